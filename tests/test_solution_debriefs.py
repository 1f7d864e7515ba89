"""utils.chapters.solution_debriefs: notebooks 10 and 13's debriefs, computed from a record. On small
synthetic records, each verdict word against a range it is below, inside or above, and each figure the
record implies; on every recorded device's real records, the record's own figures."""
import pytest

from utils import results
from utils.chapters import session as chapter
from utils.chapters import solution_debriefs as D

PIDS = (94, 75, 37, 62)
LONG_K = (94, 75, 62)
PREDICTED = {(False, "ours"): {94: "2.2-2.4x", 75: "2.2-2.4x", 37: "2.5-2.7x", 62: "2.2-2.4x"},
             (False, "ours, frozen"): dict.fromkeys(PIDS, "2.6-2.8x"),
             (True, "ours"): {94: "1.05-1.15x", 75: "1.05-1.15x", 37: "1.4-1.5x", 62: "1.05-1.15x"}}
STEP_PREDICTED = {False: dict.fromkeys(PIDS, "2.1-2.3x"), True: dict.fromkeys(PIDS, "1.05-1.2x")}
STEP_TARGETS = {False: (2.0, 2.5), True: (1.3, 1.5)}
WEIGHT_BYTES = 2 * 4 * 8192 * 8192  # 94's weight read and its small parts written, fp32
SLOWER = 1.25  # the other torch.compile mode, slower than the one a ratio is taken over


def synthetic(ms: dict[tuple[int, str, bool, str], float], slug: str = "gpu-x") -> dict:
    """A side-by-side record of the given medians ((problem, contender, tf32, protocol) -> ms)."""
    entries = [{"problem": p, "contender": c, "tf32": t, "protocol": prot, "median_ms": v} for (p, c, t, prot), v in ms.items()]
    return {"device": {"name": "GPU X", "slug": slug}, "date": "2030-01-02T03:04:05+00:00", "git_commit": "abc1234",
            "entries": entries}


def forward_record(strict: float, frozen: float, tf32: float, *, ours_added=0.05, compile_added=0.10,
                   strict_37: float = 2.6, tf32_37: float = 1.45, pass_ms: float = 0.1) -> dict:
    """The forward's record: ours over the faster torch.compile mode `strict` (37: `strict_37`) at the strict
    tier, frozen `frozen` on all four, `tf32` (37: `tf32_37`) with TF32; the weight's pass `pass_ms` on 94, 75
    and 62 (a fifth of it on 37); per call, each contender's steady time plus what a synchronized call adds."""
    ms = {}
    for pid in PIDS:
        for tf32_on, ratio in ((False, strict_37 if pid == 37 else strict), (True, tf32_37 if pid == 37 else tf32)):
            if tf32_on:
                ours = kept = 0.5
            else:  # ours = kept + pass and ratio * ours = frozen * kept
                ours = (pass_ms / 5 if pid == 37 else pass_ms) / (1 - ratio / frozen)
                kept = ratio * ours / frozen
            compiled = ratio * ours
            for protocol, (add_ours, add_compile) in (("steady", (0, 0)), ("per_call", (ours_added, compile_added))):
                ms |= {(pid, "eager", tf32_on, protocol): 4.0 + add_compile, (pid, "ours", tf32_on, protocol): ours + add_ours,
                       (pid, "ours, frozen", tf32_on, protocol): kept + add_ours,
                       (pid, "torch.compile", tf32_on, protocol): compiled + add_compile,
                       (pid, "torch.compile max-autotune-no-cudagraphs", tf32_on, protocol): SLOWER * compiled + add_compile}
    return synthetic(ms)


def step_record(strict: dict[int, float], tf32: dict[int, float]) -> dict:
    """A training step's record: ours 1 ms (TF32: 0.5), torch.compile `strict[pid]` (`tf32[pid]`) times as long."""
    ms = {}
    for pid in PIDS:
        for tf32_on, ratio in ((False, strict[pid]), (True, tf32[pid])):
            ours = 0.5 if tf32_on else 1.0
            ms |= {(pid, "eager", tf32_on, "steady"): 9 * ours, (pid, "ours", tf32_on, "steady"): ours,
                   (pid, "torch.compile", tf32_on, "steady"): ratio * ours,
                   (pid, "torch.compile max-autotune-no-cudagraphs", tf32_on, "steady"): SLOWER * ratio * ours}
    return synthetic(ms)


# --------------------------------------------------------------------------- the words

def test_a_prediction_reads_as_a_range():
    assert D.predicted_range("2.2-2.4x") == (2.2, 2.4)
    assert D.predicted_range("1.05–1.15x") == (1.05, 1.15)
    assert D.predicted_range("1.1x") == (1.1, 1.1)
    with pytest.raises(ValueError, match="not a predicted ratio"):
        D.predicted_range("about 2x")


@pytest.mark.parametrize("values, word", [
    ([2.1, 2.15], "below"), ([2.2, 2.4], "inside"), ([2.404, 2.3], "inside"), ([2.41, 2.5], "above"),
    ([2.3, 2.43], "at the top of"), ([2.1, 2.3], "at the bottom of"), ([2.1, 2.5], "around"), ([2.1, 2.3, 2.5], "around")])
def test_where_ratios_sit_against_a_range_read_as_shown(values, word):
    assert D.position(values, 2.2, 2.4) == word


def test_ratios_against_their_predictions_name_the_problems_outside():
    assert D.against({94: 2.43, 75: 2.37, 62: 2.39}, "2.2-2.4x") == (
        "2.37–2.43x on 94, 75 and 62, at the top of the 2.2–2.4x predicted (above it on 94)")
    assert D.against({94: 1.04, 75: 1.10, 62: 1.03}, "1.05-1.15x") == (
        "1.03–1.10x on 94, 75 and 62, at the bottom of the 1.05–1.15x predicted (below it on 94 and 62)")
    assert D.against({37: 1.16}, "1.4-1.5x") == "1.16x on 37, below the 1.4–1.5x predicted"
    assert D.against_each({94: 2.3, 37: 2.6}, {94: "2.2-2.4x", 37: "2.5-2.7x"}) == (
        "2.30x on 94, inside the 2.2–2.4x predicted; 2.60x on 37, inside the 2.5–2.7x predicted")


def test_a_target_is_met_or_missed_by_the_ratio_as_shown():
    assert D.target_words({94: 2.1, 75: 2.2, 37: 2.0, 62: 2.3}, 2.0) == "the 2x target met on all four"
    assert D.target_words({94: 2.1, 75: 1.99, 37: 1.996, 62: 2.3}, 2.0) == "the 2x target met on 94, 37 and 62, missed on 75"
    assert D.target_words({94: 1.2, 37: 1.1}, 1.3) == "the 1.3x target missed on 94 and 37"


@pytest.mark.parametrize("steady, per_call, words", [
    ({94: 2.0, 75: 2.0}, {94: 1.98, 75: 1.9}, "1.0–5.0% below steady, not above as predicted"),
    ({94: 1.0, 75: 1.0}, {94: 1.08, 75: 1.15}, "8.0–15.0% above steady, as predicted"),
    ({94: 2.0, 75: 2.0}, {94: 1.98, 75: 2.02}, "from 1.0% below to 1.0% above steady, above it on 75 only")])
def test_per_call_against_steady_in_words(steady, per_call, words):
    assert D.per_call_words(steady, per_call) == words


# --------------------------------------------------------------------------- the forward, synthetic

@pytest.mark.parametrize("strict, word", [(2.1, "below"), (2.3, "inside"), (2.5, "above")])
def test_the_forward_debrief_says_where_the_default_sits(strict, word):
    text = D.forward_debrief(forward_record(strict, 2.7, 1.1), PREDICTED, probe_ms=0.2)
    assert f"- *Default, strict*: {strict:.2f}x on 94, 75 and 62, {word} the 2.2–2.4x predicted; 2.60x on 37, inside" in text
    assert "- *Frozen, strict*: 2.70x on 94, 75, 37 and 62, inside the 2.6–2.8x predicted." in text
    assert "- *TF32*, default: 1.10x on 94, 75 and 62, inside the 1.05–1.15x predicted; 1.45x on 37, inside" in text
    assert text.startswith("**Debrief** of the forward's run above (GPU X, 2030-01-02, commit `abc1234`)")


def test_the_forward_debrief_times_the_weights_pass_against_the_probe_and_a_copy():
    ceilings = {"device": {"slug": "gpu-x"}, "entries": [{"copy_GBps": WEIGHT_BYTES / 0.125 / 1e6}]}
    text = D.forward_debrief(forward_record(2.3, 2.7, 1.1, pass_ms=0.15), PREDICTED, ceilings, probe_ms=0.186)
    assert ("0.150 ms on 94, 75 and 62, against the H100 probe's 0.186 ms "
            "(`results/nvidia-h100-80gb-hbm3/logs/training/training_probe_94.json`)") in text
    assert "recorded bandwidth (4295 GB/s, `ceilings.json`) takes 0.125 ms" in text
    other = {"device": {"slug": "gpu-y"}, "entries": ceilings["entries"]}  # another device's: never mixed in
    assert "GB/s" not in D.forward_debrief(forward_record(2.3, 2.7, 1.1), PREDICTED, other, probe_ms=0.186)


@pytest.mark.parametrize("compile_added, words", [(0.15, "above steady, as predicted"),
                                                   (0.06, "below steady, not above as predicted")])
def test_the_forward_debrief_tabulates_what_a_synchronized_call_added(compile_added, words):
    """Per call, the ratio moves towards what a call added to torch.compile over what it added to ours: above
    steady where that is more than the steady ratio (3 against 2.0 and 2.6), below where it is less (1.2)."""
    rec = forward_record(2.0, 2.7, 1.0, ours_added=0.05, compile_added=compile_added)
    text = D.forward_debrief(rec, PREDICTED, probe_ms=0.2)
    row = D.per_call_table(rec).loc[94]
    ours = 0.1 / (1 - 2.0 / 2.7)  # the weight's pass over 1 - 2.0 / 2.7
    assert list(row) == ["0.050 ms", f"{compile_added:.3f} ms", f"{compile_added / 0.05:.1f}", "2.00x",
                         f"{(2.0 * ours + compile_added) / (ours + 0.05):.2f}x"]
    assert (f"A synchronized call added 0.050 ms to ours and {compile_added:.3f} ms to `torch.compile` at the strict "
            f"tier, {compile_added / 0.05:.1f} times as much, against a steady ratio of 2.0–2.6 between them") in text
    strict = text[text.index("at the strict tier"):text.index("with TF32 it is")]
    assert strict.endswith(words + "; ")


# --------------------------------------------------------------------------- the training step and autocast, synthetic

def test_the_training_debrief_judges_each_tier_against_its_prediction_and_target():
    strict = {94: 2.25, 75: 2.35, 37: 2.2, 62: 1.95}
    text = D.training_debrief(step_record(strict, dict.fromkeys(PIDS, 1.31)), STEP_PREDICTED, STEP_TARGETS, probe_rows={})
    assert ("- *Strict*: 1.95–2.35x on 94, 75, 37 and 62, around the 2.1–2.3x predicted (below it on 62, above it on 75); "
            "the 2x target met on 94, 75 and 37, missed on 62, the 2.5x moonshot missed on all four.") in text
    assert "- *TF32*: 1.31x on 94, 75, 37 and 62, above the 1.05–1.2x predicted; the 1.3x target met on all four" in text
    assert "- *Problem 94, strict*: ours took 1.00 ms a step, eager 9.00 ms and `torch.compile` (default mode) 2.25 ms." in text
    assert f"- *Problem 94, TF32*: ours took 0.50 ms a step; 1.3x this run's `torch.compile` asks for {0.5 * 1.31 / 1.3:.2f} ms." in text
    missed = D.training_debrief(step_record(strict, dict.fromkeys(PIDS, 1.1)), STEP_PREDICTED, STEP_TARGETS, probe_rows={})
    assert "the 1.3x target missed on all four." in missed and "1.5x moonshot" not in missed


def test_the_training_debrief_sets_94s_step_beside_the_probes():
    probe_rows = {("ours", False): 3.7, ("eager", False): 8.59, ("torch.compile", False): 8.16}
    text = D.training_debrief(step_record(dict.fromkeys(PIDS, 2.2), dict.fromkeys(PIDS, 1.1)), STEP_PREDICTED,
                              STEP_TARGETS, probe_rows=probe_rows)
    assert "; the H100 probe's whole step took 3.70, 8.59 and 8.16 ms." in text


def test_the_autocast_summary_splits_the_problems_by_the_side_of_torch_compile():
    rec = step_record({94: 1.4, 75: 1.3, 37: 0.7, 62: 0.996}, dict.fromkeys(PIDS, 1.0))  # 62 reads as 1.00x: ahead
    text = D.autocast_summary(rec)
    assert text.endswith("ours at 9.00x eager under the same autocast, the 1x target met on all four; against the faster "
                         "`torch.compile` mode, ahead of it on 94, 75 and 62 (1.00–1.40x) and behind it on 37 (0.70x).")


# --------------------------------------------------------------------------- every recorded device's records

def devices_with(*kinds):
    return [d for d in results.recorded_devices() if all(results.load(k, d) for k in kinds)]


@pytest.mark.parametrize("device", devices_with("solutions"))
def test_the_forward_debrief_quotes_the_records_own_figures(device):
    rec, ceilings = results.load("solutions", device), results.load("ceilings", device)
    text = D.forward_debrief(rec, PREDICTED, ceilings)
    rows = {(r["problem"], r["tf32"], r["contender"]): r["vs_compile"] for c in ("ours", "ours, frozen")
            for r in chapter.solution_ratios(rec["entries"], c) if r["protocol"] == "steady"}
    assert f"({rec['device']['name']}, {rec['date'][:10]}, commit `{rec['git_commit']}`)" in text
    assert f"*Frozen, strict*: {D.span([rows[p, False, 'ours, frozen'] for p in PIDS])} on 94, 75, 37 and 62" in text
    assert f"{D.span([rows[p, False, 'ours'] for p in LONG_K])} on 94, 75 and 62" in text
    assert f"{rows[37, True, 'ours']:.2f}x on 37" in text
    assert "the H100 probe's 0.186 ms" in text  # results/nvidia-h100-80gb-hbm3/logs/training/training_probe_94.json
    if ceilings:
        assert f"({ceilings['entries'][0]['copy_GBps']:.0f} GB/s, `ceilings.json`)" in text
    ms = {(e["problem"], e["contender"], e["protocol"]): e["median_ms"] for e in rec["entries"] if not e["tf32"]}
    added = ms[94, "ours", "per_call"] - ms[94, "ours", "steady"]
    assert D.per_call_table(rec).loc[94, "added to ours"] == f"{added:.3f} ms"


@pytest.mark.parametrize("device", devices_with("training", "autocast"))
def test_the_training_and_autocast_debriefs_quote_the_records_own_figures(device):
    trained, autocast = results.load("training", device), results.load("autocast", device)
    ms = {(e["problem"], e["contender"], e["tf32"]): e["median_ms"] for e in trained["entries"]}
    text = D.training_debrief(trained, STEP_PREDICTED, STEP_TARGETS)
    assert f"ours took {ms[94, 'ours', False]:.2f} ms a step, eager {ms[94, 'eager', False]:.2f} ms" in text
    compiled = min(ms[94, mode, True] for mode in chapter.COMPILE_MODES)
    assert f"asks for {compiled / 1.3:.2f} ms" in text and "probe's whole step took 3.70, 8.59 and 8.16 ms" in text
    rows = [r for r in chapter.solution_ratios(autocast["entries"]) if r["protocol"] == "steady"]
    assert f"ours at {D.span([r['vs_eager'] for r in rows])} eager" in D.autocast_summary(autocast)


def test_the_probe_is_the_h100_log(tmp_path):
    weight_pass = D.probe()["weight's small parts", False]  # the figure notebook 10's prediction quotes
    assert f"{weight_pass:.3f}" == "0.186"
    assert D.probe(tmp_path / "training_probe_94.json") == {}


# --------------------------------------------------------------------------- notebook 13, §4: the final table's findings

def autocast_record(ratio: float) -> dict:
    """Under autocast: ours 1 ms, torch.compile `ratio` times as long, eager 3 ms."""
    ms = {}
    for pid in PIDS:
        ms |= {(pid, "eager", False, "steady"): 3.0, (pid, "ours", False, "steady"): 1.0,
               (pid, "torch.compile", False, "steady"): ratio, (pid, "torch.compile max-autotune-no-cudagraphs", False,
                                                                 "steady"): SLOWER * ratio}
    return synthetic(ms)


def test_the_final_findings_are_the_tables_ratios_over_compile():
    records = {"solutions": forward_record(2.3, 2.7, 1.1), "training": step_record(dict.fromkeys(PIDS, 2.2),
                                                                                   dict.fromkeys(PIDS, 1.2)),
               "autocast": autocast_record(1.3)}
    text = D.final_findings(records)
    # strict: the forward's 2.3x (37: 2.6x) and the step's 2.2x; the rest: TF32 1.1x (37: 1.45x), the step 1.2x, 1.3x
    assert "with TF32 off (forward and training step), ours runs 2.20–2.60x over it" in text
    assert ("the forward with TF32, the training step with TF32, the forward under autocast: 1.10–1.45x, every one of "
            "them smaller than any with TF32 off.") in text


def test_the_final_findings_say_when_a_margin_with_tf32_is_as_large():
    records = {"solutions": forward_record(2.3, 2.7, 1.1, tf32_37=2.5), "training": None, "autocast": None}
    text = D.final_findings(records)
    assert "with TF32 off (forward), ours runs 2.30–2.60x over it; the forward with TF32: 1.10–2.50x" in text
    assert text.endswith("some of them as large as those with TF32 off.")
    slower = D.final_findings({"solutions": forward_record(0.9, 2.7, 0.5, strict_37=0.95, tf32_37=0.4)})
    assert "ours runs 0.90–0.95x against it" in slower  # never "over" a mode it trails
    assert D.final_findings({"solutions": None, "training": None, "autocast": autocast_record(1.3)}) == ""
