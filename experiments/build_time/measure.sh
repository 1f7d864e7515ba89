#!/usr/bin/env bash
# What a kernel's cold build spends its time on, one compile at a time (nothing else running):
#   1. the bindings file load_inline generates, with <torch/extension.h> (its default),
#      the same with a precompiled <torch/extension.h> (load_inline's use_pch), and with
#      utils.build.BINDINGS_PRELUDE (what the workbook uses);
#   2. kernels/vector_add.cu under nvcc, with <torch/types.h> (before) and with
#      kernels/common/check.cuh's light includes (now).
# Usage: bash experiments/build_time/measure.sh [python]   (default .venv/bin/python); prints seconds.
set -euo pipefail
PY=${1:-.venv/bin/python}
REPO=$(pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
TI=$($PY -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'include'))")
PYI=$($PY -c "import sysconfig; print(sysconfig.get_path('include'))")
CUDA=${CUDA_HOME:-/usr/local/cuda}
INC="-isystem $TI -isystem $TI/torch/csrc/api/include -isystem $CUDA/include -isystem $PYI"
CXXFLAGS="-DTORCH_EXTENSION_NAME=va -DTORCH_API_INCLUDE_EXTENSION_H $INC -fPIC -std=c++20 -O3"
NVFLAGS="$INC -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr --compiler-options -fPIC -O3 -lineinfo -gencode=arch=compute_90,code=sm_90 -std=c++20"
secs() { local s=$(date +%s.%N); "$@" >/dev/null 2>&1; printf "%.1f" "$(echo "$(date +%s.%N) - $s" | bc)"; }

BIND='torch::Tensor vector_add(torch::Tensor a, torch::Tensor b);
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("vector_add", torch::wrap_pybind_function(vector_add), "doc"); }'
printf '#include <torch/extension.h>\n%s\n' "$BIND" > "$TMP/full.cpp"
{ $PY -c "from utils.build import BINDINGS_PRELUDE; print(BINDINGS_PRELUDE)"; echo "$BIND"; } > "$TMP/light.cpp"
mkdir -p "$TMP/pch/torch"
echo "bindings, <torch/extension.h>:             $(secs g++ $CXXFLAGS -c "$TMP/full.cpp" -o "$TMP/full.o") s"
echo "bindings, precompiling <torch/extension.h>: $(secs g++ $CXXFLAGS -x c++-header "$TI/torch/extension.h" -o "$TMP/pch/torch/extension.h.gch") s (once; $(du -m "$TMP/pch/torch/extension.h.gch" | cut -f1) MB)"
echo "bindings, with the precompiled header:      $(secs g++ -I"$TMP/pch" -Winvalid-pch $CXXFLAGS -c "$TMP/full.cpp" -o "$TMP/pch.o") s"
echo "bindings, BINDINGS_PRELUDE:                 $(secs g++ $CXXFLAGS -c "$TMP/light.cpp" -o "$TMP/light.o") s"

mkdir -p "$TMP/heavy/common"
cp "$REPO"/kernels/common/*.cuh "$TMP/heavy/common/"
cp "$REPO/kernels/vector_add.cu" "$TMP/heavy/"
$PY - "$TMP/heavy/common/check.cuh" <<'PYEOF'
import re, sys
p = sys.argv[1]; s = open(p).read()
# back to the former includes: <torch/types.h> in place of the tensor core and factory headers
s = re.sub(r"#include <ATen/core/Tensor.h>\n(#include <ATen/ops/\w+.h>\n)*", "#include <torch/types.h>\n", s)
s = re.sub(r"namespace torch \{\nusing namespace at;.*?\n\}  // namespace torch\n", "", s, flags=re.S)
open(p, "w").write(s)
PYEOF
echo "vector_add.cu, <torch/types.h>:             $(secs $CUDA/bin/nvcc -I"$TMP/heavy" $NVFLAGS -c "$TMP/heavy/vector_add.cu" -o "$TMP/heavy.o") s"
echo "vector_add.cu, check.cuh's includes:        $(secs $CUDA/bin/nvcc -I"$REPO/kernels" $NVFLAGS -c "$REPO/kernels/vector_add.cu" -o "$TMP/light_cu.o") s"
