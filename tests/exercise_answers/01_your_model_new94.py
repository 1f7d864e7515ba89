class YourModelNew94(get_problem(94).Model):
    """Problem 94 as seed 000 reads it: the reference's modules, and its Hardtanh range."""

    def forward(self, x):
        x = self.gemm(x) + self.bias
        x = torch.clamp(x, -1.0, 1.0)  # nn.Hardtanh()'s range: min_val -1, max_val 1
        x = self.mish(x)
        return self.groupnorm(x)
