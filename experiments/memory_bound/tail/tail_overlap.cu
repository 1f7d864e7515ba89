// DRAFT (exploration run 7): problem 75's whole tail in one kernel that overlaps the row minimum's
// reads with the broadcast's writes. Validated on the GPU element by element; slower than two kernels.
//
// Work items, handed out in order by an atomic counter: R(0), R(1), W(0), R(2), W(1), ...,
// R(S-1), W(S-2), W(S-1), where R(s) = the rows of strip s (one item per row: GroupNorm + min
// of the row, rowmin[n] written, strip s's counter incremented) and W(s) = the writes of
// strip s (C / kChannels items, each out[c, strip s's rows] for kChannels channels). A W item
// waits until its strip's counter reaches the strip's row count. Every row it waits for was
// handed out earlier, to a block that is already running and never waits: no deadlock.
#include "common/check.cuh"
#include "common/elementwise.cuh"
#include "common/groupnorm.cuh"
#include "common/reduce.cuh"

#ifndef TAIL_STRIP_ROWS
#define TAIL_STRIP_ROWS 128
#endif
#ifndef TAIL_CHANNELS
#define TAIL_CHANNELS 64
#endif
#ifndef TAIL_LAG
#define TAIL_LAG 2
#endif
#ifndef TAIL_DYNAMIC
#define TAIL_DYNAMIC 1
#endif
#ifndef TAIL_MIN_BLOCKS
#define TAIL_MIN_BLOCKS 4
#endif
#ifndef TAIL_RUNS
#define TAIL_RUNS 2
#endif
constexpr int kStripRows = TAIL_STRIP_ROWS;  // rows per strip: 4 * kStripRows contiguous bytes of each output channel
constexpr int kChannels = TAIL_CHANNELS;     // channels per write item
constexpr int kRunsPerTrip = TAIL_RUNS;

__device__ __forceinline__ int64_t imin64(int64_t a, int64_t b) { return a < b ? a : b; }

struct TailItem {
  bool is_row;
  int64_t a, b;  // row: (n, -); write: (strip, channel chunk)
};

// Item i of the sequence R(0) R(1) W(0) R(2) W(1) ... R(S-1) W(S-2) W(S-1), in closed form:
// first the rows of strips 0 and 1, then S - 2 periods "W(s - 2), R(s)" for s = 2 .. S-1
// (chunks + kStripRows items each, the last one's rows possibly fewer), then the last writes.
__device__ __forceinline__ TailItem tail_item(int64_t i, int64_t N, int64_t S, int64_t chunks) {
  constexpr int kLag = TAIL_LAG;
  const int64_t rows0 = imin64(N, kLag * kStripRows);
  if (i < rows0) return {true, i, 0};
  i -= rows0;
  const int64_t periods = S > kLag ? S - kLag : 0;
  const int64_t middle = periods > 0 ? periods * chunks + (N - kLag * kStripRows) : 0;
  if (i < middle) {
    const int64_t p = i / (chunks + kStripRows), r = i % (chunks + kStripRows);
    if (r < chunks) return {false, p, r};
    return {true, (p + kLag) * kStripRows + (r - chunks), 0};
  }
  i -= middle;
  const int64_t first = S >= kLag ? S - kLag : 0;
  return {false, first + i / chunks, i % chunks};
}

#ifndef TAIL_PREFETCH_ITEM
#define TAIL_PREFETCH_ITEM 1
#endif

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned int sm_id() {
  unsigned int s;
  asm volatile("mov.u32 %0, %smid;" : "=r"(s));
  return s;
}

// out (C, N): the float4s of a strip's rows, kQuads per channel; thread t owns quad t % kQuads
// of channels t / kQuads + k * kCStep.
constexpr int kQuads = kStripRows / 4;
constexpr int kCStep = kTeamThreads / kQuads;
constexpr int kPerThread = kChannels / kCStep;
static_assert(kTeamThreads % kQuads == 0 && kChannels % kCStep == 0, "strip and chunk must tile a block");

__device__ __forceinline__ int load_volatile(const int* p) { return *reinterpret_cast<const volatile int*>(p); }

// Thread 0 claims the block's next item: a row n (0 <= n < N), a write item N + w (w = s * chunks
// + k: strip s, channel chunk k), or N + W for "no more work".
//   static (TAIL_DYNAMIC 0): one counter over the fixed order of tail_item.
//   dynamic: a write item whose strip is complete if there is one (claimed by compare-and-swap,
//   so only a ready item is ever taken this way), else the next row, else the next write item
//   (waiting for its strip is then safe: every row has been claimed by a running block).
__device__ __forceinline__ int64_t claim(int* counters, int64_t N, int64_t S, int64_t chunks) {
  const int64_t W = S * chunks;
  if (!TAIL_DYNAMIC) {
    const int64_t i = atomicAdd(counters, 1);
    if (i >= N + W) return N + W;
    const TailItem it = tail_item(i, N, S, chunks);
    return it.is_row ? it.a : N + it.a * chunks + it.b;
  }
  if (TAIL_DYNAMIC == 2) {
    // counters: rnext, wstrip (first strip whose writes are not all claimed), wclaim[S], done[S]
    int* rnext = counters;
    int* wstrip = counters + 1;
    int* wclaim = counters + 2;
    const int* done = counters + 2 + S;
    bool rows_gone = false;
    for (;;) {
      const int s = load_volatile(wstrip);
      if (s >= S) return N + W;
      const bool ready = load_volatile(done + s) >= imin64(kStripRows, N - s * kStripRows);
      if (!ready && !rows_gone) {
        const int r = atomicAdd(rnext, 1);
        if (r < N) return r;
        rows_gone = true;  // every row is claimed: waiting for a strip is now safe
      }
      const int k = atomicAdd(wclaim + s, 1);
      if (k < chunks) return N + s * chunks + k;
      atomicMax(wstrip, s + 1);  // strip s's writes are all claimed
    }
  }
  int* rnext = counters;
  int* wnext = counters + 1;
  const int* done = counters + 2;
  int w = load_volatile(wnext);
  while (w < W) {
    const int64_t s = w / chunks;
    if (load_volatile(done + s) < imin64(kStripRows, N - s * kStripRows)) break;
    const int old = atomicCAS(wnext, w, w + 1);
    if (old == w) return N + w;
    w = old;
  }
  const int r = atomicAdd(rnext, 1);
  if (r < N) return r;
  return N + imin64(W, atomicAdd(wnext, 1));
}

template <int L, int V>
__global__ void __launch_bounds__(kTeamThreads, TAIL_MIN_BLOCKS)
    group_norm_min_bias_overlap_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                       const float* __restrict__ beta, const float* __restrict__ bias,
                                       float* __restrict__ out, float* rowmin, int* counters, int64_t N, int64_t C,
                                       int64_t G, int D, float eps, unsigned long long* trace) {
  constexpr int kTeams = 32 / L;
  __shared__ float scratch[32];
  __shared__ int64_t item_slot[2];
  __shared__ float bias_s[kChannels];
  const int lane = threadIdx.x % 32, l = lane % L, team = lane / L;
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int64_t S = (N + kStripRows - 1) / kStripRows;
  const int64_t chunks = (C + kChannels - 1) / kChannels;
  const int64_t total = N + S * chunks;
  int* done = counters + (TAIL_DYNAMIC == 2 ? 2 + S : TAIL_DYNAMIC ? 2 : 1);  // rows finished, per strip
  const bool vec = (N % 4 == 0);
  if (threadIdx.x == 0) item_slot[0] = claim(counters, N, S, chunks);
  __syncthreads();
  int buf = 0;
  for (;;) {
    const int64_t i = item_slot[buf];
    if (i >= total) return;
    unsigned long long t_claim = 0, t_ready = 0;
    if (trace && threadIdx.x == 0) t_claim = global_ns();
    if (TAIL_PREFETCH_ITEM && threadIdx.x == 0) item_slot[buf ^ 1] = claim(counters, N, S, chunks);
    if (i < N) {
      const int64_t n = i;
      MinSink sink;
      for (int64_t g0 = static_cast<int64_t>(warp) * kTeams * kRunsPerTrip; g0 < G;
           g0 += static_cast<int64_t>(warps) * kTeams * kRunsPerTrip) {
        team_trip<L, V, kRunsPerTrip, WelfordStats>(x, gamma, beta, eps, Identity{}, sink, [&](int u) {
          const int64_t g = g0 + u * kTeams + team;
          return team_slot<L, V>(n * G + g, g * D, g < G, l, D);
        });
      }
      const float m = block_min(sink.m, scratch);
      if (threadIdx.x == 0) {
        t_ready = t_claim;
        rowmin[n] = m;
        __threadfence();  // the minimum is visible before the count that announces it
        atomicAdd(done + n / kStripRows, 1);
      }
    } else {
      const int64_t s = (i - N) / chunks, n0 = s * kStripRows;
      const int rows = static_cast<int>(imin64(kStripRows, N - n0));
      const int64_t c0 = (i - N) % chunks * kChannels;
      const int q = threadIdx.x % kQuads, cc = threadIdx.x / kQuads;
      for (int j = threadIdx.x; j < kChannels; j += blockDim.x) {  // the bias first: its loads overlap the wait
        bias_s[j] = c0 + j < C ? bias[c0 + j] : 0.f;
      }
      if (threadIdx.x == 0) {
        while (load_volatile(done + s) < rows) __nanosleep(100);
        __threadfence();
        if (trace) t_ready = global_ns();
      }
      __syncthreads();
      if (vec) {
        const bool row_ok = 4 * q < rows;
        const float4 m = row_ok ? __ldcg(reinterpret_cast<const float4*>(rowmin + n0) + q) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8
        for (int k = 0; k < kPerThread; ++k) {
          const int64_t c = c0 + cc + k * kCStep;
          const float b = bias_s[cc + k * kCStep];
          if (row_ok && c < C) store4(out + c * N + n0 + 4 * q, make_float4(m.x + b, m.y + b, m.z + b, m.w + b));
        }
      } else {
        const int64_t cend = imin64(C, c0 + kChannels);
        for (int64_t j = threadIdx.x; j < (cend - c0) * rows; j += blockDim.x) {
          const int64_t c = c0 + j / rows, r = j % rows;
          out[c * N + n0 + r] = __ldcg(rowmin + n0 + r) + bias_s[c - c0];
        }
      }
    }
    if (!TAIL_PREFETCH_ITEM && threadIdx.x == 0) item_slot[buf ^ 1] = claim(counters, N, S, chunks);
    if (trace && threadIdx.x == 0) {
      unsigned long long* e = trace + 4 * i;  // indexed by item: rows first, then the write items
      e[0] = (static_cast<unsigned long long>(sm_id()) << 32) | blockIdx.x;
      e[1] = t_claim;
      e[2] = t_ready;
      e[3] = global_ns();
    }
    __syncthreads();  // the next item's index is in item_slot[buf ^ 1] for every thread
    buf ^= 1;
  }
}

static torch::Tensor overlap_impl(torch::Tensor x, int64_t G, torch::Tensor gamma, torch::Tensor beta, double eps,
                                  torch::Tensor bias, unsigned long long* trace) {
  check_group_norm_inputs(x, gamma, beta, G);
  CHECK_FLOAT_CUDA_INPUT(bias);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t N = x.size(0), C = x.size(1), D = C / G;
  TORCH_CHECK(team_path_ok(D, {x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>()}) && N > 0 && C > 0,
              "draft: team-path shapes only");
  torch::Tensor out = torch::empty({1, C, N, 1}, x.options());
  torch::Tensor rowmin = torch::empty({N}, x.options());
  const int64_t S = (N + kStripRows - 1) / kStripRows;
  torch::Tensor counters = torch::zeros({2 + 2 * S}, x.options().dtype(torch::kInt32));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  with_team_lanes(D, [&](auto lanes) {
    auto kernel = group_norm_min_bias_overlap_kernel<decltype(lanes)::value, GROUPNORM_TEAM_VECS>;
    const unsigned int grid = static_cast<unsigned int>(resident_blocks(kernel, kTeamThreads, 0, x.get_device()));
    kernel<<<grid, kTeamThreads, 0, stream>>>(x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                              bias.data_ptr<float>(), out.data_ptr<float>(), rowmin.data_ptr<float>(),
                                              counters.data_ptr<int>(), N, C, G, static_cast<int>(D),
                                              static_cast<float>(eps), trace);
    LAUNCH_CHECK();
  });
  return out;
}

// @export: DRAFT problem 75's tail in one kernel, reads and writes overlapped; (1, C, N, 1)
torch::Tensor group_norm_min_bias_overlap(torch::Tensor x, int64_t G, torch::Tensor gamma, torch::Tensor beta,
                                          double eps, torch::Tensor bias) {
  return overlap_impl(x, G, gamma, beta, eps, bias, nullptr);
}

// @export: DRAFT the same, filling trace (items, 4) int64: (sm << 32 | block, claimed, ready, done) in ns
torch::Tensor group_norm_min_bias_overlap_traced(torch::Tensor x, int64_t G, torch::Tensor gamma, torch::Tensor beta,
                                                 double eps, torch::Tensor bias, torch::Tensor trace) {
  return overlap_impl(x, G, gamma, beta, eps, bias, reinterpret_cast<unsigned long long*>(trace.data_ptr<int64_t>()));
}
