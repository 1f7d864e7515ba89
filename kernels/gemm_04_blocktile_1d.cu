// gemm_04_blocktile_1d.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 4 of the SGEMM ladder (notebooks/03_tiled_gemm.ipynb): 1-D
// register blocking, each thread computes a column of 8 outputs.
//
// Where rung 3 left off: one output per thread, so every FMA needs a shared-memory load of its
// own (one of w, plus a quarter of a 16-byte load of x). A multiprocessor serves about one
// warp-wide shared load per cycle but can issue four warp-wide FMAs, so the FMA units mostly wait:
// global memory is no longer the limit, shared memory is.
//
// The idea: give each thread several outputs that share an operand, and keep their sums in
// registers. Here a thread owns TM = 8 outputs of one column of the block's tile, rows m .. m+7
// of column n. At each k it reads w[n][k] from shared memory once, into a register, and uses it
// for 8 FMAs, one per row, with x[m + i][k], i = 0..7:
//
//     b = ws[k][n];  acc[i] += xs[k][m + i] * b   for i = 0..7
//
// The 8 sums acc[0..7] stay in registers for the whole K loop (indexed only by unrolled loop
// counters, so they never spill to local memory).
//
// Thread -> data. The block computes a BM x BN = 64 x 64 tile of out with 512 threads: thread t
// owns column tn = t % 64 and rows tm .. tm+7, tm = 8 * (t / 64). A warp is 32 consecutive
// columns of the same 8 rows, so at each k its 32 w reads are 32 consecutive floats (one
// conflict-free load), its x reads are one address for all lanes (a broadcast), and its final
// stores to out are 32 consecutive floats of a row (coalesced).
//
// Shared memory layout: k-major (xs[k][m], ws[k][n]; why, and the padding, in
// common/gemm_tile.cuh). It makes a thread's 8 x values at one k contiguous and 16-byte
// aligned, so the compiler reads them with two 16-byte loads (LDS.128 in the SASS): per k a
// thread issues 3 shared loads for 8 FMAs, where rung 3 issued 5 for 4.
//
// Arithmetic intensity, per K slice of BK = 8:
//   global -> shared: the block loads (64 + 64) x 8 floats = 4 KB and does 64 x 64 x 8 FMAs
//     = 65536 FLOP: 16 FLOP per byte (rung 3: 8), since every value loaded now serves 64 outputs.
//   shared -> registers: a thread reads 9 floats (36 bytes) for 8 FMAs = 16 FLOP: 0.44 FLOP per
//     byte (rung 3: 2 floats per FMA, 0.25), in 0.375 load instructions per FMA (rung 3: 1.25).
//
// PREDICTION (made before measuring): about 2 to 2.5x rung 3, roughly a third of cuBLAS SGEMM.
// Shared-load instructions per FMA fall by more than 3x, but the FMAs do not take over: each
// thread does only 64 FMAs per slice between two barriers, and every slice starts with a trip to
// global memory (hundreds of cycles) that only the other resident warps can hide. Next rung:
// blocking in two dimensions, so that both x and w values are reused from registers.

#include "common/gemm_tile.cuh"

// 64 x 64 outputs per block, TM = 8 per thread: 512 threads. BK = 8: each thread copies exactly
// one element of each tile per slice (64 x 8 = 512). MIN_BLOCKS_PER_SM = 4 asks ptxas to fit 4
// blocks on a multiprocessor: 2048 threads, the most it holds, at 65536 / 2048 = 32 registers
// each. The kernel fits in 32 without spilling, so all 64 warp slots fill, and the more warps an
// SM holds, the more of each slice's global-load latency the others' FMAs hide. Shared memory,
// 2 x 8 x (64 + 4) floats = 4.25 KB per block, is far from limiting.
constexpr int BM = 64;
constexpr int BN = 64;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int THREADS = BM * BN / TM;
constexpr int MIN_BLOCKS_PER_SM = 4;

__global__ void __launch_bounds__(THREADS, MIN_BLOCKS_PER_SM)
    gemm_blocktile_1d_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                             int M, int N, int K) {
  __shared__ float xs[BK][BM + GEMM_SMEM_PAD];
  __shared__ float ws[BK][BN + GEMM_SMEM_PAD];

  const int tiles_m = (M + BM - 1) / BM;
  const int m0 = static_cast<int>(blockIdx.x % tiles_m) * BM;
  const int n0 = static_cast<int>(blockIdx.x / tiles_m) * BN;
  const int tid = threadIdx.x;
  const int tn = tid % BN;
  const int tm = (tid / BN) * TM;

  float acc[TM] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    load_tile_kmajor<BM, BK, THREADS>(xs, x, M, K, m0, k0, tid);
    load_tile_kmajor<BN, BK, THREADS>(ws, w, N, K, n0, k0, tid);
    __syncthreads();  // the whole slice is in shared memory before anyone reads it
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float b = ws[k][tn];
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        acc[i] += xs[k][tm + i] * b;
      }
    }
    __syncthreads();  // everyone has read the slice before the next one overwrites it
  }

  // Outputs past M or N (edge tiles) were computed from zero-filled rows: they are not stored.
  const int n = n0 + tn;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + tm + i;
    if (m < M && n < N) {
      out[static_cast<int64_t>(m) * N + n] = acc[i];
    }
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 4, 1-D register blocking (64 x 64 tile, 8 outputs per thread)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  const int M = static_cast<int>(x.size(0));
  const int N = static_cast<int>(w.size(0));
  const int K = static_cast<int>(x.size(1));
  if (out.numel() == 0 || K == 0) {
    return out;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  gemm_blocktile_1d_kernel<<<gemm_grid(M, N, BM, BN), THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), M, N, K);
  LAUNCH_CHECK();
  return out;
}
