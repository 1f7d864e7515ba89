"""How much could rung 9 still gain, and where? Two ceilings measured, and 62's gap taken apart.

For 1.1x torch.compile on 62 with TF32 allowed, our whole model, GroupNorm inside, has to beat what
rung 9's plain GEMM took in notebook 08's run by about 3% (README.md, "Where that leaves the TF32
target"). Rung 9 runs cuBLAS's tile (128 x 256, two consumer warp groups), so whatever it gains must come from what surrounds
the main loop. Two candidates, each measured as a ceiling:

  partial last wave   1024 x 8192 x 8192 is 256 tiles on 132 SMs: 124 SMs compute two tiles and
                      8 one, so 3% of the second wave idles (32768 x 4096 x 1024: 4096 tiles, 32
                      waves, the last holding 4). The same GEMM with N = 8448 (264 tiles) or
                      M = 33792 (4224 tiles) fills every wave exactly. Its time scaled down by the
                      work (256/264, 4096/4224) is what perfect balance would give: the ceiling of
                      any split of the last wave (stream-K and its kin).
  the epilogue        a patched copy of kernels/ (probe_kit.patched_kernels) whose
                      DirectWriter stores only an element equal to a NaN bit pattern no sum makes:
                      every accumulator is still computed and compared, nothing is written. Its
                      time is the ceiling of hiding the epilogue's stores behind the next tile's
                      main loop (ping-pong, or a staged store that does not wait).

Two more patched builds (PATCHES) measure what such a change would cost or offer: the DirectWriter's
stores marked streaming (evict first), and a TMA ring of 3 stages instead of 4, which frees the
48 KB a staging buffer for the epilogue would take from the ring.

And 62 taken apart in the same run: torch.compile (default mode) beside cuBLAS's TF32 `linear`
alone (what compile's GEMM is), rung 9 alone (no bias, no tail), and our whole model in each build.

Every contender is timed in turn (utils.bench.time_interleaved). Every build that stores is checked
first: rung 9 against float64 at every shape timed, our 62 against eager at the TF32 tier. The build
that writes nothing cannot be checked.

    python -m experiments.wgmma_schedule.headroom_probe [--reps 30] [--variants "no stores" ...] [--whole-waves]

Run 1 (commit 5b08ac6, the "no stores" build only, with --whole-waves' shapes) and run 2 (7bc87ba,
every build, the full sizes): README.md, "Headroom".

Writes $OUT/o/headroom_probe.json and prints a table.
"""
import argparse
import json
import os
import time

from pathlib import Path

import torch

from experiments.wgmma_schedule.probe_kit import FUSED, output_dir, patched_kernels, timed
from utils import build, ladder, precision
from utils.chapters import session as chapter
from utils.problems import get_problem
from utils.chapters.epilogue_fusion import linear_and_rest

RUNG, MODEL = "gemm_09_wgmma_tf32", "fused_gemm_groupnorm"
# (M, N, K, tiles of 128 x 256): each full size, and the same GEMM grown until every wave is full
WAVES = [((1024, 8192, 8192, 256), (1024, 8448, 8192, 264)), ((32768, 4096, 1024, 4096), (33792, 4096, 1024, 4224))]
# Patched builds (each patch must match once in the GEMM's headers): rung 9 and our whole models with
PATCHES = {
    # the DirectWriter storing nothing (only an element equal to a NaN bit pattern no sum makes)
    "no stores": [("    if (m >= M) {\n      return;\n    }\n",
                   "    if (m >= M || __float_as_uint(v0) != 0x7fc0dead) {  // headroom_probe: no sum is this NaN\n"
                   "      return;\n    }\n")],
    # the DirectWriter's stores marked streaming (st.global.cs: evict first), so that the output's
    # lines leave L2 before the operands' do
    "streaming stores": [("    *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);",
                          "    __stcs(reinterpret_cast<float2*>(dst), make_float2(v0, v1));")],
    # a TMA ring of 3 stages instead of 4 (48 KB freed): what the main loop loses with less prefetch,
    # the price of a staging buffer for the epilogue beside the ring
    "3 stages": [("using Tf32Config = Config</*BN*/ 256, /*STAGES*/ 4,", "using Tf32Config = Config</*BN*/ 256, /*STAGES*/ 3,")],
}


def problem_62():
    """Problem 62's reference model at full size (seed 0), its input (seed 1), its nn.Linear and the
    arguments that follow the weight and bias in our whole-model op."""
    ref = get_problem(62).make_model("full", seed=0).cuda().eval()
    (x,) = [t.cuda() for t in get_problem(62).get_inputs("full", generator=torch.Generator().manual_seed(1))]
    return (ref, x, *linear_and_rest(62, ref))


def against_compile(ref, x, ours: dict, extra: dict, reps: int, unchecked=frozenset()) -> dict:
    """Each of `ours` (name: call) but `unchecked` checked against eager at the TF32 tier (SystemExit if
    one fails), then all of them, `extra` and torch.compile (default mode) timed in turn. Call with
    TF32 on. {"max_abs_err_tf32": {name: err}, "ms": {name: median}}."""
    want = ref(x)
    errs = {}
    for n, f in ours.items():
        if n in unchecked:
            continue
        got = f()
        errs[n] = (got - want).abs().max().item()
        ok = torch.allclose(got, want, atol=1e-2, rtol=1e-2)
        print(f"62, {n}: against eager at the TF32 tier {'passed' if ok else 'FAILED'} (max abs err {errs[n]:.1e})",
              flush=True)
        if not ok:
            raise SystemExit(1)
    compiled = torch.compile(ref)
    compiled(x)
    ms = timed({"torch.compile": lambda: compiled(x), **extra, **ours}, reps)
    print("62:", {n: round(v, 4) for n, v in ms.items()}, flush=True)
    return {"max_abs_err_tf32": errs, "ms": ms}


def print_against_compile(ms: dict) -> None:
    print("62, TF32, x torch.compile:")
    for n, v in ms.items():
        print(f"      {n:32s} {v:.4f} ms  {ms['torch.compile'] / v:.3f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--variants", nargs="*", default=list(PATCHES), choices=list(PATCHES))
    ap.add_argument("--whole-waves", action="store_true", help="also the shapes whose waves are all full")
    ap.add_argument("--work", type=Path, default=Path("/tmp/headroom_probe"))
    a = ap.parse_args()
    out_dir = output_dir()
    chapter.quiet_inductor()
    t0 = time.time()
    dirs = {"default": None} | {v: patched_kernels(v, PATCHES[v], a.work) for v in a.variants}
    mods = build.load_kernels({(k, v): build.Variant(k, kernels_dir=d) for k in (RUNG, MODEL) for v, d in dirs.items()})
    print(f"built {len(mods)} modules in {time.time() - t0:.0f} s", flush=True)
    checked = [v for v in dirs if v != "no stores"]  # the build that writes nothing cannot be checked
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": a.reps, "variants": list(dirs),
           "gemm": {}, "model_62": {}}

    shapes = [shape for pair in WAVES for shape in (pair if a.whole_waves else pair[:1])]
    for M, N, K, tiles in shapes:
        x, w = ladder.operands(M, N, K, seed=0)
        with precision.tf32(True), torch.no_grad():
            checks = {v: ladder.verify(mods[(RUNG, v)].gemm, x, w, "tf32") for v in checked}
            for v, (ok, detail) in checks.items():
                print(f"{M}x{N}x{K}: rung 9, {v}: check {'passed' if ok else 'FAILED'} ({detail})", flush=True)
            if not all(ok for ok, _ in checks.values()):
                raise SystemExit(1)
            c = {"cuBLAS TF32": lambda: torch.mm(x, w.t())}
            c |= {f"rung 9, {v}": (lambda m=mods[(RUNG, v)]: m.gemm(x, w)) for v in dirs}
            ms = timed(c, a.reps)
        res["gemm"][f"{M}x{N}x{K}"] = {"tiles": tiles, "checks": {v: d for v, (_, d) in checks.items()}, "ms": ms}
        print("   ", {n: round(v, 4) for n, v in ms.items()}, flush=True)
        del x, w
        torch.cuda.empty_cache()

    ref, x, lin, rest = problem_62()
    with precision.tf32(True), torch.no_grad():
        ours = {f"ours, {v}": (lambda m=mods[(MODEL, v)]: getattr(m, FUSED[62])(x, lin.weight, lin.bias, *rest, None,
                                                                                 False)[0])
                for v in dirs}
        extra = {"cuBLAS TF32 linear alone": lambda: torch.nn.functional.linear(x, lin.weight, lin.bias),
                 "rung 9 alone": lambda: mods[(RUNG, "default")].gemm(x, lin.weight)}
        res["model_62"] = against_compile(ref, x, ours, extra, a.reps, unchecked={"ours, no stores"})
    json.dump(res, open(os.path.join(out_dir, "headroom_probe.json"), "w"), indent=1)

    print("\nrung 9, % of cuBLAS TF32 (ms):")
    for shape, r in res["gemm"].items():
        ms = r["ms"]
        print(f"  {shape:18s} tiles {r['tiles']:5d}  cuBLAS {ms['cuBLAS TF32']:.4f}")
        for n in ms:
            if n != "cuBLAS TF32":
                print(f"      {n:28s} {ms[n]:.4f} ms  {100 * ms['cuBLAS TF32'] / ms[n]:6.1f}%")
    for full, whole in WAVES if a.whole_waves else []:
        f, wh = (res["gemm"][f"{s[0]}x{s[1]}x{s[2]}"] for s in (full, whole))
        for n in ("cuBLAS TF32", "rung 9, default"):
            ideal = wh["ms"][n] * f["tiles"] / wh["tiles"]
            print(f"  {full[0]}x{full[1]}x{full[2]} {n}: {f['ms'][n]:.4f} ms; scaled from whole waves "
                  f"{ideal:.4f} ms ({100 * (ideal / f['ms'][n] - 1):+.1f}%)")
    print_against_compile(res["model_62"]["ms"])
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
