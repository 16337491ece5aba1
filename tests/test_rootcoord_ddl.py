"""The DDL source's time tick: ddlTsLockManager, the scheduler's min-ddl-ts heap, sendMinDdlTsAsTt (§2.6).

Ports Milvus 2.5 ``internal/rootcoord/ddl_ts_lock_manager_test.go`` and the min-ddl-ts parts of
``internal/rootcoord/scheduler_test.go``. Go's tests start goroutines and sleep; here the test plays
``taskLoop`` and ``syncTsLoop`` itself, one step at a time. A hypothesis state machine then checks
the heap's promise under any order of enqueues, lock-path tasks and completions.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from milvus_edu.clock import ManualClock
from milvus_edu.config import MS
from milvus_edu.rootcoord import (
    DDL_SOURCE_ID,
    DdlTask,
    DdlTsLockManager,
    Scheduler,
    TimetickSync,
    send_min_ddl_ts_as_tt,
)
from milvus_edu.rootcoord.timeticksync import SKIP_ABNORMAL, SKIP_DISABLED, SKIP_STARTING, SKIP_UNHEALTHY
from milvus_edu.storage.kv import MemoryKV
from milvus_edu.tso import GlobalTSOAllocator, TSOError
from milvus_edu.tsoutil import MAX_TIMESTAMP

CHANNELS = ("by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1")


class CountingTSO:
    """A fake ``GenerateTSO``: ``atomic.Inc`` from ``start`` (the first call returns ``start + 1``)."""

    def __init__(self, start: int = 100):
        self.last = start
        self.calls = 0

    def __call__(self, count: int) -> int:
        self.calls += 1
        self.last += count
        return self.last


def failing_tso(count: int) -> int:
    raise TSOError("error mock GenerateTSO")


def fixed_tso(ts: int):
    return lambda count: ts


def run_queue(s: Scheduler) -> None:
    """Play ``taskLoop`` until the queue is empty, every task succeeding."""
    while (task := s.next_task()) is not None:
        s.execute(task)


# =================================================================================================
# Port of ddl_ts_lock_manager_test.go
# =================================================================================================

def test_get_min_ddl_ts_returns_last_ts_while_tasks_are_in_progress():
    """Ports ``Test_ddlTsLockManager_GetMinDdlTs/there are in-progress tasks``."""
    m = DdlTsLockManager(failing_tso)
    m.update_last_ts(100)
    m.in_progress_cnt = 9999
    assert m.get_min_ddl_ts() == 100


def test_get_min_ddl_ts_returns_last_ts_when_allocation_fails():
    """Ports ``Test_ddlTsLockManager_GetMinDdlTs/failed to generate ts``."""
    m = DdlTsLockManager(failing_tso)
    m.update_last_ts(101)
    m.in_progress_cnt = 0
    assert m.get_min_ddl_ts() == 101
    assert not m.locked


def test_get_min_ddl_ts_allocates_and_records_a_fresh_ts():
    """Ports ``Test_ddlTsLockManager_GetMinDdlTs/normal case``."""
    m = DdlTsLockManager(fixed_tso(102))
    m.update_last_ts(101)
    m.in_progress_cnt = 0
    assert m.get_min_ddl_ts() == 102
    assert m.last_ts == 102
    assert not m.locked


# =================================================================================================
# The ddlTsLockManager protocol of the garbage collector
# =================================================================================================

def test_garbage_collection_holds_the_ddl_ts_at_the_last_recorded_value():
    tso = CountingTSO(100)
    m = DdlTsLockManager(tso)
    assert m.get_min_ddl_ts() == 101
    # GcCollectionData: Lock, AddRefCnt(1), allocate and broadcast, UpdateLastTs, Unlock, AddRefCnt(-1)
    m.lock()
    m.add_ref_cnt(1)
    drop_ts = tso(1)
    assert m.get_min_ddl_ts() == 101  # no fresh ts can pass the drop message still being sent
    m.update_last_ts(drop_ts)
    m.unlock()
    assert m.get_min_ddl_ts() == drop_ts  # unlocked but still counted: the drop ts itself
    m.add_ref_cnt(-1)
    assert m.get_min_ddl_ts() > drop_ts


def test_lock_twice_raises_instead_of_blocking():
    m = DdlTsLockManager(fixed_tso(5))
    m.lock()
    with pytest.raises(RuntimeError, match="already held"):
        m.lock()
    with pytest.raises(RuntimeError, match="already held"):
        m.get_min_ddl_ts()  # count 0 but locked: Go would wait here


def test_unlock_of_an_unlocked_lock_raises():
    with pytest.raises(RuntimeError, match="unlocked lock"):
        DdlTsLockManager(fixed_tso(5)).unlock()


# =================================================================================================
# Port of scheduler_test.go (min ddl ts parts)
# =================================================================================================

def test_failed_ts_allocation_rejects_the_task_and_queues_nothing():
    """Ports ``Test_scheduler_failed_to_set_ts``."""
    s = Scheduler(failing_tso)
    with pytest.raises(TSOError):
        s.add_task(DdlTask("normal"))
    assert s.queued() == []
    assert s.heap_ts() == []


def test_enqueued_task_gets_the_allocated_ts():
    """Ports ``Test_scheduler_enqueue_normal_case`` (task ids are not modelled)."""
    s = Scheduler(fixed_tso(101))
    task = DdlTask("normal")
    assert s.add_task(task) == 101
    assert task.ts == 101
    assert s.queued() == [task]
    assert s.heap_ts() == [101]


def test_failed_tasks_finish_with_their_error_and_leave_the_heap():
    """Ports ``Test_scheduler_bg``: prepare and execute failures still finish the task."""
    s = Scheduler(fixed_tso(101))
    outcomes = ["error mock Prepare", "error mock Execute", None] * 4
    tasks = [DdlTask(f"t{i}") for i in range(len(outcomes))]
    for task in tasks:
        s.add_task(task)
    for outcome in outcomes:
        s.execute(s.next_task(), outcome)
    assert [t.error for t in tasks] == outcomes
    assert all(t.is_finished() for t in tasks)
    assert s.heap_ts() == []
    assert s.get_min_ddl_ts() == 101


def test_sync_ts_task_moves_min_ddl_ts_past_the_tso_start_then_tasks_keep_it_moving():
    """Ports ``Test_scheduler_updateDdlMinTsLoop/normal case``."""
    s = Scheduler(CountingTSO(100))
    assert s.get_min_ddl_ts() == 0
    s.update_latest_tso_as_min_ddl_ts()
    run_queue(s)
    assert s.get_min_ddl_ts() > 100
    for i in range(10):
        s.add_task(DdlTask(f"normal-{i}"))
    run_queue(s)
    assert s.get_min_ddl_ts() == 111


def test_sync_ts_task_with_a_failing_tso_leaves_min_ddl_ts_at_zero():
    """Ports ``Test_scheduler_updateDdlMinTsLoop/invalid tso``."""
    s = Scheduler(failing_tso)
    for _ in range(4):
        assert s.update_latest_tso_as_min_ddl_ts() is None
        run_queue(s)
    assert s.get_min_ddl_ts() == 0


def test_min_ddl_ts_never_decreases_with_lock_path_and_queue_tasks_interleaved():
    """Ports ``Test_scheduler_updateDdlMinTsLoop/concurrent task schedule`` as a seeded interleaving."""
    rng = random.Random(7)
    s = Scheduler(CountingTSO(100))
    s.update_latest_tso_as_min_ddl_ts()
    run_queue(s)
    assert s.get_min_ddl_ts() > 100
    running: list[DdlTask] = []
    left = {"lock": 600, "queue": 200}
    last_min = s.get_min_ddl_ts()
    while left["lock"] or left["queue"] or running or s.queued():
        step = rng.random()
        if step < 0.4 and left["lock"]:
            task = DdlTask("locker-key")
            s.add_task_with_lock(task)
            running.append(task)
            left["lock"] -= 1
        elif step < 0.55 and left["queue"]:
            s.add_task(DdlTask("normal"))
            left["queue"] -= 1
        elif step < 0.8 and running:
            s.execute(running.pop(rng.randrange(len(running))))
        elif s.queued():
            s.execute(s.next_task())
        assert s.get_min_ddl_ts() >= last_min
        last_min = s.get_min_ddl_ts()
    assert s.heap_ts() == []
    assert s.get_min_ddl_ts() == 100 + 1 + 800


# =================================================================================================
# The scheduler's rules
# =================================================================================================

def test_a_slow_earlier_task_holds_min_ddl_ts_back_until_it_finishes():
    s = Scheduler(CountingTSO(100))
    slow = DdlTask("CreateCollection")
    s.add_task_with_lock(slow)  # ts 101
    s.update_latest_tso_as_min_ddl_ts()  # ts 102
    assert s.execute(s.next_task()) == []
    assert s.get_min_ddl_ts() == 0
    assert s.execute(slow) == [101, 102]
    assert s.get_min_ddl_ts() == 102


def test_lock_path_tasks_never_enter_the_queue():
    s = Scheduler(CountingTSO(100))
    s.add_task_with_lock(DdlTask("CreateCollection"))
    assert s.queued() == []
    assert s.heap_ts() == [101]


def test_lock_path_allocation_failure_pushes_nothing():
    s = Scheduler(failing_tso)
    with pytest.raises(TSOError):
        s.add_task_with_lock(DdlTask("CreateCollection"))
    assert s.heap_ts() == []


def test_queue_is_first_in_first_out():
    s = Scheduler(CountingTSO(100))
    a, b = DdlTask("a"), DdlTask("b")
    s.add_task(a)
    s.add_task(b)
    assert s.next_task() is a
    assert s.next_task() is b
    assert s.next_task() is None


def test_executing_a_task_twice_is_rejected():
    s = Scheduler(CountingTSO(100))
    task = DdlTask("a")
    s.add_task(task)
    s.execute(s.next_task())
    with pytest.raises(ValueError, match="already finished"):
        s.execute(task)


# =================================================================================================
# sendMinDdlTsAsTt (root_coord.go)
# =================================================================================================

def ddl_pair(lock_tso, sched_min: int):
    mgr = DdlTsLockManager(lock_tso)
    sched = Scheduler(fixed_tso(sched_min))
    if sched_min:
        sched.update_latest_tso_as_min_ddl_ts()
        run_queue(sched)
    return mgr, sched


def synced_tt() -> TimetickSync:
    tt = TimetickSync(1)
    tt.init_sessions([])
    return tt


def test_disabled_time_tick_messages_skip_without_allocating():
    tso = CountingTSO(100)
    mgr, sched = ddl_pair(tso, 50)
    out = send_min_ddl_ts_as_tt(synced_tt(), CHANNELS, mgr, sched, healthy=True, tt_msg_enabled=False)
    assert out.skipped == SKIP_DISABLED
    assert tso.calls == 0


def test_unhealthy_rootcoord_skips_without_allocating():
    tso = CountingTSO(100)
    mgr, sched = ddl_pair(tso, 50)
    out = send_min_ddl_ts_as_tt(synced_tt(), CHANNELS, mgr, sched, healthy=False, tt_msg_enabled=True)
    assert out.skipped == SKIP_UNHEALTHY
    assert tso.calls == 0


def test_zero_min_ddl_ts_is_skipped_as_starting():
    mgr, sched = ddl_pair(CountingTSO(100), 0)
    tt = synced_tt()
    out = send_min_ddl_ts_as_tt(tt, CHANNELS, mgr, sched, healthy=True, tt_msg_enabled=True)
    assert (out.skipped, out.min_bg_ddl_ts, out.min_normal_ddl_ts) == (SKIP_STARTING, 101, 0)
    assert tt.sess2_chan_ts_map[DDL_SOURCE_ID] is None


def test_max_min_ddl_ts_is_skipped_as_abnormal():
    mgr, sched = ddl_pair(fixed_tso(MAX_TIMESTAMP), MAX_TIMESTAMP)
    out = send_min_ddl_ts_as_tt(synced_tt(), CHANNELS, mgr, sched, healthy=True, tt_msg_enabled=True)
    assert out.skipped == SKIP_ABNORMAL


def test_the_smaller_of_both_ddl_minimums_is_reported_for_every_channel():
    mgr, sched = ddl_pair(CountingTSO(100), 50)
    tt = synced_tt()
    out = send_min_ddl_ts_as_tt(tt, CHANNELS, mgr, sched, healthy=True, tt_msg_enabled=True)
    assert (out.skipped, out.sent_ts, out.min_bg_ddl_ts, out.min_normal_ddl_ts) == (None, 50, 101, 50)
    assert out.update.sent is True  # the DDL source is the only session
    assert tt.watch_round() == [(CHANNELS[0], 50), (CHANNELS[1], 50)]


def test_report_failure_is_returned_not_raised():
    mgr, sched = ddl_pair(CountingTSO(100), 50)
    out = send_min_ddl_ts_as_tt(TimetickSync(1), CHANNELS, mgr, sched, healthy=True, tt_msg_enabled=True)
    assert out.sent_ts is None
    assert out.error == "skip ChannelTimeTickMsg from un-recognized session -1"


def test_ddl_tick_from_the_real_tso_reaches_every_channel():
    clock = ManualClock()
    allocator = GlobalTSOAllocator("timestamp", MemoryKV(clock), clock)
    allocator.initialize()
    clock.advance(60 * MS)
    allocator.update_tso()

    def generate_tso(count: int) -> int:
        return allocator.generate_tso(count, sleep=lambda s: pytest.fail(f"unexpected sleep {s}"))

    mgr, sched, tt = DdlTsLockManager(generate_tso), Scheduler(generate_tso), synced_tt()
    sync_ts = sched.update_latest_tso_as_min_ddl_ts()
    run_queue(sched)
    out = send_min_ddl_ts_as_tt(tt, CHANNELS, mgr, sched, healthy=True, tt_msg_enabled=True)
    assert out.sent_ts == sync_ts < out.min_bg_ddl_ts
    assert tt.watch_round() == [(ch, sync_ts) for ch in CHANNELS]


# =================================================================================================
# Property
# =================================================================================================

class SchedulerMachine(RuleBasedStateMachine):
    """Enqueue, lock-path tasks, sync ticks and completions in any order."""

    def __init__(self):
        super().__init__()
        self.scheduler = Scheduler(CountingTSO(100))
        self.tasks: list[DdlTask] = []
        self.running: list[DdlTask] = []
        self.last_min = 0

    @rule()
    def enqueue(self):
        task = DdlTask("normal")
        self.scheduler.add_task(task)
        self.tasks.append(task)

    @rule()
    def sync_tick(self):
        self.scheduler.update_latest_tso_as_min_ddl_ts()

    @rule()
    def lock_path(self):
        task = DdlTask("locker-key")
        self.scheduler.add_task_with_lock(task)
        self.tasks.append(task)
        self.running.append(task)

    @precondition(lambda self: self.scheduler.queued())
    @rule(failed=st.booleans())
    def task_loop(self, failed):
        self.scheduler.execute(self.scheduler.next_task(), "boom" if failed else None)

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def lock_path_finishes(self, data):
        task = self.running.pop(data.draw(st.integers(0, len(self.running) - 1)))
        self.scheduler.execute(task)

    @invariant()
    def min_ddl_ts_is_monotone_and_below_every_unfinished_task(self):
        current = self.scheduler.get_min_ddl_ts()
        assert current >= self.last_min
        self.last_min = current
        queued = self.scheduler.queued()
        unfinished = [t for t in self.tasks if not t.is_finished()] + [t for t in queued if t not in self.tasks]
        assert all(current < t.ts for t in unfinished)
        in_heap = set(self.scheduler.heap_ts())
        assert all(t.ts in in_heap for t in unfinished)


@pytest.mark.slow
def test_min_ddl_ts_never_passes_an_unfinished_task():
    run_state_machine_as_test(SchedulerMachine, settings=settings(max_examples=200, stateful_step_count=40,
                                                                  deadline=None))
