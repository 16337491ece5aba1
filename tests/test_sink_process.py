"""The sinks run in a second process give exactly what they give in process.

``simulate`` writes the run folder and runs the checkers and summaries in a forked child when it
writes a folder (``sink_process=None``, :mod:`milvus_edu.events.worker`). These tests run real
scenarios of every mechanism both ways and compare the files byte for byte and the summaries, and
check that a failing sink, a failing run and a sink that wants rows one at a time behave.
"""

import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import milvus_edu
from milvus_edu.events import MemorySink, Recorder
from milvus_edu.events import worker
from milvus_edu.events.worker import SinkProcess, SinkProcessError
from milvus_edu.sim import run as run_module
from milvus_edu.sim.kernel import Simulation

#: (scenario, simulated seconds, switches): every mechanism, a failover, a bug switch, violations found.
RUNS = [
    ("tso-failover", 40.0, []),
    ("timetick-basics", 3.0, []),
    ("timetick-unlocked-enqueue", 3.0, ["allocate_outside_enqueue_lock"]),
    ("flush-basics", None, []),
    ("insert-then-search", None, []),
]


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "duration_s", "switches"), RUNS)
def test_a_sink_process_writes_the_same_run_folder_as_in_process(tmp_path, scenario, duration_s, switches):
    home = milvus_edu.simulate(scenario, seed=3, duration_s=duration_s, switches=switches, out_dir=tmp_path / "home",
                               sink_process=False, keep_events=False)
    away = milvus_edu.simulate(scenario, seed=3, duration_s=duration_s, switches=switches, out_dir=tmp_path / "away",
                               sink_process=True, keep_events=False)
    assert home.summary["events"] > 100
    for name in ("events.parquet", "events.jsonl", "summary.json"):
        assert (tmp_path / "home" / name).read_bytes() == (tmp_path / "away" / name).read_bytes(), name
    assert away.summary == home.summary


def test_the_default_uses_a_sink_process_only_when_a_folder_is_written(tmp_path, monkeypatch):
    started = []
    real = worker.SinkProcess

    def spy(*args, **kwargs):
        started.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(worker, "SinkProcess", spy)
    milvus_edu.simulate("tso-basics", seed=1, duration_s=2)
    assert started == []
    milvus_edu.simulate("tso-basics", seed=1, duration_s=2, out_dir=tmp_path / "r")
    assert len(started) == 1
    assert multiprocessing.active_children() == []


def test_kept_events_and_a_sink_process_go_together(tmp_path):
    run = milvus_edu.simulate("timetick-basics", seed=2, duration_s=1, out_dir=tmp_path / "r", keep_events=True,
                              sink_process=True)
    assert run.kept and len(run.rows) == run.summary["events"]
    assert run.events["seq"].tolist() == milvus_edu.load_run(tmp_path / "r")["seq"].tolist()


def test_sink_process_true_where_fork_is_missing_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(worker, "available", lambda: False)
    with pytest.raises(ValueError, match="needs a platform that can fork"):
        milvus_edu.simulate("tso-basics", seed=1, duration_s=1, out_dir=tmp_path / "r", sink_process=True)
    # the default falls back to the sinks in process
    run = milvus_edu.simulate("tso-basics", seed=1, duration_s=1, out_dir=tmp_path / "s")
    assert run.summary["checks"]["ok"] and (tmp_path / "s" / "events.parquet").is_file()


class Exploding:
    """A sink that fails on its third batch."""

    def __init__(self):
        self.batches = 0

    def write_batch(self, batch):
        self.batches += 1
        if self.batches == 3:
            raise OSError("No space left on device")

    def close(self):
        pass


def test_a_failing_sink_stops_the_run_soon_with_the_same_exception():
    process = SinkProcess(factories=[Exploding])
    rec = Recorder("r", sinks=[process], batch_rows=10)
    emit = rec.emitter("proxy.finish", "ts", "channel")
    with pytest.raises(OSError, match="No space left on device") as caught:
        for i in range(100_000):  # 10,000 batches: the error must come long before the end
            emit("p", i, "c")
    assert rec.seq < 100_000
    assert any("sink process" in note and "raise OSError" in note for note in caught.value.__notes__)
    assert process.exitcode == 0
    rec.sinks.clear()  # the recorder may be closed afterwards without the failed sink


def test_a_sink_that_cannot_open_is_reported_with_its_own_exception(tmp_path):
    def cannot_open():
        raise PermissionError(f"cannot write {tmp_path}")

    process = SinkProcess(factories=[cannot_open])
    rec = Recorder("r", sinks=[process], batch_rows=4)
    with pytest.raises(PermissionError, match="cannot write"):
        for i in range(10):
            rec.emit("proxy.finish", "p", ts=i)
        rec.close()


def test_a_killed_sink_process_is_a_clear_error_not_a_hang():
    process = SinkProcess(kept=[Rows()])
    rec = Recorder("r", sinks=[process], batch_rows=10)
    os.kill(process._process.pid, signal.SIGKILL)
    with pytest.raises(SinkProcessError, match=r"ended before the run did \(exit code -9\)"):
        for i in range(10_000):
            rec.emit("proxy.finish", "p", ts=i)
        rec.close()


def test_checkers_that_do_not_pickle_give_a_clear_error_and_the_files():
    class Unpicklable(Rows):
        def __init__(self):
            super().__init__()
            self.key = lambda row: row["seq"]

    process = SinkProcess(kept=[Unpicklable()])
    rec = Recorder("r", sinks=[process], batch_rows=10)
    for i in range(25):
        rec.emit("proxy.finish", "p", ts=i)
    with pytest.raises(SinkProcessError, match="could not be sent back.*picklable"):
        rec.close()


@pytest.mark.slow
def test_the_sink_process_ends_when_its_parent_is_killed(tmp_path):
    script = ("import sys, time\n"
              "from milvus_edu.events.worker import SinkProcess\n"
              "p = SinkProcess()\n"
              "print(p._process.pid, flush=True)\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _running(child):
        time.sleep(0.05)
    assert not _running(child), "the orphaned sink process kept waiting for batches"


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, never reaped in a container without an init, has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Rows:
    """A row sink (no write_batch) of some kinds, like the flush and query summaries."""

    kinds = {"proxy.finish"}

    def __init__(self):
        self.rows = []

    def write(self, row):
        self.rows.append(row)

    def close(self):
        pass


def test_a_short_default_run_forks_no_child_and_writes_the_same_folder(tmp_path, monkeypatch):
    forked = []
    real = SinkProcess._start

    def spy(self):
        forked.append(self)
        return real(self)

    monkeypatch.setattr(SinkProcess, "_start", spy)
    home = milvus_edu.simulate("insert-then-search", seed=2, duration_s=5, out_dir=tmp_path / "home",
                               sink_process=False, keep_events=False)
    short = milvus_edu.simulate("insert-then-search", seed=2, duration_s=5, out_dir=tmp_path / "short",
                                keep_events=False)
    assert 0 < short.summary["events"] < worker.HOLD_ROWS and forked == []
    long = milvus_edu.simulate("timetick-basics", seed=2, duration_s=2, out_dir=tmp_path / "long", keep_events=False)
    assert long.summary["events"] > worker.HOLD_ROWS and len(forked) == 1
    for name in ("events.parquet", "events.jsonl", "summary.json"):
        assert (tmp_path / "home" / name).read_bytes() == (tmp_path / "short" / name).read_bytes(), name
    assert short.summary == home.summary
    assert multiprocessing.active_children() == []


def _emit_23(rec: Recorder, after=lambda i: None) -> None:
    """23 events of two kinds from two proxies, then close; ``after(i)`` runs after the i-th."""
    for i in range(23):
        rec.emit("proxy.finish" if i % 3 else "proxy.enqueue", f"p{i % 2}", ts=i, channel="c")
        after(i)
    rec.close()


def test_held_batches_reach_the_child_in_order_once_enough_rows_came():
    home, away = Rows(), Rows()
    process = SinkProcess(kept=[away], hold_rows=12)
    at_home = Recorder("r", sinks=[home], batch_rows=5)
    in_child = Recorder("r", sinks=[process], batch_rows=5)
    _emit_23(at_home)
    forked = []
    _emit_23(in_child, lambda i: forked.append(process._process is not None))
    assert forked == [i >= 14 for i in range(23)]  # forked at the third batch of five
    assert away.rows == [] and process.kept[0] is not away
    assert process.kept[0].rows == home.rows and len(home.rows) == 15


class Batches:
    """A batch sink that keeps the size and the rows (in seq order) of each batch it is given."""

    def __init__(self):
        self.batches = []

    def write_batch(self, batch) -> None:
        self.batches.append((batch.size, batch.rows()))

    def close(self) -> None:
        pass


def test_batches_held_by_a_run_that_ends_short_reach_the_sinks_as_one_batch_in_order():
    home, kept = MemorySink(), Batches()
    process = SinkProcess(kept=[kept], hold_rows=100)
    at_home = Recorder("r", sinks=[home], batch_rows=5)
    held = Recorder("r", sinks=[process], batch_rows=5)
    for rec in (at_home, held):
        _emit_23(rec)
    assert process._process is None and process.kept[0] is kept  # never forked: the sinks ran here
    assert [size for size, _ in kept.batches] == [23]  # five batches of the recorder, joined
    assert kept.batches[0][1] == home.rows


def test_row_sinks_in_the_child_get_their_kinds_in_order_and_come_back():
    home, away = Rows(), Rows()
    process = SinkProcess(kept=[away])
    at_home = Recorder("r", sinks=[home], batch_rows=5)
    in_child = Recorder("r", sinks=[process], batch_rows=5)
    for rec in (at_home, in_child):
        _emit_23(rec)
    assert away.rows == [] and process.kept[0] is not away  # the child's copy came back
    assert process.kept[0].rows == home.rows and len(home.rows) == 15


def test_a_failing_run_stops_the_sink_process_and_writes_no_files(tmp_path):
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        milvus_edu.simulate("timetick-basics", seed=1, duration_s=2, out_dir=tmp_path / "r", progress=progress,
                            sink_process=True)
    for child in multiprocessing.active_children():
        child.join(timeout=10)  # the timeout only bounds a failure: a stopped sink process ends at once
    assert multiprocessing.active_children() == []
    assert not (tmp_path / "r" / "events.parquet").exists() and not (tmp_path / "r" / "summary.json").exists()


def test_memory_sink_stays_in_the_parent(tmp_path, monkeypatch):
    seen = []
    real = worker.SinkProcess

    def spy(factories, kept, **kwargs):
        seen.append([type(k).__name__ for k in kept])
        return real(factories, kept, **kwargs)

    monkeypatch.setattr(worker, "SinkProcess", spy)
    milvus_edu.simulate("tso-basics", seed=1, duration_s=1, out_dir=tmp_path / "r", keep_events=True)
    assert seen == [["TSOChecker", "TSOSummary"]]
    assert MemorySink.__name__ not in seen[0]
    assert run_module.worker is worker


@pytest.mark.slow
def test_many_runs_leak_no_file_descriptors_and_no_processes(tmp_path):
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    milvus_edu.simulate("tso-basics", seed=1, duration_s=0.3, out_dir=tmp_path / "warm")
    before = open_fds()
    for i in range(30):
        milvus_edu.simulate("tso-basics", seed=1, duration_s=0.3, out_dir=tmp_path / f"r{i}")
    assert open_fds() == before
    assert multiprocessing.active_children() == []


def test_the_collector_comes_back_after_runs_in_threads_and_after_a_failure(tmp_path, monkeypatch):
    """Runs in threads overlap: the collector stays off while any of them steps, then it is on again
    with its thresholds, and nothing is left frozen; a failed run puts it back too."""
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    errors, stepping, reported = [], [], []
    real = Simulation.run

    def run_step(self, until_ms):
        stepping.append(gc.isenabled())
        return real(self, until_ms)

    monkeypatch.setattr(Simulation, "run", run_step)

    def run(i):
        try:
            milvus_edu.simulate("timetick-basics", seed=i, duration_s=1, out_dir=tmp_path / f"t{i}",
                                progress=lambda done, total: reported.append(done))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stepping) == len(reported) >= 150 and not any(stepping)
    assert gc.isenabled() and gc.get_threshold() == threshold and gc.get_freeze_count() == frozen

    def fail(done, total):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        milvus_edu.simulate("tso-basics", seed=1, duration_s=2, out_dir=tmp_path / "f", progress=fail)
    assert gc.isenabled() and gc.get_threshold() == threshold and gc.get_freeze_count() == frozen


def _run_in_pool_worker(out: str) -> int:
    return milvus_edu.simulate("tso-basics", seed=4, duration_s=2, out_dir=out).summary["events"]


def test_a_multiprocessing_pool_worker_writes_its_run_folder_in_process(tmp_path):
    with multiprocessing.get_context("fork").Pool(1) as pool:
        events = pool.apply(_run_in_pool_worker, (str(tmp_path / "pool"),))
    milvus_edu.simulate("tso-basics", seed=4, duration_s=2, out_dir=tmp_path / "here")
    assert events > 10
    for name in ("events.parquet", "events.jsonl", "summary.json"):
        assert (tmp_path / "pool" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()


def test_numpy_scalars_are_written_as_their_values_through_the_pipe(tmp_path):
    import numpy as np

    from milvus_edu.events import JsonlSink, ParquetSink
    from functools import partial

    def record(sinks):
        rec = Recorder("r", sinks=sinks, batch_rows=3)
        for i in range(7):
            rec.emit("tso.alloc", "rc", ts=np.int64(7 + i), count=np.int32(1), clock_ms=float(np.float64(2.5)),
                     physical_ms=np.int64(100))
        rec.close()

    record([ParquetSink(tmp_path / "home.parquet"), JsonlSink(tmp_path / "home.jsonl")])
    record([SinkProcess([partial(ParquetSink, tmp_path / "away.parquet"), partial(JsonlSink, tmp_path / "away.jsonl")])])
    assert (tmp_path / "home.jsonl").read_bytes() == (tmp_path / "away.jsonl").read_bytes()
    assert (tmp_path / "home.parquet").read_bytes() == (tmp_path / "away.parquet").read_bytes()
    assert b'"ts":7,' in (tmp_path / "away.jsonl").read_bytes()


def test_sink_process_true_without_a_folder_is_a_clear_error():
    with pytest.raises(ValueError, match="give out_dir too"):
        milvus_edu.simulate("tso-basics", seed=1, duration_s=1, sink_process=True)
