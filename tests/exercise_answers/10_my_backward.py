import torch


def my_backward(grad, x, num_groups, gamma, beta, eps, negative_slope):
    """Problem 62's tail, n = group_norm(x), y = leaky_relu(n), out = y + y: from grad = dL/d(out), return
    (dx, dgamma, dbeta), computed here: no autograd, no *_backward op."""
    N, C = x.shape
    xg = x.view(N, num_groups, C // num_groups)  # each row's groups: (N, G, C/G)
    mean = xg.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt(xg.var(dim=-1, unbiased=False, keepdim=True) + eps)
    xhat = ((xg - mean) * rstd).view(N, C)  # the normalised values
    n = xhat * gamma + beta  # GroupNorm's output, LeakyReLU's input
    dy = grad + grad  # out = y + y: y reaches the output twice
    dn = torch.where(n > 0, dy, negative_slope * dy)  # LeakyReLU's slope where n < 0
    dgamma, dbeta = (dn * xhat).sum(dim=0), dn.sum(dim=0)
    dxhat = (dn * gamma).view(N, num_groups, C // num_groups)
    xhat_g = xhat.view(N, num_groups, C // num_groups)
    # xhat depends on x directly and through the group's mean and rstd: take out the parts along 1 and xhat
    dx = rstd * (dxhat - dxhat.mean(dim=-1, keepdim=True) - xhat_g * (dxhat * xhat_g).mean(dim=-1, keepdim=True))
    return dx.view(N, C), dgamma, dbeta
