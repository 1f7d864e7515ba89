"""utils/launch.py and build.load_source: a kernel a notebook writes in a cell and launches itself,
kernel[grid, block, smem](args), every argument checked in C++ before the launch."""
import pytest
import torch

from utils import build, launch

SCALE = r"""
// @launch
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ out, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i];
}

// A block sums its slice through dynamic shared memory (as much as the launch gives it).
// @launch
__global__ void block_sum_kernel(const float* x, float* sums, int per_block) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) buf[i] = x[blockIdx.x * per_block + i];
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < per_block; ++i) s += buf[i];
    sums[blockIdx.x] = s;
  }
}

// @launch: <3>
template <int kTimes>
__global__ void times_kernel(const int64_t* x, int64_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = kTimes * x[i];
}
"""


def test_launchables_are_read_from_their_marks():
    found = launch.launchables(SCALE)
    assert [k.name for k in found] == ["scale_kernel", "block_sum_kernel", "times_kernel"]
    scale = found[0]
    assert [(p.name, p.ctype, p.is_tensor) for p in scale.params] == [
        ("x", "float*", True), ("out", "float*", True), ("a", "float", False), ("n", "int", False)]
    assert found[2].template_args == "<3>"
    assert scale.signature == "scale_kernel[grid, block, smem](x, out, a, n)"


@pytest.mark.parametrize("source, message", [
    ("// @launch\nvoid host(int n) {}", "directly above a __global__ kernel"),
    ("// @launch\ntemplate <int T>\n__global__ void k(int n) {}", "names the instance"),
    ("// @launch: <1>\n__global__ void k(int n) {}", "no template"),
    ("// @launch\n__global__ void k(float2 v) {}", "cannot come from Python"),
    ("// @launch\n__global__ void k(int n) {}\n// @launch\n__global__ void k(int n) {}", "more than once"),
])
def test_marks_that_cannot_be_bound_say_why(source, message):
    with pytest.raises(launch.LaunchSourceError, match=message):
        launch.launchables(source)


def test_generated_launch_checks_every_argument():
    kernels = launch.launchables(SCALE)
    code = launch.wrappers(kernels)  # the bindings file's half: every check, then the raw launch's error checked
    assert "<<<" not in code and code.count("C10_CUDA_CHECK(workbook_raw_launch_") == 3
    assert 'check_cuda(x, "scale_kernel: x")' in code and "at::kFloat" in code
    assert "n >= INT32_MIN && n <= INT32_MAX" in code  # an int parameter must fit
    assert "const c10::cuda::CUDAGuard guard(x.device());" in code


def test_the_kernel_files_half_launches_over_pointers_without_pytorch():
    raw = launch.trampolines(launch.launchables(SCALE))
    assert raw.count("<<<") == 3 and raw.count("return cudaGetLastError();") == 3
    assert "times_kernel<3><<<grid, block, smem, stream>>>(static_cast<int64_t*>(x), static_cast<int64_t*>(out), n)" in raw
    assert "cudaFuncAttributeMaxDynamicSharedMemorySize" in raw
    assert "torch" not in raw and "TORCH_CHECK" not in raw and "#include" not in raw  # nothing of PyTorch's to parse
    assert launch.trampolines([]) == "" and launch.wrappers([]) == ""


def test_the_launch_syntax_checks_its_configuration():
    k = launch.launchables(SCALE)[0]
    calls = []
    launcher = launch.Launcher(lambda *args: calls.append(args), k)
    launcher[8, 256](1, 2, 3.0, 4)
    launcher[(2, 3), (32, 4), 1024]("x", "out", 1.0, 5)
    assert calls == [([8], [256], 0, 1, 2, 3.0, 4), ([2, 3], [32, 4], 1024, "x", "out", 1.0, 5)]
    with pytest.raises(TypeError, match=r"scale_kernel\[grid, block\]"):
        launcher[8]
    with pytest.raises(TypeError, match="takes 4 arguments"):
        launcher[1, 1](1, 2)
    with pytest.raises(TypeError, match="1 to 3 ints"):
        launcher[(1, 2, 3, 4), 32]


def test_load_source_never_writes_into_kernels():
    with pytest.raises(ValueError, match="never into kernels/"):
        build.load_source("gemm_01_naive", "// @launch\n__global__ void k(int n) {}", scratch_dir=build.KERNELS_DIR)


@pytest.fixture(scope="module")
def scale_module(tmp_path_factory):
    return build.load_source("launch_test_scale", SCALE, scratch_dir=tmp_path_factory.mktemp("scratch"))


@pytest.mark.compile
def test_a_cell_source_compiles_and_binds_its_kernels(scale_module):
    assert isinstance(scale_module.scale_kernel, launch.Launcher)
    with pytest.raises(RuntimeError, match="scale_kernel: x must be a CUDA tensor"):
        scale_module.scale_kernel[1, 32](torch.ones(3), torch.ones(3), 2.0, 3)


@pytest.mark.gpu
def test_launches_compute_and_check(scale_module, cuda):
    x = torch.randn(1000, device=cuda)
    out = torch.full_like(x, float("nan"))
    scale_module.scale_kernel[(1000 + 255) // 256, 256](x, out, 2.5, 1000)
    torch.testing.assert_close(out, 2.5 * x)

    per_block = 16 * 1024  # 64 KiB of dynamic shared memory: past the default 48 KiB limit
    xs = torch.rand(3 * per_block, device=cuda)
    sums = torch.full((3,), float("nan"), device=cuda)
    scale_module.block_sum_kernel[3, 256, per_block * 4](xs, sums, per_block)
    torch.testing.assert_close(sums, xs.view(3, per_block).sum(1), rtol=1e-4, atol=1e-2)

    n = 5000
    xi = torch.randint(-100, 100, (n,), device=cuda)
    yi = torch.empty_like(xi)
    scale_module.times_kernel[4, 128](xi, yi, n)
    assert torch.equal(yi, 3 * xi)

    with pytest.raises(RuntimeError, match="x \\(a float\\*\\) must be a tensor of dtype"):
        scale_module.scale_kernel[1, 32](x.double(), out, 2.0, 3)
    with pytest.raises(RuntimeError, match="block dimension 0 must be in 1..1024"):
        scale_module.scale_kernel[1, 2048](x, out, 2.0, 3)
    with pytest.raises(RuntimeError, match="n \\(a int\\) must fit its type"):
        scale_module.scale_kernel[1, 32](x, out, 2.0, 2**40)


def test_a_kernel_marked_in_an_included_header_is_launchable(tmp_path):
    (tmp_path / "mine.cuh").write_text("#pragma once\n// @launch\n__global__ void from_header(float* out, int n) {}\n")
    (tmp_path / "uses.cu").write_text('#include "mine.cuh"\n// @launch\n__global__ void own(const float* x, int n) {}\n')
    assert [k.name for k in build.plan("uses", kernels_dir=tmp_path).launchables] == ["own", "from_header"]
