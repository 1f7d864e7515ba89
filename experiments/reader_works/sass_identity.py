"""Did a kernel file's change alter the machine code of the kernels it already had?

    python experiments/reader_works/sass_identity.py --old OLD_KERNELS_DIR --new kernels FILE.cu ... \
        [--rename PATTERN REPLACEMENT]

Each FILE (a path under kernels/) is compiled twice with the flags utils.build uses (its `// @arch`, -O3,
torch's include paths), once from OLD_KERNELS_DIR (a copy of kernels/ as an earlier commit had it) and
once from --new; cuobjdump's SASS of every __global__ function the old build holds is compared with the
new build's. A function whose SASS is identical ran the same instructions before and after: the file's
change (a `// @launch` mark, a launchable copy beside it, a body moved into a force-inlined device
function) did not touch what a record measured. Prints one line per function and exits 1 if any
differs or is gone. Needs nvcc and cuobjdump (the GPU machines have both).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from torch.utils import cpp_extension

from utils import build, toolchain


def sass_by_function(cu: Path, kernels_dir: Path, work: Path) -> dict[str, str]:
    arch = build.required_arch(cu.read_text()) or toolchain.DEFAULT_ARCH
    cubin = work / (cu.stem + ".cubin")
    includes = [f"-I{d}" for d in (kernels_dir, cu.parent, *cpp_extension.include_paths(device_type="cuda"))]
    # torch's own nvcc flags (load_inline adds them: --expt-relaxed-constexpr among them), then utils.build's
    subprocess.run(["nvcc", "-cubin", *cpp_extension.COMMON_NVCC_FLAGS, "-O3", "-lineinfo", build.gencode_flag(arch),
                    "-std=c++20", "-DTORCH_EXTENSION_NAME=sass", *includes, "-o", str(cubin), str(cu)], check=True)
    dump = subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    functions = {}
    for block in re.split(r"\n\s*Function : ", dump)[1:]:
        name, _, body = block.partition("\n")
        # addresses and line info stay as they are: identical code has identical offsets; runs of spaces fold to
        # one, since cuobjdump pads every line to the widest instruction in the whole cubin
        # a kernel in an anonymous namespace carries a hash of its file's path in its name: the old and the
        # new copy are in different folders, so the hash goes
        name = re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N__", name.strip())
        functions[name] = "\n".join(" ".join(l.split()) for l in body.splitlines() if l.strip().startswith("/*"))
    return functions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, default=build.KERNELS_DIR)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rename", nargs=2, action="append", default=[], metavar=("PATTERN", "REPLACEMENT"),
                    help="rewrite the new build's function names (re.sub) before matching them with the old: a "
                         "template that gained parameters with defaults mangles its old instances under new names")
    args = ap.parse_args(argv)
    differ = 0
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        jobs = {}
        for rel in args.files:
            rel = Path(rel).relative_to("kernels") if rel.startswith("kernels/") else Path(rel)
            for side, root in (("old", args.old), ("new", args.new)):
                work = Path(tmp) / side / rel.parent
                work.mkdir(parents=True, exist_ok=True)
                jobs[rel, side] = pool.submit(sass_by_function, root / rel, root, work)
        for rel in dict.fromkeys(r for r, _ in jobs):
            old, new = jobs[rel, "old"].result(), jobs[rel, "new"].result()
            for pattern, replacement in args.rename:
                new = {re.sub(pattern, replacement, name): sass for name, sass in new.items()}
            for name, sass in old.items():
                verdict = "identical" if new.get(name) == sass else ("gone" if name not in new else "DIFFERS")
                differ += verdict != "identical"
                print(f"{rel}: {verdict:<9} {len(sass.splitlines()):>6} SASS lines  {name}")
            for name in sorted(set(new) - set(old)):
                print(f"{rel}: new       {len(new[name].splitlines()):>6} SASS lines  {name}")
    print(f"{differ} of the old functions differ or are gone")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
