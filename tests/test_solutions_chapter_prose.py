"""The prose of notebooks 10 and 13 (the drop-in solutions, once one chapter) against their records, probe logs
and the seeds. A recorded run's figures are not the prose's: a cell computes each debrief from the record the
notebook shows (utils.chapters.solution_debriefs, tested in test_solution_debriefs.py), and the prose names no
record's commit. What the prose does claim of the runs holds on every recorded device's records; the fixed
figures it quotes are the probe logs' under results/, rounded as the prose rounds them; what it says of the five
seeds is what the seeds say; and every section either names ("§2", "chapter 10's §5") is a heading of the
chapter meant.

Also the final scoreboard's table (utils.chapters.scoreboard.final_markdown, show_final): built from
the three records of one device, its ratios the records' own."""
import ast
import json
import re
import types
from collections import defaultdict

import pytest

from utils import REPO, results
from utils.chapters import scoreboard as sb
from utils.chapters import session as chapter
from utils.chapters import solution_debriefs as debriefs
from utils.chapters.solution_debriefs import span

NB10 = REPO / "notebooks" / "10_fused_solutions.ipynb"
NB13 = REPO / "notebooks" / "13_dropins_in_real_code.ipynb"
CHAPTERS = {"10": NB10, "13": NB13}
ROOT = REPO / "results"
H200, H100 = "nvidia-h200", "nvidia-h100-80gb-hbm3"
SEEDS_DIR = REPO.parent / "shared" / "seeds"
LONG_K, SHORT_K = (94, 75, 62), (37,)  # the problems by their GEMM's K: 8192, and 37's 1024
PIDS = (94, 75, 37, 62)


def markdown_cells(*notebooks) -> dict[str, str]:
    """{cell id: source} of the markdown cells of `notebooks` (default: both chapters; their ids are distinct)."""
    found = {}
    for notebook in notebooks or CHAPTERS.values():
        cells = json.loads(notebook.read_text())["cells"]
        found |= {c["id"]: "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"}
    return found


def prose() -> str:
    """All of both chapters' markdown, whitespace folded (a phrase may be wrapped anywhere)."""
    return " ".join(" ".join(markdown_cells().values()).split())


def says(*phrases: str) -> None:
    text = prose()
    missing = [p for p in phrases if p not in text]
    assert not missing, f"notebooks 10 and 13 do not say (their records do): {missing}"


def record(device: str, kind: str) -> dict:
    rec = results.load(kind, device, ROOT)
    assert rec is not None, f"no {kind} record for {device}"
    return rec


def ratios(device: str, kind: str, contender: str = "ours", protocol: str = "steady") -> dict[tuple[int, bool], dict]:
    """{(problem, tf32): session.solution_ratios row} of a record."""
    rows = chapter.solution_ratios(record(device, kind)["entries"], contender)
    return {(r["problem"], r["tf32"]): r for r in rows if r["protocol"] == protocol}


def medians(device: str, kind: str) -> dict[tuple, float]:
    """{(problem, contender, tf32, protocol): median ms} of a record."""
    return {(e["problem"], e["contender"], e["tf32"], e["protocol"]): e["median_ms"]
            for e in record(device, kind)["entries"]}


# --------------------------------------------------------------------------- the final scoreboard

def test_the_final_table_is_the_records_ratios():
    recs = {kind: record(H200, kind) for kind in sb.FINAL_KINDS}
    frame = sb.final_table(recs)
    ms = medians(H200, "solutions")
    eager, compiled = ms[94, "eager", False, "steady"], min(ms[94, m, False, "steady"] for m in chapter.COMPILE_MODES)
    ours = ms[94, "ours", False, "steady"]
    assert frame.loc[94, ("forward, TF32 off", "× eager")] == pytest.approx(eager / ours)
    assert frame.loc[94, ("forward, TF32 off", "× compile")] == pytest.approx(compiled / ours)
    assert list(dict.fromkeys(head for head, _ in frame.columns)) == [head for _, _, head in sb.FINAL_COLUMNS]
    assert list(frame.index) == [94, 75, 37, 62]
    text = sb.final_markdown(recs)
    row = next(line for line in text.splitlines() if line.startswith("|") and line.split("|")[1].strip() == "94")
    assert [c.strip() for c in row.split("|")[1:-1]][1] == f"{eager / ours:.2f}x · {compiled / ours:.2f}x"
    assert len(row.split("|")[1:-1]) == 1 + len(sb.FINAL_COLUMNS)
    assert "recorded on NVIDIA H200" in text and "Not recorded" not in text


def test_the_final_table_names_what_is_missing_and_never_mixes_devices():
    text = sb.final_markdown({"solutions": record(H100, "solutions"), "training": None, "autocast": None})
    assert "Not recorded on this device: the training step, the forward under autocast." in text
    assert "training step, TF32 off" not in text and "forward, TF32 on" in text
    with pytest.raises(ValueError, match="more than one device"):
        sb.final_markdown({"solutions": record(H100, "solutions"), "training": record(H200, "training")})


def test_show_final_without_records_prints_one_line(tmp_path, capsys):
    sb.show_final(types.SimpleNamespace(on_gpu=False, results_dir=tmp_path))
    out = capsys.readouterr().out
    assert out.startswith("SKIPPED: the final scoreboard") and out.count("\n") == 1


# --------------------------------------------------------------------------- the sections either chapter names

def section_refs(markdown: str) -> list[tuple[str | None, int]]:
    """(chapter, section) for each "§N" of a chapter's prose: "chapter 10's §5" and "(chapter 10, §5)" name
    chapter 10, a range's second end ("chapter 10's §3–§4") its first end's chapter, a bare "§2" (None) the
    chapter it stands in. Links are left out: their targets are checked by test_hopper_chapter's link test."""
    text = re.sub(r"\[[^\]]*\]\([^)]*\)", "a link", " ".join(markdown.split()))
    refs, chapter = [], None
    for m in re.finditer(r"(?:[Cc]hapter (\d\d)(?:'s|,) )?§(\d+)", text):
        if m[1] or text[m.start() - 1:m.start()] != "–":
            chapter = m[1]
        refs.append((chapter, int(m[2])))
    return refs


def sections(notebook) -> list[int]:
    return [int(n) for n in re.findall(r"^## (\d+)\. ", "\n".join(markdown_cells(notebook).values()), re.M)]


@pytest.mark.parametrize("number", sorted(CHAPTERS))
def test_every_section_named_is_a_heading_of_the_chapter_meant(number):
    """The two chapters were one, numbered 1-13: each numbers its own from 1, and a "§N" either names is a
    section of the chapter it means."""
    notebook = CHAPTERS[number]
    assert sections(notebook) == list(range(1, len(sections(notebook)) + 1)), sections(notebook)
    refs = section_refs("\n".join(markdown_cells(notebook).values()))
    assert refs, f"notebook {number} names no section"
    for chapter, section in refs:
        (target,) = (REPO / "notebooks").glob(f"{chapter or number}_*.ipynb")
        assert section in sections(target), f"notebook {number} names §{section} of {target.name}, which has no such section"


@pytest.mark.parametrize("number", sorted(CHAPTERS))
def test_the_chapter_is_more_prose_than_code_in_short_cells(number):
    cells = json.loads(CHAPTERS[number].read_text())["cells"]
    words = {kind: sum(len("".join(c["source"]).split()) for c in cells if c["cell_type"] == kind)
             for kind in ("code", "markdown")}
    assert words["code"] <= words["markdown"], words
    long = {c["id"]: len("".join(c["source"]).splitlines()) for c in cells if c["cell_type"] == "code"}
    assert max(long.values()) <= 30, long


def test_a_section_reference_is_read_with_its_chapter():
    assert section_refs("(chapter 10's §3–§4, §1–§3 here); chapter 13's §2 says; [§9](#9.-x) (chapter 10, §6)") == [
        ("10", 3), ("10", 4), (None, 1), (None, 3), ("13", 2), ("10", 6)]


# --------------------------------------------------------------------------- the seeds

def seed_texts() -> dict[str, str]:
    return {p.name[:3]: " ".join(p.read_text(errors="replace").split()) for p in SEEDS_DIR.glob("*.txt")}


def seed_rows(cell_id: str) -> list[tuple[str, list[str]]]:
    """(seed, the table row's cells) for each row of a markdown cell's table that names a seed."""
    rows = []
    for line in markdown_cells()[cell_id].splitlines():
        if m := re.match(r"\| (\d{3}|all)\b", line):
            rows.append(("000" if m[1] == "all" else m[1], [c.strip() for c in line.strip().strip("|").split(" | ")]))
    return rows


RECAP = "nb09-58e"  # notebook 13's "## 5. The seeds against the outcome"


@pytest.mark.skipif(not SEEDS_DIR.is_dir(), reason=f"the seed documents are not at {SEEDS_DIR}")
@pytest.mark.parametrize("cell_id", ["nb09-01", RECAP])
def test_every_quote_of_a_seed_is_verbatim(cell_id):
    seeds = seed_texts()
    quoted = 0
    for seed, cells in seed_rows(cell_id):
        for quote in re.findall(r'"([^"]+)"', " | ".join(cells)):
            assert " ".join(quote.replace("`", "").split()) in seeds[seed], f"seed {seed} does not say {quote!r}"
            quoted += 1
    assert quoted or cell_id == RECAP  # the seeds' words are quoted at the top; the recap may paraphrase


@pytest.mark.skipif(not SEEDS_DIR.is_dir(), reason=f"the seed documents are not at {SEEDS_DIR}")
def test_only_the_seed_the_prose_names_drafts_a_model_new():
    drafted = [seed for seed, text in sorted(seed_texts().items()) if "class ModelNew" in text]
    assert drafted == ["001"]
    says(f"Only {drafted[0]} drafts a `class ModelNew`")
    assert "Each seed ends with" not in prose()


def test_the_recap_has_one_row_per_seed_and_names_chapters_that_exist():
    rows = seed_rows(RECAP)
    assert [seed for seed, _ in rows] == ["000", "001", "002", "003", "004"]
    for seed, (_, right, slipped, chapters) in rows:
        assert right and slipped, seed
        for number in chapters.split(", "):
            assert list((REPO / "notebooks").glob(f"{number}_*.ipynb")), f"seed {seed}: no chapter {number}"


def test_seed_003s_whole_batch_statistics_are_called_a_slip_where_it_is_marked_right():
    (cells,) = [cells for seed, cells in seed_rows("nb09-01") if seed == "003"]
    verdict = cells[3]
    assert verdict.startswith("right") and "across the batch" in verdict and "chapter 06" in verdict
    (recap,) = [cells for seed, cells in seed_rows(RECAP) if seed == "003"]
    assert "GroupNorm over the whole batch" in recap[2] and "06" in recap[3]


def test_what_the_prose_reads_from_the_final_table_holds_on_every_device():
    """"With TF32 off ... over 2x torch.compile on all four, forward and training step alike; with TF32
    allowed and under autocast ... the smallest margins are there": on every device's records."""
    says("With TF32 off the margin is the GEMM's, over 2x `torch.compile` on all four, forward and training step alike")
    for device in results.recorded_devices(ROOT):
        strict, rest = [], []
        for kind in sb.FINAL_KINDS:
            if results.load(kind, device, ROOT) is not None:
                for (_, tf32), r in ratios(device, kind).items():
                    (rest if tf32 or kind == "autocast" else strict).append(r["vs_compile"])
        assert not strict or (min(strict) > 2 and max(rest, default=0) < min(strict)), (device, strict, rest)


# --------------------------------------------------------------------------- the GEMM's share

def test_the_gemm_share_is_the_eager_profiles():
    """Chapter 01's profiles on every recorded GPU: the GEMM (aten::addmm) is 87-91% of eager's time at
    K = 8192 and about two thirds on 37, not "over 90% of every model's time"."""
    shares = defaultdict(list)
    devices = [d for d in results.recorded_devices(ROOT) if results.load("eager_profile", d, ROOT)]
    for device in devices:
        for e in record(device, "eager_profile")["entries"]:
            if e["op"] == "aten::addmm":
                shares[e["problem"]].append(e["pct"])
    long_k = span([v for p in LONG_K for v in shares[p]], "{:.0f}", "%")
    short_k = span([v for p in SHORT_K for v in shares[p]], "{:.0f}", "%")
    says(f"takes {long_k} of the time on 94, 75 and 62, and {short_k} on 37",
         f"({long_k} of eager's on 94, 75 and 62, {short_k} on 37)")
    assert "over 90%" not in prose()
    if "both recorded GPUs" in prose():
        assert len(devices) == 2, devices


# --------------------------------------------------------------------------- the debriefs, computed in a cell

def code_cells(notebook) -> list[tuple[str, str]]:
    """(cell id, source) of a notebook's code cells, in order."""
    return [(c["id"], "".join(c["source"])) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]


def cell_constant(notebook, name: str):
    """The value a code cell of `notebook` assigns to `name` at its top level (the predictions the cells
    write down before they measure), evaluated with PIDS as the cells have it."""
    for _, source in code_cells(notebook):
        for node in ast.parse(re.sub(r"^%.*$", "", source, flags=re.M)).body:  # a line magic is no Python
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                return eval(compile(ast.Expression(node.value), name, "eval"), {"PIDS": list(PIDS)})
    raise AssertionError(f"no code cell of {notebook.name} assigns {name}")


def devices_with(kind: str) -> list[str]:
    devices = [d for d in results.recorded_devices(ROOT) if results.load(kind, d, ROOT) is not None]
    assert devices, f"no device has a {kind} record"
    return devices


@pytest.mark.parametrize("notebook, results_cell, shown, call", [
    (NB10, "nb09-36", "measured", 'debriefs.forward_debrief(measured, PREDICTED, S.recorded("ceilings"))'),
    (NB13, "nb09-46", "trained", "debriefs.training_debrief(trained, PREDICTED_STEP, STEP_TARGETS)"),
    (NB13, "nb09-54", "autocast", "debriefs.autocast_summary(autocast)")])
def test_each_debrief_is_computed_in_the_cell_after_its_results(notebook, results_cell, shown, call):
    """The code cell right after the one that shows a record's tables and plots displays its debrief, when
    there is a record (S.shown has said why, once, when there is none)."""
    cells = json.loads(notebook.read_text())["cells"]
    after = cells[[c["id"] for c in cells].index(results_cell) + 1]
    source = "".join(after["source"])
    assert after["cell_type"] == "code" and source.startswith(f"if {shown} is not None:"), source
    assert f"display(Markdown({call})" in source, source


def test_the_prose_quotes_no_records_commit():
    """The figures of a recorded run are the debriefs', computed: the prose names no record's commit."""
    commits = {results.load(kind, d, ROOT)["git_commit"][:7] for kind in ("solutions", "training", "autocast")
               for d in devices_with(kind)}
    assert not [c for c in commits if c in prose()], commits


# --------------------------------------------------------------------------- notebook 10's §5, the forward

def forward_ratios(device: str, contender: str = "ours", protocol: str = "steady", tf32: bool = False) -> dict[int, float]:
    return {p: r["vs_compile"] for (p, t), r in ratios(device, "solutions", contender, protocol).items() if t == tf32}


def test_the_training_steps_prediction_quotes_the_probes_whole_step():
    """"The probe's whole step: eager 8.59 ms, torch.compile (default mode) 8.16 ms, ours 3.70 ms": its log."""
    rows = json.loads((ROOT / H100 / "logs" / "training" / "training_probe_94.json").read_text())["rows"]
    step = {r["contender"]: r["median_ms"] for r in rows if not r["tf32"] and r["what"] == "training step"}
    says(f"The probe's whole step: eager {step['eager']:.2f} ms, `torch.compile` (default mode) "
         f"{step['torch.compile']:.2f} ms, ours {step['ours']:.2f} ms")


def test_the_forwards_prediction_is_the_probes():
    """"0.186 ms at 8192 x 8192, against 0.176 ms for a copy of the same size": the H100 probe's log."""
    rows = json.loads((ROOT / H100 / "logs" / "training" / "training_probe_94.json").read_text())["rows"]
    probe = {r["contender"]: r["median_ms"] for r in rows if not r["tf32"]}
    made = probe["weight's small parts"]
    says(f"{made:.3f} ms at 8192 x 8192, against {probe['weight, copy (ceiling)']:.3f} ms for a copy of the same size",
         f"the H100 probe's {made:.3f} ms")


@pytest.mark.parametrize("device", devices_with("solutions"))
def test_what_the_forward_prose_says_holds_on_every_device(device):
    """The prediction, judged on every record: frozen inside it, the default on 37 inside or above; on 94, 75
    and 62 never below it, its weight's pass within 10% of a copy at the device's recorded bandwidth; with TF32
    94, 75 and 62 at 1.0-1.15x and 37 furthest ahead; per call within 3% of steady at the strict tier, below it
    on at least one problem, and above it on all four with TF32."""
    says("frozen meets its prediction at the strict tier, and the default on 37, whose weight is a sixteenth of the "
         "others', meets it or lands above it",
         "it takes within 10% of a copy of the weight's size at the device's recorded copy bandwidth",
         "lands higher in the 2.2–2.4x predicted, or above it; none lands below",
         "With TF32 ours runs 1.0–1.15x the faster `torch.compile` on 94, 75 and 62", "and furthest ahead on 37",
         "the ratio lands within 3% of steady, below it on some of the four or all; with TF32 it is above on all "
         "four, as predicted")
    predicted = cell_constant(NB10, "PREDICTED")
    frozen, default = forward_ratios(device, "ours, frozen"), forward_ratios(device)
    for pid in PIDS:
        lo, hi = debriefs.predicted_range(predicted[False, "ours, frozen"][pid])
        assert debriefs.position([frozen[pid]], lo, hi) == "inside", (pid, frozen[pid])
    assert debriefs.side(default[37], *debriefs.predicted_range(predicted[False, "ours"][37])) >= 0
    assert all(debriefs.side(default[p], *debriefs.predicted_range(predicted[False, "ours"][p])) >= 0 for p in LONG_K)
    ms, ceilings = medians(device, "solutions"), results.load("ceilings", device, ROOT)
    if ceilings is not None:
        copy_ms = 2 * 4 * 8192 * 8192 / ceilings["entries"][0]["copy_GBps"] / 1e6
        passes = [ms[p, "ours", False, "steady"] - ms[p, "ours, frozen", False, "steady"] for p in LONG_K]
        assert all(1.0 <= t / copy_ms <= 1.1 for t in passes), (passes, copy_ms)
    tf32 = forward_ratios(device, tf32=True)
    assert all(1.0 <= round(tf32[p], 2) <= 1.15 for p in LONG_K) and tf32[37] > max(tf32[p] for p in LONG_K), tf32
    for tier in (False, True):
        change = {p: forward_ratios(device, protocol="per_call", tf32=tier)[p] / forward_ratios(device, tf32=tier)[p] - 1
                  for p in PIDS}
        assert (all(c > 0 for c in change.values()) if tier else
                all(abs(c) < 0.03 for c in change.values()) and min(change.values()) < 0), (tier, change)


@pytest.mark.parametrize("device", devices_with("solutions"))
def test_what_the_prose_says_of_the_two_protocols_holds_on_every_device(device):
    """At the strict tier a synchronized call adds more to torch.compile (its faster mode per call) than to ours,
    never much more than the steady ratio times as much; per call comes out above steady exactly where it added
    more than that. With TF32 per call favours ours on all four, by more than it moves any strict ratio."""
    says("a synchronized call adds more to `torch.compile` than to ours, but not much more than the steady ratio "
         "times as much, so per call stays close to steady",
         "a little below it where `torch.compile`'s addition was less than the steady ratio times ours, a little "
         "above where it was more",
         "per call favours ours on all four, by more than per call moves any ratio at the strict tier")
    ms, per_call = medians(device, "solutions"), ratios(device, "solutions", protocol="per_call")
    steady = forward_ratios(device)
    for pid in PIDS:
        mode = per_call[pid, False]["compile_mode"]
        ours = ms[pid, "ours", False, "per_call"] - ms[pid, "ours", False, "steady"]
        times = (ms[pid, mode, False, "per_call"] - ms[pid, mode, False, "steady"]) / ours
        assert 1 < times < 1.15 * steady[pid], (pid, times, steady[pid])
        # above or below: decided only where torch.compile's addition is more than 1% away from the steady ratio
        # times ours (per call takes the faster mode per call, the steady ratio the faster one in steady state, so
        # at the edge the two can fall either side: 75 on the H200, 2.27 against 2.36, per call 0.2% above)
        if abs(times / steady[pid] - 1) > 0.01 and abs(per_call[pid, False]["vs_compile"] / steady[pid] - 1) > 0.01:
            assert (per_call[pid, False]["vs_compile"] > steady[pid]) == (times > steady[pid]), (pid, times, steady[pid])
    strict = [abs(forward_ratios(device, protocol="per_call")[p] / steady[p] - 1) for p in PIDS]
    tf32 = [forward_ratios(device, protocol="per_call", tf32=True)[p] / forward_ratios(device, tf32=True)[p] - 1 for p in PIDS]
    assert min(tf32) > max(strict), (tf32, strict)


@pytest.mark.parametrize("device", devices_with("solutions"))
def test_62_with_tf32_is_below_1_1_on_every_device(device):
    says("1.1x would take a whole model faster than cuBLAS's GEMM without its tail",
         "Every recorded run of this chapter puts 62 with TF32 below 1.1x in steady state")
    assert round(forward_ratios(device, tf32=True)[62], 2) < 1.1
    assert "balancing the GEMM's last wave nothing; that probe's" not in prose()


# --------------------------------------------------------------------------- notebook 13's §2, §3

TF32_STEP_PROBES = {H100: ROOT / H100 / "logs" / "training" / "training_probe_94.json",
                    H200: ROOT / H200 / "logs" / "dropins" / "training_probe_pieces.json"}


@pytest.mark.parametrize("device", devices_with("training"))
def test_what_the_training_prose_says_holds_on_every_device(device):
    """"the strict step meets the 2x target and misses the 2.5x moonshot, and the TF32 step misses the 1.3x
    target, as predicted": STEP_TARGETS against every record."""
    says("On every recorded device the strict step meets the 2x target and misses the 2.5x moonshot, and the "
         "TF32 step misses the 1.3x target, as predicted")
    targets, step = cell_constant(NB13, "STEP_TARGETS"), ratios(device, "training")
    assert targets == {False: (2.0, 2.5), True: (1.3, 1.5)}
    assert all(2.0 <= round(step[p, False]["vs_compile"], 2) < 2.5 for p in PIDS)
    assert all(round(step[p, True]["vs_compile"], 2) < 1.3 for p in PIDS)


def test_the_tf32_steps_floor_is_each_devices_probe():
    """The fastest GEMM of 94's TF32 step (cuBLAS's dx, as linear_backward calls it) and the tail's backward,
    timed alone on each GPU; three such GEMMs and the tail are a floor a few percent under what 1.3x
    torch.compile asks of each device's recorded step; ours' dW on each."""
    pieces = {d: {r["contender"]: r["median_ms"] for r in json.loads(p.read_text())["rows"]
                  if r["tf32"] and r["problem"] == 94} for d, p in TF32_STEP_PROBES.items()}
    dx, tail, dw = ({d: pieces[d][c] for d in (H100, H200)} for c in ("linear_backward dx", "tail backward",
                                                                      "linear_backward dw"))
    floor = {d: 3 * dx[d] + tail[d] for d in dx}
    assert f"{tail[H100]:.3f}" == f"{tail[H200]:.3f}"
    says(f"`dx`, which `linear_backward` calls: {dx[H100]:.3f} ms on an H100 and {dx[H200]:.3f} ms on an H200",
         f"the tail's backward ({tail[H100]:.3f} ms on both) make {floor[H100]:.2f} ms on the H100 and "
         f"{floor[H200]:.2f} on the H200, where 1.3x `torch.compile` asks for a few percent more on each device's "
         "recorded run",
         f"which took ours {dw[H100]:.3f} ms on the H100 and {dw[H200]:.3f} on the H200")
    for device in devices_with("training"):
        ms = medians(device, "training")
        asks = min(ms[94, m, True, "steady"] for m in chapter.COMPILE_MODES) / 1.3
        assert 1.0 < asks / floor[device] < 1.1, (device, asks, floor[device])


@pytest.mark.parametrize("device", devices_with("autocast"))
def test_what_the_autocast_prose_says_holds_on_every_device(device):
    says("On every recorded device that meets the target on all four and runs ahead of `torch.compile` on 94, 75 "
         "and 62, but not on 37, whose tail's input is 537 MB in float32")
    bf16 = ratios(device, "autocast")
    assert all(round(bf16[p, False]["vs_eager"], 2) >= 1 for p in PIDS)
    assert round(bf16[37, False]["vs_compile"], 2) < 1 <= min(round(bf16[p, False]["vs_compile"], 2) for p in LONG_K)


def test_what_the_prose_says_of_dws_time_is_the_h100_probes():
    """"ours took 0.470 ms against cuBLAS's dx at 0.343; the transposed copies cost 0.055 ms of it, the stores
    0.039, and the GEMM storing nothing at all still took 0.376": the dW store probe's log and the training
    probe's pieces, one H100 session (experiments/training/)."""
    logs = ROOT / H100 / "logs" / "training"
    ms = json.loads((logs / "dw_store_probe.json").read_text())["ms"]
    (dx,) = [r["median_ms"] for r in json.loads((logs / "training_probe_94.json").read_text())["rows"]
             if r["tf32"] and r["contender"] == "linear_backward dx"]
    says(f"ours took {ms['linear_backward dW']:.3f} ms against cuBLAS's `dx` at {dx:.3f}; the transposed copies "
         f"cost {ms['linear_backward dW'] - ms['rung 9']:.3f} ms of it, the stores "
         f"{ms['rung 9'] - ms['rung 9, no stores']:.3f}, and the GEMM storing nothing at all still took "
         f"{ms['rung 9, no stores']:.3f}")
