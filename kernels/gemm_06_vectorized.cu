// gemm_06_vectorized.cu: out = x @ w.T in float32, x (M, K) and w (N, K) row-major as nn.Linear
// stores them, out (M, N). Rung 6 of the SGEMM ladder (notebooks/03_tiled_gemm.ipynb): rung 5
// with 16-byte (float4) memory accesses and a deeper K slice.
//
// The idea: move the same bytes with fewer instructions. The tile and the outer products are rung
// 5's; what changes is how data moves:
//   - global -> shared: each float4 load brings 4 consecutive k of one row (LDG.128), a quarter of
//     rung 5's load instructions. It needs K % 4 == 0 and x and w on 16-byte boundaries; the
//     launcher checks both at run time and otherwise runs the VEC_LOADS = false variant, whose
//     copy is rung 5's.
//   - shared -> registers: a[0..7] and b[0..7] as two float4 each (the tiles are declared 16-byte
//     aligned, so this no longer depends on the optimiser).
//   - registers -> out: two float4 stores per row of the 8 x 8 sub-tile when N % 4 == 0, else
//     scalars.
//   - BK = 16 instead of 8: half as many slices, so half the barriers and loop overhead per FMA.
//
// PREDICTION (made before measuring): a small gain, 5-15% over rung 5, some 65-75% of cuBLAS
// SGEMM, and most of it from BK = 16 (fewer barriers) rather than from the float4 instructions:
// at 32 FLOP per byte, rung 5 asks L2 for a fraction of its bandwidth, and its shared reads were
// already 16 bytes wide. (Set BK = 8 to separate the two effects.)
//
// What is left for rung 7: each slice is copied, then computed, then the next one copied, so the
// wait for global memory is covered only by the SM's other block. And the reads of ws conflict: a
// 16-byte shared load is served a quarter-warp (8 lanes, 128 bytes) at a time, and the 8 lanes of a
// quarter read float4 32 bytes apart (tn = 8 (t % 16)), so lanes t and t + 4 hit the same 4 banks
// at different addresses: 2 passes per quarter where 1 would do.

#include <cstdint>

#include "common/gemm_tile.cuh"

// As rung 5, with BK = 16: each thread copies 2 float4 of each tile per slice (128 x 16 / 4 / 256).
// ptxas: 127 registers for the float4 variant and 113 for the scalar one, under the 128 that
// MIN_BLOCKS_PER_SM = 2 allows (2 blocks of 256 threads x 128 = 65536), no spills. Shared memory:
// 2 x 16 x (128 + 4) floats = 16.5 KB per block, 33 KB for two, of the SM's 228 KB.
constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 16;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);
constexpr int MIN_BLOCKS_PER_SM = 2;

// The float4 counterpart of load_tile_kmajor (common/gemm_tile.cuh), for K % 4 == 0 and a
// 16-byte-aligned src: then every row starts on a 16-byte boundary, and each float4 of 4
// consecutive k lies either wholly inside [0, K) or wholly past it.
//
// Thread t loads float4 t % 2 (k0 + 4 * (t % 2) .. + 3, then the same 8 further on, ... up to BK)
// of rows row0 + t / 2 (+ THREADS / 2, ...). A warp's 32 threads thus read 2 float4 (8 k, 32
// bytes: one memory sector) of 16 consecutive rows, with 16-byte instructions: a quarter of the
// load instructions of rung 5. Each float4 goes to shared memory as 4 scalars, down the k-major
// tile; for each of the 4, the warp's 2 x 16 writes land in 32 different banks (GEMM_SMEM_PAD).
template <int ROWS>
__device__ __forceinline__ void load_tile_kmajor_vec4(float (&tile)[BK][ROWS + GEMM_SMEM_PAD],
                                                      const float* __restrict__ src, int rows, int K, int row0,
                                                      int k0, int tid) {
  constexpr int ROW_STEP = THREADS / 2;
  static_assert(BK % 8 == 0 && THREADS % 32 == 0 && ROWS % ROW_STEP == 0,
                "the threads must cover whole 8 (k) x THREADS / 2 (rows) blocks of the tile");
  const int kt = 4 * (tid % 2);
  const int rt = tid / 2;
#pragma unroll
  for (int kh = 0; kh < BK; kh += 8) {
#pragma unroll
    for (int rh = 0; rh < ROWS; rh += ROW_STEP) {
      const int kk = kh + kt;
      const int rr = rh + rt;
      const int row = row0 + rr;
      const int k = k0 + kk;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (row < rows && k < K) {
        v = *reinterpret_cast<const float4*>(src + static_cast<int64_t>(row) * K + k);
      }
      tile[kk + 0][rr] = v.x;
      tile[kk + 1][rr] = v.y;
      tile[kk + 2][rr] = v.z;
      tile[kk + 3][rr] = v.w;
    }
  }
}

// @launch: <true>
template <bool VEC_LOADS>
__global__ void __launch_bounds__(THREADS, MIN_BLOCKS_PER_SM)
    gemm_vectorized_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                           int M, int N, int K, bool vec_stores) {
  __shared__ __align__(16) float xs[BK][BM + GEMM_SMEM_PAD];
  __shared__ __align__(16) float ws[BK][BN + GEMM_SMEM_PAD];

  const int tiles_m = (M + BM - 1) / BM;
  const int m0 = static_cast<int>(blockIdx.x % tiles_m) * BM;
  const int n0 = static_cast<int>(blockIdx.x / tiles_m) * BN;
  const int tid = threadIdx.x;
  const int tm = (tid / (BN / TN)) * TM;
  const int tn = (tid % (BN / TN)) * TN;

  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    if constexpr (VEC_LOADS) {
      load_tile_kmajor_vec4<BM>(xs, x, M, K, m0, k0, tid);
      load_tile_kmajor_vec4<BN>(ws, w, N, K, n0, k0, tid);
    } else {
      load_tile_kmajor<BM, BK, THREADS>(xs, x, M, K, m0, k0, tid);
      load_tile_kmajor<BN, BK, THREADS>(ws, w, N, K, n0, k0, tid);
    }
    __syncthreads();  // the whole slice is in shared memory before anyone reads it
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM];
      float b[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&xs[k][tm + i]);
        a[i] = v.x;
        a[i + 1] = v.y;
        a[i + 2] = v.z;
        a[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < TN; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&ws[k][tn + j]);
        b[j] = v.x;
        b[j + 1] = v.y;
        b[j + 2] = v.z;
        b[j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
          acc[i][j] += a[i] * b[j];
        }
      }
    }
    __syncthreads();  // everyone has read the slice before the next one overwrites it
  }

  // Outputs past M or N (edge tiles) were computed from zero-filled rows: they are not stored.
  // vec_stores is a run-time flag rather than a template parameter: it is tested once per
  // 4 outputs, after the K loop, where a uniform branch costs nothing measurable.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + tm + i;
    if (m >= M) {
      break;
    }
    float* row = out + static_cast<int64_t>(m) * N;
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      const int n = n0 + tn + j;
      if (vec_stores) {
        if (n < N) {
          *reinterpret_cast<float4*>(row + n) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
        }
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          if (n + c < N) {
            row[n + c] = acc[i][j + c];
          }
        }
      }
    }
  }
}

// @export: out = x @ w.T for float32 CUDA tensors x (M, K) and w (N, K): rung 6, 16-byte vector accesses (128 x 128 tile, BK = 16)
torch::Tensor gemm(torch::Tensor x, torch::Tensor w) {
  torch::Tensor out = gemm_new_output(x, w);
  const int M = static_cast<int>(x.size(0));
  const int N = static_cast<int>(w.size(0));
  const int K = static_cast<int>(x.size(1));
  if (out.numel() == 0 || K == 0) {
    return out;
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* outp = out.data_ptr<float>();
  const bool vec_loads = K % 4 == 0 && aligned16(xp) && aligned16(wp);
  const bool vec_stores = N % 4 == 0 && aligned16(outp);
  const dim3 grid = gemm_grid(M, N, BM, BN);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (vec_loads) {
    gemm_vectorized_kernel<true><<<grid, THREADS, 0, stream>>>(xp, wp, outp, M, N, K, vec_stores);
  } else {
    gemm_vectorized_kernel<false><<<grid, THREADS, 0, stream>>>(xp, wp, outp, M, N, K, vec_stores);
  }
  LAUNCH_CHECK();
  return out;
}
