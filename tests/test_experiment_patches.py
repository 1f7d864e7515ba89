"""The wgmma probes (experiments/wgmma_schedule/) build patched copies of kernels/, each patch matching
exactly once in the GEMM's headers. A header edit can move a patch's anchor (or duplicate it) long
before a probe runs again on a GPU; these tests find that on the CPU, and check that a patch lands
where it says. Nothing here builds or runs a kernel."""
import pytest

from experiments.wgmma_schedule import cluster_probe, headroom_probe, schedule_study, timeline_probe
from experiments.wgmma_schedule.cluster_probe import HEADERS, patched_kernels
from utils import build

# every schedule the study and the probes build: (cluster, persistent[, store[, ping-pong]])
SCHEDULES = [*schedule_study.SCHEDULES, (1, 0, 1), (1, 0, 2), (1, 0, 3), (1, 1, 0, 1)]

PATCH_SETS = {f"cluster_probe: {name}": schedule_study.schedule_patches((cluster, 1)) + patches
              for name, (cluster, patches) in cluster_probe.PROBES.items()}
PATCH_SETS |= {f"schedule_study: {schedule_study.key(s)}": schedule_study.schedule_patches(s) for s in SCHEDULES}
PATCH_SETS |= {f"headroom_probe: {name}": patches for name, patches in headroom_probe.PATCHES.items()}
PATCH_SETS["timeline_probe"] = schedule_study.schedule_patches(timeline_probe.ONE_TILE_PER_BLOCK) + timeline_probe.PATCHES


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


def test_the_timeline_probe_adds_its_export(tmp_path):
    rung = timeline_probe.probe_kernels(tmp_path) / f"{timeline_probe.RUNG}.cu"
    assert "torch::Tensor timeline(int64_t n)" in rung.read_text()


def test_the_workbook_schedule_needs_no_patch_and_the_others_name_their_types(tmp_path):
    assert schedule_study.schedule_patches((1, 1)) == []  # the Config defaults: persistent, no cluster, direct stores
    copy = schedule_study.schedule_kernels((2, 0, 1), tmp_path)
    text = (copy / "common" / "gemm_wgmma.cuh").read_text()
    assert "class SCHEDULE_ = ScheduleCooperative, int CLUSTER_ = 2, class STORE_ = StoreStaged<1>>" in text
    assert '#include "probes/gemm_wgmma_staged_writer.cuh"' in text
    assert (copy / "probes" / "gemm_wgmma_staged_writer.cuh").is_file()
    pingpong = (schedule_study.schedule_kernels((1, 1, 0, 1), tmp_path) / "common" / "gemm_wgmma.cuh").read_text()
    assert "SchedulePingpong>;" in pingpong
