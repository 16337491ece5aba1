"""Sweeps as Spark jobs: a small sweep's tables, a sweep killed with SIGKILL and resumed, files set aside
when loading, and the same sweep on a real Spark standalone cluster (a master and a 2-core worker started
from the pyspark installation) giving the tables of a local[2] run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import milvus_edu
from milvus_edu.events.schema import SCHEMA_VERSION
from milvus_edu.sweep import StandaloneCluster, load_sweep, run_specs, run_sweep
from milvus_edu.sweep.run import MARKER

ROOT = Path(__file__).resolve().parents[1]
# 2 scenarios x 3 seeds x 2 switch sets; tso-pause shows its gap (global-monotonic) in some seeds
SMALL = {"scenario": ["tso-pause", "timetick-basics"], "seeds": 3,
         "switches": [[], ["allocate_outside_enqueue_lock"]], "duration_s": 2.0}


def _table(path: Path, sort: list[str]) -> list[dict]:
    """A table's rows, sorted, without the wall-clock column."""
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        r.pop("wall_s", None)
    return sorted(rows, key=lambda r: [str(r[k]) for k in sort])


def _tables(out: Path) -> tuple[list[dict], list[dict]]:
    return (_table(out / "tables" / "runs.parquet", ["run_id"]),
            _table(out / "tables" / "verdicts.parquet", ["run_id", "mechanism", "check"]))


def _cli(*args: str, tmpdir: Path | None = None, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if tmpdir is not None:  # the driver's own temporary folder, to see what it leaves there
        env["TMPDIR"] = str(tmpdir)
    return subprocess.Popen([sys.executable, "-m", "milvus_edu.cli", "sweep", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.fixture(scope="module")
def small(spark, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "small"
    return run_sweep(SMALL, out, spark=spark, progress=False)


@pytest.mark.spark
def test_a_small_sweep_gives_one_row_per_run_and_per_check(small):
    runs = small.runs.orderBy("run_id").collect()
    assert len(runs) == 12 and all(r.status == "ok" and r.error is None for r in runs)
    assert small.runs.columns == ["run_id", "scenario", "seed", "switches", "status", "error", "events", "sim_s",
                                  "wall_s"]
    assert {r.switches for r in runs} == {"", "allocate_outside_enqueue_lock"}
    assert small.dimensions == ["scenario", "seed", "switches"]
    checks = {"tso-pause": 3, "timetick-basics": 7}  # the checks of each scenario's mechanisms
    assert small.verdicts.count() == sum(checks[r.scenario] for r in runs)
    assert {r.verdict for r in small.verdicts.select("verdict").distinct().collect()} <= {"pass", "fail", "vacuous"}
    by_run = {r.run_id: r.events for r in runs}
    counted = {r.run_id: r["count"] for r in small.events.groupBy("run_id").count().collect()}
    assert counted == by_run
    assert sorted(p.name for p in (small.out / "runs" / runs[0].run_id).iterdir()) == [
        "events.parquet", MARKER, "summary.json"]


@pytest.mark.spark
def test_the_verdicts_table_equals_the_in_process_checkers_on_a_sample(small):
    table = {(r.run_id, r.check): r for r in small.verdicts.collect()}
    for spec in run_specs(json.loads((small.out / "grid.json").read_text()))[::3]:
        checks = milvus_edu.simulate(spec["scenario"], seed=spec["seed"], duration_s=spec["duration_s"],
                                     switches=spec["switches"], keep_events=False).summary["checks"]
        vacuous = {c for names in checks["vacuous"].values() for c in names}
        for check in checks["invariants"]:
            row = table[(spec["run_id"], check)]
            n = checks["violation_counts"][check]
            assert (row.verdict, row.violations) == ("fail" if n else "vacuous" if check in vacuous else "pass", n)
            assert row.expected == (spec["scenario"] == "tso-pause" and row.mechanism == "tso")


@pytest.mark.spark
def test_sweeping_the_same_grid_again_runs_nothing_and_gives_the_same_tables(small, spark):
    markers = {p: p.stat().st_mtime_ns for p in (small.out / "runs").glob(f"*/{MARKER}")}
    before = _tables(small.out)
    again = run_sweep(SMALL, small.out, spark=spark, progress=False)
    assert {p: p.stat().st_mtime_ns for p in (small.out / "runs").glob(f"*/{MARKER}")} == markers
    assert _tables(again.out) == before


@pytest.mark.spark
def test_a_sweep_killed_mid_way_resumes_to_the_tables_of_an_uninterrupted_one(spark, tmp_path):
    # 120 runs: enough for the kill to land mid-way (a 1,000-run sweep killed and resumed is issue 22's note)
    grid = {"scenario": "tso-basics", "seeds": "1-120", "duration_s": 2.0}
    (tmp_path / "grid.json").write_text(json.dumps(grid))
    out = tmp_path / "killed"
    proc = _cli(str(tmp_path / "grid.json"), "--out", str(out), "--master", "local[2]", start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob(f"runs/*/{MARKER}"))) < 20:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the JVM it started: its own process group
        proc.wait()
    # pyspark's Python workers sit in a process group of their own: one may finish the run it was in before
    # it notices the JVM is gone. Wait for the markers to stop coming, as a user re-running later would.
    count, still = -1, 0
    while still < 10:
        now = len(list(out.glob(f"runs/*/{MARKER}")))
        still = still + 1 if now == count else 0
        count = now
        time.sleep(0.2)
    done_before = {p.parent.name: p.stat().st_mtime_ns for p in out.glob(f"runs/*/{MARKER}")}
    assert 20 <= len(done_before) < 120 and not (out / "tables").exists()
    resumed = run_sweep(tmp_path / "grid.json", out, spark=spark, progress=False)
    assert {n: (out / "runs" / n / MARKER).stat().st_mtime_ns for n in done_before} == done_before
    assert resumed.set_aside == [] and resumed.unfinished == []
    clean = run_sweep(grid, tmp_path / "clean", spark=spark, progress=False)
    assert _tables(resumed.out) == _tables(clean.out)
    assert len(_tables(clean.out)[0]) == 120


@pytest.mark.spark
def test_loading_sets_bad_files_aside_reports_them_and_leaves_them_in_place(small, spark, tmp_path, capsys):
    out = tmp_path / "copy"
    shutil.copytree(small.out, out)
    specs = run_specs(json.loads((out / "grid.json").read_text()))
    cut = out / "runs" / specs[0]["run_id"] / "events.parquet"
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    summary = out / "runs" / specs[1]["run_id"] / "summary.json"
    data = json.loads(summary.read_text())
    data["schema_version"] = SCHEMA_VERSION - 1
    summary.write_text(json.dumps(data))
    foreign = out / "runs" / specs[2]["run_id"] / "events.parquet"
    pq.write_table(pq.read_table(foreign).select(["seq", "kind"]), foreign)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    loaded = load_sweep(out, spark=spark)
    printed = capsys.readouterr().out
    assert {a.kind for a in loaded.set_aside} == {"truncated", "version", "foreign"}
    assert "set aside 3 files" in printed and all(str(a.path) in printed for a in loaded.set_aside)
    gone = {s["run_id"] for s in specs[:3]}
    assert {r.run_id for r in loaded.runs.collect()} == {s["run_id"] for s in specs} - gone
    assert {r.run_id for r in loaded.events.select("run_id").distinct().collect()}.isdisjoint(gone)
    assert {r.run_id for r in loaded.verdicts.select("run_id").distinct().collect()}.isdisjoint(gone)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.spark
def test_the_same_sweep_on_a_standalone_cluster_gives_the_local_tables(small, tmp_path):
    (tmp_path / "grid.json").write_text(json.dumps(SMALL))
    cluster = StandaloneCluster(cores=2, memory="1g", log_dir=tmp_path / "cluster")
    pids = []
    try:
        master = cluster.start()
        pids = cluster.pids
        assert master.startswith("spark://127.0.0.1:") and len(pids) == 2
        driver_tmp = tmp_path / "driver-tmp"
        driver_tmp.mkdir()
        proc = _cli(str(tmp_path / "grid.json"), "--out", str(tmp_path / "remote"), "--master", master,
                    tmpdir=driver_tmp)
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        assert "12 runs ok, 0 failed" in stdout
    finally:
        cluster.stop()
    assert pids and all(_gone(pid) for pid in pids)
    assert _tables(tmp_path / "remote") == _tables(small.out)
    # the package zip the executors fetched from the driver went with the driver (sweep.run.ship_package)
    assert not list(driver_tmp.rglob("milvus_edu.zip"))
