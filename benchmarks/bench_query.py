"""Reads per second through the QueryNode's wait-then-read path, and logged events per second of a query cluster.

(a) Pure components (:mod:`milvus_edu.querynode`, no SimPy): a :class:`~milvus_edu.querynode.ShardDelegator` with
one growing segment of ``--rows`` rows (timestamps in order, one ms apart) and ``--deletes`` of them deleted. Each
read drives the ``wait_tsafe`` generator by hand -- the *immediate* case (tsafe already past the guarantee) or the
*one-wait* case (the guarantee one logical step past tsafe: it yields ``TSafeChanged`` once, the "pipeline"
publishes tsafe, the read resumes) -- then reads at the returned tsafe with ``ShardDelegator.read`` and filters
the rows as ``QueryNodeNode.handle_read`` does, with the predicate of a point filter (``id == <pk>``) or none
(a full scan). Reported: reads/s of each combination, and the wait alone (waits/s). For comparison only, a point
lookup through the segment's primary-key index (``InsertRecord.search_pk`` plus the delete check), which the model's
read path does not use.

(b) The simulator on a mixed query load: ``insert-then-search`` with ``--rounds`` rounds (an insert and three
queries at Bounded, Session and Strong per round, on a cluster with rootcoord, two proxies, DataCoord, a DataNode
and a QueryNode), run by :func:`milvus_edu.simulate` with the run folder written (``events.parquet``,
``events.jsonl``, ``summary.json``; checkers and summaries on), as ``benchmarks/bench_sim.py`` does: each run is
timed right after a bare-SimPy timeout loop (``bench_sim.bare_simpy_rate``) and the pair with the best ratio counts.

Prints figures only (no assertions). Run from the repo root:
``python benchmarks/bench_query.py [--rows 100000] [--deletes 1000] [--seconds 2] [--rounds 400] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's milvus_edu, whatever is installed
sys.path.insert(0, str(HERE))  # bench_sim's helpers

import milvus_edu  # noqa: E402
from bench_sim import bare_simpy_rate  # noqa: E402
from milvus_edu.events import SIM_EPOCH_MS  # noqa: E402
from milvus_edu.mechanisms.query.scenarios import insert_then_search_steps  # noqa: E402
from milvus_edu.querynode import Row, ShardDelegator, TSafeChanged  # noqa: E402
from milvus_edu.querynode.expr import read_predicate  # noqa: E402
from milvus_edu.tsoutil import compose_ts  # noqa: E402

SEGMENT = 1


# --- (a) wait_tsafe + MVCC read over one growing segment -----------------------------------------

def build_delegator(rows: int, deletes: int) -> ShardDelegator:
    """A delegator serving one growing segment of ``rows`` rows (pk i at ms i), ``deletes`` of them deleted (evenly
    spread, each 1 logical step after its row), tsafe at the last timestamp."""
    d = ShardDelegator("by-dev-rootcoord-dml_0_100v0", start_ts=0)
    d.insert(SEGMENT, [Row(i, compose_ts(SIM_EPOCH_MS + i, 0)) for i in range(rows)])
    step = max(1, rows // max(1, deletes))
    gone = list(range(0, rows, step))[:deletes]
    d.process_delete(gone, [compose_ts(SIM_EPOCH_MS + pk, 1) for pk in gone])
    d.update_tsafe(compose_ts(SIM_EPOCH_MS + rows, 0))
    return d


def wait(d: ShardDelegator, guarantee_ts: int) -> int:
    """Drive ``wait_tsafe``: when it yields ``TSafeChanged``, publish a tsafe one logical step past the guarantee
    (what the pipeline's next pack does) and resume it. Returns the tsafe to read at."""
    steps = d.wait_tsafe(guarantee_ts)
    try:
        effect = next(steps)
        while True:
            assert isinstance(effect, TSafeChanged)
            d.update_tsafe(effect.guarantee_ts + 1)
            effect = steps.send(None)
    except StopIteration as stop:
        return stop.value


def guarantee(d: ShardDelegator, case: str) -> int:
    """A guarantee already reached (``immediate``) or one step past tsafe (``one-wait``)."""
    return d.get_tsafe() if case == "immediate" else d.get_tsafe() + 1


def timed(seconds: float, once) -> tuple[int, float]:
    """Call ``once()`` until ``seconds`` of wall time passed (at least 3 times); (calls, calls per second)."""
    n, start = 0, time.perf_counter()
    while True:
        once()
        n += 1
        wall = time.perf_counter() - start
        if wall >= seconds and n >= 3:
            return n, n / wall


def bench_reads(rows: int, deletes: int, seconds: float) -> None:
    start = time.perf_counter()
    d = build_delegator(rows, deletes)
    built = time.perf_counter() - start
    visible = len(d.read(d.get_tsafe()))
    print(f"(a) one growing segment of {rows:,} rows, {deletes:,} deleted ({visible:,} visible), "
          f"built in {built:.2f} s")
    target = rows // 2 + 1  # a pk that was never deleted
    point = read_predicate(f"id == {target}")
    scan = read_predicate("")

    for case in ("immediate", "one-wait"):
        _, rate = timed(seconds / 4, lambda: wait(d, guarantee(d, case)))
        print(f"    wait_tsafe only, {case:9}: {rate:>12,.0f} waits/s")
    for case in ("immediate", "one-wait"):
        for label, pred in (("point filter id == pk", point), ("full scan", scan)):
            got = []

            def once():
                ts = wait(d, guarantee(d, case))
                got.append(len(d.read(ts, pred)))

            n, rate = timed(seconds, once)
            print(f"    wait ({case:9}) + read, {label:21}: {rate:>8,.1f} reads/s "
                  f"({1000 / rate:,.1f} ms per read, {n} reads, {got[-1]:,} rows each)")
    seg = d.growing[SEGMENT]

    def lookup():
        ts = wait(d, guarantee(d, "immediate"))
        offsets = seg.record.search_pk(target, ts)
        gone = seg.deleted.query(ts, seg.get_active_count(ts))
        return [seg.record.rows[o] for o in offsets if o not in gone]

    _, rate = timed(seconds / 2, lookup)
    print(f"    for comparison, a point lookup through the pk index (not the model's read path): {rate:,.0f} reads/s")


# --- (b) logged events per second of a query cluster ---------------------------------------------

def timed_run(rounds: int, duration_s: float, seed: int) -> tuple[int, float]:
    """(events logged, wall seconds) of one ``simulate`` of insert-then-search with the run folder written."""
    with tempfile.TemporaryDirectory(prefix="bench-query-") as tmp:
        start = time.perf_counter()
        result = milvus_edu.simulate("insert-then-search", seed=seed, duration_s=duration_s,
                                     out_dir=Path(tmp) / "run", keep_events=False, options={"rounds": rounds})
        wall = time.perf_counter() - start
    return result.summary["events"], wall


def bench_sim(rounds: int, seed: int, repeat: int) -> None:
    steps = insert_then_search_steps(rounds)
    duration_s = steps[-1]["at"] + 2.0  # the last round, then time for its Strong read to be answered
    reads = sum(1 for s in steps if s["op"] in ("search", "query"))
    writes = sum(1 for s in steps if s["op"] in ("insert", "delete"))
    pairs = []  # (bare SimPy rate, events, written events/s), each run right after its bare-SimPy loop
    for _ in range(repeat):
        bare = bare_simpy_rate()
        events, wall = timed_run(rounds, duration_s, seed)
        pairs.append((bare, events, events / wall))
    bare, events, written = max(pairs, key=lambda p: p[2] / p[0])
    print(f"(b) insert-then-search, {rounds} rounds ({writes:,} inserts, {reads:,} reads at Bounded/Session/Strong), "
          f"{duration_s:g} simulated s, seed {seed}: {events:,} events")
    print(f"    bare SimPy {bare:,.0f} timeouts/s; folder written {written:,.0f} events/s "
          f"(1/{bare / written:.1f} of bare SimPy, best of {repeat} pairs); "
          f"all pairs: " + ", ".join(f"{w:,.0f}/s vs {b:,.0f}/s" for b, _, w in pairs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000, help="rows in the growing segment (a)")
    ap.add_argument("--deletes", type=int, default=1_000, help="of them deleted (a)")
    ap.add_argument("--seconds", type=float, default=2.0, help="wall seconds per read measurement (a)")
    ap.add_argument("--rounds", type=int, default=400, help="insert-then-search rounds (b)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="bare-SimPy/run pairs; the best ratio counts (b)")
    ap.add_argument("--only", choices=("reads", "sim"), default=None, help="run only part (a) or (b)")
    args = ap.parse_args()
    if args.only != "sim":
        bench_reads(args.rows, args.deletes, args.seconds)
    if args.only != "reads":
        bench_sim(args.rounds, args.seed, args.repeat)


if __name__ == "__main__":
    main()
