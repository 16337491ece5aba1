"""Steps that need the outside world: one vocabulary of effects, written once and driven two ways.

A component operation that must call another component, write a file or wait (a sync task's
``SaveBinlogPaths``, the checkpoint updater's RPC, ``GenerateTSO``'s back-off) is a generator: it
``yield``s an *effect* (a small frozen dataclass below, saying what it needs) and receives the result by
``send``; a failure comes back into it as a raised exception (``throw``), at the line that asked. The
same generator runs

* in unit tests and notebooks through :func:`drive` with a plain handler function, synchronously;
* in the simulator inside a node (:class:`milvus_edu.cluster.node.Node`), whose interpreter performs each
  effect with latency and faults, and stops driving the generator when the node dies.

So the order of effects, and what happens on each outcome, is the component's (and mirrors Go),
while time and failure are the simulator's.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

Steps = Generator[Any, Any, T]
"""A generator that yields effects, receives their results and returns ``T``."""


# ---- time and calls ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sleep:
    """Wait ``duration_ns`` (a ``time.Sleep``, a retry's back-off, ``GenerateTSO``'s wait); result ``None``."""

    duration_ns: int


@dataclass(frozen=True)
class Call:
    """A request/response RPC to the node named ``dst``, which runs ``handler()`` there; the result is its answer
    (``handler`` answers at once or returns the steps that get the answer: see ``Simulation.call``). A
    synchronous driver simply calls ``handler()``.
    """

    dst: str
    handler: Callable[[], Any]


@dataclass(frozen=True)
class Parallel:
    """Run every effect at once (Go's goroutines and ``WaitGroup``) and wait for all of them.

    The result is a list aligned with ``effects``: each effect's result, or the exception it failed with.
    No driver throws into the generator for a ``Parallel``: failures are in the list.
    """

    effects: tuple[Any, ...]

    def gather(self, handle: Callable[[Any], Any]) -> list:
        """Perform the effects one by one with ``handle``, catching failures (for synchronous drivers)."""
        results = []
        for effect in self.effects:
            try:
                results.append(handle(effect))
            except Exception as exc:  # noqa: BLE001 - a failed call is a result of the wave
                results.append(exc)
        return results


# ---- ids, timestamps, objects -----------------------------------------------------------------------

@dataclass(frozen=True)
class AllocIDs:
    """``allocator.Alloc(count)`` (rootcoord's ``AllocID``); the result is the first of ``count`` consecutive ids."""

    count: int


@dataclass(frozen=True)
class AllocTimestamp:
    """``allocator.AllocTimestamp``: one timestamp from RootCoord's TSO; the result is the ts."""


@dataclass(frozen=True)
class WriteObjects:
    """``ChunkManager.MultiWrite`` of every object of a sync (key -> bytes); result ``None``."""

    objects: Mapping[str, bytes]


# ---- DataCoord and DataNode RPCs --------------------------------------------------------------------

@dataclass(frozen=True)
class SaveBinlogPaths:
    """The ``DataCoord.SaveBinlogPaths`` RPC with a ``SaveBinlogPathsRequest``; result ``None``, or the Milvus
    error thrown in."""

    request: Any


@dataclass(frozen=True)
class DropVirtualChannel:
    """The ``DataCoord.DropVirtualChannel`` RPC for ``channel_name``; result ``None`` or an error."""

    channel_name: str
    source_id: int


@dataclass(frozen=True)
class NotifyDropPartition:
    """The ``DataCoord.NotifyDropPartition`` RPC; result ``None`` or an error."""

    channel: str
    collection_id: int
    partition_ids: tuple[int, ...]


@dataclass(frozen=True)
class UpdateChannelCheckpoints:
    """``broker.UpdateChannelCheckpoint(positions)`` with a ``timeout_ns`` deadline; result ``None``."""

    positions: tuple[Any, ...]
    timeout_ns: int


@dataclass(frozen=True)
class FlushChannels:
    """The DataNode RPC ``FlushChannels(flush_ts, channels)`` to ``node_id``; the result is ignored.

    ``channels`` may be empty: Go calls every DataNode, whether or not it holds a channel of the collection.
    """

    node_id: int
    flush_ts: int
    channels: tuple[str, ...]


# ---- the QueryNode's tsafe --------------------------------------------------------------------------

@dataclass(frozen=True)
class TSafeChanged:
    """Wait until the delegator's tsafe changes (``tsCond.Wait``); the reader then checks again.

    ``guarantee_ts`` is what the reader waits for (for the run log; the driver does not need it); ``vchannel`` the
    delegator's channel; ``deadline`` the request context's deadline in the driver's time (``None``: none): once it
    passes with tsafe unmoved, the driver throws :class:`~milvus_edu.querynode.DeadlineExceeded` in, as
    ``waitTSafe``'s ``ctx.Done()`` case returns the context's error.
    """

    guarantee_ts: int
    vchannel: str = ""
    deadline: float | None = None


# ---- the synchronous driver -------------------------------------------------------------------------

def started(steps: Steps[T]) -> T | Steps[T]:
    """Run ``steps`` up to its first effect: its value when it needs none (it returned at once), otherwise
    steps that yield that first effect and go on from there, as ``steps`` itself would have.

    An RPC handler whose work nearly always needs no effect (``AllocTimestamp``: ``GenerateTSO`` sleeps only
    before the first ``tsLoop`` update or on logical overflow) answers with a plain value that way, and
    the caller drives a generator only in the rare case.
    """
    try:
        effect = next(steps)
    except StopIteration as done:
        return done.value
    return _resumed(effect, steps)


def _resumed(effect: Any, steps: Steps[T]) -> Steps[T]:
    while True:
        try:
            result = yield effect
        except GeneratorExit:
            steps.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown back into ``steps`` where it asked
            try:
                effect = steps.throw(exc)
            except StopIteration as done:
                return done.value
            continue
        try:
            effect = steps.send(result)
        except StopIteration as done:
            return done.value


def drive(steps: Steps[T], handle: Callable[[Any], Any]) -> T:
    """Run ``steps`` to the end, answering each effect with ``handle(effect)``; returns its value.

    An exception raised by ``handle`` is thrown into the generator where the effect was yielded, as a
    failed call would be; if the generator does not catch it, it propagates to the caller. ``handle``
    answers a :class:`Parallel` too, usually with ``effect.gather(handle)``.
    """
    try:
        effect = next(steps)
        while True:
            try:
                result = handle(effect)
            except Exception as exc:  # noqa: BLE001 - the component decides what a failure means
                effect = steps.throw(exc)
            else:
                effect = steps.send(result)
    except StopIteration as stop:
        return stop.value


def sleeping(sleep: Callable[[float], None], handle: Callable[[Any], Any] | None = None) -> Callable[[Any], Any]:
    """A handler for :func:`drive` that answers :class:`Sleep` with ``sleep(seconds)`` (e.g. ``time.sleep``)
    and passes any other effect to ``handle`` (a :class:`TypeError` when there is none)."""

    def answer(effect):
        if type(effect) is Sleep:
            sleep(effect.duration_ns / 1e9)
            return None
        if handle is None:
            raise TypeError(f"no handler for effect {effect!r}")
        return handle(effect)

    return answer
