"""The proxy's DML queue and its pchannel statistics (reference §2.2).

The first part ports the dm-queue and pchan-statistics tests of Milvus 2.5
``internal/proxy/task_scheduler_test.go``. The second pins the exact rules of ``commitPChanStats`` /
``popPChanStats`` and of ``dmTaskQueue.Enqueue`` one branch at a time. The last part is property
tests: the heap statistics equal Go's scan after every step, and the statistics never promise more
than the unfinished tasks allow.
"""

from __future__ import annotations

import itertools
import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.config import TimeTickParams
from milvus_edu.proxy import (
    ChannelsTimeTicker,
    DmlTask,
    DmTaskQueue,
    HeapPChanStats,
    PChanStatistics,
    ScanPChanStats,
    TooManyRequestsError,
    channels_time_tick_msg,
)
from milvus_edu.tsoutil import compose_ts

PHYS0 = 1_700_000_000_000  # ms


class CountingTSO:
    """A TSO stand-in like Go's ``mockTsoAllocator``: one physical ms, logical +1 per call, thread-safe."""

    def __init__(self, physical: int = PHYS0):
        self.physical = physical
        self._logical = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return compose_ts(self.physical, next(self._logical))


def failing(exc):
    def call(*_):
        raise exc
    return call


both_stats = pytest.mark.parametrize("stats", ["scan", "heap"])


# =================================================================================================
# Port of task_scheduler_test.go (dm queue and pchan statistics)
# =================================================================================================

@both_stats
def test_dm_queue_moves_tasks_from_unissued_to_active_and_refuses_when_full(stats):
    """Ports TestDmTaskQueue_Basic."""
    tso = CountingTSO()
    queue = DmTaskQueue(stats=stats)
    assert queue.ut_empty() and not queue.ut_full()
    task = DmlTask(pchannels=("p0", "p1"))

    assert queue.front_unissued_task() is None
    assert queue.get_task_by_req_id(task.id) is None
    assert queue.pop_unissued_task() is None

    queue.enqueue_with_alloc(task, tso)
    assert not queue.ut_empty() and not queue.ut_full()
    assert queue.unissued_tasks == (task,)
    front = queue.front_unissued_task()
    assert front is task
    assert queue.get_task_by_req_id(front.id) is task
    issued = queue.pop_unissued_task()
    assert issued is task
    assert queue.ut_empty() and not queue.ut_full()

    assert queue.get_task_by_req_id(issued.id) is None
    assert queue.pop_active_task(issued.id) is None

    queue.add_active_task(issued)
    assert queue.get_task_by_req_id(issued.id) is issued
    assert queue.pop_active_task(issued.id) is issued

    queue.set_max_task_num(10)
    for _ in range(queue.get_max_task_num()):
        queue.enqueue_with_alloc(DmlTask(pchannels=("p0",)), tso)
    assert queue.ut_full()
    with pytest.raises(TooManyRequestsError):
        queue.enqueue_with_alloc(DmlTask(pchannels=("p0",)), tso)


@both_stats
def test_enqueue_enters_the_task_ts_on_every_pchan_and_finishing_removes_it(stats):
    """Ports TestDmTaskQueue_TimestampStatistics."""
    queue = DmTaskQueue(stats=stats)
    task = DmlTask(pchannels=("p0", "p1"))
    queue.enqueue_with_alloc(task, CountingTSO())

    info = queue.get_pchan_stats_info()
    assert set(info) == {"p0", "p1"}
    front = queue.front_unissued_task()
    for stat in info.values():
        assert stat == PChanStatistics(front.begin_ts(), front.end_ts())

    view = queue.pchan_stats_view()  # live: it follows the queue without being read again
    assert {p: (i.min_ts, i.max_ts) for p, i in view.items()} == info
    issued = queue.pop_unissued_task()
    assert queue.ut_empty()
    queue.add_active_task(issued)
    queue.pop_active_task(issued.id)
    assert queue.get_pchan_stats_info() == {} and dict(view) == {}


@both_stats
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_concurrent_enqueue_and_finish_never_moves_min_or_max_back(stats, seed):
    """Ports TestDmTaskQueue_TimestampStatistics2: 100 threads enqueue on two pchans while workers
    finish tasks in random order; a monitor checks minTs and maxTs never go back; all stats end empty.

    Go randomises the finishing order with sleeps and polls with sleeps. Here the main thread is the scheduler
    and the monitor: it takes each task as soon as a producer says it enqueued one, gives it to a worker thread,
    and between steps lets workers finish in an order drawn from ``seed``, reading the statistics after every step
    while producers and workers run. Every wait has a timeout that only bounds a failure."""
    queue = DmTaskQueue(stats=stats)
    tso = CountingTSO()
    rng = random.Random(seed)
    insert_num = 100
    enqueued = threading.Semaphore(0)
    finished = threading.Semaphore(0)
    violations: list[str] = []
    seen: dict[str, PChanStatistics] = {}

    def look():
        for pchan, stat in queue.get_pchan_stats_info().items():
            old = seen.get(pchan)
            if old is not None and (stat.min_ts < old.min_ts or stat.max_ts < old.max_ts):
                violations.append(f"{pchan}: {old} -> {stat}")
            seen[pchan] = stat

    def producer():
        queue.enqueue_with_alloc(DmlTask(pchannels=("c_1", "c_2")), tso)
        enqueued.release()

    def worker(task, go: threading.Event):
        queue.add_active_task(task)
        if go.wait(timeout=30):
            queue.pop_active_task(task.id)
            finished.release()

    producers = [threading.Thread(target=producer) for _ in range(insert_num)]
    for t in producers:
        t.start()
    waiting: list[threading.Event] = []  # workers not yet told to finish
    workers = []
    for _ in range(insert_num):
        assert enqueued.acquire(timeout=30), "a producer did not enqueue"
        task = queue.pop_unissued_task()
        assert task is not None
        go = threading.Event()
        workers.append(threading.Thread(target=worker, args=(task, go)))
        workers[-1].start()
        waiting.append(go)
        while waiting and rng.random() < 0.5:  # let some workers finish, in random order
            waiting.pop(rng.randrange(len(waiting))).set()
            look()
        look()
    rng.shuffle(waiting)
    for go in waiting:
        go.set()
        look()
    for _ in range(insert_num):
        assert finished.acquire(timeout=30), "a worker did not finish"
        look()
    for t in producers + workers:
        t.join(timeout=30)
        assert not t.is_alive()

    assert violations == []
    assert len(seen) == 2  # the monitor did see both pchannels' statistics
    assert queue.get_pchan_stats_info() == {}


def test_a_new_queue_reports_no_statistics_and_tracks_what_is_enqueued():
    """Ports TestTaskScheduler (the getPChanStatistics part)."""
    queue = DmTaskQueue()
    assert queue.get_pchan_statistics() == {}
    ts = queue.enqueue_with_alloc(DmlTask(pchannels=("p0",)), CountingTSO())
    assert queue.get_pchan_statistics() == {"p0": PChanStatistics(ts, ts)}


@both_stats
def test_concurrent_push_schedule_and_pop_leaves_no_statistics(stats):
    """Ports TestTaskScheduler_concurrentPushAndPop: 100 threads each enqueue, schedule some task,
    make it active and pop it; nothing raises and no statistics are left behind."""
    queue = DmTaskQueue(stats=stats)
    tso = CountingTSO()
    errors: list[BaseException] = []

    def run():
        try:
            queue.enqueue_with_alloc(DmlTask(pchannels=("mock-chan-0", "mock-chan-1")), tso)
            task = queue.pop_unissued_task()
            queue.add_active_task(task)
            queue.pop_active_task(task.id)
        except BaseException as exc:  # collected so the main thread can fail the test
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert queue.get_pchan_statistics() == {}
    assert queue.active_tasks == {} and queue.ut_empty()


# =================================================================================================
# Exact rules of commitPChanStats / popPChanStats
# =================================================================================================

@pytest.fixture(params=[ScanPChanStats, HeapPChanStats], ids=["scan", "heap"])
def pstats(request):
    return request.param()


def test_commit_on_a_new_pchan_starts_at_the_task_range(pstats):
    pstats.commit(["p"], 5, 7)
    assert pstats.info() == {"p": PChanStatistics(5, 7)}


def test_commit_on_a_known_pchan_widens_min_and_max(pstats):
    pstats.commit(["p"], 5, 5)
    pstats.commit(["p"], 3, 3)
    pstats.commit(["p"], 9, 9)
    assert pstats.info() == {"p": PChanStatistics(3, 9)}


def test_pop_recomputes_min_but_never_lowers_max(pstats):
    pstats.commit(["p"], 5, 5)
    pstats.commit(["p"], 9, 9)
    pstats.pop(["p"], 9)
    assert pstats.info() == {"p": PChanStatistics(5, 9)}
    pstats.pop(["p"], 5)
    assert pstats.info() == {}


def test_pop_of_the_last_ts_deletes_the_pchan_only_on_the_pchans_given(pstats):
    pstats.commit(["p", "q"], 5, 5)
    pstats.pop(["p"], 5)
    assert pstats.info() == {"q": PChanStatistics(5, 5)}


def test_pop_of_a_ts_never_committed_keeps_the_set(pstats):
    pstats.commit(["p"], 5, 5)
    pstats.commit(["p"], 8, 8)
    pstats.pop(["p", "absent"], 6)
    assert pstats.info() == {"p": PChanStatistics(5, 8)}
    pstats.pop(["p"], 5)
    assert pstats.info() == {"p": PChanStatistics(8, 8)}


def test_duplicate_ts_collapse_so_one_pop_removes_both(pstats):
    """tsSet is a set: two tasks with the same ts on one pchan leave after the first pop."""
    pstats.commit(["p"], 5, 5)
    pstats.commit(["p"], 5, 5)
    pstats.commit(["p"], 7, 7)
    pstats.pop(["p"], 5)
    assert pstats.info() == {"p": PChanStatistics(7, 7)}


def test_min_follows_the_set_while_end_ts_only_raises_max(pstats):
    pstats.commit(["p"], 4, 10)
    pstats.commit(["p"], 6, 6)
    pstats.pop(["p"], 4)
    assert pstats.info() == {"p": PChanStatistics(6, 10)}


def test_heap_stays_linear_in_the_pending_tasks_when_an_old_task_is_stuck():
    heap = HeapPChanStats()
    heap.commit(["p"], 1, 1)  # never finishes, so stale entries above it are never at the top
    for ts in range(2, 2000):
        heap.commit(["p"], ts, ts)
        heap.pop(["p"], ts)
    assert heap.info() == {"p": PChanStatistics(1, 1999)}
    assert len(heap._infos["p"].heap) <= 2 * len(heap._infos["p"].live) + 1


def test_info_is_a_copy(pstats):
    pstats.commit(["p"], 5, 5)
    pstats.info().clear()
    assert pstats.info() == {"p": PChanStatistics(5, 5)}


def test_commit_rejects_a_begin_after_the_end(pstats):
    with pytest.raises(ValueError, match="BeginTs must not exceed its EndTs"):
        pstats.commit(["p"], 6, 5)
    assert pstats.info() == {}


# =================================================================================================
# dmTaskQueue.Enqueue / PopActiveTask
# =================================================================================================

def test_enqueue_sets_ts_and_id_to_the_allocated_ts():
    queue = DmTaskQueue()
    task = DmlTask(pchannels=("p",), rows=3, kind="delete")
    ts = queue.enqueue_with_alloc(task, CountingTSO())
    assert task.ts == task.id == ts == compose_ts(PHYS0, 1)
    assert (task.begin_ts(), task.end_ts()) == (ts, ts)


def test_allocation_happens_while_stats_lock_is_held_and_set_channels_before_it():
    seen = {}

    def resolve(task):
        seen["resolve_locked"] = queue.stats_lock.locked()
        return ["p1", "p0"]

    def alloc():
        seen["alloc_locked"] = queue.stats_lock.locked()
        return 42

    queue = DmTaskQueue(get_channels=resolve)
    task = DmlTask()
    queue.enqueue_with_alloc(task, alloc)
    assert seen == {"resolve_locked": False, "alloc_locked": True}
    assert task.pchannels == ("p1", "p0")
    assert not queue.stats_lock.locked()
    assert queue.get_pchan_stats_info() == {"p0": PChanStatistics(42, 42), "p1": PChanStatistics(42, 42)}


def test_a_set_channels_error_changes_nothing_and_allocates_nothing():
    tso_calls = []
    queue = DmTaskQueue(get_channels=failing(KeyError("collection not found")))
    with pytest.raises(KeyError):
        queue.enqueue_with_alloc(DmlTask(), lambda: tso_calls.append(1) or 1)
    assert tso_calls == []
    assert queue.ut_empty() and queue.get_pchan_stats_info() == {}


def test_an_allocation_error_changes_nothing_and_releases_the_lock():
    queue = DmTaskQueue()
    task = DmlTask(pchannels=("p",))
    with pytest.raises(RuntimeError):
        queue.enqueue_with_alloc(task, failing(RuntimeError("can not get timestamp")))
    assert task.ts == 0 and queue.ut_empty() and queue.get_pchan_stats_info() == {}
    assert not queue.stats_lock.locked()


def test_a_full_queue_raises_too_many_requests_and_commits_no_statistics():
    queue = DmTaskQueue(params=TimeTickParams(max_task_num=1))
    tso = CountingTSO()
    first = queue.enqueue_with_alloc(DmlTask(pchannels=("p",)), tso)
    late = DmlTask(pchannels=("p", "q"))
    with pytest.raises(TooManyRequestsError, match=r"queue is full\[limit=1\]") as err:
        queue.enqueue_with_alloc(late, tso)
    assert err.value.limit == 1
    assert late.ts == late.id != 0  # Go sets ts and id before addUnissuedTask fails
    assert queue.get_pchan_stats_info() == {"p": PChanStatistics(first, first)}
    assert len(queue.unissued_tasks) == 1


def test_the_default_cap_is_proxy_max_task_num():
    assert DmTaskQueue().get_max_task_num() == 1024


def test_popping_an_unknown_task_returns_none_and_keeps_statistics():
    queue = DmTaskQueue()
    ts = queue.enqueue_with_alloc(DmlTask(pchannels=("p",)), CountingTSO())
    assert queue.pop_active_task(ts) is None  # enqueued, but never made active
    assert queue.get_pchan_stats_info() == {"p": PChanStatistics(ts, ts)}


def test_adding_an_active_task_twice_is_reported():
    queue = DmTaskQueue()
    task = DmlTask(pchannels=("p",), id=7, ts=7)
    assert queue.add_active_task(task) is True
    assert queue.add_active_task(task) is False
    assert queue.active_tasks == {7: task}


def test_finishing_out_of_order_keeps_min_at_the_oldest_unfinished_task():
    queue = DmTaskQueue()
    tso = CountingTSO()
    t1, t2, t3 = (DmlTask(pchannels=("p",)) for _ in range(3))
    for t in (t1, t2, t3):
        queue.enqueue_with_alloc(t, tso)
        queue.add_active_task(queue.pop_unissued_task())
    queue.pop_active_task(t2.id)
    assert queue.get_pchan_stats_info() == {"p": PChanStatistics(t1.ts, t3.ts)}
    queue.pop_active_task(t1.id)
    assert queue.get_pchan_stats_info() == {"p": PChanStatistics(t3.ts, t3.ts)}


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: DmTaskQueue(stats="tree"), "stats='tree' is unknown"),
        (lambda: DmTaskQueue().set_max_task_num(-1), "max_task_num must be >= 0"),
        (lambda: DmlTask(kind="upsert"), "kind 'upsert' is unknown"),
        (lambda: DmlTask(rows=-1), "rows must be >= 0"),
    ],
)
def test_bad_arguments_raise_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# =================================================================================================
# The design documents' six steps (book/seeds.md): allocation and statistics must be one atomic step
# =================================================================================================

def reported(ticker: ChannelsTimeTicker, pchan: str) -> int:
    msg = channels_time_tick_msg(ticker, source_id=1)
    listed = dict(zip(msg.channel_names, msg.timestamps))
    return listed.get(pchan, msg.default_timestamp)


def test_allocation_outside_the_lock_lets_the_report_pass_an_unfinished_task():
    """Seed steps 1-6: task 1 is allocated, task 2 is allocated *and* committed, the proxy reports,
    then task 1 is committed. The report already promised task 1's pchannel past task 1's ts."""
    tso = CountingTSO()
    queue = DmTaskQueue()
    ticker = ChannelsTimeTicker(tso, queue.get_pchan_statistics)
    task1, task2 = DmlTask(pchannels=("p",)), DmlTask(pchannels=("p",))

    assert queue.get_pchan_stats_info() == {}  # step 1
    ts1 = tso()                                 # step 2: allocated outside the lock
    ts2 = tso()                                 # step 3
    queue.enqueue(task2, ts2)                   # step 4: minTs = ts2
    ticker.tick()                               # step 5: the proxy reports ts2 - 1
    promise = reported(ticker, "p")
    queue.enqueue(task1, ts1)                   # step 6: minTs = ts1, too late

    assert promise == ts2 - 1 >= ts1
    assert queue.get_pchan_stats_info()["p"].min_ts == ts1
    assert task1 in queue.unissued_tasks  # still unfinished: its message (ts1) is not sent yet


def test_allocation_inside_the_lock_keeps_the_report_below_every_unfinished_task():
    """The expected order: task 1 is allocated and committed before task 2 is allocated."""
    tso = CountingTSO()
    queue = DmTaskQueue()
    ticker = ChannelsTimeTicker(tso, queue.get_pchan_statistics)
    task1, task2 = DmlTask(pchannels=("p",)), DmlTask(pchannels=("p",))

    ts1 = queue.enqueue_with_alloc(task1, tso)
    ts2 = queue.enqueue_with_alloc(task2, tso)
    ticker.tick()
    promise = reported(ticker, "p")

    assert ts1 < ts2
    assert promise == ts1 - 1 < min(task1.ts, task2.ts)


# =================================================================================================
# Properties
# =================================================================================================

PCHANS = ("p0", "p1", "p2")
pchan_subsets = st.lists(st.sampled_from(PCHANS), min_size=1, max_size=4)

stats_ops = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), pchan_subsets, st.integers(1, 30), st.integers(0, 3)),
        st.tuples(st.just("pop_committed"), pchan_subsets, st.integers(0, 1000)),
        st.tuples(st.just("pop_any"), pchan_subsets, st.integers(1, 40)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(stats_ops)
def test_heap_statistics_equal_the_scan_after_every_step(ops):
    scan, heap = ScanPChanStats(), HeapPChanStats()
    committed: list[int] = []
    for op in ops:
        if op[0] == "commit":
            _, pchans, begin, extra = op
            scan.commit(pchans, begin, begin + extra)
            heap.commit(pchans, begin, begin + extra)
            committed.append(begin)
        else:
            _, pchans, pick = op
            if op[0] == "pop_committed":
                if not committed:
                    continue
                ts = committed[pick % len(committed)]
            else:
                ts = pick
            scan.pop(pchans, ts)
            heap.pop(pchans, ts)
        assert heap.info() == scan.info()
        info = scan.info()
        for stats in (scan, heap):  # the live view reads what the copy holds, and cannot be written
            view = stats.view()
            assert {p: (i.min_ts, i.max_ts) for p, i in view.items()} == info
            with pytest.raises(TypeError):
                view["x"] = None


queue_ops = st.lists(
    st.one_of(
        st.tuples(st.just("enqueue"), pchan_subsets),
        st.tuples(st.just("issue"), st.just(None)),
        st.tuples(st.just("finish"), st.integers(0, 1000)),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["scan", "heap"]), queue_ops)
def test_min_is_the_oldest_unfinished_task_and_max_never_drops_while_the_pchan_lives(stats, ops):
    queue = DmTaskQueue(stats=stats)
    tso = CountingTSO()
    unfinished: dict[int, DmlTask] = {}
    last_max: dict[str, int] = {}
    for kind, arg in ops:
        if kind == "enqueue":
            task = DmlTask(pchannels=tuple(arg))
            queue.enqueue_with_alloc(task, tso)
            unfinished[task.id] = task
        elif kind == "issue":
            task = queue.pop_unissued_task()
            if task is not None:
                queue.add_active_task(task)
        else:
            active = sorted(queue.active_tasks)
            if active:
                task = queue.pop_active_task(active[arg % len(active)])
                del unfinished[task.id]
        info = queue.get_pchan_stats_info()
        pending = {p: [t.ts for t in unfinished.values() if p in t.pchannels] for p in PCHANS}
        assert set(info) == {p for p, tss in pending.items() if tss}
        for pchan, stat in info.items():
            assert all(stat.min_ts <= ts for ts in pending[pchan])
            assert stat.min_ts == min(pending[pchan])
            assert stat.max_ts >= last_max.get(pchan, 0)
            last_max[pchan] = stat.max_ts
        for gone in set(last_max) - set(info):
            del last_max[gone]
