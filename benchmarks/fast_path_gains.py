"""What each fast path gains: a run's CPU time with the fast path and with its readable form put back.

Each fast path below has a readable form beside it in the code; this script swaps the readable form in (a
monkeypatch for the length of one run), runs the same scenario both ways and prints the gain, the readable
run's CPU time over the fast one's, minus one, for the simulating process and for the sink process beside it (each run in a fresh
interpreter, fast and readable alternated, the least of ``--repeat`` counts; the ``control`` line swaps nothing
and shows the noise). A fast path worth under 5 % of a run is a candidate for removal
(issue 25). The runs write their files as the CLI does, the sinks in a process of their own.

Run from the repo root: ``python benchmarks/fast_path_gains.py [--repeat 3] [--paths insert-msg ...]``.
Prints figures only. On the shared 2-core machine the ``control`` line moves by up to a few percent, more
when other work runs.

The fast paths live in ``milvus_edu/mq/fast.py`` and ``milvus_edu/events/fast.py`` (the recorder's emitter
and the dispatcher's column reads stay methods, listed there), each with the gain measured here.

Removed after measuring (issue 25; gains of the simulating process in a TimeTick, flush and query run):
the TSO answering AllocTimestamp without its step generator (``GenerateTSO`` written twice, ``generate_tso_now``:
+2.8% in tso-basics, +2.4% in tso-failover), ``Simulation.one_way`` with ``expovariate`` written out (-2.9%,
+0.6%, -3.8%; the control line moved up to 3.3%), both measured with ``--repeat 2`` on 2026-11-25;
detached client processes (``DetachedProcess``, -3.6%, -0.3%, -3.7%), the run loop with SimPy's step written
in (-0.2%, +4.0%, +1.5%), ``detail`` dicts encoded with their batch (-0.1%, +4.1%, -4.4%; the sink process
paid up to 7% for it) and the broker's hand-built position stamp (-5.0%, +3.4%, +0.7%); murmur3 written out for
an int64 key (``fast.hash32_int64``: -1.4%, -2.4%, +0.7% with ``--repeat 3`` on 2026-11-26, once the flush
clients hashed their keys ahead too).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's milvus_edu, whatever is installed
import milvus_edu  # noqa: E402
from milvus_edu.events import dispatch, recorder  # noqa: E402
from milvus_edu.cluster import dml as cluster_dml  # noqa: E402
from milvus_edu.mq import InsertMsg  # noqa: E402
from milvus_edu.mq import fast as mq_fast  # noqa: E402
from milvus_edu.proto import MsgPosition  # noqa: E402
from milvus_edu.sim import run as sim_run  # noqa: E402
from milvus_edu.sim.kernel import Simulation  # noqa: E402

#: (scenario, simulated seconds) each fast path is measured on: the families whose runs it is in.
RUNS = {
    "all": [("timetick-basics", 4.0), ("flush-basics", 30.0), ("insert-then-search", 30.0)],
}


def _rows_of_kinds(self, batch) -> None:
    for row in batch.rows(self.kinds):
        self.write(row)


def _emit_each(self, kind: str, *names: str):
    def emit_one(node: str, *values) -> None:
        self.emit(kind, node, **dict(zip(names, values)))

    emit_one.rows = lambda node, rows: [emit_one(node, *values) for values in rows]
    return emit_one


def _jsonl_rows(self, batch) -> None:
    for row in batch.rows():
        self.write(row)


def _parquet_rows(self, batch) -> None:
    for row in batch.rows():
        self.write(row)


class _RowsKept:
    """``KeptBatches``' readable form: a MemorySink (a dict per row, as it is emitted), the table from those dicts."""

    def __init__(self):
        self._sink = recorder.MemorySink()
        self.write, self.close = self._sink.write, self._sink.close

    def rows(self) -> list:
        return self._sink.rows

    def table(self):
        return recorder.arrow_table(self._sink.rows, recorder.arrow_schema())


def _insert_msg(shard_name, collection_id, partition_id, segment_id, pks, timestamps, payload_bytes, msg_id,
                source_id, position=None, fields=None):
    return InsertMsg(shard_name=shard_name, collection_id=collection_id, partition_id=partition_id,
                     segment_id=segment_id, pks=pks, timestamps=timestamps, payload_bytes=payload_bytes,
                     msg_id=msg_id, source_id=source_id, position=position, fields=fields)


#: name -> (where it is, the families it runs in, (object, attribute, readable form) to swap in)
PATHS = {
    # the same code both ways: what the measurement's own noise and order give
    "control": ("nothing swapped", "all", [(Simulation, "spawn", Simulation.spawn)]),
    "dispatch-columns": ("Dispatch.write_batch reading columns from tuples (events/dispatch.py)", "all",
                         [(dispatch.Dispatch, "write_batch", _rows_of_kinds)]),
    "bound-emitters": ("Recorder.emitter (events/recorder.py)", "all",
                       [(recorder.Recorder, "emitter", _emit_each)]),
    "jsonl-by-arrow": ("json_bytes (events/fast.py)", "all",
                       [(recorder.JsonlSink, "write_batch", _jsonl_rows)]),
    "parquet-by-arrow": ("batch_table (events/fast.py)", "all",
                         [(recorder.ParquetSink, "write_batch", _parquet_rows)]),
    "insert-msg": ("new_insert_msg and new_msg_position (mq/fast.py)", "all",
                   [(cluster_dml, "new_insert_msg", _insert_msg), (cluster_dml, "new_msg_position", MsgPosition)]),
    "kept-batches": ("KeptBatches, simulate's events kept in memory (events/recorder.py)", "all",
                     [(sim_run, "KeptBatches", _RowsKept)]),
    "murmur3-prehash": ("prehash_int64, numpy's murmur3 of a client's next keys (mq/fast.py)", "all",
                        [(mq_fast, "prehash_int64", lambda pks: None)]),
}


@contextmanager
def _swapped(patches):
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, value in patches:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


#: The fast paths of a run kept in memory: measured on ``simulate(keep_events=True)`` with no folder, and the
#: DataFrame read once (``run.events``), as a notebook or a test uses a run.
KEPT = {"kept-batches"}


def _cpu_here(scenario: str, seconds: float, kept: bool = False) -> tuple[float, float]:
    """The CPU seconds of one run of ``scenario`` written to a folder as the CLI writes it: of the simulating
    process, and of the sink process (which works beside it; the larger bounds the run). ``kept``: the run kept
    in memory instead, its DataFrame read once (no sink process: the second figure is 0)."""
    if kept:
        start = time.process_time()
        milvus_edu.simulate(scenario, seed=1, duration_s=seconds).events
        return time.process_time() - start, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        start = time.process_time()
        # the sinks always in their own process (a short run would keep them at home), so the two columns part
        milvus_edu.simulate(scenario, seed=1, duration_s=seconds, out_dir=Path(tmp) / "run", keep_events=False,
                            sink_process=True)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time() - start, children.ru_utime + children.ru_stime


def _cpu(path: str, readable: bool, scenario: str, seconds: float) -> tuple[float, float]:
    """One run in a fresh interpreter: runs made one after another in one process slow down (its heap grows),
    which would read as a gain of whatever ran second."""
    command = [sys.executable, __file__, "--one", path, str(int(readable)), scenario, str(seconds)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()
    return float(out[-2]), float(out[-1])


def main() -> None:
    """Print, per fast path and scenario, the CPU time with it and without it and the gain."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the least CPU time counts")
    parser.add_argument("--paths", nargs="*", default=list(PATHS), choices=list(PATHS))
    parser.add_argument("--one", nargs=4, metavar=("PATH", "READABLE", "SCENARIO", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        path, readable, scenario, seconds = args.one
        with _swapped(PATHS[path][2] if readable == "1" else []):
            print(*_cpu_here(scenario, float(seconds), kept=path in KEPT))
        return
    for name in args.paths:
        where, family, _ = PATHS[name]
        for scenario, seconds in RUNS[family]:
            fast, readable = [float("inf")] * 2, [float("inf")] * 2
            for _ in range(args.repeat):  # alternated, so a change of load hits both
                fast = list(map(min, fast, _cpu(name, False, scenario, seconds)))
                readable = list(map(min, readable, _cpu(name, True, scenario, seconds)))
            sinks = (f"sinks {fast[1]:5.2f} s -> {readable[1]:5.2f} s, gain {readable[1] / fast[1] - 1:+6.1%}"
                     if fast[1] > 0 else "kept in memory, its DataFrame read once; no sink process")
            print(f"{name:17} {scenario:19} simulation {fast[0]:5.2f} s -> {readable[0]:5.2f} s readable, gain "
                  f"{readable[0] / fast[0] - 1:+6.1%}; {sinks}   [{where}]", flush=True)


if __name__ == "__main__":
    main()
