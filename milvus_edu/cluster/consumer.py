"""Reading pchannels through msgdispatcher, as a DataNode's flowgraphs and a QueryNode's pipelines both do.

Go's ``msgdispatcher.Client`` (pkg/mq/msgdispatcher/client.go) keeps one ``DispatcherManager`` per pchannel
(a main dispatcher, and a deputy for each vchannel registered later until it catches up) and a target per
vchannel; here :class:`PackConsumer` keeps them for a node, with one SimPy process per pchannel that the
broker wakes when a time tick lands. After one network leg the process drains every complete pack the
pchannel's dispatchers have and hands each vchannel's pack to the node's :meth:`PackConsumer.on_pack`.

Woken by time ticks only, as Go's ``MqTtMsgStream.bufMsgPackToChannel`` hands the dispatcher a pack only once
its consumers reached a time tick: a DML message alone completes no pack, so waking for it would find nothing
(it waits in the pchannel and is read with the tick that closes its pack).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import simpy

from ..mq import DispatcherManager, SubscriptionPosition
from ..proto import MsgType

#: What :meth:`PackConsumer.on_pack` returns to end the pchannel's process (the node stopped mid-pack).
STOP = object()


class PackConsumer(ABC):
    """A mixin for a :class:`~milvus_edu.cluster.node.Node` with ``broker`` and ``clock`` that consumes pchannels.

    ``wake_on_start``: whether a pchannel's process looks for packs as soon as it starts (a DataNode, which may
    subscribe at a position with messages already behind it) or only when a message lands or the node kicks it.
    """

    wake_on_start = False

    def reset_consumer(self) -> None:
        """No dispatcher yet (a fresh node, or one restarted: a new life subscribes again)."""
        self.dispatchers: dict[str, DispatcherManager] = {}
        self.wake: dict[str, simpy.Event] = {}

    def subscribe(self, pchannel: str, vchannel: str, position) -> None:
        """``Client.Register``: register ``vchannel`` on ``pchannel``'s manager from ``position``, starting the
        manager and its process on the pchannel's first vchannel.

        A later vchannel gets a deputy dispatcher seeked to its own position (the main one has read on); the
        process is kicked so the deputy reads what the pchannel already holds."""
        manager = self.dispatchers.get(pchannel)
        first = manager is None
        if first:
            manager = DispatcherManager(self.broker, pchannel, now_ns=self.clock.now_ns, params=self.sim.config.mq)
            self.dispatchers[pchannel] = manager
            self.wake[pchannel] = self.sim.env.event()
            self.broker.watch(pchannel, self.callback(self.kick), msg_types=(MsgType.TIME_TICK,))
            self.process(self._consume(pchannel))
        manager.add(vchannel, position, SubscriptionPosition.EARLIEST)
        if not first:
            self.kick(pchannel)

    def kick(self, pchannel: str, _msg_id: int | None = None) -> None:
        """Wake ``pchannel``'s process (the broker calls this when a time tick lands)."""
        event = self.wake.get(pchannel)
        if event is not None and not event.triggered:
            event.succeed()

    @abstractmethod
    def on_pack(self, vchannel: str, pack):
        """Handle one vchannel's pack: ``None`` when done at once, steps to drive (it takes simulated time), or
        :data:`STOP` to end the pchannel's process."""

    def _consume(self, pchannel: str):
        env = self.sim.env
        if self.wake_on_start:
            self.kick(pchannel)
        while True:
            yield self.wake[pchannel]
            self.wake[pchannel] = env.event()
            yield env.timeout(self.sim.one_way("mq"))
            manager = self.dispatchers[pchannel]
            while (packs := manager.poll()) is not None:
                for vchannel in sorted(packs):
                    steps = self.on_pack(vchannel, packs[vchannel])
                    if steps is STOP:
                        return
                    if steps is not None:
                        yield from steps
