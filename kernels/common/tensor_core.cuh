// kernels/common/tensor_core.cuh: the TF32 tensor-core building blocks that the tensor-core rungs
// of the GEMM ladder share (gemm_08_mma_tf32.cu, gemm_09_wgmma_tf32.cu, gemm_10_3xtf32.cu;
// notebooks/08_tensor_cores_and_precision.ipynb).
//
//   to_tf32 / split_tf32   fp32 -> TF32, and the 3xTF32 split v = big + small (split_tf32x4: four);
//   tf32_residual          the small part when v itself is the big part (tensor cores truncate it);
//   mma_tf32               one warp-wide mma.sync m16n8k8 (TF32 in, FP32 accumulate);
//   ldmatrix_x4            four 8 x 4 blocks of 32-bit words from shared memory into fragments;
//   cp_async_16            a 16-byte cp.async (common/cp_async.cuh, with the 4-byte one, commit and wait);
//   grouped_tile           which output tile a block computes (a raster that keeps operands in L2);
//   add_bias / bias_pair   nn.Linear's bias, added to a lane's two finished outputs (or loaded ahead).
//
// Why these live here: rung 8 runs them with one product per fragment, rung 10 with three (the
// split), and rung 9 falls back to rung 8's kernel when TMA cannot describe the inputs. One copy
// of each means the three rungs cannot drift apart in what "TF32" or "the split" means.

#pragma once

#include <cfloat>  // FLT_MIN
#include <cstdint>

#include <cuda_runtime.h>

#include "common/cp_async.cuh"  // async_copy::cp_async_16 / cp_async_f32 / cp_async_commit / cp_async_wait

namespace tc {

// ---- TF32 ---------------------------------------------------------------------------------
//
// TF32 is fp32 with the mantissa cut from 23 bits to 10: same exponent range, 1 + 10 significant
// bits, relative precision 2^-11. The tensor cores read a 32-bit register and ignore its low 13
// bits, which truncates. cvt.rna rounds to the nearest TF32 instead (ties away from zero) and
// clears those bits, so the hardware sees exactly the value we chose: round-to-nearest halves the
// worst-case error of each operand (2^-11 instead of 2^-10, relative) and, unlike truncation, is
// unbiased, so errors cancel along K instead of piling up in one direction.
__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
  return r;
}

// 3xTF32: v = big + small + (a rest below 2^-22 |v|). big is v rounded to TF32; v - big is exact
// in fp32 (it is v with its top 11 significant bits removed), and small is that rounded to TF32.
// Then x·w = xb·wb + xb·ws + xs·wb + xs·ws, where the last term is ~2^-22 of the product and is
// dropped: three tensor-core products give what fp32 gives, for 3x the TF32 work.
//
// That holds for finite v (split as above, bit for bit). An inf v kept in big would break it twice:
// its small part would be inf - inf = NaN, and its cross term xb·ws = inf·ws takes the sign of ws,
// which is the opposite of w's wherever w was rounded up (ws = w - rna(w) < 0 < w) and 0 wherever w
// is a TF32 value already (one uniform weight in 8192): inf - inf or inf·0, NaN where fp32 gives
// ±inf. So a non-finite v goes into small, and big is ±2^-126 (fp32's smallest normal, v's sign):
// then v meets the other operand's big part, which has that operand's sign and is 0 only where the
// operand is (a nonzero normal value never rounds to 0), and its small part only through the tiny
// big: xs·wb = ±inf with the product's sign, NaN where fp32 has NaN (inf·0, any NaN), and both
// operands infinite give inf·(±2^-126) twice, ±inf as in fp32. The tiny big's terms are finite and
// vanish beside the inf. (A finite v within 2^-12 of fp32's maximum still rounds up to big = inf,
// small = -inf: NaN, as before; the bad-input matrix's near-max values are 2^125.)
__device__ __forceinline__ void split_tf32(float v, uint32_t& big, uint32_t& small) {
  const uint32_t rounded = to_tf32(v);
  const uint32_t rest = to_tf32(v - __uint_as_float(rounded));
  const bool finite = isfinite(v);
  big = finite ? rounded : (__float_as_uint(v) & 0x80000000u) | 0x00800000u;  // ±2^-126
  small = finite ? rest : __float_as_uint(v);
}

// The small part when the big part is v itself (common/tf32_operands.cuh: the operands that go through
// memory): trunc(v) is what the tensor cores read of v; v - trunc(v) (v's low 13 bits, v's sign) rounded to the
// nearest TF32 keeps v's sign too. The residual is never 0 but where v is ±0: where v - trunc(v)
// is 0 (v a TF32 value already: one uniform weight in 8192) or no number (v = ±inf or NaN, where it
// would be inf - inf), it is ±2^-126, fp32's smallest normal, with v's sign. Why: an inf in x meets
// w's parts in xb·wb + xb·ws, and reaches w's through xs·wb only if w is inf too; with every part of
// a nonzero value nonzero and of its sign, each such term is ±inf with the product's sign, as fp32's
// x·w is, where a small part of 0 would give inf·0 = NaN. (v = ±0 keeps 0: inf·0 is NaN in fp32
// too.) What it adds to a finite product: xb·(±2^-126) + (±2^-126)·wb, a fraction 2^-126 (1/|x| +
// 1/|w|) of xb·wb, of its sign: below fp32's 2^-24 for operands above 2^-101 in magnitude (the
// split's own error is 2^-21). Nor does it reach the result: the tensor core adds each k8 step's
// xb·wb after those terms, aligns the sum to its largest term and keeps a limited number of bits
// below it, truncating (gemm_10_3xtf32.cu; utils/tf32.tensor_core_step models it), which cuts the
// 2^-126 terms away: finite results keep their bits (tests/test_tf32_special_values.py checks it on
// the model, tests/test_gemm_tensor_cores.py on the GPU).
__device__ __forceinline__ float tf32_residual(float v) {
  const float big = __uint_as_float(__float_as_uint(v) & 0xffffe000u);
  const float small = isfinite(v) ? __uint_as_float(tc::to_tf32(v - big)) : 0.0f;
  return small == 0.0f && v != 0.0f ? copysignf(FLT_MIN, v) : small;
}

// split_tf32 of four values at once, parts kept as floats (TF32 values with their low 13 bits zero):
// the unit of the splits that go through memory, 16 bytes at a time.
__device__ __forceinline__ void split_tf32x4(float4 v, float4& big, float4& small) {
  uint32_t b0, b1, b2, b3, s0, s1, s2, s3;
  split_tf32(v.x, b0, s0);
  split_tf32(v.y, b1, s1);
  split_tf32(v.z, b2, s2);
  split_tf32(v.w, b3, s3);
  big = make_float4(__uint_as_float(b0), __uint_as_float(b1), __uint_as_float(b2), __uint_as_float(b3));
  small = make_float4(__uint_as_float(s0), __uint_as_float(s1), __uint_as_float(s2), __uint_as_float(s3));
}

// ---- mma.sync m16n8k8, TF32 ----------------------------------------------------------------
//
// One instruction, one warp: D (16 x 8) += A (16 x 8) · B (8 x 8), A row-major, B column-major
// (which is w's own layout: B's column n is w's row n, contiguous along k). Each lane holds a
// fragment, pieces of the three matrices at fixed places. With g = lane / 4 (the group, 0..7) and
// t = lane % 4 (the thread in the group, 0..3):
//
//   A: a[0] = A[g][t]      a[1] = A[g + 8][t]      a[2] = A[g][t + 4]      a[3] = A[g + 8][t + 4]
//   B: b[0] = B[t][g]      b[1] = B[t + 4][g]       (B[k][n] = w[n][k])
//   D: d[0] = D[g][2t]     d[1] = D[g][2t + 1]     d[2] = D[g + 8][2t]     d[3] = D[g + 8][2t + 1]
//
// So a lane's A values are rows g and g + 8 at columns t and t + 4: the 16 x 8 tile seen as four
// 8 x 4 blocks (rows 0-7 / 8-15, columns 0-3 / 4-7), one value of each per lane, lane l holding
// element (l / 4, l % 4) of each block. ldmatrix (below) produces exactly that arrangement.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- ldmatrix ------------------------------------------------------------------------------
//
// ldmatrix.x4 loads four 8 x 8 matrices of 16-bit values, one register per matrix per lane: lane l
// gets row l / 4, 16-bit columns 2(l % 4) and 2(l % 4) + 1 of each. Read as 32-bit words, an
// 8 x 8 b16 matrix is an 8 x 4 block of fp32 values and lane l gets its word (l / 4, l % 4): the
// fragment arrangement above. Lanes 8i .. 8i + 7 give the addresses of matrix i's 8 rows (16
// bytes each, 16-byte aligned). One instruction replaces four 32-bit shared loads per lane, and
// with rows 144 bytes apart (see the padding in gemm_mma.cuh) each 8-row matrix touches all 32
// banks exactly once: no conflicts.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const float* smem_row) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// ---- cp.async, 16 bytes ----------------------------------------------------------------------
//
// Four consecutive floats from global to shared memory in one asynchronous copy: common/cp_async.cuh.
using async_copy::cp_async_16;

// ---- which tile a block computes --------------------------------------------------------------
//
// Block b of a 1-D grid (gemm_grid) takes output tile (tile_m, tile_n). Rungs 1-7 walk the M
// tiles first (b % tiles_m): at the problems' 1024 x 8192 x 8192 the 8 M tiles of one N tile run
// together and share that tile of w in L2. At 32768 x 4096 x 1024 there are 256 M tiles, so the
// blocks resident at one time all sit in one or two columns of N tiles and every column re-reads
// all of x (128 MB) from DRAM: 16 columns x 128 MB = 2 GB, which at tensor-core speed costs more
// than the arithmetic. Grouped order: blocks walk GROUP M tiles, then the next N tile, and only
// after the last N tile move to the next GROUP M tiles. The blocks resident at once then cover a
// compact GROUP x (a few) rectangle of tiles whose x rows and w rows both stay in L2, and x is
// read from DRAM about once. With tiles_m <= GROUP (the 1024-row problems) it is rung 7's order.
__device__ __forceinline__ void grouped_tile(int block, int tiles_m, int tiles_n, int group, int& tile_m,
                                             int& tile_n) {
  const long long per_group = static_cast<long long>(group) * tiles_n;  // blocks in a full group
  const int first_m = static_cast<int>(block / per_group) * group;
  const int rows = min(tiles_m - first_m, group);  // the last group may hold fewer M tiles
  const int in_group = static_cast<int>(block % per_group);
  tile_m = first_m + in_group % rows;
  tile_n = in_group / rows;
}

// ---- epilogue -------------------------------------------------------------------------------
//
// A lane finishes two adjacent outputs of a row, columns n and n + 1 (the D fragment of mma.sync
// and wgmma alike). bias (N,), or null for none, is added to the finished sum once, as cuBLAS's
// addmm does: one rounding, the same as adding it afterwards, without a second pass over out.
__device__ __forceinline__ void add_bias(const float* __restrict__ bias, int n, int N, float& v0, float& v1) {
  if (bias != nullptr) {
    if (n < N) v0 += __ldg(bias + n);
    if (n + 1 < N) v1 += __ldg(bias + n + 1);
  }
}

// The same two bias values, loaded ahead: (bias[n], bias[n + 1]), 0 where there is no bias or no
// column. An epilogue that loads all its pairs first waits for memory once instead of once per
// store (the loads cannot move past the stores to `out` by themselves); adding 0 changes nothing.
__device__ __forceinline__ float2 bias_pair(const float* __restrict__ bias, int n, int N) {
  float2 b = make_float2(0.0f, 0.0f);
  if (bias != nullptr) {
    if (n < N) b.x = __ldg(bias + n);
    if (n + 1 < N) b.y = __ldg(bias + n + 1);
  }
  return b;
}

}  // namespace tc
