// min_bias_broadcast.cu: problem 75 after its GEMM, GroupNorm -> min over channels -> + bias
// (notebooks/07_broadcasting_pitfall.ipynb).
//
//   group_norm_row_min(x, G, gamma, beta, eps)   torch.min(F.group_norm(x, ...), dim=1, keepdim=True)[0]: (N, 1)
//   min_bias_broadcast(rowmin, bias)             rowmin (N, 1) + bias (1, C, 1, 1): (1, C, N, 1)
//   group_norm_min_bias(x, G, gamma, beta, eps, bias)    both: the model's whole tail
//
// The broadcast (seed 002 concluded that it is an error; it is not). Broadcasting aligns shapes
// from the right and stretches every 1:
//        rowmin        (N, 1)   ->  (1, 1, N, 1)
//        bias    (1, C, 1, 1)   ->  (1, C, 1, 1)
//        sum     (1, C, N, 1)       out[0, c, n, 0] = rowmin[n] + bias[c]
// So the model's output is C = 8192 times larger than the minimum it computes: (1, 8192, 1024, 1),
// 33.5 MB, from a 4 KB vector of minima and a 32 KB bias.
//
// The idea. Eager runs F.group_norm (statistics, then a normalised copy written to memory), then
// a min over that copy, then the broadcast add: x is read 3 times, the normalised tensor written
// once and read once more, then the output written. But the minimum of a row needs no
// normalised tensor in memory: normalise each value in registers and keep a running minimum.
// One kernel reads x once and writes N floats; a second writes the output once.
//
// Thread -> data.
//   group_norm_row_min: one block per row (sample) n. Its groups are normalised by the team path
//     of common/groupnorm.cuh (2 lanes per group of 75's D = 16, two float4s per lane; 8 warps x
//     16 teams x 2 runs cover 256 groups = 16 KB of the row per trip, gamma and beta loaded
//     with x). Each thread keeps the minimum of the values it normalised (min.NaN, one
//     instruction), then block_min (common/reduce.cuh) gives the row's. Other D (not a multiple
//     of 4, over 256) take the block path: the whole block normalises one group after another.
//   min_bias_broadcast: out is (C, N) in memory, n fastest. A thread owns 4 consecutive n
//     (a float4 of rowmin, loaded once, kept in registers) and walks down the channels
//     c = blockIdx.y, blockIdx.y + gridDim.y, ..., storing rowmin[n..n+3] + bias[c] as one
//     float4: a warp writes 512 contiguous bytes per store, and nothing is read from DRAM but
//     the 4 KB rowmin and the 32 KB bias. When N is not a multiple of 4 (or a view is
//     unaligned), a flat scalar loop over (c, n) does the same one float at a time.
//
// Bytes at problem 75's shape (N = 1024, C = 8192, G = 512): the row minimum reads 33.5 MB and
// writes 4 KB; the broadcast writes 33.5 MB: 67.1 MB in all, a read and a write of the tensor.
// Eager: F.group_norm 3 passes (100.7 MB), min 1 read (33.5 MB), the add 1 write (33.5 MB):
// 168 MB, in 4 kernels, the first with one 16-float group per block.
//
// PREDICTION (written before measuring, H100, copy bandwidth ~3000 GB/s): group_norm_row_min at
// 80-90% of the bandwidth of a read (33.5 MB in ~13 us); min_bias_broadcast near write
// bandwidth, 33.5 MB in ~12 us (a pure store stream; floor ~11 us); the whole tail in ~25-30 us,
// 3-4x faster than eager's GroupNorm + min + add. Later, for the broadcast launched as a
// programmatic dependent of the row minimum (written after the runs of
// experiments/memory_bound/README.md, before notebook 07's): 4-7% faster than the two kernels
// launched one after the other.
//
// MEASURED: notebook 07 records the run of record in results/<device>/broadcast_min.json and holds
// the PREDICTION against it. Two things to read it by. The row minimum only reads, and at 33.5 MB
// no kernel that only reads reaches 80% of a same-size copy's bandwidth (probes/read_probe.cu says why):
// its yardstick is the pure read, which the PREDICTION names. And the tail reads all of x before it
// writes the first output value (the broadcast needs every minimum), where a copy overlaps its
// reads with its writes.
//
// The tail: overlapping the read with the write was tried four ways, each checked element by
// element: one persistent kernel handing out row and write items, the rows streamed through shared
// memory by bulk async copies, a broadcast writing each strip as the row minimum announces it, and
// the broadcast launched as a programmatic dependent of the row minimum
// (common/dependent_launch.cuh). Only the last was faster than two plain launches, and
// group_norm_min_bias uses it: it removes the launch gap, not the wait for every minimum. The runs
// and why each lost: experiments/memory_bound/README.md.

// @ops: its launchers are operators' kernels (utils/ops.py registers them)

#include "common/broadcast_add.cuh"
#include "common/check.cuh"
#include "common/dependent_launch.cuh"
#include "common/elementwise.cuh"
#include "common/groupnorm.cuh"
#include "common/reduce.cuh"

// ---- GroupNorm + row minimum ---------------------------------------------------------------

// Runs per trip of the row minimum. It only reads, so registers are not what limits it: two
// runs (32 KB of a row in flight per block, the row in two trips) measured faster than one, which
// adds trips of pure latency (experiments/memory_bound/README.md).
constexpr int kRowMinUnroll = 2;

// @launch: <2, GROUPNORM_TEAM_VECS, WelfordStats>
template <int L, int V, class Stats>
__global__ void __launch_bounds__(kTeamThreads)
    group_norm_row_min_team_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, float* __restrict__ rowmin, int64_t N, int64_t G,
                                   int D, float eps) {
  constexpr int kTeams = 32 / L;
  __shared__ float scratch[32];
  const int lane = threadIdx.x % 32;
  const int l = lane % L;
  const int team = lane / L;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {  // the same n for the whole block
    MinSink sink;
    // As in group_norm_team_kernel: kRowMinUnroll runs of 32 / L groups per warp per trip, all
    // loads first; the loop condition depends on the warp alone, so its lanes shuffle together.
    for (int64_t g0 = static_cast<int64_t>(warp) * kTeams * kRowMinUnroll; g0 < G;
         g0 += static_cast<int64_t>(warps) * kTeams * kRowMinUnroll) {
      team_trip<L, V, kRowMinUnroll, Stats>(x, gamma, beta, eps, Identity{}, sink, [&](int u) {
        // Group g of row n: segment n * G + g, its first channel g * D, no remainder to take.
        const int64_t g = g0 + u * kTeams + team;
        return team_slot<L, V>(n * G + g, g * D, g < G, l, D);
      });
    }
    const float m = block_min(sink.m, scratch);
    if (threadIdx.x == 0) rowmin[n] = m;
  }
}

template <class Stats>
__global__ void __launch_bounds__(1024)
    group_norm_row_min_block_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                    const float* __restrict__ beta, float* __restrict__ rowmin, int64_t N, int64_t G,
                                    int D, float eps) {
  __shared__ typename Stats::Partial stats_scratch[32];
  __shared__ float min_scratch[32];
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    MinSink sink;
    for (int64_t g = 0; g < G; ++g) {
      block_group_norm<Stats>(x, gamma, beta, n * G + g, G, D, eps, Identity{}, sink, stats_scratch);
    }
    const float m = block_min(sink.m, min_scratch);
    if (threadIdx.x == 0) rowmin[n] = m;
  }
}

// rowmin (N, 1) for x (N, C) already checked, on the current stream.
static torch::Tensor row_min_of_group_norm(const torch::Tensor& x, int64_t G, const torch::Tensor& gamma,
                                           const torch::Tensor& beta, double eps) {
  const int64_t N = x.size(0);
  const int64_t C = x.size(1);
  TORCH_CHECK(C > 0 || N == 0, "the minimum over dim 1 of x ", shape_string(x),
              " is undefined: it has no channels (torch.min raises the same)");
  torch::Tensor rowmin = torch::empty({N, 1}, x.options());
  if (N == 0) return rowmin;
  const int64_t D = C / G;
  const int device = x.get_device();
  const float e = static_cast<float>(eps);
  const float* xp = x.data_ptr<float>();
  const float* gp = gamma.data_ptr<float>();
  const float* bp = beta.data_ptr<float>();
  float* mp = rowmin.data_ptr<float>();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  using Stats = WelfordStats;
  if (team_path_ok(D, {xp, gp, bp})) {
    with_team_lanes(D, [&](auto lanes) {
      auto kernel = group_norm_row_min_team_kernel<decltype(lanes)::value, GROUPNORM_TEAM_VECS, Stats>;
      const unsigned int grid = resident_grid(kernel, kTeamThreads, 0, N, device);
      kernel<<<grid, kTeamThreads, 0, stream>>>(xp, gp, bp, mp, N, G, static_cast<int>(D), e);
      LAUNCH_CHECK();
    });
  } else {
    const int threads = block_path_threads(D);
    auto kernel = group_norm_row_min_block_kernel<Stats>;
    const unsigned int grid = resident_grid(kernel, threads, 0, N, device);
    kernel<<<grid, threads, 0, stream>>>(xp, gp, bp, mp, N, G, static_cast<int>(D), e);
    LAUNCH_CHECK();
  }
  return rowmin;
}

// ---- exports -------------------------------------------------------------------------------

// @export: torch.min(F.group_norm(x, num_groups, gamma, beta, eps), dim=1, keepdim=True)[0] for x (N, C): (N, 1), one read of x
torch::Tensor group_norm_row_min(torch::Tensor x, int64_t num_groups, torch::Tensor gamma, torch::Tensor beta,
                                 double eps) {
  check_group_norm_inputs(x, gamma, beta, num_groups);
  TORCH_CHECK(eps >= 0.0, "eps must be non-negative, got ", num(eps));
  const c10::cuda::CUDAGuard guard(x.device());
  return row_min_of_group_norm(x, num_groups, gamma, beta, eps);
}

// @export: rowmin (N, 1) + bias (1, C, 1, 1) -> (1, C, N, 1): out[0, c, n, 0] = rowmin[n] + bias[c]
torch::Tensor min_bias_broadcast(torch::Tensor rowmin, torch::Tensor bias) {
  CHECK_FLOAT_CUDA_INPUT(rowmin);
  TORCH_CHECK(rowmin.dim() == 2 && rowmin.size(1) == 1,
              "rowmin must have shape [N, 1] (torch.min(..., dim=1, keepdim=True)), got ", shape_string(rowmin));
  check_broadcast_bias(rowmin, bias, "rowmin");
  const c10::cuda::CUDAGuard guard(rowmin.device());
  return broadcast_add(rowmin, bias, /*dependent=*/false);
}

// @export: problem 75 after its GEMM: torch.min(F.group_norm(x, ...), dim=1, keepdim=True)[0] + bias -> (1, C, N, 1)
torch::Tensor group_norm_min_bias(torch::Tensor x, int64_t num_groups, torch::Tensor gamma, torch::Tensor beta,
                                  double eps, torch::Tensor bias) {
  check_group_norm_inputs(x, gamma, beta, num_groups);
  TORCH_CHECK(eps >= 0.0, "eps must be non-negative, got ", num(eps));
  check_broadcast_bias(x, bias, "x");
  const c10::cuda::CUDAGuard guard(x.device());
  // The broadcast is launched while the row minimum's last blocks run (programmatic dependent
  // launch): that removes the gap between the two kernels (notebook 07 measures what it saves).
  return broadcast_add(row_min_of_group_norm(x, num_groups, gamma, beta, eps), bias, /*dependent=*/true);
}
