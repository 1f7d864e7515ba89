// experiments/bf16/mixed16.cu: the mixed-input GEMM of the README ("The mixed-input main loop: ... counted
// again"), the GEMM alone, for mixed16_probe.py: out (M, N, float32) = x (M, K, bf16 or fp16) @ w (N, K,
// float32).T, w read as float32 and converted to x's dtype in registers on its way to the tensor cores, never
// written back; what torch.autocast computes as w.to(x.dtype) then a 16-bit GEMM, without the conversion's
// pass over w (a read of 4 bytes and a write of 2 per weight, every call).
//
// Why w is the A operand. wgmma reads B from shared memory only; A may come from registers. Converting w in
// shared memory and handing wgmma the converted tile as B costs about twice rung 11's shared-memory traffic
// (README), so w is loaded from shared memory straight into A's register fragments, converted there, and the
// kernel computes out.T: a block's tile is BW = 128 channels (rows of w; 64 per consumer warp group, wgmma's
// m) by BX = 256 rows of x (wgmma's n), x's tile the B operand as in rung 11. The accumulators then hold
// channels on their rows, which is what a whole-model epilogue would have to take (not written yet).
//
// Shared memory, per stage (3 stages, 64 KB each): w's float32 tile as two TMA boxes, k 0..31 and k 32..63 of
// the stage, each BW rows of 128 bytes with the 128-byte swizzle (16-byte chunk c of row r at chunk c ^ r % 8);
// then x's tile, BX rows of 64 16-bit values (128 bytes) with the same swizzle, as rung 11 has it.
//
// A's fragments (wgmma's register A for 16-bit kinds, mma.sync's m16n8k16 layout per warp): warp v of the
// group, lane (g, q) = (lane / 4, lane % 4), for the k16 step at k0: a0 = rows 16v + g, k0 + 2q and + 1;
// a1 = row + 8, same k; a2 = row 16v + g, k0 + 2q + 8 and + 9; a3 = row + 8, those k. Each pair is one float2
// in a single 16-byte chunk of the float32 tile, converted to a packed 16-bit pair (round to nearest even,
// as Tensor.to rounds). A warp's float2 loads touch each chunk position twice over its 8 rows: 2 wavefronts
// for 256 bytes, no conflict beyond the minimum.
//
// The register hazard. A wgmma reads its A registers asynchronously, until a wait says its group is done. ptxas
// knows it, and where an ordinary instruction writes a register that a wgmma still in flight reads, it waits
// for every wgmma after each one (its C7513 "wgmma.mma_async instructions are serialized"). A first version
// double-buffered the fragments so that the next k tile's could load while this one's wgmmas ran; at the 168
// registers a thread of a 384-thread block has (128 of them accumulators), ptxas gave both buffers the same
// four registers and serialized every wgmma. So each k tile loads its four steps' fragments (16 registers),
// issues its four wgmmas as one group and waits for it before the next k tile's loads: the tensor cores idle
// for one warp group's loads per k tile (about a tenth of its 1,024 clocks of wgmma), while the other
// consumer warp group, out of step with it, keeps them busy.
// @arch: 9.0a

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/gemm_wgmma_host.cuh"

namespace mixed16 {

using gemm_wgmma::CONSUMER_REGS;
using gemm_wgmma::CONSUMERS;
using gemm_wgmma::GROUP_M;
using gemm_wgmma::PRODUCER_REGS;
using gemm_wgmma::THREADS;

constexpr int BW = 128;                            // channels (rows of w) per tile: 2 consumer warp groups x 64
constexpr int BX = 256;                            // rows of x per tile: wgmma's n
constexpr int BK = 64;                             // k per stage: one 128-byte row of x, two of w
constexpr int STAGES = 3;
constexpr int W_HALF_BYTES = BW * 128;             // one float32 box of w: k 32 wide
constexpr int W_BYTES = 2 * W_HALF_BYTES;          // 32 KB
constexpr int X_BYTES = BX * 128;                  // 32 KB
constexpr int STAGE_BYTES = W_BYTES + X_BYTES;     // 64 KB
constexpr int ACC = BX / 2;                        // accumulators per consumer thread: 64 x 256 / 128
constexpr size_t SMEM_BYTES = 1024 + static_cast<size_t>(STAGE_BYTES) * STAGES + 2 * STAGES * sizeof(uint64_t);
static_assert(SMEM_BYTES <= 227 * 1024, "more shared memory than a block may have on sm_90");

// The 16-bit kind: a float pair packed as two values of it (the lower column in the low half), and the
// register-A wgmma m64n256k16 on it.
template <class T>
struct Kind;

#define MIXED16_RS_WGMMA(INSTR)                                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n" INSTR " {" HOPPER_WGMMA_REGS_128 "}, "              \
               "{%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"                                                \
               : HOPPER_WGMMA_OUTS_128                                                                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))

template <>
struct Kind<__nv_bfloat16> {
  static constexpr CUtensorMapDataType TMA_TYPE = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&p);
  }
  static __device__ __forceinline__ void mma(float (&d)[ACC], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    MIXED16_RS_WGMMA("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16");
  }
};

template <>
struct Kind<__half> {
  static constexpr CUtensorMapDataType TMA_TYPE = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 p = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&p);
  }
  static __device__ __forceinline__ void mma(float (&d)[ACC], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    MIXED16_RS_WGMMA("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16");
  }
};

template <int N>
__device__ __forceinline__ void fence_fragments(uint32_t (&a)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[i][j])::"memory");
  }
}

// The float2 at (row r, k) of a stage's float32 w tile (k even, 0..63): box k / 32, chunk (k % 32) / 4 swizzled.
__device__ __forceinline__ float2 w_pair(const unsigned char* w_tile, int r, int k) {
  const int half = k / 32;
  const int kk = k % 32;
  const int chunk = (kk / 4) ^ (r % 8);
  return *reinterpret_cast<const float2*>(w_tile + half * W_HALF_BYTES + r * 128 + chunk * 16 + (kk % 4) * 4);
}

// One k tile of a consumer warp group: its four k16 steps' fragments into a (rows r0 and r0 + 8 of the tile),
// converted, then four wgmmas reading them and x's tile, committed as one group.
template <class T>
__device__ __forceinline__ void k_tile(float (&acc)[ACC], const unsigned char* stage, int r0, int q, int first) {
  uint32_t a[4][4];
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int k0 = 16 * s + 2 * q;
    const float2 v0 = w_pair(stage, r0, k0);
    const float2 v1 = w_pair(stage, r0 + 8, k0);
    const float2 v2 = w_pair(stage, r0, k0 + 8);
    const float2 v3 = w_pair(stage, r0 + 8, k0 + 8);
    a[s][0] = Kind<T>::pack(v0.x, v0.y);
    a[s][1] = Kind<T>::pack(v1.x, v1.y);
    a[s][2] = Kind<T>::pack(v2.x, v2.y);
    a[s][3] = Kind<T>::pack(v3.x, v3.y);
  }
  const uint64_t desc_x = hopper::wgmma_desc_sw128(stage + W_BYTES);
  fence_fragments(a);
  hopper::fence_operands(acc);
  hopper::wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    Kind<T>::mma(acc, a[s], desc_x + s * hopper::WGMMA_DESC_K8_STEP, s == 0 && first ? 0 : 1);
  }
  hopper::wgmma_commit();
  hopper::wgmma_wait<0>();  // the fragments are free again (above)
  hopper::fence_operands(acc);
  fence_fragments(a);
}

// out.T tiles, BW channels x BX rows of x, over persistent blocks (the engine's PersistentTiles, with x's rows
// as its M and the channels as its N). Warp group 0 produces (one thread: TMA), 1 and 2 consume: channels
// 64c .. 64c + 63 of the tile.
template <class T>
__global__ void __launch_bounds__(THREADS, 1)
    mixed_gemm_kernel(const __grid_constant__ CUtensorMap tmap_w, const __grid_constant__ CUtensorMap tmap_x,
                      float* __restrict__ out, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (hopper::smem_addr(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + STAGES * STAGE_BYTES);
  uint64_t* empty = full + STAGES;
  const gemm_wgmma::PersistentTiles<BX, BW, GROUP_M> tiles(M, N);
  const int k_tiles = (K + BK - 1) / BK;
  const int wg = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      hopper::mbar_init(&full[s], 1);
      hopper::mbar_init(&empty[s], CONSUMERS);
    }
    hopper::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    hopper::setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      hopper::tma_prefetch_descriptor(&tmap_w);
      hopper::tma_prefetch_descriptor(&tmap_x);
      int it = 0;
      for (int unit = tiles.first(); unit < tiles.units; unit += tiles.step()) {
        int m0, n0, tile_n;
        tiles.origin(unit, m0, n0, tile_n);
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) hopper::mbar_wait(&empty[s], (it / STAGES - 1) & 1);
          unsigned char* stage = smem + s * STAGE_BYTES;
          hopper::mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
          hopper::tma_load_2d(stage, &tmap_w, &full[s], kt * BK, n0);
          hopper::tma_load_2d(stage + W_HALF_BYTES, &tmap_w, &full[s], kt * BK + BK / 2, n0);
          hopper::tma_load_2d(stage + W_BYTES, &tmap_x, &full[s], kt * BK, m0);
        }
      }
    }
  } else {
    hopper::setmaxnreg_inc<CONSUMER_REGS>();
    const int c = wg - 1;
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int warp = static_cast<int>(threadIdx.x % 128) / 32;
    const int g = lane / 4, q = lane % 4;
    const int r0 = 64 * c + 16 * warp + g;  // this thread's first row of the w tile (and of out.T's tile)
    auto release = [&](int s) {
      if (threadIdx.x % 128 == 0) hopper::mbar_arrive(&empty[s]);
    };
    int it = 0;
    for (int unit = tiles.first(); unit < tiles.units; unit += tiles.step()) {
      int m0, n0, tile_n;
      tiles.origin(unit, m0, n0, tile_n);
      float acc[ACC];
#pragma unroll
      for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
      // Each k tile: wait for its stage, load, convert and issue, wait for the group, hand the stage back.
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        hopper::mbar_wait(&full[s], (it / STAGES) & 1);
        k_tile<T>(acc, smem + s * STAGE_BYTES, r0, q, kt == 0);
        release(s);
      }
      // acc[4j + 2h + e] = out.T[n0 + r0 + 8h][m0 + 8j + 2q + e]
#pragma unroll
      for (int j = 0; j < ACC / 4; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int n = n0 + r0 + 8 * h;
            const int m = m0 + 8 * j + 2 * q + e;
            if (m < M && n < N) out[static_cast<int64_t>(m) * N + n] = acc[4 * j + 2 * h + e];
          }
        }
      }
    }
  }
}

template <class T>
void run(const torch::Tensor& x, const torch::Tensor& w, torch::Tensor& out) {
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  const CUtensorMap tmap_w = hopper::make_tensor_map_2d(w.data_ptr<float>(), N, K, BW, BK / 2,
                                                        CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  const CUtensorMap tmap_x = hopper::make_tensor_map_2d(reinterpret_cast<const T*>(x.data_ptr()), M, K, BX, BK,
                                                        Kind<T>::TMA_TYPE);
  auto kernel = mixed_gemm_kernel<T>;
  allow_dynamic_smem(kernel, SMEM_BYTES);
  using Tiles = gemm_wgmma::PersistentTiles<BX, BW, GROUP_M>;
  const int64_t blocks = Tiles::blocks(Tiles::tiles(M, N), max_active_clusters(kernel, 1, THREADS, SMEM_BYTES));
  kernel<<<static_cast<unsigned>(blocks), THREADS, SMEM_BYTES, at::cuda::getCurrentCUDAStream()>>>(
      tmap_w, tmap_x, out.data_ptr<float>(), static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
  LAUNCH_CHECK();
}

}  // namespace mixed16

// @export: out (M, N) float32 = x @ w.T for CUDA x (M, K) bfloat16 or float16 and w (N, K) float32, w converted to x's dtype in registers (round to nearest even, as w.to(x.dtype)); K % 8 == 0, both contiguous and 16-byte aligned
torch::Tensor mixed_gemm(torch::Tensor x, torch::Tensor w) {
  CHECK_CUDA(x);
  CHECK_CUDA(w);
  CHECK_SAME_DEVICE(x, w);
  TORCH_CHECK(x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf,
              "x must be bfloat16 or float16, got ", x.scalar_type());
  CHECK_FLOAT(w);
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.size(0) > 0 && w.size(0) > 0 &&
                  x.size(1) > 0,
              "x (M, K) and w (N, K) with every size positive, got x ", shape_string(x), " and w ", shape_string(w));
  TORCH_CHECK(x.size(1) % 8 == 0, "K = ", num(x.size(1)), " must be a multiple of 8 (TMA's 16-byte rows of x)");
  TORCH_CHECK(x.size(0) <= INT32_MAX && w.size(0) <= INT32_MAX, "M and N must fit in 32 bits");
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor wc = w.contiguous();
  TORCH_CHECK(aligned16(xc.data_ptr()) && aligned16(wc.data_ptr()), "x and w must be 16-byte aligned");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor out = torch::empty({xc.size(0), wc.size(0)}, xc.options().dtype(torch::kFloat));
  if (x.scalar_type() == torch::kBFloat16) {
    mixed16::run<__nv_bfloat16>(xc, wc, out);
  } else {
    mixed16::run<__half>(xc, wc, out);
  }
  return out;
}
