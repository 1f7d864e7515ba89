"""The wgmma probes (experiments/wgmma_schedule/) build patched copies of kernels/, each patch matching
exactly once in the GEMM's headers. A header edit can move a patch's anchor (or duplicate it) long
before a probe runs again on a GPU; these tests find that on the CPU, and check that a patch lands
where it says. Nothing here builds or runs a kernel."""
import pytest

from experiments.wgmma_schedule import headroom_probe
from experiments.wgmma_schedule.probe_kit import HEADERS, patched_kernels
from utils import build

PATCH_SETS = {f"headroom_probe: {name}": patches for name, patches in headroom_probe.PATCHES.items()}


@pytest.mark.parametrize("name", list(PATCH_SETS))
def test_every_probe_patch_applies_once(name, tmp_path):
    patches = PATCH_SETS[name]
    originals = {h: (build.KERNELS_DIR / h).read_text() for h in HEADERS}
    copy = patched_kernels(name.replace(":", ""), patches, tmp_path)
    texts = {h: (copy / h).read_text() for h in HEADERS}
    for old, new in patches:
        assert sum(t.count(new) for t in texts.values()) >= 1, f"{name}: the replacement is not in the copy"
        assert sum(t.count(old) for t in originals.values()) == 1
    assert texts != originals or not patches, f"{name}: the copy is the original"
    assert {h: (build.KERNELS_DIR / h).read_text() for h in HEADERS} == originals, "kernels/ itself was changed"


def test_a_patch_that_no_longer_matches_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="does not occur exactly once"):
        patched_kernels("stale", [("// a line no header has", "")], tmp_path)
