"""Sweeps without Spark: grids checked before anything runs, run ids, one run of a task as the executors run
it, its verdicts against the in-process checkers, and the inspection that sets bad files aside."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.cli import main
from milvus_edu.events.schema import SCHEMA_VERSION
from milvus_edu.sweep import GridError, normalise_grid, run_specs
from milvus_edu.sweep.grid import dimensions
from milvus_edu.sweep.load import inspect_runs, report_set_aside
from milvus_edu.sweep.run import MARKER, build_tables, prepare_sweep_dir, run_one, verdicts_of

BAD_GRIDS = [
    ({}, "names no scenario"),
    ({"scenario": "no-such-scenario"}, "unknown scenario 'no-such-scenario'"),
    ({"scenario": []}, "empty list"),
    ({"scenario": "tso-basics", "switches": [["no_such_switch"]]}, "unknown bug switch 'no_such_switch'"),
    ({"scenario": "tso-basics", "options": {"proxies": [1, 2]}}, "has no option 'proxies'"),
    ({"scenario": ["timetick-basics", "tso-basics"], "options": {"proxies": [2]}}, "tso-basics has no option"),
    ({"scenario": "timetick-basics", "options": {"proxies": ["many"]}}, "option proxies takes a whole number"),
    ({"scenario": "tso-basics", "params": {"timetick.time_tick_interval_ns": [1]}}, "does not exercise timetick"),
    ({"scenario": "tso-basics", "params": {"tso.no_such_param": [1]}}, "unknown parameter 'tso.no_such_param'"),
    ({"scenario": "tso-basics", "params": {"tso.max_logical": [0]}}, "tso.max_logical"),
    ({"scenario": "tso-basics", "seeds": 0}, "seeds"),
    ({"scenario": "tso-basics", "seeds": "9-3"}, "is not a range"),
    ({"scenario": "tso-basics", "seeds": [1, -2]}, "seeds"),
    ({"scenario": "tso-basics", "seeds": [1, 1]}, "twice"),
    ({"scenario": "tso-basics", "duration_s": -1}, "duration_s"),
    ({"scenario": "tso-basics", "colour": "blue"}, "unknown grid key 'colour'"),
    ({"scenario": "tso-basics", "seed": 3}, "unknown grid key 'seed' (did you mean 'seeds'?)"),  # the usual typo
]


@pytest.mark.parametrize("grid, needle", BAD_GRIDS, ids=[n for _, n in BAD_GRIDS])
def test_a_bad_grid_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, grid, needle):
    with pytest.raises(GridError, match=re.escape(needle)):
        normalise_grid(grid)
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(grid))
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_yaml_grid_reads_like_its_json_twin(tmp_path):
    (tmp_path / "g.yaml").write_text("scenario: [tso-basics]\nseeds: 1-3\nswitches: [[], [tso_no_window_save]]\n")
    (tmp_path / "g.json").write_text(json.dumps({"scenario": "tso-basics", "seeds": [1, 2, 3],
                                                 "switches": [[], ["tso_no_window_save"]]}))
    assert normalise_grid(tmp_path / "g.yaml") == normalise_grid(str(tmp_path / "g.json"))


def test_a_broken_grid_file_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "g.json").write_text("{\"scenario\": ")
    assert main(["sweep", str(tmp_path / "g.json"), "--out", str(tmp_path / "out")]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


def test_a_folder_of_another_grid_is_refused_and_left_as_it_was(tmp_path, capsys):
    out = tmp_path / "out"
    prepare_sweep_dir(out, normalise_grid({"scenario": "tso-basics", "seeds": 2}))
    before = (out / "grid.json").read_bytes()
    (tmp_path / "g.json").write_text(json.dumps({"scenario": "tso-basics", "seeds": 3}))
    assert main(["sweep", str(tmp_path / "g.json"), "--out", str(out)]) == 2
    assert "holds the sweep of another grid" in capsys.readouterr().err
    assert (out / "grid.json").read_bytes() == before and sorted(p.name for p in out.iterdir()) == ["grid.json", "runs"]


def test_an_out_folder_spark_would_read_as_a_pattern_is_refused(tmp_path):
    with pytest.raises(GridError, match="as a pattern"):
        prepare_sweep_dir(tmp_path / "local[2]", normalise_grid({"scenario": "tso-basics"}))
    assert not (tmp_path / "local[2]").exists()


def test_a_non_empty_folder_without_a_grid_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(GridError, match="holds no sweep"):
        prepare_sweep_dir(tmp_path, normalise_grid({"scenario": "tso-basics"}))
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_run_ids_name_options_and_params_and_the_dimensions_are_what_varies():
    grid = normalise_grid({"scenario": "timetick-basics", "seeds": "1-2", "options": {"proxies": [1, 2]},
                           "params": {"timetick.time_tick_interval_ns": [100_000_000]}})
    ids = [s["run_id"] for s in run_specs(grid)]
    assert ids[0] == "timetick-basics-s1+opt.proxies=1+param.timetick.time_tick_interval_ns=100000000"
    assert len(set(ids)) == 4
    assert dimensions(grid) == ["seed", "opt_proxies"]
    # without options or params a run keeps the simulator's own id
    plain = normalise_grid({"scenario": "tso-basics", "seeds": [4], "switches": [["tso_no_window_save"]]})
    assert [s["run_id"] for s in run_specs(plain)] == ["tso-basics-s4+tso_no_window_save"]


def test_run_ids_do_not_depend_on_the_order_a_grid_lists_its_options():
    """grid.json is written with sorted keys and load_sweep rebuilds the ids from it: a grid listing
    workload_s before rpc_failure_rate once gave ids no run folder had, and every run was set aside."""
    listed = {"scenario": "checkpoint-rpc-failures", "seeds": [1], "options": {"workload_s": [8.0],
                                                                             "rpc_failure_rate": [0.0, 0.5]}}
    normal = normalise_grid(listed)
    reread = normalise_grid(json.loads(json.dumps(normal, sort_keys=True)))
    assert [s["run_id"] for s in run_specs(normal)] == [s["run_id"] for s in run_specs(reread)]
    assert run_specs(normal)[0]["run_id"].index("rpc_failure_rate") < run_specs(normal)[0]["run_id"].index("workload_s")


@given(seeds=st.lists(st.integers(0, 10_000), min_size=1, max_size=6, unique=True),
       proxies=st.lists(st.integers(1, 9), min_size=1, max_size=3, unique=True),
       rates=st.lists(st.floats(1.0, 5000.0, allow_nan=False), min_size=1, max_size=3, unique=True),
       switch_sets=st.sampled_from([[[]], [[], ["allocate_outside_enqueue_lock"]]]))
def test_a_grid_runs_its_cartesian_product_once_each_with_safe_unique_ids(seeds, proxies, rates, switch_sets):
    grid = {"scenario": ["timetick-basics", "timetick-proxy-stall"], "seeds": seeds, "switches": switch_sets,
            "options": {"proxies": proxies, "inserts_per_s": rates}}
    try:
        specs = run_specs(normalise_grid(grid))
    except GridError as exc:  # two rates that print alike are refused, never merged
        assert "share the id" in str(exc)
        return
    assert len(specs) == 2 * len(seeds) * len(switch_sets) * len(proxies) * len(rates)
    ids = [s["run_id"] for s in specs]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9._=+-]+", i) for i in ids)
    combos = {(s["scenario"], s["seed"], tuple(s["switches"]), s["options"]["proxies"], s["options"]["inserts_per_s"])
              for s in specs}
    assert len(combos) == len(specs)


def test_a_task_writes_parquet_only_a_marker_and_the_checkers_verdicts(tmp_path):
    # tso-pause seed 3 breaks global-monotonic with the faithful rules: the scenario's documented gap
    spec = run_specs(normalise_grid({"scenario": "tso-pause", "seeds": [3]}))[0]
    record = run_one(spec, str(tmp_path))
    folder = tmp_path / spec["run_id"]
    assert sorted(p.name for p in folder.iterdir()) == ["events.parquet", MARKER, "summary.json"]
    assert json.loads((folder / MARKER).read_text()) == record
    assert record["status"] == "ok" and pq.ParquetFile(folder / "events.parquet").metadata.num_rows == record["events"]
    in_process = milvus_edu.simulate("tso-pause", seed=3, keep_events=False).summary["checks"]
    table = {v["check"]: v for v in record["verdicts"]}
    assert set(table) == set(in_process["invariants"])
    for check, row in table.items():
        n = in_process["violation_counts"][check]
        assert row["violations"] == n
        assert row["verdict"] == ("fail" if n else "vacuous" if check in in_process["vacuous"]["tso"] else "pass")
    assert table["global-monotonic"]["verdict"] == "fail" and table["global-monotonic"]["expected"]
    assert table["global-monotonic"]["explanation"] == in_process["violations"][0]["explanation"]
    # a run already marked complete is read back, not run again
    mtime = (folder / "events.parquet").stat().st_mtime_ns
    assert run_one(spec, str(tmp_path)) == record and (folder / "events.parquet").stat().st_mtime_ns == mtime


def test_a_run_rerun_after_a_kill_removes_only_the_half_written_files_of_the_sweep(tmp_path):
    # a sweep killed between writing a marker's temporary file and renaming it leaves the file behind;
    # the run is unfinished (no marker), so the next sweep runs it again and must not leave the temp file
    spec = run_specs(normalise_grid({"scenario": "tso-basics", "seeds": [1], "duration_s": 0.5}))[0]
    folder = tmp_path / spec["run_id"]
    folder.mkdir()
    (folder / f".{MARKER}.tmp-12940").write_text("{")
    (folder / ".notes.tmp-x").write_text("a user's file")
    (folder / "mine.tmp-1").write_text("a user's file")
    record = run_one(spec, str(tmp_path))
    assert record["status"] == "ok"
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([".notes.tmp-x", "events.parquet", MARKER, "mine.tmp-1", "summary.json"])


def test_a_run_that_raises_is_an_error_row_not_the_end_of_the_sweep(tmp_path):
    grid = normalise_grid({"scenario": "timetick-basics", "options": {"proxies": [0, 1]}, "duration_s": 0.2})
    records = {s["run_id"]: run_one(s, str(tmp_path)) for s in run_specs(grid)}
    runs, verdicts = build_tables(grid, records)
    rows = runs.to_pylist()
    assert [r["status"] for r in rows] == ["error", "ok"]
    assert rows[0]["error"].startswith("ValueError: ") and "\n" not in rows[0]["error"]
    assert rows[0]["events"] is None and rows[1]["events"] > 0 and rows[1]["opt_proxies"] == 1.0
    assert set(verdicts.column("run_id").to_pylist()) == {rows[1]["run_id"]}


def test_unverdicted_checks_follow_the_checkers_vacuous_lists():
    summary = milvus_edu.simulate("tso-basics", seed=1, duration_s=1.0, keep_events=False).summary
    rows = verdicts_of(summary)
    vacuous = {c for names in summary["checks"]["vacuous"].values() for c in names}
    assert {r["check"] for r in rows if r["verdict"] == "vacuous"} == vacuous
    assert not any(r["expected"] for r in rows)  # tso-basics declares no gap


def test_bad_files_in_a_sweep_folder_are_set_aside_by_file_and_never_touched(tmp_path):
    grid = normalise_grid({"scenario": "tso-basics", "seeds": 4, "duration_s": 1.0})
    prepare_sweep_dir(tmp_path, grid)
    specs = run_specs(grid)
    for spec in specs[:3]:  # the fourth stays unfinished
        run_one(spec, str(tmp_path / "runs"))
    runs = tmp_path / "runs"
    truncated = runs / specs[0]["run_id"] / "events.parquet"
    truncated.write_bytes(truncated.read_bytes()[:200])
    summary = runs / specs[1]["run_id"] / "summary.json"
    data = json.loads(summary.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    summary.write_text(json.dumps(data))
    pq.write_table(pq.read_table(truncated.parent.parent / specs[2]["run_id"] / "events.parquet").select(["seq"]),
                   runs / "foreign.parquet")
    before = {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()}
    good, failed, aside, unfinished = inspect_runs(tmp_path, grid)
    assert good == [specs[2]["run_id"]] and failed == [] and unfinished == [specs[3]["run_id"]]
    assert {(a.path, a.kind) for a in aside} == {(truncated, "truncated"), (summary.parent, "version"),
                                                 (runs / "foreign.parquet", "stray")}
    lines = report_set_aside(tmp_path, aside)
    assert lines[0].startswith("set aside 3 files") and "1 truncated or not Parquet" in lines[0]
    assert all(any(str(a.path) in line for line in lines[1:]) for a in aside)
    assert {p: p.read_bytes() for p in runs.rglob("*") if p.is_file()} == before


def test_progress_counts_finished_and_failed_runs_from_the_markers(tmp_path, monkeypatch):
    import IPython
    import IPython.display

    from milvus_edu.sweep.run import _Progress

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: type("Kernel", (), {"kernel": object()})())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    grid = normalise_grid({"scenario": "timetick-basics", "options": {"proxies": [0, 1, 2]}, "duration_s": 0.2})
    specs = run_specs(grid)
    run_one(specs[2], str(tmp_path))  # done before this sweep
    progress = _Progress(tmp_path, [s["run_id"] for s in specs[:2]], len(specs), show=True)
    with progress:
        for spec in specs[:2]:
            run_one(spec, str(tmp_path))
    bar, label = progress._widget
    assert len(shown) == 1 and (bar.value, bar.max) == (3, 3)
    assert "3/3 runs (1 already done), 1 failed" in label.value and label.value.endswith("runs/min")
