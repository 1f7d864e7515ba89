"""Notebook 09 (the Hopper GEMM and the fused epilogue) on the CPU: the ring's shared-memory budget against
kernels/common/gemm_wgmma.cuh, exercise 1's checker on the notebook's starting value, what the chapter computes
from a "whole_model_fusion" record (75's stores, the predictions missed, the scoreboard), the scoreboard cell
reading the record its table reads, and the chapter's links to other chapters landing on headings."""
import ast
import json
import re

import pytest
from matplotlib.figure import Figure

from utils import REPO
from utils.chapters import epilogue_fusion as fusion
from utils.chapters import hopper_gemm as hg
from utils.report import tensor_cores as tcr

from test_tensor_core_chapter import fusion_record

NB09 = REPO / "notebooks" / "09_hopper_gemm_and_epilogue.ipynb"


def cells(notebook=NB09) -> list[dict]:
    return json.loads(notebook.read_text())["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def starting_value(name: str):
    for cell in cells():
        if cell["cell_type"] == "code":
            for node in ast.parse(text(cell).replace("%matplotlib inline", "")).body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
                    return ast.literal_eval(node.value)
    raise AssertionError(f"no code cell of notebook 09 assigns {name}")


# --- the ring's budget and exercise 1 -----------------------------------------------------------

def test_the_ring_is_read_from_the_kernels_constants():
    c = hg.ring_configs()
    assert (c["BM"], c["BK"], c["limit_bytes"]) == (128, 32, 227 * 1024)
    assert c["rungs"] == {"rung 9": {"BN": 256, "stages": 4, "presplit": False},
                          "rung 10": {"BN": 128, "stages": 3, "presplit": True}}
    assert hg.stage_bytes("rung 9") == 48 * 1024 and hg.stage_bytes("rung 10") == 64 * 1024  # the headers' figures
    # the kernel's own sum (Config::SMEM_BYTES): alignment, the stages, two 8-byte barriers per stage
    assert hg.ring_bytes("rung 9", 4) == 1024 + 4 * 48 * 1024 + 2 * 4 * 8


def test_the_configurations_use_the_deepest_ring_that_fits():
    """What the notebook's exercise 1 says on PASS, and why the answer is what the kernel runs."""
    c = hg.ring_configs()
    for rung, r in c["rungs"].items():
        assert hg.deepest_ring(rung) == r["stages"]
        assert hg.ring_bytes(rung, r["stages"]) <= c["limit_bytes"] < hg.ring_bytes(rung, r["stages"] + 1)


RIGHT_KB = {"rung 9": (1024 + 4 * (48 * 1024 + 16)) / 1024, "rung 10": (1024 + 3 * (64 * 1024 + 16)) / 1024}


def test_exercise_1_is_not_yet_at_the_start_and_passes_on_the_deepest_rings():
    start, start_kb = starting_value("MY_STAGES"), starting_value("MY_RING_KB")
    assert start == {"rung 9": None, "rung 10": None} and start_kb == {"rung 9": None, "rung 10": None}
    assert hg.ring_verdict(start, start_kb).startswith("Not yet")
    assert hg.ring_verdict({"rung 9": 4, "rung 10": None}, RIGHT_KB).startswith("Not yet")
    assert hg.ring_verdict({"rung 9": 4, "rung 10": 3}).startswith("Not yet")  # the depths without the sum
    verdict = hg.ring_verdict({"rung 9": 4, "rung 10": 3}, RIGHT_KB)
    assert verdict.startswith("PASS") and "use exactly these" in verdict
    assert "hg.ring_verdict(MY_STAGES, MY_RING_KB)" in "".join(text(c) for c in cells() if c["cell_type"] == "code")


@pytest.mark.parametrize("mine", [{"rung 9": 5, "rung 10": 3}, {"rung 9": 4, "rung 10": 2}, {"rung 9": 2, "rung 10": 9},
                                  {"rung 9": 3, "rung 10": 3}, {"rung 9": 4.0, "rung 10": 3}, "4 and 3"])
def test_a_wrong_ring_hears_neither_the_answer_nor_the_direction(mine):
    """With its own sums right, a wrong depth is told only that it is not the deepest that fits: a depth one too
    deep and one too shallow get the same words, so the messages cannot be bisected."""
    kb = ({r: hg.ring_bytes(r, n) / 1024 for r, n in mine.items() if isinstance(n, int)} if isinstance(mine, dict)
          else RIGHT_KB)
    verdict = hg.ring_verdict(mine, kb)
    assert verdict.startswith("Not yet")
    told = verdict.replace("227 KB", "")
    assert "deeper" not in told and "does not fit" not in told and "more than" not in told
    for rung, right in (("rung 9", 4), ("rung 10", 3)):
        if isinstance(mine, dict) and mine.get(rung) != right:
            assert f"{rung}: {right} stages" not in told and f"{rung}: {right} " not in told
    if mine in ({"rung 9": 5, "rung 10": 3}, {"rung 9": 3, "rung 10": 3}):
        assert re.sub(r"[35] stages", "N stages", verdict) == hg.ring_verdict(
            {"rung 9": 3, "rung 10": 3}, {"rung 9": hg.ring_bytes("rung 9", 3) / 1024, "rung 10": RIGHT_KB["rung 10"]}
        ).replace("3 stages", "N stages")


def test_a_ring_sum_that_is_not_the_readers_depth_is_not_yet():
    assert "is not what 4 stages" in hg.ring_verdict({"rung 9": 4, "rung 10": 3}, dict(RIGHT_KB, **{"rung 9": 192.0 + 5}))


# --- the record: 75's stores, the misses, the scoreboard ------------------------------------------

def test_75s_stores_are_read_with_their_sign():
    rec = fusion_record()  # fused 1.0 against its GEMM alone 0.97: +3.1% at both tiers
    assert fusion.epilogue_price(rec, 75) == pytest.approx({"strict": 100 * (1 / 0.97 - 1), "tf32": 100 * (1 / 0.97 - 1)})
    assert "costs more than the stores it saves" in fusion.stores_findings(rec)
    cheaper = fusion_record({(75, tier): {"eager": 3.0, tcr.COMPILE: 2.7, tcr.UNFUSED: 1.05, tcr.FUSED: 0.95,
                                          tcr.GEMM_ALONE: 0.97} for tier in tcr.TIERS})
    assert "outweigh the epilogue's arithmetic" in fusion.stores_findings(cheaper) and "-2.1%" in fusion.stores_findings(cheaper)
    assert fusion.stores_findings(fusion_record({(94, "strict"): {"eager": 3.0, tcr.FUSED: 1.0}})).startswith("(no problem 75")


def test_fusion_missed_lists_the_misses_of_the_table():
    text = ("PREDICTION: strict tier, plus 2-4% (the epilogue): 37 saves ~0.3 ms of ~3.0 (10%), 94/62/75 ~0.01 ms "
            "of ~1.1 (1%). TF32 tier: plus 3-6%: 37 saves ~0.3 ms of ~1.1 (25-30%); at 94/62/75 rung 9 is close, "
            "so they come out within +-5%.")
    missed = fusion.fusion_missed(fusion_record(), text)
    table = tcr.fusion_prediction_table(fusion_record(), text)
    assert "- problem 37, TF32 tier, the epilogue: predicted 3 to 6%, measured **-17.5%**, below" in missed
    assert "- problem 94, strict tier, the saving: predicted ~1%, measured **+4.8%**, above" in missed
    assert "the epilogue: predicted 2 to 4%, measured **+3.1%**" not in missed  # inside, as the table says
    assert ["94", "strict", "2-4%", "+3.1%", "inside"] in [[c.strip() for c in line.strip()[1:-1].split("|")][:5]
                                                            for line in table.splitlines() if line.startswith("|")]


def test_the_scoreboard_is_the_records_own_ratios():
    rec = fusion_record()
    board = fusion.scoreboard(rec)
    assert board[37][("strict", tcr.FUSED)] == pytest.approx(3.0 / 0.8)
    assert board[94][("tf32", "eager")] == pytest.approx(1.0)  # eager fp32 over eager with TF32 (the same here)
    table = fusion.scoreboard_table(rec)
    assert list(table.columns[:2]) == ["eager fp32 ms", "torch.compile, strict"]
    assert list(table.loc[37])[:4] == [3.0, "1.11x", "2.86x", "3.75x"]
    assert isinstance(fusion.scoreboard_figure(rec), Figure)


def test_the_scoreboard_cell_reads_the_record_the_table_above_it_reads():
    """Notebook 08 once showed a scoreboard recorded at another commit three cells after a table that said
    otherwise: the chapter's scoreboard is drawn from the whole-model run its table shows."""
    code = [text(c) for c in cells() if c["cell_type"] == "code"]
    table = next(i for i, c in enumerate(code) if "tcr.fusion_findings(FUSION)" in c)
    board = next(i for i, c in enumerate(code) if "scoreboard" in c)
    assert board > table and "fusion.scoreboard_figure(FUSION" in code[board] and 'FUSION["entries"]' in code[board]
    assert 'pd.DataFrame(FUSION["entries"])' in code[table]
    assert "scoreboard.show(" not in "\n".join(code)
    assert sum("FUSION, FUSION_MEASURED = S.recorded(tcr.FUSION_KIND)" in c for c in code) == 1


# --- links ----------------------------------------------------------------------------------------

def anchors(notebook) -> set[str]:
    """The ids Jupyter gives a notebook's headings: the text without inline code marks, spaces as '-'."""
    found = set()
    for cell in cells(notebook):
        if cell["cell_type"] == "markdown":
            found |= {m.strip().replace("`", "").replace(" ", "-") for m in re.findall(r"^#{1,6} (.+)$", text(cell), re.M)}
    return found


def links(markdown: str) -> list[str]:
    """Targets of [label](target) links, a target holding balanced parentheses as heading anchors do."""
    out, i = [], 0
    while (start := markdown.find("](", i)) != -1:
        depth, j = 1, start + 2
        while depth:
            depth += {"(": 1, ")": -1}.get(markdown[j], 0)
            j += 1
        out.append(markdown[start + 2:j - 1])
        i = j
    return out


@pytest.mark.parametrize("notebook", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.name[:2])
def test_every_link_to_a_notebook_lands_on_it_and_its_heading(notebook):
    prose = "\n".join(text(c) for c in cells(notebook) if c["cell_type"] == "markdown")
    for target in links(prose):
        if not re.match(r"[\w.]*\.ipynb", target) and not target.startswith("#"):
            continue
        name, _, anchor = target.partition("#")
        other = REPO / "notebooks" / (name or notebook.name)
        assert other.is_file(), f"{notebook.name} links to {name}, which is no notebook"
        assert not anchor or anchor in anchors(other), f"{notebook.name} links to #{anchor}, no heading of {other.name}"


# --- section 5: the wave sweep; the debrief's profile -----------------------------------------------

def code_cells() -> list[str]:
    return [text(c) for c in cells() if c["cell_type"] == "code"]


def test_the_sweep_is_measured_in_a_readable_cell_and_recorded_as_its_kind():
    sweep = next(c for c in code_cells() if "bench.time_interleaved(" in c and "SWEEP_NS" in c)
    assert 'results.record("sweep_waves"' in sweep and "reps=" in sweep
    plot = next(c for c in code_cells() if "plots.sweep(" in c)
    assert "floor=" in plot and "hg.wave_findings(" in plot  # the steps' text is computed from the data
    waves = next(c for c in code_cells() if "STEPS = " in c)
    assert "SMS" in waves and "cdiv" in waves


def test_wave_findings_say_where_the_steps_fall_from_the_data():
    rows = [{"N": n, "median_ms": 1.0 + 0.5 * (n >= 4352) + 0.5 * (n >= 8704), "tflops": 2.0 * n / 1000}
            for n in range(1024, 10000, 256)]
    text_ = hg.wave_findings([4352, 8704], [4352, 8704], rows, 132, 256)
    assert "new wave at N = 4352, 8704" in text_ and "2 of the 2 predicted boundaries" in text_
    assert "At N = 4352: 1.000 ms at N = 4096, 1.500 ms" in text_
    off = hg.wave_findings([4608], [4352], rows, 132, 256)
    assert "0 of the 1" in off and "not predict: 4608" in off and "without a measured step: 4352" in off
    assert "no clear step" in hg.wave_findings([], [4352], rows, 132, 256)


def test_profile_findings_are_generated_from_the_entries():
    entries = [{"kernel": "k", "metric": "DRAM throughput", "value": 11.0, "unit": "%"},
               {"kernel": "k", "metric": "tensor pipe utilization", "value": 71.5, "unit": "%"},
               {"kernel": "k", "metric": "achieved occupancy", "value": 18.6, "unit": "%"},
               {"kernel": "k", "metric": "shared memory bank conflicts", "value": 0, "unit": ""}]
    text_ = hg.profile_findings(entries)
    assert "tensor pipe utilization at 71.5% against DRAM throughput at 11.0%" in text_
    assert "18.75%" in text_ and "bank conflicts: 0: none" in text_
    swapped = hg.profile_findings([dict(entries[0], value=80.0), entries[1]])
    assert "memory is the busier" in swapped
    assert "none of the metrics" in hg.profile_findings([])


def test_profile_findings_read_the_kernel_the_time_goes_to():
    """Problem 94's strict forward launches the weight's split pass before the GEMM: the findings are the GEMM's
    (the longer), whatever order the entries come in, and a nonzero bank-conflict count is not called none."""
    def kernel(name, ms, dram, tensor, bank, loads):
        return [{"kernel": name, "metric": "gpu__time_duration.sum", "value": ms * 1e6, "unit": "ns"},
                {"kernel": name, "metric": "dram__throughput.avg.pct_of_peak_sustained_elapsed", "value": dram, "unit": "%"},
                {"kernel": name, "metric": "sm__pipe_tensor_cycles_active.avg.pct", "value": tensor, "unit": "%"},
                {"kernel": name, "metric": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "value": bank, "unit": ""},
                {"kernel": name, "metric": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "value": loads, "unit": ""}]
    split, gemm = kernel("residual_kernel", 0.14, 79.1, 0.0, 0, 0), kernel("gemm_wgmma_kernel", 1.23, 14.3, 95.7, 106503, 630791)
    for entries in (split + gemm, gemm + split):
        text_ = hg.profile_findings(entries)
        assert "at 95.7% against" in text_ and "14.3%" in text_ and "the tensor pipe is the busier" in text_
        assert "106,503" in text_ and "17% of its 630,791 shared-load wavefronts" in text_ and "none" not in text_


def test_the_profile_cell_reads_its_record_and_says_so_in_one_line_when_there_is_none():
    cell = next(c for c in code_cells() if 'S.recorded("profile")' in c)
    assert "whole model 94" in cell and "pd.DataFrame" in cell and "hg.profile_findings(" in cell
    assert "No Nsight Compute profile" in cell


# --- defects: the promised figure, no history in the reader's text ---------------------------------

def test_the_layout_promised_for_problem_75_follows():
    all_cells = cells()
    i = next(i for i, c in enumerate(all_cells) if " ".join(text(c).split()).endswith("The layout for problem 75 at the strict tier:"))
    assert all_cells[i + 1]["cell_type"] == "code" and "epilogue_figure(75" in text(all_cells[i + 1])


@pytest.mark.parametrize("notebook", [NB09, REPO / "notebooks" / "08_tensor_cores_and_precision.ipynb"], ids=lambda p: p.name[:2])
def test_no_history_in_the_chapter_or_the_kernel_text_it_renders(notebook):
    everything = "\n".join(text(c) for c in cells(notebook))
    rendered = re.findall(r'(?:show_kernel|show_excerpt|quote)\("([\w/]+(?:\.cuh)?)"', everything)
    sources = [everything] + [(REPO / "kernels" / (f if f.endswith(".cuh") else f + ".cu")).read_text() for f in set(rendered)]
    for body in sources:
        assert not re.search(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", body), "a commit hash"
        assert "the recording at" not in body and not re.search(r"\bissues? #\d+|/issues/\d+", body, re.I)
