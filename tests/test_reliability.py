"""Reliability at scale, small: the documented sweep's grids (milvus_edu/sweep/grids/) at 1 seed per scenario and per
switch, as CI runs them, and the book's page of the full tables.

The slow tests sweep seed 1 of every grid on the shared local[2] Spark session (43 runs, each scenario at its
own length: a grid's ``duration_s`` applies to every scenario of the grid, and the DataNode scenarios crash or
flush at fixed times up to 30 s in, so none is shortened) and assert: no violation outside a documented gap, every
switch caught at seed 1 (as in the book's 20-seed tables), the one switch that changes no answer caught
by none, and the vacuous checks reported. The quick tests check the grid files and the page's structure.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from milvus_edu.config import BugSwitches
from milvus_edu.registry import get_scenario, scenarios
from milvus_edu.sweep import normalise_grid

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "reliability.md"
SEEDS = 1  # seed 1 catches every switch (book/reliability.md); the suite stays within its 10 minutes


def _driver():
    """benchmarks/reliability.py as a module (benchmarks/ is not a package)."""
    if "reliability" not in sys.modules:
        spec = importlib.util.spec_from_file_location("reliability", ROOT / "benchmarks" / "reliability.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["reliability"] = module  # dataclasses look their module up here
        spec.loader.exec_module(module)
    return sys.modules["reliability"]


rel = _driver()


# ---- the grid files (quick) ------------------------------------------------------------------------------------
def test_the_scenario_grid_is_every_scenario_but_workload_times_1000_seeds_without_a_switch():
    folder, grid = rel.grids()[0]
    normal = normalise_grid(grid)
    assert folder == "scenarios"
    assert sorted(normal["scenario"]) == sorted(n for n in scenarios() if n != "workload"), (
        "milvus_edu/sweep/grids/reliability-scenarios.json lists every scenario but `workload`: add a new lesson's "
        "scenarios there (book/design.md, Adding a lesson)")
    assert normal["seeds"] == list(range(1, 1001)) and normal["switches"] == [[]]


def test_the_switch_grids_give_every_switch_200_seeds_in_the_scenario_its_lab_breaks():
    switch_grids = rel.grids()[1:]
    named = set()
    for folder, grid in switch_grids:
        normal = normalise_grid(grid)
        assert folder == f"switches/{grid['scenario']}" and normal["seeds"] == list(range(1, 201))
        assert normal["duration_s"] is None and not normal["options"] and not normal["params"]
        named |= {s for switch_set in normal["switches"] for s in switch_set}
        assert not get_scenario(grid["scenario"]).gap  # a caught switch is then never a gap's failure
    assert named == set(BugSwitches.names())
    pairs = {(g["scenario"], ",".join(s)) for _, g in switch_grids for s in g["switches"]}
    assert set(rel.NOT_CAUGHT) <= pairs
    # the labs' "break it" choices, where a switch is taught in several scenarios
    assert {("delete-then-read", "update_tsafe_before_delete"), ("tso-basics", "tso_no_window_save"),
            ("flush-ts-boundary", "reset_flush_ts_inclusive")} <= pairs


def test_seeds_overrides_every_grid_and_refuses_zero():
    assert {g["seeds"] for _, g in rel.grids(2)} == {"1-2"}
    with pytest.raises(ValueError, match="at least 1"):
        rel.grids(0)


# ---- the book's page (quick: its size and structure; the numbers come from the committed run) -------------------
def _block() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert text.count(rel.BEGIN) == 1 and text.count(rel.END) == 1
    return text.split(rel.BEGIN, 1)[1].split(rel.END, 1)[0]


def _table(block: str, header: str) -> list[list[str]]:
    """The rows (without the header and rule) of the Markdown table whose header starts with ``header``."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_page_sits_next_to_the_sweeps_page_and_states_its_size():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert files[files.index("sweeps") + 1] == "reliability"
    text = PAGE.read_text(encoding="utf-8")
    block = _block()
    size = re.search(r"with \*\*(\d+) seeds per scenario\*\* and \*\*(\d+) seeds per switch\*\*: ([\d,]+) runs", block)
    assert size, "the generated block states its size"
    per_scenario, per_switch, runs = int(size[1]), int(size[2]), int(size[3].replace(",", ""))
    switch_sets = sum(len(g["switches"]) for _, g in rel.grids()[1:])
    assert runs == per_scenario * len(rel.grids()[0][1]["scenario"]) + per_switch * switch_sets
    assert f"{per_scenario} seeds" in text.split(rel.BEGIN)[0]  # the prose says the size too
    assert "python benchmarks/reliability.py --out" in text  # the command for the full size


def test_the_page_has_the_three_tables_with_a_row_per_scenario_and_switch():
    block = _block()
    per_scenario = int(re.search(r"\*\*(\d+) seeds per scenario", block)[1])
    per_switch = int(re.search(r"\*\*(\d+) seeds per switch", block)[1])
    violations = _table(block, "| scenario | runs | runs with a violation")
    assert sorted(r[0].strip("`") for r in violations) == sorted(rel.grids()[0][1]["scenario"])
    for r in violations:
        assert int(r[1]) == per_scenario and int(r[2]) == 0, r  # no violation outside a gap
        assert (r[3] == "yes") == bool(get_scenario(r[0].strip("`")).gap)
    detection = _table(block, "| switch | scenario | seeds caught")
    assert len(detection) == sum(len(g["switches"]) for _, g in rel.grids()[1:])
    assert all(re.match(rf"\d+ of {per_switch} ", r[2]) for r in detection)
    vacuous = _table(block, "| scenario | runs | vacuous checks")
    assert vacuous and all(r[0].strip("`") in scenarios() for r in vacuous)


# ---- the sweep, small (slow) -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small(spark, tmp_path_factory):
    result = rel.run(tmp_path_factory.mktemp("reliability"), SEEDS, spark=spark, progress=False)
    return result, rel.tables(result)


@pytest.mark.slow
@pytest.mark.spark
def test_every_run_of_the_small_sweep_ran(small):
    result, t = small
    assert t["errors"].empty
    assert result.runs.count() == SEEDS * len(rel.grids()[0][1]["scenario"])
    assert result.switch_runs.count() == SEEDS * sum(len(g["switches"]) for _, g in rel.grids()[1:])
    assert (result.scenario_seeds, result.switch_seeds) == (SEEDS, SEEDS)


@pytest.mark.slow
@pytest.mark.spark
def test_no_violation_outside_a_documented_gap(small):
    _, t = small
    v = t["violations"]
    assert len(v) == len(rel.grids()[0][1]["scenario"])
    assert v.failed_runs.sum() == 0 and v.violations.sum() == 0, v[v.failed_runs > 0]
    assert not v[~v.gap].gap_runs.any()
    stuck = v.set_index("scenario").loc["flush-stuck-memory-sync"]
    assert stuck.gap_runs == SEEDS and stuck.failed_checks == f"flush-completes ({SEEDS})"  # its gap, on every seed swept


@pytest.mark.slow
@pytest.mark.spark
def test_every_switch_is_caught_on_seeds_1_and_2_except_the_one_that_changes_no_answer(small):
    _, t = small
    d = t["detection"].set_index(["scenario", "switches"])
    for pair, row in d.iterrows():
        if pair in rel.NOT_CAUGHT:
            assert row.detected == 0, pair
        else:
            assert row.detected >= 1 and row.first_seed == 1, pair
    # known pairs: the switch and the check its lab names
    assert "watermark" in d.loc[("timetick-unlocked-enqueue", "allocate_outside_enqueue_lock")].caught_by
    assert "mvcc-exact" in d.loc[("delete-then-read", "update_tsafe_before_delete")].caught_by
    assert "global-monotonic" in d.loc[("tso-failover", "tso_skip_load_on_init")].caught_by
    assert rel.problems(t) == []


@pytest.mark.slow
@pytest.mark.spark
def test_the_vacuous_checks_are_reported_per_scenario_and_check(small):
    result, t = small
    vac = t["vacuous"]
    counted = result.verdicts.filter("verdict = 'vacuous'").count()
    assert vac.vacuous.sum() == counted > 0
    assert set(vac.columns) == {"scenario", "mechanism", "check", "runs", "vacuous"}
    # two the sweep of seed 1 finds vacuous
    pairs = set(zip(vac.scenario, vac.check))
    assert {("seed-example", "bounded-staleness"), ("seed-example", "pack-exact")} <= pairs
    assert "| `seed-example` |" in rel.markdown(t, result, "local[2]")


@pytest.mark.slow
@pytest.mark.spark
def test_the_checks_fail_when_a_switch_goes_uncaught_or_a_run_breaks_a_promise(small):
    """The assertions above can fail: the same tables with one switch no longer caught, one scenario with a
    violation outside its gap and the P23 switch caught are each reported, by name."""
    _, t = small
    doctored = {k: (v.copy() if isinstance(v, pd.DataFrame) else v) for k, v in t.items()}
    d = doctored["detection"]
    d.loc[d.switches == "allocate_outside_enqueue_lock", "detected"] = 0
    d.loc[d.switches == "reset_flush_ts_inclusive", "detected"] = 1
    v = doctored["violations"]
    v.loc[v.scenario == "tso-basics", "failed_runs"] = 1
    found = rel.problems(doctored)
    assert len(found) == 3
    assert any(line.startswith("allocate_outside_enqueue_lock in timetick-unlocked-enqueue: no seed") for line in found)
    assert any(line.startswith("reset_flush_ts_inclusive in flush-ts-boundary: caught") for line in found)
    assert any(line.startswith(f"tso-basics: 1 of {SEEDS} runs broke a check") for line in found)
