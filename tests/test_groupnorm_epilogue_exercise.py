"""Notebook 09's exercise 2: the GroupNorm epilogue, written from scratch on the given wgmma main loop
(kernels/exercises/gemm_wgmma_lanes.cuh), and its checker (utils/chapters/hopper_gemm.py).

- The starter is the notebook's own cell (GN_EPILOGUE); the reference answer is
  tests/exercise_answers/gemm_groupnorm_epilogue.cu, which no chapter renders.
- Without a GPU: the checker run on PyTorch stand-ins passes the right GroupNorm and fails every shortcut
  (statistics over the whole tile or over the batch, gamma and beta ignored, the unbiased variance, eps outside
  the square root, no GroupNorm at all); the static checks; compile: starter and answer build for sm_90a.
- gpu: the whole checker on the kernels: the starter fails, the answer passes, and the answer with each
  shortcut edited in fails.
"""
import json
import re

import pytest
import torch
import torch.nn.functional as F

from utils import REPO, build, env
from utils.chapters import hopper_gemm as hg

NB09 = REPO / "notebooks" / "09_hopper_gemm_and_epilogue.ipynb"
ANSWER = (REPO / "tests" / "exercise_answers" / "gemm_groupnorm_epilogue.cu").read_text()
BUILD_DIR = build.build_root_dir().parent / "exercise_answers"  # a fixed path, so the builds are cached


def starter() -> str:
    for cell in json.loads(NB09.read_text())["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and src.startswith("GN_EPILOGUE = "):
            namespace = {}
            exec(src, namespace)
            return namespace["GN_EPILOGUE"]
    raise AssertionError("notebook 09 has no cell assigning GN_EPILOGUE")


def edited(old: str, new: str, count: int = -1) -> str:
    assert old in ANSWER, old
    return ANSWER.replace(old, new, count)


# the answer with one shortcut each: statistics over the tile's whole row, gamma and beta left out, the unbiased
# variance, eps outside the square root
KERNEL_SHORTCUTS = {
    "whole_tile": edited("if ((first + 8 * j) / D == g) {", "if (true) {", 2)
    .replace("sum / D", "sum / lanes::BN").replace("sq / D + eps", "sq / lanes::BN + eps"),
    "no_gamma_beta": edited(" * rstd * gamma[n] + beta[n];", " * rstd;").replace(
        " * rstd * gamma[n + 1] + beta[n + 1];", " * rstd;"),
    "unbiased": edited("rsqrtf(sq / D + eps)", "rsqrtf(sq / (D - 1) + eps)"),
    "eps_outside": edited("rsqrtf(sq / D + eps)", "1.0f / (sqrtf(sq / D) + eps)"),
}


# --- without a GPU --------------------------------------------------------------------------------

def y_of(x, w, b):
    return x @ w.T + b


def groups_of(y, G):
    return y.reshape(y.shape[0], G, y.shape[1] // G)


def right(x, w, b, g, be, G, eps):
    return F.group_norm(y_of(x, w, b), G, g, be, eps)


def plain(x, w, b, g, be, G, eps):
    return y_of(x, w, b)


def whole_tile(x, w, b, g, be, G, eps):
    y = y_of(x, w, b)
    out = torch.empty_like(y)
    for n0 in range(0, y.shape[1], hg.ring_configs()["rungs"]["rung 9"]["BN"]):
        t = y[:, n0:n0 + 256]
        out[:, n0:n0 + 256] = (t - t.mean(1, keepdim=True)) / torch.sqrt(t.var(1, unbiased=False, keepdim=True) + eps)
    return out * g + be


def batch(x, w, b, g, be, G, eps):  # the seeds' slip: statistics over the batch
    yy = groups_of(y_of(x, w, b), G)
    m, v = yy.mean((0, 2), keepdim=True), yy.var((0, 2), unbiased=False, keepdim=True)
    return ((yy - m) / torch.sqrt(v + eps)).flatten(1) * g + be


def no_gamma_beta(x, w, b, g, be, G, eps):
    return F.group_norm(y_of(x, w, b), G, None, None, eps)


def unbiased(x, w, b, g, be, G, eps):
    yy = groups_of(y_of(x, w, b), G)
    m, v = yy.mean(2, keepdim=True), yy.var(2, unbiased=True, keepdim=True)
    return ((yy - m) / torch.sqrt(v + eps)).flatten(1) * g + be


def eps_outside(x, w, b, g, be, G, eps):
    yy = groups_of(y_of(x, w, b), G)
    m, v = yy.mean(2, keepdim=True), yy.var(2, unbiased=False, keepdim=True)
    return ((yy - m) / (torch.sqrt(v) + eps)).flatten(1) * g + be


def test_the_checker_passes_groupnorm_of_the_linear_output_on_the_cpu():
    assert hg.epilogue_verdict(right, "cpu").startswith("PASS")


@pytest.mark.parametrize("shortcut", [plain, whole_tile, batch, no_gamma_beta, unbiased, eps_outside],
                         ids=lambda f: f.__name__)
def test_every_shortcut_fails_the_checker(shortcut):
    assert hg.epilogue_verdict(shortcut, "cpu").startswith("Not yet")


def test_the_trials_can_tell_the_shortcuts_apart():
    """Groups of 8 (where the unbiased variance differs most), N past a tile and short of one, and an eps large
    against the groups' variance (where eps outside the root shows)."""
    widths = {N // G for M, K, N, G, eps in hg.EPILOGUE_TRIALS}
    assert 8 in widths and all(256 % d == 0 and d % 2 == 0 for d in widths)
    assert any(N > 256 and N % 256 for M, K, N, G, eps in hg.EPILOGUE_TRIALS)
    assert any(N < 256 for M, K, N, G, eps in hg.EPILOGUE_TRIALS)
    assert any(eps >= 0.1 for *_, eps in hg.EPILOGUE_TRIALS) and all(K % 4 == 0 for _, K, *_ in hg.EPILOGUE_TRIALS)
    x, w, bias, gamma, beta, G, eps = hg.epilogue_inputs(hg.EPILOGUE_TRIALS[0])
    assert gamma.std() > 0.5 and beta.std() > 0.5  # not the identity: a missing scale or shift shows


def test_the_starter_and_the_answer_pass_the_static_checks_and_the_shortcuts_do_not():
    assert hg.epilogue_static(starter()) == [] and hg.epilogue_static(ANSWER) == []
    assert hg.epilogue_static(starter().replace("// @arch: 9.0a\n", ""))
    assert hg.epilogue_static(ANSWER.replace('#include "exercises/gemm_wgmma_lanes.cuh"',
                                             '#include "exercises/gemm_wgmma_lanes.cuh"\n'
                                             '#include "common/gemm_epilogue_groupnorm.cuh"'))
    assert hg.epilogue_static(ANSWER.replace("sum += __shfl_xor_sync", "team_welford<4>; sum += __shfl_xor_sync"))
    assert "Not yet" in hg.epilogue_verdict(right, "cpu", source=starter().replace("struct GroupNormEpilogue", "struct X"))


def test_the_starter_is_a_gap_and_no_chapter_shows_the_answer():
    start = starter()
    assert "// @arch: 9.0a" in start.lstrip().splitlines()[0] and "YOUR CODE" in start
    assert "__shfl_xor_sync" not in start and "rsqrtf" not in start and "gamma[n + 1]" not in start
    # the answer's own lines appear in no notebook
    lines = [l.strip() for l in ANSWER.splitlines() if "rsqrtf" in l or "__shfl_xor_sync" in l]
    for nb in (REPO / "notebooks").glob("*.ipynb"):
        text = nb.read_text()
        assert not any(json.dumps(l)[1:-1] in text for l in lines), nb.name
    # the part around the epilogue, the launcher, is the same in both
    tail = lambda s: s[s.index("// @export"):]  # noqa: E731
    assert tail(start) == tail(ANSWER)


# --- compile -----------------------------------------------------------------------------------------

@pytest.mark.compile
@pytest.mark.parametrize("which", ["starter", "answer"])
def test_the_starter_and_the_answer_compile_for_hopper(which):
    if env.mode() == "reference-only":
        pytest.skip(env.no_build_reason())
    # the starter under the chapter's own name and folder, as its cell builds it (tests/scratch_builds.py)
    if which == "starter":
        module = build.load_source("gn_epilogue", starter())
    else:
        module = build.load_source("gn_epilogue_answer", ANSWER, scratch_dir=BUILD_DIR)
    assert callable(module.linear_groupnorm)


# --- gpu -----------------------------------------------------------------------------------------------

def gpu_verdict(name: str, source: str, folder=BUILD_DIR) -> str:
    if env.mode() != "gpu" or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs an sm_90 GPU (H100, H200): the exercise's kernel is wgmma")
    module = build.load_source(name, source, scratch_dir=folder)
    return hg.epilogue_verdict(module.linear_groupnorm, "cuda", source)


@pytest.mark.gpu
def test_the_starter_fails_and_the_answer_passes_on_the_gpu():
    assert gpu_verdict("gn_epilogue", starter(), build.SCRATCH_DIR).startswith("Not yet")  # as the chapter builds it
    assert gpu_verdict("gn_epilogue_answer", ANSWER).startswith("PASS")


@pytest.mark.gpu
@pytest.mark.parametrize("shortcut", sorted(KERNEL_SHORTCUTS))
def test_each_shortcut_kernel_fails_on_the_gpu(shortcut):
    assert gpu_verdict(f"gn_epilogue_{shortcut}", KERNEL_SHORTCUTS[shortcut]).startswith("Not yet")


@pytest.mark.gpu
def test_bad_group_widths_are_refused_with_a_message():
    if env.mode() != "gpu" or torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs an sm_90 GPU (H100, H200)")
    module = build.load_source("gn_epilogue_answer", ANSWER, scratch_dir=BUILD_DIR)
    x, w, bias, gamma, beta, _, eps = hg.epilogue_inputs((64, 64, 96, 3, 1e-5), "cuda")
    with pytest.raises(RuntimeError, match="groups must divide N"):
        module.linear_groupnorm(x, w, bias, gamma, beta, 5, eps)
    x, w, bias, gamma, beta, _, eps = hg.epilogue_inputs((64, 64, 288, 3, 1e-5), "cuda")  # width 96: 256 % 96 != 0
    with pytest.raises(RuntimeError, match="must be even and divide"):
        module.linear_groupnorm(x, w, bias, gamma, beta, 3, eps)
