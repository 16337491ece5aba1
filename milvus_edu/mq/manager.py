"""``DispatcherManager``: the dispatchers of one pchannel on one node, a main one and deputies.

Models ``pkg/mq/msgdispatcher/manager.go`` (Milvus 2.5): ``Add``, ``Remove``, ``tryBuildDispatcher``,
``tryMerge``, ``removeTargetFromDispatcher``, ``NumTarget``, ``NumConsumer``; ``client.go``'s ``Register``
keeps one manager per pchannel.

A vchannel registered on a pchannel that already has a running dispatcher does not join it: that
dispatcher has read past where the new vchannel must start (or not yet as far). The manager builds a
new dispatcher for it, seeked to the vchannel's own position: the first one built is the *main*
dispatcher, later ones are *deputies*. A deputy whose ``CurTs`` equals the main's (both delivered the
same time tick) is merged: its targets move to the main dispatcher and it stops. So each vchannel gets
exactly what follows its position, and the pchannel is read once again as soon as the deputy has caught up.

Simplification: Go builds and merges on the manager's ticker (``mq.dispatcher.mergeCheckInterval``,
0.1 s); here a dispatcher is built as soon as a vchannel registers and a deputy is merged as soon as a
poll aligns it, so each build has one target and Go's pull-back wait and 60-minute position-gap rule
(which apply to several targets built together) never come up.
Simplification: no pause/resume around a merge (nothing runs between the model's steps).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import MQParams
from ..proto import MsgPosition
from .broker import Broker
from .dispatcher import Dispatcher
from .msg import MsgPack
from .msgstream import SubscriptionPosition


class DispatcherManager:
    """``dispatcherManager`` of one pchannel: registered targets, a main dispatcher and deputies.

    :meth:`poll` replaces the dispatchers' ``work`` goroutines: it returns the next pack any of them
    has ready, split per target, and merges a deputy once it is aligned with the main dispatcher.
    """

    def __init__(self, broker: Broker, pchannel: str, *, now_ns: Callable[[], int], params: MQParams | None = None):
        self.broker = broker
        self.pchannel = pchannel
        self.now_ns = now_ns
        self.params = params
        self._registered: dict[str, tuple[MsgPosition | None, str]] = {}
        self.main: Dispatcher | None = None
        self.deputies: dict[int, Dispatcher] = {}
        self._next_id = 0

    def add(self, vchannel: str, position: MsgPosition | None = None,
            sub_pos: str = SubscriptionPosition.EARLIEST) -> None:
        """``Add`` (then ``tryBuildDispatcher``): register ``vchannel`` and build a dispatcher for it.

        Raises ``ValueError`` with Go's text when the vchannel is already registered.
        """
        if vchannel in self._registered:
            raise ValueError(f"vchannel {vchannel} already exists in the dispatcher")
        self._registered[vchannel] = (position, sub_pos)
        self.try_build_dispatcher()

    def try_build_dispatcher(self) -> Dispatcher | None:
        """``tryBuildDispatcher``: one new dispatcher for the registered targets no dispatcher has.

        It seeks to the earliest of their positions; it becomes the main dispatcher if there is none,
        else a deputy. Returns it, or None when every registered target is served.
        """
        served = set()
        for d in self.dispatchers():
            served.update(t.vchannel for t in d.get_targets())
        lacking = [(v, pos, sub) for v, (pos, sub) in self._registered.items() if v not in served]
        if not lacking:
            return None
        lacking.sort(key=lambda t: t[1].timestamp if t[1] is not None else 0)
        _, earliest, sub_pos = lacking[0]
        self._next_id += 1
        d = Dispatcher(self.broker, self.pchannel, position=earliest, sub_pos=sub_pos, now_ns=self.now_ns,
                       params=self.params, dispatcher_id=self._next_id)
        for vchannel, pos, _ in lacking:
            d.add_target(vchannel, pos)
        if self.main is None:
            self.main = d
        else:
            self.deputies[d.id] = d
        return d

    def try_merge(self) -> list[int]:
        """``tryMerge``: move the targets of every deputy whose ``CurTs`` equals the main's into the main.

        Nothing merges before the main dispatcher delivered a pack (``CurTs`` 0). Returns the merged
        deputies' ids.
        """
        if self.main is None or self.main.cur_ts == 0:
            return []
        merged = [i for i, d in self.deputies.items() if d.cur_ts == self.main.cur_ts]
        for i in merged:
            for t in self.deputies.pop(i).get_targets():
                self.main.add_target(t.vchannel, t.pos)
        return merged

    def remove(self, vchannel: str) -> bool:
        """``Remove`` (``Client.Deregister``): unregister ``vchannel`` and drop its target
        (``removeTargetFromDispatcher``).

        A deputy left without targets stops; so does the main one when no deputy is left either.
        False (Go only logs) when the vchannel was not registered.
        """
        if self._registered.pop(vchannel, None) is None:
            return False
        for i, d in list(self.deputies.items()):
            if d.remove_target(vchannel) and d.target_num() == 0:
                del self.deputies[i]
        if self.main is not None and self.main.remove_target(vchannel):
            if self.main.target_num() == 0 and not self.deputies:
                self.main = None
        return True

    def num_target(self) -> int:
        """``NumTarget``: registered vchannels."""
        return len(self._registered)

    def num_consumer(self) -> int:
        """``NumConsumer``: running dispatchers (main and deputies)."""
        return (self.main is not None) + len(self.deputies)

    def dispatchers(self) -> list[Dispatcher]:
        """The running dispatchers: the main one first, then the deputies in the order they were built."""
        return ([self.main] if self.main is not None else []) + list(self.deputies.values())

    def poll(self) -> dict[str, MsgPack] | None:
        """The next pack any dispatcher has ready (the main one first), split per target; None if none has.

        After every pack, while there are deputies, :meth:`try_merge` runs, so a deputy stops as soon as
        it caught up.
        """
        for d in self.dispatchers():
            out = d.poll()
            if out is not None:
                if self.deputies:
                    self.try_merge()
                return out
        return None
