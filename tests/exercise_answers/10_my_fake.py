def my_fake(x, num_groups, gamma, beta, eps, bias):
    N, C = x.shape
    return x.new_empty((1, C, N, 1))  # (N, 1) + bias (1, C, 1, 1) broadcasts to (1, C, N, 1)
