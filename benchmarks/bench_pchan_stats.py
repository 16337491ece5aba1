"""pChan statistics speed: Go's O(n) scan (``popPChanStats``) vs the design documents' min-heap with lazy deletion.

For 10 / 1,000 / 100,000 pending DML tasks, each on both pchannels of a two-shard collection (Go's
``setChannels`` takes every channel of the collection), one step = commit a new task + finish one
pending task, so the number of pending tasks stays constant. Two finishing orders: uniformly random,
and oldest first (tasks finishing roughly in ts order). Both implementations replay the same seeded
sequence. ``info()`` (``getPChanStatsInfo``) is timed separately.

Prints figures only (no assertions). Run from the repo root: ``python benchmarks/bench_pchan_stats.py``.
A simulation picks its implementation with the parameter ``timetick.pchan_stats`` (``scan``, Go's, by default;
``heap``); both give the same run log (``tests/test_timetick_sim.py``), so only the cost differs.
"""

from __future__ import annotations

import argparse
import random
import time

from milvus_edu.proxy import HeapPChanStats, ScanPChanStats

PCHANS = ("by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1")
SIZES = (10, 1_000, 100_000)
STEPS = {10: 20_000, 1_000: 5_000, 100_000: 300}
REPEATS = {10: 5, 1_000: 3, 100_000: 1}
INFO_CALLS = 4_000


def steps(pending: int, count: int, order: str, rng: random.Random) -> list[tuple[int, int]]:
    """``count`` pairs ``(ts to commit, ts to finish)`` keeping ``pending`` tasks in flight."""
    if order == "oldest":
        return [(pending + 1 + i, 1 + i) for i in range(count)]
    live = list(range(1, pending + 1))
    out = []
    for i in range(count):
        new = pending + 1 + i
        live.append(new)
        k = rng.randrange(len(live))
        live[k], live[-1] = live[-1], live[k]
        out.append((new, live.pop()))
    return out


def prefilled(cls, pending: int):
    """A statistics object holding ``pending`` tasks, ts 1..pending, on both pchannels."""
    stats = cls()
    for ts in range(1, pending + 1):
        stats.commit(PCHANS, ts, ts)
    return stats


def time_steps(cls, pending: int, seq: list[tuple[int, int]], repeats: int) -> float:
    """Best time per step (µs) over ``repeats`` fresh runs."""
    best = float("inf")
    for _ in range(repeats):
        stats = prefilled(cls, pending)
        start = time.perf_counter()
        for new, done in seq:
            stats.commit(PCHANS, new, new)
            stats.pop(PCHANS, done)
        best = min(best, (time.perf_counter() - start) / len(seq))
    return best * 1e6


def time_info(cls, pending: int) -> float:
    """Best time per ``info()`` call (µs) over five batches."""
    stats = prefilled(cls, pending)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(INFO_CALLS):
            stats.info()
        best = min(best, (time.perf_counter() - start) / INFO_CALLS)
    return best * 1e6


def main() -> None:
    """Print the step table for both finishing orders, then the ``info()`` table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    print(f"{'finish order':<13}{'pending':>9}  {'scan µs/step':>13}{'heap µs/step':>13}{'scan/heap':>10}")
    for order in ("random", "oldest"):
        for pending in SIZES:
            seq = steps(pending, STEPS[pending], order, random.Random(args.seed))
            scan = time_steps(ScanPChanStats, pending, seq, REPEATS[pending])
            heap = time_steps(HeapPChanStats, pending, seq, REPEATS[pending])
            print(f"{order:<13}{pending:>9,}  {scan:>13.2f}{heap:>13.2f}{scan / heap:>10.1f}")
    print()
    print(f"{'info()':<13}{'pending':>9}  {'scan µs/call':>13}{'heap µs/call':>13}{'scan/heap':>10}")
    for pending in SIZES:
        scan, heap = time_info(ScanPChanStats, pending), time_info(HeapPChanStats, pending)
        print(f"{'':<13}{pending:>9,}  {scan:>13.2f}{heap:>13.2f}{scan / heap:>10.1f}")


if __name__ == "__main__":
    main()
