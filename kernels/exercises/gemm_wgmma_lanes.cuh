// exercises/gemm_wgmma_lanes.cuh: the given part of notebook 09's from-scratch exercise, the
// GroupNorm epilogue on the wgmma GEMM. The main loop is rung 9's, unchanged: common/gemm_wgmma.cuh's
// gemm_wgmma_kernel with Tf32Config (block tile 128 x 256, TMA ring, a producer and two consumer
// warp groups, TF32). What the reader writes in the notebook is the epilogue: a struct whose
//
//     __device__ void operator()(const float (&acc)[lanes::ACC], const lanes::Tile& t,
//                                const lanes::Out& out) const
//
// gets one consumer thread's finished sums of x @ w.T, in registers, with where they sit:
//
//     acc[4 * j + 2 * h + e]  is  (x @ w.T)[t.row + 8 * h][t.col + 8 * j + e]
//                             for h in 0..1, e in 0..1, j in 0..lanes::BN / 8 - 1
//
// and hands each finished pair to out.put(h, j, v0, v1), which stores v0 and v1 at row t.row + 8h,
// columns t.col + 8j and + 1 (rows past M and columns past N are not stored). The four lanes of a
// quad (lanes 4g .. 4g + 3 of a warp, the same t.row) hold all BN columns of their two rows in this
// tile: lane 4g + q holds columns 8j + 2q and 8j + 2q + 1. Every lane of the block calls it, rows
// past M included (their sums are 0: TMA fills past the matrix with zeros), so a shuffle within the
// quad always has its four lanes.
//
//   lanes::Tile, Out, BN, ACC    what the epilogue gets;
//   lanes::group_width(...)      GroupNorm's parameters checked; the group width D = N / groups;
//   lanes::run(x, w, fn)         x @ w.T on the wgmma kernel, fn as its epilogue, into out (M, N).

#pragma once

#include "common/gemm_launch.cuh"
#include "common/gemm_wgmma_host.cuh"

namespace lanes {

using Config = gemm_wgmma::Tf32Config;
constexpr int BN = Config::BN;    // columns of a block tile (256)
constexpr int ACC = Config::ACC;  // sums per consumer thread: 2 rows x BN / 4 columns (128)
using Out = gemm_wgmma::DirectWriter;

struct Tile {
  int row;  // the lane's first row (its second is row + 8)
  int col;  // the lane's first column in n8 block 0 (then col + 1, and + 8j in block j)
  int n0;   // the tile's first column
  int M, N;
};

// The GroupNorm parameters checked against w (N, K): bias, gamma and beta (N,) float32 on x's device,
// groups dividing N, and groups of an even width D that divides BN, so that no group straddles two
// tiles and a lane's pair of columns is in one group. Returns D.
inline int group_width(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                       const torch::Tensor& gamma, const torch::Tensor& beta, int64_t groups) {
  const int64_t N = w.size(0);
  auto check_param = [&](const torch::Tensor& p, const char* name) {
    check_float_cuda_input(p, name);
    check_same_device(x, "x", p, name);
    TORCH_CHECK(p.dim() == 1 && p.size(0) == N, "bias, gamma and beta must each have shape [N] = [", num(N),
                "], got ", shape_string(p));
  };
  check_param(bias, "bias");
  check_param(gamma, "gamma");
  check_param(beta, "beta");
  TORCH_CHECK(groups > 0 && N % groups == 0, "groups must divide N = ", num(N), ", got ", num(groups));
  const int64_t D = N / groups;
  TORCH_CHECK(D % 2 == 0 && BN % D == 0, "the group width N / groups must be even and divide the tile's ", num(BN),
              " columns, got ", num(D));
  return static_cast<int>(D);
}

// The kernel's epilogue interface (common/gemm_wgmma.cuh), around the reader's functor.
template <class Fn>
struct Adapter {
  Fn fn;
  float* out;  // the kernel's writer stores here

  struct Ahead {};
  template <class C>
  __device__ __forceinline__ Ahead ahead(const gemm_wgmma::EpilogueTile&) const {
    return {};
  }
  template <class C>
  static constexpr int smem_floats() {
    return 0;
  }
  template <class C, class Writer>
  __device__ __forceinline__ void finish(const float (&acc)[C::ACC], Ahead, const gemm_wgmma::EpilogueTile& t,
                                         const float*, const Writer& writer) const {
    static_assert(C::ACC == ACC, "the exercise's epilogue runs on Tf32Config's tile");
    fn(acc, Tile{t.row, t.col, t.n0, t.M, t.N}, writer);
  }
};

// out (M, N) = what fn makes of x @ w.T, on the wgmma kernel. x (M, K) and w (N, K) float32 CUDA
// tensors, K % 4 == 0 and 16-byte aligned (TMA's conditions).
template <class Fn>
torch::Tensor run(const torch::Tensor& x, const torch::Tensor& w, const Fn& fn) {
  check_gemm_inputs(x, w);
  TORCH_CHECK(gemm_wgmma::tma_ok(x, w), "the exercise's GEMM needs K % 4 == 0 and 16-byte-aligned x and w (TMA), got x ",
              shape_string(x));
  torch::Tensor out = gemm_new_output(x, w);
  if (out.numel() == 0 || x.size(1) == 0) {
    return out;
  }
  gemm_wgmma::run_epilogue<Config>(x, w, Adapter<Fn>{fn, out.data_ptr<float>()});
  return out;
}

}  // namespace lanes
