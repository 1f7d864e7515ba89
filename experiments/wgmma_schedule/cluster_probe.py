"""Why were clusters of 2 slower? Rung 9 (TF32) taken apart, one mechanism at a time.

The study (schedule_study.py) found rung 9 1.4-1.6x slower in clusters of 2 with w's tile
multicast, and about 9% slower when launched with a cluster attribute of 1. Three mechanisms
are mixed in the cluster build. Each probe below adds one of them to the default build, in a
copy of kernels/ whose common/gemm_wgmma.cuh or common/hopper.cuh is patched (every patch must
match exactly once, so a probe cannot silently test something else):

  one tile per block       the default build, no cluster;
  launch attribute 1       the same kernel launched with a cluster-dimension attribute of 1;
  launch attribute 2       the same kernel, blocks still independent, launched in clusters of 2:
                           the cost of cluster scheduling alone;
  coupled, no multicast    clusters of 2 whose blocks each load all of w's tile themselves but
                           still release every stage in both blocks: the cost of the coupling;
  cluster of 2             coupling and multicast, as the header has them;
  ..., release.cluster     the two coupled builds with the peer's release at cluster scope
                           (mbarrier.arrive.release.cluster), as the study's build had it.

Its first two runs, before the header changed, found the cause: the release at cluster scope
(README.md, "Why clusters were slow").

Each probe is checked against float64 on the GEMM tests' shapes (every element, at the tf32
tier), then all are timed beside cuBLAS TF32 at 1024 x 8192 x 8192 and 32768 x 4096 x 1024,
two rounds, the second in reverse order, each keeping its better median.

    python -m experiments.wgmma_schedule.cluster_probe [--reps 30]

Writes $OUT/o/cluster_probe.json and prints a table.
"""
import argparse
import json
import os
import time

from pathlib import Path

import torch

from experiments.wgmma_schedule.schedule_study import HEADERS, output_dir, patched_kernels, schedule_patches, timed
from tests.test_gemm_tensor_cores import FULL, SHAPES as GEMM_SHAPES, misaligned_copy
from utils import build, ladder, precision

RUNG = "gemm_09_wgmma_tf32"

# The launcher's cluster attribute: its size, and whether a launch without a cluster sets it.
ATTRIBUTE = ("cudaLaunchAttribute cluster = cluster_dimension(C::CLUSTER);",
             "config.numAttrs = C::CLUSTER > 1 ? 1 : 0;")


GRID = "config.gridDim = dim3(static_cast<unsigned>(clusters * C::CLUSTER));"


def attribute_patch(dim: int) -> list[tuple[str, str]]:
    # A cluster launch needs a grid of whole clusters: the blocks past the last tile find no unit
    # of work and exit.
    return [(ATTRIBUTE[0], f"cudaLaunchAttribute cluster = cluster_dimension({dim});"),
            (ATTRIBUTE[1], "config.numAttrs = 1;"),
            (GRID, f"config.gridDim = dim3(static_cast<unsigned>((clusters + {dim - 1}) / {dim} * {dim}));")]


# Each block loads the whole of w's tile (a box of BN rows) into its own stage, not half of it
# into both blocks'.
NO_MULTICAST = [("static constexpr int W_ROWS = BN / CLUSTER;", "static constexpr int W_ROWS = BN;"),
                ("if constexpr (C::CLUSTER == 1) {\n          hopper::tma_load_2d(dst, map, bar, k, n0);",
                 "if constexpr (true) {\n          hopper::tma_load_2d(dst, map, bar, k, n0);")]

# A stage's release in the peer block as the study's build did it: release at cluster scope, where
# the header now keeps the arrive's default semantics (release at CTA scope, as CUTLASS's cluster
# barrier does).
ARRIVE_CLUSTER_SCOPE = [("mbarrier.arrive.shared::cluster.b64 _, [remote];",
                         "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];")]

# name: (blocks per cluster, patches of the headers)
PROBES = {
    "one tile per block": (1, []),
    "launch attribute 1": (1, attribute_patch(1)),
    "launch attribute 2": (1, attribute_patch(2)),
    "coupled, no multicast": (2, NO_MULTICAST),
    "cluster of 2": (2, []),
    "coupled, no multicast, release.cluster": (2, NO_MULTICAST + ARRIVE_CLUSTER_SCOPE),
    "cluster of 2, release.cluster": (2, ARRIVE_CLUSTER_SCOPE),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--work", type=Path, default=Path("/tmp/cluster_probe"))
    a = ap.parse_args()
    out_dir = output_dir()
    t0 = time.time()
    wanted = {n: build.Variant(RUNG, kernels_dir=patched_kernels(n, schedule_patches((c, 1)) + p, a.work))
              for n, (c, p) in PROBES.items()}
    mods = build.load_kernels(wanted)
    print(f"built {len(mods)} probes in {time.time() - t0:.0f} s", flush=True)

    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": a.reps, "checks": {}, "ms": {}}
    for n, m in mods.items():
        fails = []
        for M, N, K, misaligned in GEMM_SHAPES:
            x, w = ladder.operands(M, N, K, seed=M + N + K)
            if misaligned == "x":
                x = misaligned_copy(x)
            elif misaligned == "w":
                w = misaligned_copy(w)
            ok, detail = ladder.verify(m.gemm, x, w, "tf32")
            if not ok:
                fails.append(f"{M}x{N}x{K} {misaligned or ''}: {detail}")
        res["checks"][n] = fails
        print(f"checks, {n}: {'all passed' if not fails else f'{len(fails)} FAILED'}", *fails[:5], sep="\n    ",
              flush=True)

    for M, N, K in FULL:
        x, w = ladder.operands(M, N, K, seed=0)
        with precision.tf32(True), torch.no_grad():
            c = {"cuBLAS TF32": lambda: torch.mm(x, w.t())}
            c.update({n: (lambda m=m: m.gemm(x, w)) for n, m in mods.items() if not res["checks"][n]})
            res["ms"][f"{M}x{N}x{K}"] = ms = timed(c, a.reps)
        print(f"{M}x{N}x{K}", {n: round(v, 4) for n, v in ms.items()}, flush=True)
        del x, w
        torch.cuda.empty_cache()

    json.dump(res, open(os.path.join(out_dir, "cluster_probe.json"), "w"), indent=1)
    print("\nrung 9, ms and % of cuBLAS TF32 (better of two rounds' medians)")
    for shape, ms in res["ms"].items():
        print(f"  {shape}")
        for n, v in ms.items():
            print(f"    {n:40s} {v:.4f} ms  {100 * ms['cuBLAS TF32'] / v:6.1f}%")
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
