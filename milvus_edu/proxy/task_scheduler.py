"""The proxy's DML task queue and its per-pchannel timestamp statistics.

Models ``internal/proxy/task_scheduler.go`` (Milvus 2.5): ``dmTaskQueue`` (``Enqueue``,
``PopActiveTask``, ``commitPChanStats``, ``popPChanStats``, ``getPChanStatsInfo``), the parts of
``baseTaskQueue`` it uses (``addUnissuedTask``, ``PopUnissuedTask``, ``AddActiveTask``, ...) and
``taskScheduler.getPChanStatistics``.

For every pchannel the queue keeps ``{minTs, maxTs, tsSet}`` over the DML tasks that were enqueued and
have not finished. The proxy's ticker reads ``minTs - 1`` as "everything on this pchannel up to here
has been sent" and reports it to rootcoord. That promise only holds if a task's timestamp allocation
and its entry into the statistics are one atomic step (Go: both under ``statsLock``). The design
documents' six-step example (book/seeds.md) shows the failure when they are not:

1. the statistics of a pchannel are empty (minTs 0);
2. task 1 is allocated ts 1;
3. task 2 is allocated ts 2;
4. task 2 enters the statistics first: minTs = 2;
5. the proxy reports minTs = 2 to rootcoord ("everything below 2 is sent");
6. task 1 enters the statistics: minTs = 1, and its message (ts 1) is sent after the promise.

With the lock, steps 2 and 4 swap places: task 1 is in the statistics before task 2 can be allocated,
so the report in step 5 can never pass an unfinished task.

Two implementations of the statistics share one interface: :class:`ScanPChanStats` is Go's exact
O(n) rescan of ``tsSet`` on every pop; :class:`HeapPChanStats` is the design documents' proposed optimisation, a
min-heap per pchannel with lazy deletion (O(log n) amortised), which gives identical results.

Simplification: only the DML queue; the DDL, DQL and data-control queues are not modelled.
Simplification: no ``utBufChan``; the simulator's scheduler calls ``pop_unissued_task`` itself.
Simplification: ``processTask`` (AddActiveTask, PreExecute, Execute, PostExecute, PopActiveTask) runs in the simulator.
Simplification: a task is a small :class:`DmlTask` record; ``OnEnqueue`` and the metrics are left out.
Simplification: ``setChannels`` calls an injected resolver (Go: meta cache + ``chMgr.getChannels``).
Simplification: no ``CanSkipAllocTimestamp`` path; DML tasks always take their ts from the TSO.
"""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple, Protocol

from ..config import TimeTickParams

DML_KINDS = ("insert", "delete")


class TooManyRequestsError(Exception):
    """``merr.ErrServiceTooManyRequests``: the unissued queue already holds ``maxTaskNum`` tasks."""

    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(
            f"too many concurrent requests, queue is full[limit={limit}]: "
            "retry later or raise proxy.maxTaskNum"
        )


class PChanInfo(Protocol):
    """What a live statistics entry offers (:meth:`DmTaskQueue.pchan_stats_view`)."""

    min_ts: int
    max_ts: int


class PChanStatistics(NamedTuple):
    """``pChanStatistics``: the smallest and largest ts of the unfinished DML tasks on one pchannel.

    A named tuple (immutable, compared by value): the proxy copies every pchannel's statistics on each
    read, several times per DML task, and a tuple is the cheapest record to build.
    """

    min_ts: int
    max_ts: int


@dataclass(eq=False)
class DmlTask:
    """The fields of a proxy ``dmlTask`` (``insertTask``, ``deleteTask``) that the queue reads.

    ``pchannels`` is what ``getChannels`` returns: every pchannel of the target collection (Go's
    ``setChannels`` takes the collection's channels, not only those the rows hash to). ``rows`` and
    ``kind`` ride along for the simulator. ``id`` and ``ts`` are set on enqueue (``SetID``/``SetTs``);
    a DML task's ``BeginTs`` and ``EndTs`` are both its ts. Tasks compare by identity, like Go pointers.
    """

    pchannels: tuple[str, ...] = ()
    rows: int = 0
    kind: str = "insert"
    id: int = 0
    ts: int = 0

    def __post_init__(self):
        if self.kind not in DML_KINDS:
            raise ValueError(f"DmlTask kind {self.kind!r} is unknown; use one of {', '.join(DML_KINDS)}")
        if self.rows < 0:
            raise ValueError(f"DmlTask rows must be >= 0, got {self.rows}")
        self.pchannels = tuple(self.pchannels)

    def begin_ts(self) -> int:
        """``BeginTs``: the task's ts."""
        return self.ts

    def end_ts(self) -> int:
        """``EndTs``: the task's ts (a DML task has a single ts)."""
        return self.ts


class PChanStats(Protocol):
    """The interface both statistics implementations offer (Go: ``pChanStatisticsInfos`` + helpers)."""

    def commit(self, pchans: Iterable[str], begin_ts: int, end_ts: int) -> None:
        """``commitPChanStats``: add a task's ts to every pchannel it writes to."""

    def pop(self, pchans: Iterable[str], ts: int) -> None:
        """``popPChanStats``: remove a finished task's ts from every pchannel it wrote to."""

    def info(self) -> dict[str, PChanStatistics]:
        """``getPChanStatsInfo``: a copy ``{pchan: PChanStatistics(min_ts, max_ts)}``."""

    def view(self) -> Mapping[str, PChanInfo]:
        """The live statistics, read-only: ``{pchan: info}`` with ``info.min_ts`` and ``info.max_ts``."""


def _check_range(begin_ts: int, end_ts: int) -> None:
    if begin_ts > end_ts:
        raise ValueError(f"begin_ts {begin_ts} > end_ts {end_ts}: a task's BeginTs must not exceed its EndTs")


class _StatsReads:
    """The reads both statistics implementations share: each keeps ``_infos``, pchan -> an info with
    ``min_ts`` and ``max_ts``."""

    _infos: dict
    _view: MappingProxyType

    def info(self) -> dict[str, PChanStatistics]:
        """``getPChanStatsInfo``: a copy of every pchan's ``(minTs, maxTs)``."""
        return {p: PChanStatistics(i.min_ts, i.max_ts) for p, i in self._infos.items()}

    def view(self) -> Mapping[str, PChanInfo]:
        """The live statistics, read-only: ``{pchan: info}`` with ``info.min_ts`` and ``info.max_ts``.

        No copy is made, so it is the cheapest read (the simulator logs a DML task's pchannels after
        each enqueue and pop); an info changes with the next commit or pop, so read it at once.
        """
        return self._view


class _ScanInfo:
    """``pChanStatInfo``: ``pChanStatistics`` plus ``tsSet``."""

    __slots__ = ("min_ts", "max_ts", "ts_set")

    def __init__(self, ts: int, max_ts: int):
        self.min_ts = ts
        self.max_ts = max_ts
        self.ts_set = {ts}


class ScanPChanStats(_StatsReads):
    """Go's exact statistics: a ts set per pchannel, rescanned on every pop (``popPChanStats``)."""

    def __init__(self):
        self._infos: dict[str, _ScanInfo] = {}
        self._view = MappingProxyType(self._infos)

    def commit(self, pchans: Iterable[str], begin_ts: int, end_ts: int) -> None:
        """``commitPChanStats``: new pchan ``{begin, end, {begin}}``; else min, max and set-add."""
        _check_range(begin_ts, end_ts)
        for pchan in pchans:
            info = self._infos.get(pchan)
            if info is None:
                self._infos[pchan] = _ScanInfo(begin_ts, end_ts)
                continue
            info.min_ts = min(info.min_ts, begin_ts)
            info.max_ts = max(info.max_ts, end_ts)
            info.ts_set.add(begin_ts)

    def pop(self, pchans: Iterable[str], ts: int) -> None:
        """``popPChanStats``: remove ts; an empty set drops the pchan, else minTs = min(maxTs, min(set)).

        maxTs is never lowered: it stays the largest ts ever committed while the pchan has entries.
        """
        for pchan in pchans:
            info = self._infos.get(pchan)
            if info is None:
                continue
            info.ts_set.discard(ts)
            if not info.ts_set:
                del self._infos[pchan]
            else:
                info.min_ts = min(info.max_ts, min(info.ts_set))


class _HeapInfo:
    """One pchan of :class:`HeapPChanStats`: ``live`` is Go's tsSet, ``heap`` may hold stale entries."""

    __slots__ = ("min_ts", "max_ts", "live", "heap")

    def __init__(self, ts: int, max_ts: int):
        self.min_ts = ts
        self.max_ts = max_ts
        self.live = {ts}
        self.heap = [ts]


class HeapPChanStats(_StatsReads):
    """The design documents' optimisation of ``popPChanStats`` (book/seeds.md): a min-heap per pchan with lazy deletion.

    ``live`` is the exact ts set (so duplicates collapse as in Go); the heap is only an index to its
    minimum. A pop removes the ts from ``live`` and discards stale heap tops; when stale entries
    outnumber live ones the heap is rebuilt, which keeps memory linear and pops O(log n) amortised.
    """

    def __init__(self):
        self._infos: dict[str, _HeapInfo] = {}
        self._view = MappingProxyType(self._infos)

    def commit(self, pchans: Iterable[str], begin_ts: int, end_ts: int) -> None:
        """``commitPChanStats`` with a heap push when the ts is new to the pchan."""
        _check_range(begin_ts, end_ts)
        for pchan in pchans:
            info = self._infos.get(pchan)
            if info is None:
                self._infos[pchan] = _HeapInfo(begin_ts, end_ts)
                continue
            info.min_ts = min(info.min_ts, begin_ts)
            info.max_ts = max(info.max_ts, end_ts)
            if begin_ts not in info.live:
                info.live.add(begin_ts)
                heapq.heappush(info.heap, begin_ts)

    def pop(self, pchans: Iterable[str], ts: int) -> None:
        """``popPChanStats`` with the minimum read from the heap top instead of a scan."""
        for pchan in pchans:
            info = self._infos.get(pchan)
            if info is None:
                continue
            info.live.discard(ts)
            if not info.live:
                del self._infos[pchan]
                continue
            heap = info.heap
            while heap[0] not in info.live:
                heapq.heappop(heap)
            if len(heap) > 2 * len(info.live):
                info.heap = heap = list(info.live)
                heapq.heapify(heap)
            info.min_ts = min(info.max_ts, heap[0])


STATS_IMPLEMENTATIONS: dict[str, Callable[[], PChanStats]] = {"scan": ScanPChanStats, "heap": HeapPChanStats}


class DmTaskQueue:
    """``dmTaskQueue`` over ``baseTaskQueue``: unissued queue, active map and pchan statistics.

    ``stats`` picks the statistics implementation: ``"scan"`` (Go's, the default) or ``"heap"``.
    ``get_channels`` is what ``setChannels`` asks for a task's pchannels (Go: the collection's
    channels from ``chMgr``); without it a task keeps the pchannels it was built with.

    Locks (for live use with threads): ``stats_lock`` is Go's ``statsLock``; it serialises timestamp
    allocation with the statistics update. ``enqueue`` does not take it, because its caller must
    already hold it (or, in the simulator, an equivalent lock) across the allocation.
    """

    def __init__(
        self,
        params: TimeTickParams | None = None,
        stats: str = "scan",
        get_channels: Callable[[DmlTask], Sequence[str]] | None = None,
    ):
        if stats not in STATS_IMPLEMENTATIONS:
            raise ValueError(f"stats={stats!r} is unknown; use one of {', '.join(STATS_IMPLEMENTATIONS)}")
        self.params = params or TimeTickParams()
        self.stats = stats
        self.get_channels = get_channels
        self._stats: PChanStats = STATS_IMPLEMENTATIONS[stats]()
        self.set_max_task_num(self.params.max_task_num)
        self._unissued: deque[DmlTask] = deque()
        self._active: dict[int, DmlTask] = {}
        self.stats_lock = threading.Lock()
        self._ut_lock = threading.Lock()
        self._at_lock = threading.Lock()

    # ----------------------------------------------------------------- baseTaskQueue (unissued, active)

    def set_max_task_num(self, num: int) -> None:
        """``setMaxTaskNum``: the cap on unissued tasks (``proxy.maxTaskNum``)."""
        if num < 0:
            raise ValueError(f"max_task_num must be >= 0, got {num}; proxy.maxTaskNum is 1024 by default")
        self._max_task_num = num

    def get_max_task_num(self) -> int:
        """``getMaxTaskNum``."""
        return self._max_task_num

    def ut_empty(self) -> bool:
        """``utEmpty``: no unissued task."""
        return not self._unissued

    def ut_full(self) -> bool:
        """``utFull``: the unissued queue holds ``maxTaskNum`` tasks or more."""
        return len(self._unissued) >= self._max_task_num

    def add_unissued_task(self, task: DmlTask) -> None:
        """``addUnissuedTask``: append, or raise :class:`TooManyRequestsError` when full."""
        with self._ut_lock:
            if self.ut_full():
                raise TooManyRequestsError(self._max_task_num)
            self._unissued.append(task)

    def front_unissued_task(self) -> DmlTask | None:
        """``FrontUnissuedTask``: the oldest unissued task, or None."""
        with self._ut_lock:
            return self._unissued[0] if self._unissued else None

    def pop_unissued_task(self) -> DmlTask | None:
        """``PopUnissuedTask``: remove and return the oldest unissued task, or None."""
        with self._ut_lock:
            return self._unissued.popleft() if self._unissued else None

    def add_active_task(self, task: DmlTask) -> bool:
        """``AddActiveTask``; returns False when a task with that id was already active (Go warns)."""
        with self._at_lock:
            fresh = task.id not in self._active
            self._active[task.id] = task
            return fresh

    def get_task_by_req_id(self, req_id: int) -> DmlTask | None:
        """``getTaskByReqID``: search the unissued queue, then the active map."""
        with self._ut_lock:
            for task in self._unissued:
                if task.id == req_id:
                    return task
        with self._at_lock:
            return self._active.get(req_id)

    @property
    def unissued_tasks(self) -> tuple[DmlTask, ...]:
        """The unissued queue, oldest first (a snapshot)."""
        with self._ut_lock:
            return tuple(self._unissued)

    @property
    def active_tasks(self) -> dict[int, DmlTask]:
        """The active map ``{id: task}`` (a copy)."""
        with self._at_lock:
            return dict(self._active)

    # ----------------------------------------------------------------- dmTaskQueue

    def set_channels(self, task: DmlTask) -> None:
        """``dmlTask.setChannels``: resolve and store the task's pchannels; errors propagate."""
        if self.get_channels is not None:
            task.pchannels = tuple(self.get_channels(task))

    def enqueue(self, task: DmlTask, ts: int) -> None:
        """The atomic part of ``dmTaskQueue.Enqueue``, after the allocation: set ts and id, queue, commit.

        The caller must hold ``stats_lock`` (or the simulator's equivalent) from before it allocated
        ``ts`` until this returns; see the six-step example in the module docstring. When the queue is
        full :class:`TooManyRequestsError` is raised after ts and id are set and nothing is committed.
        """
        task.ts = ts
        task.id = ts  # Go: "we always use same msg id and ts for now"
        self.add_unissued_task(task)
        self.commit_pchan_stats(task, task.pchannels)

    def enqueue_with_alloc(self, task: DmlTask, alloc_one: Callable[[], int]) -> int:
        """``dmTaskQueue.Enqueue``: ``setChannels`` outside the lock, then allocate + enqueue under it.

        Returns the allocated ts. An error from ``setChannels`` or ``alloc_one`` changes nothing.
        """
        self.set_channels(task)
        with self.stats_lock:
            ts = alloc_one()
            self.enqueue(task, ts)
        return ts

    def commit_pchan_stats(self, task: DmlTask, pchans: Iterable[str]) -> None:
        """``commitPChanStats``: enter the task's ``[BeginTs, EndTs]`` into each pchan's statistics."""
        self._stats.commit(pchans, task.begin_ts(), task.end_ts())

    def pop_pchan_stats(self, task: DmlTask) -> None:
        """``popPChanStats``: remove the task's BeginTs from the pchans ``getChannels`` returns."""
        self._stats.pop(task.pchannels, task.begin_ts())

    def pop_active_task(self, task_id: int) -> DmlTask | None:
        """``dmTaskQueue.PopActiveTask``: forget a finished task and pop its statistics.

        An unknown id returns None and changes no statistics (Go only warns).
        """
        with self._at_lock:
            task = self._active.get(task_id)
            if task is None:
                return None
            with self.stats_lock:
                del self._active[task_id]
                self.pop_pchan_stats(task)
            return task

    def get_pchan_stats_info(self) -> dict[str, PChanStatistics]:
        """``getPChanStatsInfo``: a copy ``{pchan: PChanStatistics(min_ts, max_ts)}``."""
        with self.stats_lock:
            return self._stats.info()

    def pchan_stats_view(self) -> Mapping[str, PChanInfo]:
        """``getPChanStatsInfo`` without the copy: the live, read-only ``{pchan: info}`` (``info.min_ts``,
        ``info.max_ts``). An info changes with the next commit or pop, so read it at once, and only
        where nothing else can change the queue meanwhile (the single-threaded simulator); a reader
        on another thread takes :meth:`get_pchan_stats_info`."""
        return self._stats.view()

    def get_pchan_statistics(self) -> dict[str, PChanStatistics]:
        """``taskScheduler.getPChanStatistics``: the DML queue's statistics (the ticker's input)."""
        return self.get_pchan_stats_info()
