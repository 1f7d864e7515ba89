"""Records -> Markdown. Imports the library only (tests/test_layering.py).

readme        results/README.md's tables and README.md's times and headline (`python -m utils.report --update-readme`)
records       the tables of the kinds the library's measurements record (ceilings, baselines, ladder, ...)
scoreboard    the scoreboard record: stages, speedups over eager fp32, its table
tensor_cores  notebooks 08 and 09's records: accuracy, promotion, the rungs against their predictions, the fusion
"""
