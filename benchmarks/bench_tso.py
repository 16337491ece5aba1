"""TSO speed: live allocation rate, batch throughput, and simulator event rate vs bare SimPy.

Prints figures only (no assertions). Run: ``python benchmarks/bench_tso.py [--seconds 2]``.
"""

from __future__ import annotations

import argparse
import time

import simpy

import milvus_edu
from milvus_edu.events import MemorySink
from milvus_edu.live import LiveTSO


def live_alloc_one(seconds: float) -> float:
    with LiveTSO() as tso:
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(1000):
                tso.alloc_one()
            n += 1000
        return n / seconds


def live_batches(seconds: float, count: int) -> tuple[float, float]:
    with LiveTSO() as tso:
        calls, start = 0, time.perf_counter()
        end = start + seconds
        while time.perf_counter() < end:
            for _ in range(100):
                tso.alloc(count)
            calls += 100
        elapsed = time.perf_counter() - start
    return calls / elapsed, calls * count / elapsed


def sim_events_per_second(duration_s: float) -> tuple[float, int]:
    start = time.perf_counter()
    run = milvus_edu.simulate("tso-basics", seed=1, duration_s=duration_s, keep_events=True)
    elapsed = time.perf_counter() - start
    return run.summary["events"] / elapsed, run.summary["events"]


def bare_simpy_timeouts_per_second(n: int) -> float:
    env = simpy.Environment()
    sink = MemorySink()

    def proc():
        for i in range(n):
            yield env.timeout(1)

    env.process(proc())
    start = time.perf_counter()
    env.run()
    del sink
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per live measurement")
    parser.add_argument("--sim-duration", type=float, default=120.0, help="simulated seconds of tso-basics")
    args = parser.parse_args()
    print(f"live alloc_one:           {live_alloc_one(args.seconds):12,.0f} calls/s")
    for count in (10, 1000):
        calls, stamps = live_batches(args.seconds, count)
        print(f"live alloc({count:>4}):          {calls:12,.0f} calls/s = {stamps:14,.0f} timestamps/s")
    rate, events = sim_events_per_second(args.sim_duration)
    bare = bare_simpy_timeouts_per_second(200_000)
    print(f"simulator (tso-basics):   {rate:12,.0f} logged events/s ({events:,} events)")
    print(f"bare SimPy timeouts:      {bare:12,.0f} timeouts/s")
    print(f"ratio logged events / bare timeouts: {rate / bare:.3f}")


if __name__ == "__main__":
    main()
