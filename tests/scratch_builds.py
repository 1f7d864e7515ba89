"""Every kernel text the exercise tests compile on any machine, with the name and folder each is built under.

A starter is built as its chapter's cell builds it (build.load_source with the notebook's name, into
build/scratch/); an answer under its own name in build/exercise_answers/. The session's prebuild
(tests/conftest.py) saves them all and builds them side by side with the kernel files, so the compile
tests find them built, and so do the chapters nbval runs after the tests: each text is compiled once.
"""
from __future__ import annotations

from pathlib import Path

from utils import build

STARTERS = build.SCRATCH_DIR  # where a chapter builds the reader's text
ANSWERS = build.build_root_dir().parent / "exercise_answers"  # a fixed path, so the builds are cached


def texts() -> list[tuple[str, str, Path]]:
    """(name, text, folder) of each starter and each answer."""
    import test_bf16x2_exercise as t12
    import test_groupnorm_epilogue_exercise as t09
    import test_memory_bound_exercises as t0607
    import test_split_k_exercise as t11
    import test_tiled_sgemm_exercise as t03
    from utils.chapters import memory_exercises as mx

    return [
        ("my_tiled_sgemm", t03.starter(), STARTERS), ("my_tiled_sgemm", t03.answer(), ANSWERS / "answer"),
        ("tail94", t0607.notebook_source(t0607.NB06, "TAIL_SOURCE"), STARTERS),
        (f"answer_{mx.TAIL_KERNEL}", t0607.TAIL_ANSWER, ANSWERS),
        ("min_bias", t0607.notebook_source(t0607.NB07, "MIN_BIAS_SOURCE"), STARTERS),
        (f"answer_{mx.MIN_BIAS_KERNEL}", t0607.MIN_BIAS_ANSWER, ANSWERS),
        ("group_norm_stats", t0607.welford_with(t0607.WELFORD_ANSWER_REGION), ANSWERS),
        ("gn_epilogue", t09.starter(), STARTERS), ("gn_epilogue_answer", t09.ANSWER, ANSWERS),
    ] + [(t.NAME, t.text(v), t.folder(v)) for t in (t11, t12) for v in t.EVERYWHERE]


def gpu_texts() -> list[tuple[str, str, Path]]:
    """(name, text, folder) of what only the GPU tests build: each exercise's shortcuts, which its checker
    must refuse, and 05's GELU solved (built one after the other, these took most of `pytest -m gpu`)."""
    import test_bf16x2_exercise as t12
    import test_groupnorm_epilogue_exercise as t09
    import test_memory_bound_exercises as t0607
    import test_split_k_exercise as t11
    import test_tiled_sgemm_exercise as t03

    found = [("my_tiled_sgemm", path.read_text(), t03.SCRATCH / path.stem) for path in t03.SHORTCUTS]
    found += [(t.NAME, t.text(v), t.folder(v)) for t in (t11, t12) for v in t.SHORTCUT_VARIANTS]
    found += [(f"gn_epilogue_{name}", text, t09.BUILD_DIR) for name, text in t09.KERNEL_SHORTCUTS.items()]
    for prefix, answer, edits in (("tail94_", t0607.TAIL_ANSWER, t0607.TAIL_SHORTCUT_EDITS),
                                  ("min_bias_", t0607.MIN_BIAS_ANSWER, t0607.MIN_BIAS_SHORTCUT_EDITS)):
        found += [(*t0607.shortcut_build(prefix, answer, edits, shortcut), ANSWERS) for shortcut in sorted(edits)]
    _, export, todo, solution = t0607.GELU
    found.append((export, (t0607.EXERCISES / f"{export}.cu").read_text().replace(todo, solution), ANSWERS))
    return found


def load(name: str, text: str, folder: Path):
    """build.load_source, as the prebuild built it."""
    return build.load_source(name, text, scratch_dir=folder)


def variants(gpu: bool = False) -> list[build.Variant]:
    """The texts saved where they are built, as Variants for the session's prebuild (`python -m utils.build --variants`); with gpu, the GPU tests' too."""
    return [build.Variant(name, kernels_dir=build.write_source(name, text, folder))
            for name, text, folder in texts() + (gpu_texts() if gpu else [])]
