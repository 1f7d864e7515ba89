// DRAFT: problem 75's two kernels, the broadcast launched as a programmatic dependent (PDL) of the row minimum.
#include "min_bias_broadcast.cu"
#include "pdl_broadcast.cuh"  // folded after the runs

// @export: DRAFT the whole tail, the broadcast as a PDL dependent when pdl
torch::Tensor group_norm_min_bias_pdl(torch::Tensor x, int64_t G, torch::Tensor gamma, torch::Tensor beta, double eps,
                                      torch::Tensor bias, bool pdl) {
  check_group_norm_inputs(x, gamma, beta, G);
  check_broadcast_bias(x, bias);
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor rowmin = row_min_of_group_norm(x, G, gamma, beta, eps);
  return broadcast_pdl(rowmin, bias, x.size(0), x.size(1), pdl);
}
