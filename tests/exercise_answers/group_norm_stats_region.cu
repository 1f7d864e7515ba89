// ---- YOUR CODE: from here ----
struct Stats {
  float n, mean, m2;
};

// The summary of no value at all (what a thread with nothing to read contributes).
__device__ Stats stats_empty() { return {0.0f, 0.0f, 0.0f}; }

// s with one more value v: Welford's update.
__device__ Stats stats_push(Stats s, float v) {
  const float n = s.n + 1.0f;
  const float d = v - s.mean;
  const float mean = s.mean + d / n;
  return {n, mean, s.m2 + d * (v - mean)};
}

// The summary of the union of a's and b's values (either or both may be empty): Chan et al.
__device__ Stats stats_merge(Stats a, Stats b) {
  const float n = a.n + b.n;
  if (n == 0.0f) return a;
  const float wb = b.n / n;
  const float delta = b.mean - a.mean;
  return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.n * wb};
}

// The mean and 1 / sqrt(var + eps) (biased variance: divide by n).
__device__ MeanRstd stats_finish(Stats s, float eps) { return {s.mean, rsqrtf(s.m2 / s.n + eps)}; }
// ---- YOUR CODE: to here ----
