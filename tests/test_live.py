"""Live mode: the wall-clock TSO with a tsLoop thread is thread-safe and durable in SQLite."""

import threading

import pytest

from milvus_edu.live import LiveTSO
from milvus_edu.tsoutil import is_valid_hybrid_ts


def test_concurrent_alloc_gives_unique_increasing_timestamps_per_thread():
    results: dict[int, list[int]] = {}
    with LiveTSO() as tso:
        def worker(i):
            results[i] = [tso.alloc(3) for _ in range(3000)]
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    batches = [ts for r in results.values() for ts in r]
    covered = {b + k for b in batches for k in range(3)}
    assert len(covered) == 3 * len(batches)  # no two batches overlap
    for r in results.values():
        assert all(b > a for a, b in zip(r, r[1:]))
    assert all(is_valid_hybrid_ts(ts) for ts in batches)


def test_sqlite_window_survives_a_restart(tmp_path):
    path = tmp_path / "tso.db"
    with LiveTSO.open(path) as first:
        before = first.alloc(10) + 9
        saved = first.last_saved_time_ms()
    with LiveTSO.open(path) as second:
        after = second.alloc_one()
        assert after > before
        assert after >> 18 > saved  # a restarted TSO starts past the saved window


def test_alloc_before_start_is_a_clear_error():
    with pytest.raises(RuntimeError, match="start"):
        LiveTSO().alloc_one()


def test_ts_loop_thread_moves_the_window_on():
    """The physical part moves by ``tsLoop``'s ticks alone: waited for by counting ticks (the thread
    may be slow to get the CPU), not by sleeping a fixed time."""
    with LiveTSO() as tso:
        first = tso.alloc_one()
        ticks = threading.Semaphore(0)
        real = tso.core.ts_loop_tick

        def counted_tick():
            ok = real()
            ticks.release()
            return ok

        tso.core.ts_loop_tick = counted_tick
        # two ticks at least 50 ms apart: the second sees the clock past the first's physical time
        assert ticks.acquire(timeout=60) and ticks.acquire(timeout=60), "tsLoop did not tick"
        second = tso.alloc_one()
    assert (second >> 18) > (first >> 18)


def test_an_allocation_past_the_logical_counter_sleeps_outside_the_lock_until_tsloop_moves_the_window():
    """Two batches of 200,000 overflow the 2^18 logical counter: GenerateTSO sleeps and retries, and succeeds only if
    tsLoop can take the lock while it sleeps (each step runs under the lock, the sleeps outside it)."""
    from milvus_edu.tsoutil import parse_hybrid_ts

    with LiveTSO() as tso:
        first = tso.alloc(200_000)
        done = {}
        worker = threading.Thread(target=lambda: done.setdefault("ts", tso.alloc(200_000)))
        worker.start()
        worker.join(timeout=60)  # bounds a failure only: a lock held across the sleeps would never return
        assert not worker.is_alive(), "the second batch never got a window: the lock was held while it slept"
    assert parse_hybrid_ts(done["ts"])[0] > parse_hybrid_ts(first)[0]


def test_ts_loop_keeps_the_grid_of_a_go_ticker():
    """``tsLoop`` reads a ``time.Ticker``: the ticks keep a 50 ms grid from the start whatever a tick's body costs;
    a tick that fell due while the body ran comes at once and the ones after it are dropped. Driven on a fake
    monotonic clock: each wait and each tick's body moves it, and the test reads the waits the loop asked for."""
    clock = {"now": 100.0}
    bodies = iter([0.010, 0.120, 0.0, 0.0])
    waits = []

    class FakeStop:
        def wait(self, seconds):
            waits.append(seconds)
            clock["now"] += seconds
            return len(waits) > 4

    tso = LiveTSO(monotonic=lambda: clock["now"])
    tso.core.init_tso_allocator()
    tso._stop = FakeStop()

    def tick():
        clock["now"] += next(bodies)
        return True

    tso.core.ts_loop_tick = tick
    tso._ts_loop()
    # grid 100.05, 100.10, 100.15, ...: the body of the tick at 100.10 ends at 100.22, so the 100.15 tick comes at
    # once (the channel held it), 100.20 is dropped, and the loop waits for 100.25
    assert waits == pytest.approx([0.05, 0.04, 0.0, 0.03, 0.05])
