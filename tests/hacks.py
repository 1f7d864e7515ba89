"""ModelNews that do one thing wrong, each of a kind that can pass KernelBench's plain protocol.

They are the reference of problem 62 (75 for the broadcast) with one change; test_check.py
shows, for each, the check of utils.check that catches it. Kept apart from the tests so a
notebook can import them to show a check failing.
"""
import torch
import torch.nn.functional as F
from torch import nn

from utils.problems import get_problem

Model62 = get_problem(62).Model
Model75 = get_problem(75).Model


def _after_gemm(m: Model62, y: torch.Tensor) -> torch.Tensor:
    """62's GroupNorm -> LeakyReLU -> x + x, as the reference does them."""
    y = m.leaky_relu(m.gn(y))
    return y + y


class Faithful(Model62):
    """The reference itself: passes every check (on CUDA it is, of course, a PyTorch fallback)."""


class UninitialisedOutput(Model62):
    """Returns memory it never wrote, of the right shape: whatever the allocator had there."""

    def forward(self, x):
        return torch.empty(x.shape[0], self.fc.out_features, device=x.device)


class PartlyWrittenOutput(Model62):
    """Writes every column but the last, like a kernel whose grid misses the edge tile."""

    def forward(self, x):
        out = torch.empty(x.shape[0], self.fc.out_features, device=x.device)
        out[:, :-1] = super().forward(x)[:, :-1]
        return out


class ZeroesInput(Model62):
    """Right answer, then reuses its input as scratch space."""

    def forward(self, x):
        out = super().forward(x)
        x.zero_()
        return out


class EditsInput(Model62):
    """Right answer, then nudges its input: a change too small to see by eye."""

    def forward(self, x):
        out = super().forward(x)
        x.mul_(1.0001)
        return out


class CachesByPointer(Model62):
    """Remembers results by x.data_ptr(): right for every fresh tensor, stale when x is rewritten in place."""

    def forward(self, x):
        cache = self.__dict__.setdefault("_by_pointer", {})
        if x.data_ptr() not in cache:
            cache[x.data_ptr()] = super().forward(x)
        return cache[x.data_ptr()]


class SideStream(Model62):
    """Computes on a stream of its own that never waits for the caller's current stream. (It does
    hand its result back: the caller's stream waits for it, so only the missing first wait is wrong.)"""

    def forward(self, x):
        side = torch.cuda.Stream(x.device)
        with torch.cuda.stream(side):
            out = super().forward(x)
        torch.cuda.current_stream(x.device).wait_stream(side)
        return out


class FallsBack(Model62):
    """The kernel "isn't ready", so PyTorch does the work: right answers, no kernel."""

    def forward(self, x):
        try:
            raise NotImplementedError("fused kernel not built")
        except NotImplementedError:
            return super().forward(x)


class Bf16Gemm(Model62):
    """The GEMM in bfloat16: 4-8x faster on tensor cores, about 1000x less precise than fp32."""

    def forward(self, x):
        y = (x.bfloat16() @ self.fc.weight.bfloat16().T).float() + self.fc.bias
        return _after_gemm(self, y)


class SwitchesTF32On(Model62):
    """Turns TF32 on for every matmul in the process, the caller's included."""

    def forward(self, x):
        torch.backends.cuda.matmul.allow_tf32 = True
        return super().forward(x)


class TF32Inside(Model62):
    """Runs its GEMM in TF32 under the caller's IEEE setting, then switches TF32 off again."""

    def forward(self, x):
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return super().forward(x)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False


class IgnoresAffine(Model62):
    """GroupNorm without γ and β: exact while they are 1 and 0, as freshly built."""

    def forward(self, x):
        y = F.group_norm(self.fc(x), self.gn.num_groups, eps=self.gn.eps)
        y = self.leaky_relu(y)
        return y + y


class NewParameters(nn.Module):
    """Seed 000's rewrite: its own gamma/beta instead of keeping the GroupNorm module."""

    def __init__(self, input_size, hidden_size, num_groups, eps=1e-5, negative_slope=0.01):
        super().__init__()
        self.fc = nn.Linear(input_size, hidden_size)
        self.gamma = nn.Parameter(torch.ones(hidden_size))
        self.beta = nn.Parameter(torch.zeros(hidden_size))
        self.num_groups, self.eps, self.negative_slope = num_groups, eps, negative_slope

    def forward(self, x):
        y = F.group_norm(self.fc(x), self.num_groups, self.gamma, self.beta, self.eps)
        y = F.leaky_relu(y, self.negative_slope)
        return y + y


class ReorderedParameters(Model62):
    """The same modules, created GroupNorm first: names match, seeded weights do not."""

    def __init__(self, input_size, hidden_size, num_groups, eps=1e-5, negative_slope=0.01):
        nn.Module.__init__(self)
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=hidden_size, eps=eps)
        self.fc = nn.Linear(input_size, hidden_size)
        self.leaky_relu = nn.LeakyReLU(negative_slope=negative_slope)


class MinWithoutBroadcast(Model75):
    """Seed 002's reading of 75: (N, 1) + bias(1, C, 1, 1) "must be" (N, 1), so it keeps (N, 1)."""

    def forward(self, x):
        y = self.group_norm(self.gemm(x))
        return torch.min(y, dim=1, keepdim=True)[0] + self.bias.mean()


class Noisy(Model62):
    """Differs by a few ulps from call to call, like a reduction with atomics in a varying order."""

    def forward(self, x):
        out = super().forward(x)
        return out + 1e-6 * torch.randn_like(out)


class AssumesContiguous(Model62):
    """Reads x as row-major with a row stride of its width, as a kernel indexing x_ptr[row * K + k] does."""

    def forward(self, x):
        return super().forward(torch.as_strided(x, x.shape, (x.shape[1], 1)))


class FullTilesOnly(Model62):
    """Computes only the output columns that fill whole 32-wide tiles: right whenever out % 32 == 0."""

    def forward(self, x):
        y = self.fc(x)
        y[:, y.shape[1] // 32 * 32:] = 0
        return _after_gemm(self, y)


class OffBy5e3(Model62):
    """5e-3 off everywhere: inside the tf32 tier, far outside the strict one."""

    def forward(self, x):
        return super().forward(x) + 5e-3


class Crashes(Model62):
    def forward(self, x):
        raise RuntimeError("illegal configuration")


class WrongSlope(Model62):
    """A wrong formula and nothing else: LeakyReLU's slope 0.1 instead of the module's 0.01."""

    def forward(self, x):
        y = F.leaky_relu(self.gn(self.fc(x)), 0.1)
        return y + y


class ReusesOutputBuffer(Model62):
    """Right values, written into one buffer that every call returns: the caller's last output
    changes under it at the next call."""

    def forward(self, x):
        out = super().forward(x)
        buffer = self.__dict__.get("_buffer")
        if buffer is None or buffer.shape != out.shape or buffer.device != out.device:
            buffer = self.__dict__["_buffer"] = torch.empty_like(out)
        return buffer.copy_(out)


class DetachedOutput(Model62):
    """Right values, no autograd: what a kernel called without a registered autograd formula gives."""

    def forward(self, x):
        return super().forward(x).detach()


class _TimesTwoForgetsTheTwo(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        return y + y

    @staticmethod
    def backward(ctx, grad):
        return grad  # should be 2 * grad


class WrongGradient(Model62):
    """Right values; its `x + x` has a hand-written backward that forgets the factor 2."""

    def forward(self, x):
        return _TimesTwoForgetsTheTwo.apply(self.leaky_relu(self.gn(self.fc(x))))


class FrozenBias(Model62):
    """Right values, but Linear's bias enters detached: that parameter never gets a gradient."""

    def forward(self, x):
        y = F.linear(x, self.fc.weight, self.fc.bias.detach())
        return _after_gemm(self, y)


class RowsWrapAt256(Model62):
    """Computes 256 rows at most and repeats them, like a grid sized for the largest batch it was tried
    on: right for every batch up to 256, rows past 256 are copies of earlier ones."""

    def forward(self, x):
        out = super().forward(x[:256])
        return out.repeat(-(-x.shape[0] // 256), 1)[: x.shape[0]]


def _valued_as(kept: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """`kept`'s values, with gradients that reach `w`: what a kernel computing with a kept copy of a
    weight, under an autograd formula that hands dW to the parameter, gives."""
    return kept + (w - w.detach())


def _weight_at_first_call(m: Model62) -> torch.Tensor:
    if "_snapshot" not in m.__dict__:
        m.__dict__["_snapshot"] = m.fc.weight.detach().clone()
    return m.__dict__["_snapshot"]


class SnapshotsWeight(Model62):
    """Copies fc.weight at its first call and computes with the copy ever after (a weight prepacked
    once); gradients still reach fc.weight. Right until the weight changes."""

    def forward(self, x):
        return _after_gemm(self, F.linear(x, _valued_as(_weight_at_first_call(self), self.fc.weight), self.fc.bias))


class CachesWeightByVersion(Model62):
    """Copies fc.weight again only when (id, _version, data_ptr) of the weight changes, as a weight-split
    cache keyed on the version counter does: it sees optimizer steps, load_state_dict, no_grad writes
    and `p.data = new`, but not an in-place write through p.data (.data has a version counter of its
    own) nor a fused optimizer step."""

    def forward(self, x):
        w = self.fc.weight
        key = (id(w), w._version, w.data_ptr())
        if self.__dict__.get("_key") != key:
            self.__dict__["_key"], self.__dict__["_copy"] = key, w.detach().clone()
        return _after_gemm(self, F.linear(x, _valued_as(self.__dict__["_copy"], w), self.fc.bias))


class StaleInputGradient(Model62):
    """Right values and parameter gradients; the input's gradient goes through a copy of fc.weight
    taken at the first call, like a backward that keeps the weight it first saw."""

    def forward(self, x):
        through_copy = F.linear(x, _weight_at_first_call(self))
        y = F.linear(x.detach(), self.fc.weight, self.fc.bias) + (through_copy - through_copy.detach())
        return _after_gemm(self, y)
