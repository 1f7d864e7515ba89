"""The fp32 precision settings of PyTorch: read them all, restore them exactly, switch TF32.

Why a module of its own: the harness must run the reference in IEEE fp32 whatever the
user set and then put every setting back, the benchmarks switch TF32 on and off around
timings, and a model that quietly flips a setting must be caught. All of that needs the
same exact save-and-restore, or one test's settings leak into the next.

    with precision.ieee_fp32(): ...        # plain IEEE fp32 inside
    with precision.tf32(True): ...         # TF32 allowed for fp32 matmuls inside
    precision.tf32_allowed()               # does the current setting let matmuls use TF32?
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from typing import Callable, Iterator

import torch

# # torch >= 2.9 keeps the fp32 precision of matmuls and convolutions as a tree of
# `fp32_precision` settings (generic -> cuda (cudnn) and mkldnn -> matmul / conv / rnn) where
# "none" means "as my parent". Next to it live two legacy fields, float32_matmul_precision
# and cudnn's allow_tf32: their setters write the tree too, and their getters raise once the
# two disagree (the "mix of the legacy and new APIs" error). So the harness saves both, and
# restores the legacy fields first, then the tree, parents before children. Before 2.9 there
# are only the legacy fields (cuda.matmul.allow_tf32 being a view of the matmul precision).


@dataclass(frozen=True)
class _Flag:
    label: str
    get: Callable[[], object]
    set: Callable[[object], None]
    ieee: object  # the value that means plain IEEE fp32
    inherits: bool = False  # "none" inherits the parent's value


def _owner(path: str):
    """torch.<path>, or None where this torch has no such node."""
    return reduce(lambda obj, part: getattr(obj, part, None), path.split("."), torch)


def _attribute_flag(path: str, attr: str, ieee: object, inherits: bool = False) -> _Flag:
    owner = _owner(path)
    return _Flag(f"torch.{path}.{attr}", lambda: getattr(owner, attr), lambda v: setattr(owner, attr, v), ieee, inherits)


_NEW_PRECISION_API = hasattr(torch.backends, "fp32_precision")
_TREE = ("backends", "backends.cudnn", "backends.cuda.matmul", "backends.cudnn.conv", "backends.cudnn.rnn",
         "backends.mkldnn", "backends.mkldnn.matmul", "backends.mkldnn.conv", "backends.mkldnn.rnn")
_MATMUL_PRECISION = "torch.get_float32_matmul_precision()"
_FLAGS = (
    _Flag(_MATMUL_PRECISION, torch.get_float32_matmul_precision, torch.set_float32_matmul_precision, "highest"),
    _attribute_flag("backends.cudnn", "allow_tf32", False),
    *(_attribute_flag(p, "fp32_precision", "ieee", inherits=p != "backends")
      for p in _TREE if _NEW_PRECISION_API and _owner(p) is not None),
)
_MIXED = "unreadable (legacy and new TF32 APIs mixed)"


def _read(flag: _Flag) -> object:
    try:
        return flag.get()
    except RuntimeError:  # a legacy getter refusing to answer: that state is itself a value to compare
        return _MIXED


def flags() -> dict[str, object]:
    """Every flag that decides how fp32 matmuls and convolutions round (TF32, bf16), by name."""
    return {f.label: _read(f) for f in _FLAGS}


def restore(saved: dict[str, object]) -> None:
    for flag in _FLAGS:  # legacy first, then the tree's parents before its children
        want = saved[flag.label]
        if want == _MIXED or _read(flag) == want:
            continue
        if flag.inherits:  # back to inheriting, if that gives the saved value
            flag.set("none")
        if _read(flag) != want:
            flag.set(want)


def changes(before: dict[str, object], after: dict[str, object]) -> str:
    return ", ".join(f"{k}: {before[k]!r} -> {after[k]!r}" for k in before if before[k] != after[k])


@contextmanager
def ieee_fp32() -> Iterator[None]:
    """Plain IEEE fp32 matmuls and convolutions inside, whatever the caller set; restored on exit."""
    saved = flags()
    for flag in _FLAGS:
        flag.set(flag.ieee)
    try:
        yield
    finally:
        restore(saved)


def tf32_allowed() -> bool:
    """Whether fp32 matmuls may round below IEEE fp32 (TF32, bf16) under the current settings."""
    current = flags()
    if not _NEW_PRECISION_API:
        return current[_MATMUL_PRECISION] != "highest"

    def effective(*chain: str) -> object:  # the first setting up the tree that is not "none"
        values = (current.get(f"torch.{node}.fp32_precision", "none") for node in chain)
        return next((v for v in values if v != "none"), "ieee")

    return any(effective(*chain) not in ("ieee", _MIXED)
               for chain in (("backends.cuda.matmul", "backends"), ("backends.mkldnn.matmul", "backends.mkldnn", "backends")))


@contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """Allow (or forbid) TF32 in fp32 matmuls inside the block; every setting comes back after."""
    saved = flags()
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        restore(saved)
