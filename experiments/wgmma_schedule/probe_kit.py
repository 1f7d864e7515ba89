"""What the wgmma probes here share: a patched copy of kernels/ (each patch matching exactly once in
the GEMM's headers, so a probe cannot silently measure something else), where they write, and how
they time. schedule_study.py defined these until the schedules it built left the header (its last
commit with them: experiments/README.md, "Historical scripts and logs")."""
import os
import shutil

from pathlib import Path

from utils import bench, build

FUSED = {94: "linear_bias_hardtanh_mish_group_norm", 75: "linear_group_norm_min_bias",
         37: "linear_swish_bias_group_norm", 62: "linear_group_norm_leaky_relu_x2"}

# The wgmma GEMM's headers, which the probes patch in a copy of kernels/ (each patch matching once).
HEADERS = ("common/gemm_wgmma.cuh", "common/gemm_wgmma_writers.cuh", "common/gemm_wgmma_host.cuh",
           "common/hopper.cuh")


def patched_kernels(name: str, patches: list[tuple[str, str]], root: Path) -> Path:
    """A copy of kernels/ with `patches` applied to the GEMM's headers; each must match once in them."""
    dst = root / name.replace(" ", "_").replace(",", "") / "kernels"
    shutil.rmtree(dst.parent, ignore_errors=True)
    shutil.copytree(build.KERNELS_DIR, dst)
    texts = {h: (dst / h).read_text() for h in HEADERS}
    for old, new in patches:
        where = [h for h in HEADERS if old in texts[h]]
        if len(where) != 1 or texts[where[0]].count(old) != 1:
            raise SystemExit(f"probe {name!r}: {old!r} does not occur exactly once in {', '.join(HEADERS)}")
        texts[where[0]] = texts[where[0]].replace(old, new)
    for h, text in texts.items():
        (dst / h).write_text(text)
    return dst


def output_dir() -> str:
    """$OUT/o (./o without $OUT), created: where the probes write their JSON."""
    path = os.path.join(os.environ.get("OUT", "."), "o")
    os.makedirs(path, exist_ok=True)
    return path


def timed(contenders: dict, reps: int) -> dict:
    """{name: median ms}, every contender timed in turn (bench.time_interleaved)."""
    return {name: t.median for name, t in bench.time_interleaved(contenders, reps=reps).items()}
