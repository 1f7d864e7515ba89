"""freeze(): a drop-in keeps its GEMM weight's 3xTF32 small parts between calls, by the user's choice.

By default a drop-in derives nothing from its parameters that outlives a call: at the strict tier the
3xTF32 GEMM splits the weight on every call (kernels/common/tf32_operands.cuh: the weight itself is
the big parts, its small parts are made from it, one read and one write of the weight), so every
write to a parameter is seen, whatever made it. Keeping the small parts saves that pass (at 8192 x
8192, 537 MB of traffic per call), at the cost of a copy of the weight's size on the GPU and of a
contract, the one PyTorch's own kept-weight features have (inductor's freezing, torch.ao's
prepacking): what is kept reflects the weight at the time it was made.

    model = ModelNew(*get_init_inputs()).cuda().freeze()   # the small parts made once
    ...
    model.weight.data.mul_(0.5); model.freeze()           # a write no counter sees: freeze() again
    model.unfreeze()                                       # back to the default

While frozen, the small parts are made again by themselves when the weight's version counter, its
storage or its device changes: an in-place write to the parameter itself (an unfused optimizer step,
`load_state_dict`, `with torch.no_grad(): w.mul_(2)`), `weight.data = new`, `.to()`. What no counter
sees is NOT seen: a write through `weight.data` (a tensor with a version counter of its own), through
any other tensor that shares the weight's storage, and a fused optimizer step (`fused=True`: it
leaves the counter as it was). Those need freeze() again; training a frozen model is not what it is
for. state_dict() never holds the kept parts. At 256 rows of x or fewer the kept parts are not read:
the small-batch schedule (up to 64 rows) and the narrow tiles (65-256) split the weight as they load it
(kernels/common/gemm_dispatch.cuh), so there every write is seen, frozen or not.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from utils import ops

KEPT = "frozen_weight_residual"  # the buffer's name (not persistent: never in a state_dict)


def _state(w: Tensor) -> tuple:
    """What changes when a write is seen: the version counter, the storage, the device."""
    return w._version, w.data_ptr(), w.device


class Freezable:
    """Mixin of a drop-in whose model has one nn.Linear, the GEMM: freeze(), unfreeze() and
    `weight_residual`, what its forward hands the whole-model op (None unless frozen)."""

    def _gemm_weight(self) -> nn.Parameter:
        # Found by its name, looked up anew on every call (a replaced submodule is seen), but searched
        # for only once: walking the modules on every frozen call cost ~10 µs of host time per call.
        linear = self
        for name in getattr(self, "_gemm_path", "?").split("."):
            linear = linear._modules.get(name) if isinstance(linear, nn.Module) else None
        if not isinstance(linear, nn.Linear):
            ((path, linear),) = [(n, m) for n, m in self.named_modules() if isinstance(m, nn.Linear)]
            self._gemm_path = path
        return linear.weight

    def freeze(self):
        """Keep the GEMM weight's small parts between calls (see the module's docstring); returns self."""
        w = self._gemm_weight()
        with torch.no_grad():
            self.register_buffer(KEPT, ops.tf32_residual(w.detach()), persistent=False)
        self._frozen_state = _state(w)
        return self

    def unfreeze(self):
        """Drop the kept small parts: every call splits the weight again (the default); returns self."""
        self._buffers.pop(KEPT, None)
        self._frozen_state = None
        return self

    @property
    def frozen(self) -> bool:
        return KEPT in self._buffers

    @property
    def weight_residual(self) -> Tensor | None:
        kept = self._buffers.get(KEPT)
        if kept is None or torch.compiler.is_compiling():
            return kept  # a compiled graph keeps what it traced: freeze() again after a write, then recompile
        if _state(self._gemm_weight()) != self._frozen_state:
            self.freeze()  # a write the counters saw: made again
            kept = self._buffers[KEPT]
        return kept
