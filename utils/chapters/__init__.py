"""Notebook chapter support: what the notebooks share, one module per chapter (and its parts). Chapters may
import the library (utils/*.py), utils/report/ and solutions/; nothing in those imports a chapter
(tests/test_layering.py).

session             every notebook: the parameters resolved, contenders, side-by-side runs, notebooks 10 and
                    13's measurements, notebook 10's exercise checkers
baselines           notebook 01: eager's profile, eager and torch.compile timed, speedups over eager fp32
gemm_ladder         notebooks 02-03: the rungs' headers and PREDICTIONs, building and measuring them
gemm_addressing     notebooks 02-03: a warp's loads, the tiles, shared-memory banks, in numbers
gemm_diagrams       notebooks 02-03: the drawings
gemm_exercises      notebooks 02-03: the exercise checkers and the cells that run them
bias                notebook 04: the Amdahl bound, the bias measurement, exercise checkers
bias_diagram        notebook 04: the drawing of where a bias goes
memory              notebooks 05-07: kernels timed beside a same-size copy, tables, plots, findings
memory_exercises    notebooks 05-07: the exercise checkers (GELU, Welford, the broadcast layout)
memory_diagrams     notebooks 05-07: the drawings
tensor_cores        notebooks 08-09: TF32 and the split as tables and verdicts, the models with the GEMM swapped,
                    the accumulation, the GPU run both read (kind tensor_cores), each one's share of it and the
                    predictions it missed, notebook 08's exercise checkers
tensor_core_figures notebooks 08-09's figures
hopper_gemm         notebook 09: the wgmma ring's shared-memory budget and exercise 1's checker
epilogue_fusion     notebook 09, section 4: whole models in the GEMM's epilogue (kind whole_model_fusion), the
                    chapter's scoreboard from that run
regime_exercises    notebook 11: the split-K fix-up exercise's checker
half16_exercises    notebook 12: the float32-to-bf16 exercise's checker (bit for bit, NaN kept a NaN)
solution_exercises  notebook 10: the fake-implementation exercise's checker, which names no shape it wants
solution_debriefs   notebooks 10 and 13: the debriefs of the forward, the training step and autocast, computed from
                    the record shown
scoreboard          the four models after each chapter: `python -m utils.chapters.scoreboard` records it on a
                    GPU, every chapter shows it
"""
