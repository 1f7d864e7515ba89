"""utils/profile.py: Nsight Compute's metrics chosen by what this ncu knows, its CSV read into record entries.
On the CPU with ncu's output as it prints it; the profile itself runs on a GPU (python -m utils.profile)."""
import pytest

from utils import profile, results

RAW = '''==PROF== Connected to process 123 (/usr/bin/python3.12)
==PROF== Profiling "gemm_pipelined_kernel" - 0: 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","launch__registers_per_thread"
"","","","","","","","usecond","%","register/thread"
"0","123","python3.12","127.0.0.1","void gemm_pipelined_kernel<NoEpilogue>(const float *, const float *, float *, int, int, int, bool, NoEpilogue)","1","7","3,412.19","11.52","128"
==PROF== Disconnected from process 123
'''


def test_each_role_takes_the_first_metric_this_ncu_knows():
    known = {"gpu__time_duration", "dram__throughput", "sm__pipe_tensor_cycles_active", "launch__registers_per_thread"}
    chosen, missing = profile.chosen_metrics(known)
    assert chosen["duration"] == "gpu__time_duration.sum"
    assert chosen["tensor pipe, % of active cycles"] == "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
    assert "achieved occupancy, % of max warps" in missing and "achieved occupancy, % of max warps" not in chosen


def test_raw_csv_becomes_one_entry_per_kernel_and_metric():
    chosen = {"duration": "gpu__time_duration.sum", "DRAM throughput, % of peak":
              "dram__throughput.avg.pct_of_peak_sustained_elapsed", "registers per thread": "launch__registers_per_thread"}
    entries = profile.parse_raw_csv(RAW, chosen)
    assert [(e["role"], e["value"], e["unit"]) for e in entries] == [
        ("duration", 3412.19, "usecond"), ("DRAM throughput, % of peak", 11.52, "%"),
        ("registers per thread", 128.0, "register/thread")]
    assert all(e["kernel"].startswith("void gemm_pipelined_kernel") for e in entries)
    keys = results.KINDS["profile"].entry_keys
    assert all(k in {"target": "rung 7", **e} for e in entries for k in keys)


def test_no_kernel_in_the_range_is_an_error():
    with pytest.raises(RuntimeError, match="profiled no kernel"):
        profile.parse_raw_csv("==PROF== nothing\n", {"duration": "gpu__time_duration.sum"})


def test_every_target_says_what_it_is():
    assert set(profile.TARGETS) == {"rung 7", "whole model 94"}
    assert all(what for what, _ in profile.TARGETS.values())


def test_the_main_kernel_is_the_one_the_time_goes_to():
    one = [{"kernel": "a", "metric": "gpu__time_duration.sum", "value": 5.0}, {"kernel": "a", "metric": "x", "value": 1.0}]
    two = [{"kernel": "b", "metric": "gpu__time_duration.sum", "value": 50.0}, {"kernel": "b", "metric": "x", "value": 2.0}]
    assert profile.main_kernel(one + two) == two and profile.main_kernel(two + one) == two
    assert profile.main_kernel(one) == one and profile.main_kernel([]) == []
