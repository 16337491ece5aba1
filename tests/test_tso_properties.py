"""Property: timestamps never go back across clock jumps and rootcoord failovers.

Two rootcoords (two :class:`Core` instances) share one KV, each reading its own wall clock = true
time + its own offset. Hypothesis interleaves allocations, ``tsLoop`` ticks, the passing of time,
clock jumps of up to ±10 s on either node, restarts and failovers. Whatever the order, every
timestamp handed out (the whole batch ``[first, last]``) is strictly greater than every earlier one,
and its physical part is below the window end saved in the KV.

With the bug switch ``tso_skip_load_on_init`` a failover to a node whose clock is behind breaks the
first property; with ``tso_no_window_save`` the second. Both are shown with fixed sequences.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from milvus_edu.config import MS, S, BugSwitches
from milvus_edu.rootcoord import Core
from milvus_edu.storage.kv import MemoryKV
from milvus_edu.tso import TSOError, drive_with_sleep
from milvus_edu.tsoutil import physical_time
from milvus_edu.clock import ManualClock

T0 = 1_700_000_000_123_456_789
TSO_KEY = "by-dev/kv/gid/timestamp"




class TSOFailover(RuleBasedStateMachine):
    """Two rootcoords over one MemoryKV; node ``self.active`` serves, the other is stopped/standby."""

    SWITCHES = BugSwitches()

    def __init__(self):
        super().__init__()
        self.true_clock = ManualClock()
        self.offsets = [0, 0]
        self.kv = MemoryKV(self.true_clock)
        self.active = 0
        self.cores = [self._new_core(i) for i in (0, 1)]
        self.cores[0].init_tso_allocator()
        self.last_handed = 0
        self.batches: list[tuple[int, int]] = []

    # ---- helpers ----------------------------------------------------------------------------
    def _new_core(self, i: int) -> Core:
        return Core(self.kv, lambda: self.true_clock.t + self.offsets[i], node=f"rootcoord-{i}",
                    switches=self.SWITCHES)

    def _window_end_ns(self) -> int:
        return int.from_bytes(self.kv.load(TSO_KEY), "big")

    def _sleep(self, seconds: float) -> None:
        # GenerateTSO waits; meanwhile true time passes and the active's tsLoop keeps ticking
        self.true_clock.t += round(seconds * 1e9)
        self.cores[self.active].ts_loop_tick()

    # ---- rules ------------------------------------------------------------------------------
    @rule(count=st.integers(min_value=1, max_value=1000))
    def alloc(self, count):
        core = self.cores[self.active]
        try:
            first, n = drive_with_sleep(core.alloc_timestamp_steps(count), self._sleep)
        except TSOError:  # ten failed retries: nothing handed out
            return
        last = first + n - 1
        assert n == count
        assert first > self.last_handed, (
            f"timestamp went back: {first} after {self.last_handed} (node {self.active})"
        )
        assert physical_time(first) == physical_time(last)  # LimitMaxLogic: a batch never spans 2 ms
        window_ms = self._window_end_ns() // MS
        assert physical_time(last) < window_ms, (
            f"allocated at {physical_time(last)} ms, window ends at {window_ms} ms"
        )
        self.last_handed = last
        self.batches.append((first, last))

    @rule()
    def tick(self):
        assert self.cores[self.active].ts_loop_tick()

    @rule(ns=st.integers(min_value=0, max_value=200 * MS))
    def time_passes(self, ns):
        self.true_clock.t += ns

    @rule(node=st.integers(min_value=0, max_value=1), delta=st.integers(min_value=-10 * S, max_value=10 * S))
    def clock_jump(self, node, delta):
        self.offsets[node] += delta

    @rule(delay=st.integers(min_value=0, max_value=60 * S))
    def failover(self, delay):
        """The active stops; after ``delay`` (lease expiry or revoke) the other takes over."""
        self.true_clock.t += delay
        self.active = 1 - self.active
        self.cores[self.active] = self._new_core(self.active)  # a fresh process
        self.cores[self.active].init_tso_allocator()

    @rule()
    def restart(self):
        """The active re-runs initTSOAllocator on the same Core (re-initialised, same process)."""
        self.cores[self.active].init_tso_allocator()

    # ---- invariants -------------------------------------------------------------------------
    @invariant()
    def physical_below_saved_window(self):
        alloc = self.cores[self.active].tso_allocator
        physical = alloc.tso.tso.physical_ns
        assert physical < alloc.get_last_saved_time()
        assert physical < self._window_end_ns()
        assert alloc.get_last_saved_time() == self._window_end_ns()  # only the active writes the window

    @invariant()
    def batches_strictly_increasing(self):
        for (f1, l1), (f2, l2) in zip(self.batches, self.batches[1:]):
            assert f1 <= l1 < f2 <= l2


TestTSOFailover = pytest.mark.slow(TSOFailover.TestCase)  # ~2 CPU s: the full suite runs it
TestTSOFailover.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# ---- fixed sequences -------------------------------------------------------------------------------

def make(switches: BugSwitches) -> TSOFailover:
    cls = type("Machine", (TSOFailover,), {"SWITCHES": switches})
    return cls()


def failover_to_slower_clock(m: TSOFailover) -> None:
    m.alloc(count=10)
    m.time_passes(ns=50 * MS)
    m.tick()
    m.alloc(count=500)
    m.clock_jump(node=1, delta=-5 * S)  # the standby's clock is 5 s behind
    m.failover(delay=0)  # graceful stop: the standby takes over at once
    m.physical_below_saved_window()
    m.alloc(count=1)


def test_failover_to_slower_clock_keeps_order_when_faithful():
    m = make(BugSwitches())
    failover_to_slower_clock(m)
    assert len(m.batches) == 3
    # the new active started one guard past the saved window (T0 + 3 s), not at its own (slow) clock
    assert physical_time(m.batches[-1][0]) == (T0 + 3 * S + MS) // MS


def test_skip_load_on_init_hands_out_a_smaller_timestamp_after_failover():
    m = make(BugSwitches(tso_skip_load_on_init=True))
    with pytest.raises(AssertionError, match="timestamp went back"):
        failover_to_slower_clock(m)
    # the last accepted batch was node 0's; node 1 started from its own clock, 5 s behind
    assert physical_time(m.last_handed) == (T0 + 50 * MS) // MS
    assert m.cores[1].tso_allocator.tso.tso.physical_ns == T0 + 50 * MS - 5 * S


def test_restart_on_same_node_with_clock_set_back_keeps_order():
    m = make(BugSwitches())
    m.alloc(count=1000)
    m.clock_jump(node=0, delta=-10 * S)
    m.restart()
    m.alloc(count=1)
    m.physical_below_saved_window()
    assert m.batches[1][0] > m.batches[0][1]


def run_past_window(m: TSOFailover) -> None:
    m.alloc(count=1)
    for _ in range(70):  # 3.5 s of tsLoop ticks, past the 3 s window
        m.time_passes(ns=50 * MS)
        m.tick()
    m.alloc(count=1)


def test_no_window_save_lets_allocation_pass_the_saved_window():
    run_past_window(make(BugSwitches()))  # faithful: fine
    m = make(BugSwitches(tso_no_window_save=True))
    with pytest.raises(AssertionError, match="window ends at"):
        run_past_window(m)


def test_no_window_save_then_failover_goes_back():
    m = make(BugSwitches(tso_no_window_save=True))
    m.alloc(count=1)
    for _ in range(100):  # 5 s: physical runs 2 s past the saved window
        m.time_passes(ns=50 * MS)
        m.cores[0].ts_loop_tick()
    m.last_handed = m.cores[0].tso_allocator.generate_tso(1, sleep=m._sleep)  # handed out unchecked
    m.offsets[1] = -10 * S
    m.failover(delay=0)
    with pytest.raises(AssertionError, match="timestamp went back"):
        m.alloc(count=1)


def test_hypothesis_search_finds_the_skip_load_violation():
    cls = type("Buggy", (TSOFailover,), {"SWITCHES": BugSwitches(tso_skip_load_on_init=True)})
    with pytest.raises(AssertionError):
        run_state_machine_as_test(
            cls,
            settings=settings(max_examples=300, stateful_step_count=30, deadline=None, derandomize=True,
                              database=None, print_blob=False,
                              suppress_health_check=[HealthCheck.too_slow]),
        )
