// The reference answer of notebook 06's from-scratch exercise (no chapter renders this folder):
// problem 94's tail after its GEMM, y = GroupNorm(mish(hardtanh(x + bias))), one block per
// (sample, group). Self-contained: no helper of kernels/common.

// Mish as F.mish: x * tanh(softplus(x)), softplus with PyTorch's threshold of 20.
__device__ float mish_answer(float v) {
  const float sp = v > 20.0f ? v : log1pf(expf(v));
  return v * tanhf(sp);
}

// @launch
__global__ void tail94_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                              const float* __restrict__ gamma, const float* __restrict__ beta,
                              float* __restrict__ y, int C, int G, float eps) {
  extern __shared__ float scratch[];  // 3 floats per warp: a Welford summary each
  const int D = C / G;
  const int q = blockIdx.x;            // (sample, group) = (q / G, q % G)
  const int c0 = (q % G) * D;          // the group's first channel
  const float* seg = x + static_cast<long long>(q / G) * C + c0;
  float* out = y + static_cast<long long>(q / G) * C + c0;

  // Welford over this thread's values: the activation applied as each value is read.
  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
  for (int e = threadIdx.x; e < D; e += blockDim.x) {
    const float a = mish_answer(fminf(fmaxf(seg[e] + bias[c0 + e], -1.0f), 1.0f));
    n += 1.0f;
    const float d = a - mean;
    mean += d / n;
    m2 += d * (a - mean);
  }
  // Merge the summaries across the warp (Chan et al.), then across warps through shared memory.
  for (int off = 16; off > 0; off /= 2) {
    const float nb = __shfl_xor_sync(0xffffffffu, n, off);
    const float mb = __shfl_xor_sync(0xffffffffu, mean, off);
    const float sb = __shfl_xor_sync(0xffffffffu, m2, off);
    const float nn = n + nb;
    if (nn > 0.0f) {
      const float d = mb - mean;
      mean += d * nb / nn;
      m2 += sb + d * d * n * nb / nn;
    }
    n = nn;
  }
  const int warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  if (threadIdx.x % 32 == 0) {
    scratch[3 * warp] = n;
    scratch[3 * warp + 1] = mean;
    scratch[3 * warp + 2] = m2;
  }
  __syncthreads();
  n = 0.0f, mean = 0.0f, m2 = 0.0f;
  for (int w = 0; w < warps; ++w) {  // every thread merges the warps' summaries in the same order
    const float nb = scratch[3 * w], mb = scratch[3 * w + 1], sb = scratch[3 * w + 2];
    const float nn = n + nb;
    if (nn > 0.0f) {
      const float d = mb - mean;
      mean += d * nb / nn;
      m2 += sb + d * d * n * nb / nn;
    }
    n = nn;
  }
  const float rstd = rsqrtf(m2 / n + eps);
  for (int e = threadIdx.x; e < D; e += blockDim.x) {
    const float a = mish_answer(fminf(fmaxf(seg[e] + bias[c0 + e], -1.0f), 1.0f));
    out[e] = (a - mean) * rstd * gamma[c0 + e] + beta[c0 + e];
  }
}
