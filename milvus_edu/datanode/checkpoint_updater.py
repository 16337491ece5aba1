"""The DataNode's channel checkpoint updater: batching every channel's checkpoint into DataCoord RPCs.

Models ``internal/flushcommon/util/checkpoint_updater.go`` (``ChannelCheckpointUpdater``: ``AddTask``,
``trigger``, the ``Start`` loop's two paths, ``updateCheckpoints``, ``execute``, ``taskNum``) of
Milvus 2.5 (reference §4.5).

Each channel has at most one pending task: the latest checkpoint its ttNode submitted, with a
callback (tell the write buffer the checkpoint is stored) and a ``flush`` flag (a flush is waiting on
it). Every 10 s the loop sends all tasks (:meth:`ChannelCheckpointUpdater.execute`); a flush task also
wakes the loop at once, which sends only the flush tasks (:meth:`take_flush_tasks`). A sent task is
deleted only if its RPC succeeded and no newer position replaced it meanwhile, so a failed update is
simply sent again on the next tick: there is no other retry.

The loop itself (the ticker and ``notifyChan``) belongs to the simulator: on every tick it runs
``execute()``; when :attr:`notify_pending` is set it runs ``update_checkpoints(take_flush_tasks())``.
Both are effect generators yielding one :class:`Parallel` of :class:`UpdateChannelCheckpoints` per wave.

Simplification: ``Start``/``Close`` and the ticker are the simulator's; ``notifyChan`` (capacity 1) is
the :attr:`notify_pending` flag.
Simplification: Go ranges over the task map (random order); here tasks go out by channel name.
Simplification: Go reads the parameters on every call (they can change at run time); here once.
Simplification: a wave's callbacks run once every RPC of the wave is back, group by group in order; Go's
goroutine of a group runs its callbacks as soon as its own RPC succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..config import DataNodeParams
from ..effects import Parallel, Steps, UpdateChannelCheckpoints
from ..proto import MsgPosition

#: ``defaultUpdateChanCPMaxParallel``: used when ``updateChannelCheckpointMaxParallel`` is not positive.
DEFAULT_UPDATE_CHAN_CP_MAX_PARALLEL = 10


def update_chan_cp_max_parallel(configured: int) -> int:
    """The RPCs sent at once: ``updateChannelCheckpointMaxParallel``, or 10 when it is ``<= 0``."""
    return configured if configured > 0 else DEFAULT_UPDATE_CHAN_CP_MAX_PARALLEL


def _chunk(items: Sequence, size: int) -> list[list]:
    """``lo.Chunk``: consecutive slices of ``size`` (the last may be shorter)."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


@dataclass
class ChannelCPUpdateTask:
    """``channelCPUpdateTask``: a channel's pending checkpoint, its callback, and whether a flush waits.

    Mutable as in Go: the notify path clears ``flush`` on the very task that stays in the map.
    """

    pos: MsgPosition
    callback: Callable[[], None]
    flush: bool


@dataclass(frozen=True)
class CheckpointTaskView:
    """A read-only copy of one pending task, for panels and events."""

    channel: str
    position: MsgPosition
    flush: bool


@dataclass(frozen=True)
class UpdateOutcome:
    """What one ``updateCheckpoints`` did: positions stored, positions whose RPC failed, tasks deleted."""

    sent: tuple[MsgPosition, ...]
    failed: tuple[MsgPosition, ...]
    deleted: tuple[str, ...]
    rpcs: int


class ChannelCheckpointUpdater:
    """``ChannelCheckpointUpdater``: one per DataNode, shared by all its channels.

    Bug switch ``drop_failed_checkpoint_tasks``: a group whose RPC failed has its tasks deleted like a
    successful one (without calling their callbacks). The update is lost: if the channel submits
    nothing newer (a stalled or idle channel, or a flush waiting on exactly that position), DataCoord's
    channel checkpoint stays behind and a flush never completes.
    """

    def __init__(self, params: DataNodeParams | None = None, *, drop_failed_checkpoint_tasks: bool = False):
        params = params or DataNodeParams()
        self.max_channel_checkpoints_per_rpc = params.max_channel_checkpoints_per_rpc
        self.update_channel_checkpoint_max_parallel = update_chan_cp_max_parallel(
            params.update_channel_checkpoint_max_parallel)
        self.rpc_timeout_ns = params.update_channel_checkpoint_rpc_timeout_ns
        self.drop_failed_checkpoint_tasks = drop_failed_checkpoint_tasks
        self._tasks: dict[str, ChannelCPUpdateTask] = {}
        self._notify_pending = False
        self._updating = False

    @property
    def notify_pending(self) -> bool:
        """A flush task arrived and the loop has not yet collected flush tasks (``notifyChan`` is full)."""
        return self._notify_pending

    def trigger(self) -> None:
        """``trigger``: a non-blocking send on the one-slot ``notifyChan`` (a full slot stays full)."""
        self._notify_pending = True

    def add_task(self, pos: MsgPosition | None, flush: bool, callback: Callable[[], None]) -> bool:
        """``AddTask``: record a channel's checkpoint; returns whether it triggered the notify path.

        An illegal position (``None``, no msg id, no channel) is ignored. With no pending task the new
        one is stored. Otherwise it replaces the pending one only if its position is newer or it brings
        a flush the pending one lacks; the replacement keeps the newer position (the pending one on a
        tie) but always takes the *new* callback, and ``flush`` is the or of both (quirk 8). An ignored
        task's callback is never called. Every legal flush task triggers, even an ignored one.
        """
        if pos is None or pos.msg_id is None or pos.channel_name == "":
            return False
        channel = pos.channel_name
        old = self._tasks.get(channel)
        if old is None:
            self._tasks[channel] = ChannelCPUpdateTask(pos, callback, flush)
        elif old.pos.timestamp < pos.timestamp or (flush and not old.flush):
            newer = pos if pos.timestamp > old.pos.timestamp else old.pos
            self._tasks[channel] = ChannelCPUpdateTask(newer, callback, flush or old.flush)
        if flush:
            self.trigger()
        return flush

    def take_flush_tasks(self) -> list[ChannelCPUpdateTask]:
        """The notify path of ``Start``: consume the notification, collect the flush tasks and clear their flag.

        The flag is cleared before the RPC, so a flush task whose RPC fails is retried only by the tick
        (or by a new flush task for its channel).
        """
        self._notify_pending = False
        tasks = [task for _, task in sorted(self._tasks.items()) if task.flush]
        for task in tasks:
            task.flush = False
        return tasks

    def all_tasks(self) -> list[ChannelCPUpdateTask]:
        """The pending tasks by channel name (what ``execute`` sends)."""
        return [task for _, task in sorted(self._tasks.items())]

    def execute(self) -> Steps[UpdateOutcome]:
        """``execute``: the tick path, ``update_checkpoints(all_tasks())``."""
        return (yield from self.update_checkpoints(self.all_tasks()))

    def update_checkpoints(self, tasks: Sequence[ChannelCPUpdateTask]) -> Steps[UpdateOutcome]:
        """``updateCheckpoints``: send ``tasks`` in groups, groups in waves, then delete what was stored.

        Groups hold ``max_channel_checkpoints_per_rpc`` positions (one RPC each); a wave is up to
        ``update_channel_checkpoint_max_parallel`` groups sent together (one :class:`Parallel`); waves go
        one after the other. After a group succeeds its callbacks run; a failed group is only
        skipped. At the end a sent task is deleted if the channel's pending task is not newer than it.

        Runs one at a time, as Go's single loop goroutine: a second call while one is in progress raises
        ``RuntimeError``.
        """
        if self._updating:
            raise RuntimeError("update_checkpoints is already running: the updater loop runs one update at a time")
        self._updating = True
        try:
            return (yield from self._update_checkpoints(list(tasks)))
        finally:
            self._updating = False

    def _update_checkpoints(self, tasks: list[ChannelCPUpdateTask]) -> Steps[UpdateOutcome]:
        groups = _chunk(tasks, self.max_channel_checkpoints_per_rpc)
        finished: dict[str, ChannelCPUpdateTask] = {}
        abandoned: dict[str, ChannelCPUpdateTask] = {}
        sent: list[MsgPosition] = []
        failed: list[MsgPosition] = []
        for wave in _chunk(groups, self.update_channel_checkpoint_max_parallel):
            effects = tuple(UpdateChannelCheckpoints(tuple(t.pos for t in g), self.rpc_timeout_ns) for g in wave)
            results = yield Parallel(effects)
            for group, result in zip(wave, results):
                if isinstance(result, BaseException):
                    failed.extend(t.pos for t in group)
                    if self.drop_failed_checkpoint_tasks:
                        abandoned.update((t.pos.channel_name, t) for t in group)
                    continue
                for task in group:
                    task.callback()
                    finished[task.pos.channel_name] = task
                    sent.append(task.pos)
        deleted = []
        for channel, task in sorted({**abandoned, **finished}.items()):
            if self._tasks[channel].pos.timestamp <= task.pos.timestamp:
                del self._tasks[channel]
                deleted.append(channel)
        return UpdateOutcome(tuple(sent), tuple(failed), tuple(deleted), len(groups))

    def task_num(self) -> int:
        """``taskNum``: channels with a pending task."""
        return len(self._tasks)

    @property
    def tasks(self) -> tuple[CheckpointTaskView, ...]:
        """Read-only copies of the pending tasks, by channel name (for the panel)."""
        return tuple(CheckpointTaskView(ch, t.pos, t.flush) for ch, t in sorted(self._tasks.items()))


__all__ = [
    "DEFAULT_UPDATE_CHAN_CP_MAX_PARALLEL", "update_chan_cp_max_parallel", "UpdateChannelCheckpoints",
    "Parallel", "ChannelCPUpdateTask", "CheckpointTaskView", "UpdateOutcome", "ChannelCheckpointUpdater",
]
