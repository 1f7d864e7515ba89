// kernels/common/hopper.cuh: Hopper's (sm_90a) asynchronous machinery, as the wgmma rungs of the
// GEMM ladder use it (gemm_09_wgmma_tf32.cu, gemm_10_3xtf32.cu; notebooks/09_hopper_gemm_and_
// epilogue.ipynb). Every function is a thin wrapper over one PTX instruction, with why it exists.
//
//   make_tensor_map_2d        (host) a TMA descriptor of a row-major matrix, 128-byte swizzle;
//   mbar_*                    mbarriers: the producer/consumer handshake of the shared-memory ring;
//   tma_load_2d               one box of a matrix, global -> shared, by the TMA unit;
//   fence_proxy_async         make ordinary shared-memory writes visible to wgmma (the async proxy);
//   wgmma_*                   warpgroup MMA: descriptors, fence / commit / wait, m64n{64,128,256}k8 TF32;
//   fence_operands            keep the compiler from touching accumulators while a wgmma owns them;
//   setmaxnreg_inc/dec        move registers from the producer warp group to the consumers.
//
// Clusters of blocks (TMA multicast, a peer's mbarrier) and TMA stores had wrappers here while the
// GEMM's measured-slower schedules did (experiments/wgmma_schedule/README.md).
//
// What the pieces are for (rung 9's header tells the whole story): on Hopper one warp GROUP (4
// warps, 128 threads) issues wgmma, an asynchronous MMA of 64 x N x 8 (TF32) that reads both
// operands straight from shared memory, so no thread loads fragments. The operands get there by
// TMA: one thread describes a whole tile (a box of the matrix) and the copy engine moves it,
// zero-filling whatever lies outside the matrix, and signals an mbarrier when the bytes have
// landed. A producer warp group keeps a ring of stages full; consumer warp groups wait on each
// stage's "full" barrier, run their wgmmas and arrive on its "empty" barrier to hand it back.

#pragma once

#include <cstdint>

#include <cuda.h>           // CUtensorMap and its enums: types only, nothing here links against libcuda
#include <cudaTypedefs.h>   // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include "common/check.cuh"

namespace hopper {

// ---- TMA descriptors (host) ------------------------------------------------------------------
//
// cuTensorMapEncodeTiled is a driver API function. Linking -lcuda for it would make every build
// depend on the driver library at link time (CI has none); instead the runtime hands us the
// driver's function pointer, looked up once by name (the driver is loaded anyway: torch uses it).
inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    TORCH_CHECK(found == cudaDriverEntryPointSuccess && p != nullptr,
                "the CUDA driver has no cuTensorMapEncodeTiled (TMA needs a driver for CUDA 12.0 or newer)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A TMA descriptor for a row-major (rows, cols) matrix of T at `base` (TMA's name for T: `type`), read
// or written in boxes of box_rows x box_cols with the 128-byte swizzle (box_cols * sizeof(T) must be
// 128: one swizzle row). TMA's own rules, which the caller must have checked: base 16-byte aligned,
// the row stride (cols * sizeof(T) bytes) a multiple of 16. Out-of-bounds parts of a box are
// filled with zeros when loaded (FLOAT_OOB_FILL_NONE) and skipped when stored, which is what makes
// edge tiles free of special cases.
template <class T>
inline CUtensorMap make_tensor_map_2d(const T* base, int64_t rows, int64_t cols, int box_rows, int box_cols,
                                      CUtensorMapDataType type) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};  // innermost first
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * sizeof(T)};  // bytes, dims 1.. only
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode_tiled()(&map, type, 2, const_cast<T*>(base), dims, strides, box, elem_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed (CUresult ", num(static_cast<int>(r)),
              ") for a ", num(rows), " x ", num(cols), " matrix of ", num(sizeof(T)), "-byte elements in boxes of ",
              num(box_rows), " x ", num(box_cols));
  return map;
}

// The same for a float matrix.
inline CUtensorMap make_tensor_map_2d(const float* base, int64_t rows, int64_t cols, int box_rows, int box_cols) {
  return make_tensor_map_2d(base, rows, cols, box_rows, box_cols, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
}

// ---- mbarriers -------------------------------------------------------------------------------
//
// An mbarrier is a 64-bit word in shared memory that counts arrivals (and, for TMA, bytes) toward
// the completion of its current phase; phases alternate parity 0, 1, 0, ... A waiter asks "has the
// phase of parity P completed?", which is how a ring of stages reuses one barrier per stage: round
// r of stage s waits for parity r % 2.
__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals));
}

// After initialising barriers: make the initialisation visible to the TMA unit (the async proxy)
// and to the other threads (with the __syncthreads that must follow).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The producer's arrival on a "full" barrier: one arrival, and `bytes` more to come from TMA.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Spins until the phase of parity `parity` has completed (try_wait suspends the thread for a
// while inside the instruction, so the loop is not a hot spin).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// ---- TMA -------------------------------------------------------------------------------------
//
// Copies the box at (col, row) (element coordinates, innermost first) of the matrix `map`
// describes into shared memory at `dst` (1024-byte aligned for the 128-byte swizzle), and counts
// its bytes on `bar`. Issued by one thread; the copy engine does the rest.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int col, int row) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(col), "r"(row), "r"(smem_addr(bar))
      : "memory");
}

// Fetches a descriptor (a __grid_constant__ kernel parameter) into the TMA unit's cache early.
__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Ordinary stores to shared memory (the generic proxy) are not seen by wgmma's operand reads
// (the async proxy) until this fence: a thread that wrote an operand tile fences, then the
// threads synchronise, then wgmma may read it.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// A named barrier for a subset of the block's warps (id 0 is __syncthreads').
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- registers ---------------------------------------------------------------------------------
//
// setmaxnreg: a warp group gives registers back (dec) or takes them (inc) while the kernel runs.
// The launch gives every thread the same number; the producer needs few (it issues TMA from one
// thread), the consumers need many (the accumulators), so the producer hands its share over.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// ---- wgmma -------------------------------------------------------------------------------------
//
// A shared-memory matrix descriptor (64 bits): start address >> 4 in bits 0-13, leading-dimension
// byte offset >> 4 in 16-29, stride-dimension byte offset >> 4 in 32-45, base offset in 49-51,
// swizzle mode in 62-63 (1 = 128-byte swizzle). For a K-major tile with the 128-byte swizzle each
// row is one 128-byte swizzle row (32 floats of k), 8 rows form a 1024-byte swizzle atom, and the
// stride offset is the distance between atoms, 1024 bytes; the leading offset is unused (1 by
// convention). A wgmma k8 step reads 32 bytes of each row: the step at k = 8s starts 32 s bytes
// further, inside the atom, and the hardware applies the swizzle to the address it computes, so
// the same descriptor plus 32 s bytes is right (the tile itself must be 1024-byte aligned).
__device__ __forceinline__ uint64_t wgmma_desc_sw128(const void* tile) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr(tile) & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>(1) << 16;            // leading byte offset (unused with swizzle): 16 >> 4
  desc |= static_cast<uint64_t>(1024 >> 4) << 32;    // stride byte offset: 8 rows x 128 bytes
  desc |= static_cast<uint64_t>(1) << 62;            // 128-byte swizzle
  return desc;
}
constexpr uint64_t WGMMA_DESC_K8_STEP = 32 >> 4;  // + this per k8 step: 8 floats = 32 bytes, in units of 16

// Before the first wgmma of a batch: orders earlier register and shared-memory accesses before it.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the batch of wgmmas issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N groups of this warp group are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// The accumulators of a running wgmma belong to the tensor core until wgmma_wait says it is done,
// but the compiler does not know that: it sees the asm statement that issued the wgmma as the
// registers' last writer, and may move reads of them (the epilogue, a promotion) above the wait.
// An empty asm that "reads and writes" each register, placed after the wait (and before a batch),
// pins every access to its side of the wait.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    asm volatile("" : "+f"(d[i])::"memory");
  }
}

// The operands of a wgmma with N accumulators per thread (32, 64, 128: widths n64, n128, n256), as
// inline PTX names them: the accumulator list, the two descriptors and the scale-d predicate's source,
// and the output constraints. HOPPER_WGMMA writes one wrapper's asm from them.
#define HOPPER_WGMMA_REGS_32 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define HOPPER_WGMMA_DESCS_32 "%32, %33"
#define HOPPER_WGMMA_PRED_32 "%34"
#define HOPPER_WGMMA_OUTS_32 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define HOPPER_WGMMA_REGS_64 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define HOPPER_WGMMA_DESCS_64 "%64, %65"
#define HOPPER_WGMMA_PRED_64 "%66"
#define HOPPER_WGMMA_OUTS_64 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define HOPPER_WGMMA_REGS_128 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define HOPPER_WGMMA_DESCS_128 "%128, %129"
#define HOPPER_WGMMA_PRED_128 "%130"
#define HOPPER_WGMMA_OUTS_128 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
// asm volatile of "INSTR {d...}, desc_a, desc_b, p, IMMS;" with p = (scale_d != 0), for d[N]
#define HOPPER_WGMMA(INSTR, N, IMMS)                                                                       \
  asm volatile("{\n.reg .pred p;\n"                                                                      \
               "setp.ne.b32 p, " HOPPER_WGMMA_PRED_##N ", 0;\n" INSTR " {" HOPPER_WGMMA_REGS_##N "}, "       \
               HOPPER_WGMMA_DESCS_##N ", p, " IMMS ";\n}\n"                                                 \
               : HOPPER_WGMMA_OUTS_##N                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d))


// D (64 x N, fp32, in registers across the warp group) = A (64 x 8) · B (8 x N) + (scale_d ? D : 0),
// A and B TF32, both K-major in shared memory (descriptors). TF32 wgmma has no transpose and no
// register-free rounding: it reads the 32-bit words and ignores their low 13 bits (truncation).
// Accumulator layout: warp v of the group, lane l (g = l / 4, t = l % 4): d[4j + 0..1] = D[16v + g]
// [8j + 2t + 0..1], d[4j + 2..3] = D[16v + g + 8][8j + 2t + 0..1] (mma.sync's C fragment, repeated
// for each n8 block j).
// n64: a 64 x 64 tile, 32 accumulators per thread (the narrow tiles of a mid-size batch).
__device__ __forceinline__ void wgmma_m64n64k8_tf32(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", 32, "1, 1");
}

__device__ __forceinline__ void wgmma_m64n128k8_tf32(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32", 64, "1, 1");
}

__device__ __forceinline__ void wgmma_m64n256k8_tf32(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", 128, "1, 1");
}

// D (64 x N, fp32) = A (64 x 16) · B (16 x N) + (scale_d ? D : 0), A and B bf16 or fp16 (one kind for
// both), K-major in shared memory (descriptors, the same 128-byte swizzle: 64 values of k per row). A
// k16 step reads 32 bytes of each row, as TF32's k8 does, so the descriptors advance by the same 32
// bytes. The four immediates after the predicate: scale A and B by 1 (not negated), and no transpose
// (both operands K-major). Accumulators laid out as the TF32 wrappers' above.

__device__ __forceinline__ void wgmma_m64n64k16_bf16(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", 32, "1, 1, 0, 0");
}

__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", 64, "1, 1, 0, 0");
}

__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", 128, "1, 1, 0, 0");
}

__device__ __forceinline__ void wgmma_m64n64k16_f16(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", 32, "1, 1, 0, 0");
}

__device__ __forceinline__ void wgmma_m64n128k16_f16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", 64, "1, 1, 0, 0");
}

__device__ __forceinline__ void wgmma_m64n256k16_f16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  HOPPER_WGMMA("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", 128, "1, 1, 0, 0");
}

}  // namespace hopper
