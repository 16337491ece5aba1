"""``Dispatcher``: one ``MqTtMsgStream`` on a pchannel, split into one pack stream per vchannel.

Models ``pkg/mq/msgdispatcher/dispatcher.go`` (Milvus 2.5): ``NewDispatcher``, ``AddTarget``,
``GetTarget``, ``RemoveTarget``, ``work`` and ``groupingMsgs``; and the ``target`` of ``target.go``.

Several vchannels (of one or several collections) share a pchannel; DataNode and QueryNode consume
a vchannel through a dispatcher on its pchannel. Every pack of the stream becomes one pack per
target with the stream pack's Begin/End ts and positions, so a target gets the time tick even when
none of the messages is its own. A target registered at a position skips every pack with
``EndTs <= pos.Timestamp``: the dispatcher may have started (or seeked) earlier than this target,
and those packs were already consumed by whoever produced that position.

The Go dispatcher pushes packs into each target's Go channel from a goroutine; here :meth:`poll`
returns them.

Simplification: replicate messages and targets' replicate configs (CDC) are left out.
Simplification: no pause/resume/terminate signals, no send timeout (``mq.dispatcher.maxTolerantLag``), so no
lagging target is split off into its own dispatcher; no pullback notification (the manager never waits for
one, see :mod:`milvus_edu.mq.manager`, which builds and merges dispatchers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..config import MQParams
from ..proto import MsgPosition, MsgType
from .broker import Broker
from .msg import MsgPack, TsMsg
from .msgstream import MqTtMsgStream, SubscriptionPosition
from .names import to_physical_channel

_DDL_TYPES = (
    MsgType.CREATE_COLLECTION, MsgType.DROP_COLLECTION, MsgType.CREATE_PARTITION, MsgType.DROP_PARTITION,
)


@dataclass(frozen=True)
class Target:
    """``target``: a vchannel fed by a dispatcher and the position it was registered at."""

    vchannel: str
    pos: MsgPosition | None = None


class Dispatcher:
    """``Dispatcher``: reads ``pchannel`` from ``position`` (a seek) or from ``sub_pos``.

    ``position`` may name the vchannel; it is turned into the pchannel (``ToPhysicalChannel``). A
    position without a msg id is treated as no position, as in Go.
    """

    def __init__(
        self,
        broker: Broker,
        pchannel: str,
        position: MsgPosition | None = None,
        sub_pos: str = SubscriptionPosition.EARLIEST,
        *,
        now_ns: Callable[[], int],
        params: MQParams | None = None,
        dispatcher_id: int = 0,
    ):
        self.pchannel = pchannel
        self.id = dispatcher_id
        self.sub_name = f"{pchannel}-{dispatcher_id}-{now_ns()}"
        self.stream = MqTtMsgStream(broker, now_ns, params)
        self._targets: dict[str, Target] = {}
        self._cur_ts = 0
        self._last_skipped: tuple[str, ...] = ()
        if position is not None and position.msg_id is not None:
            seek_pos = replace(position, channel_name=to_physical_channel(position.channel_name))
            self.stream.as_consumer([pchannel], self.sub_name, SubscriptionPosition.UNKNOWN)
            self.stream.seek([seek_pos])
        else:
            self.stream.as_consumer([pchannel], self.sub_name, sub_pos)

    @property
    def cur_ts(self) -> int:
        """``CurTs``: the end-position timestamp of the last pack consumed (0 before any)."""
        return self._cur_ts

    @property
    def last_skipped(self) -> tuple[str, ...]:
        """Targets that skipped the last pack because ``EndTs <= target.pos.Timestamp``."""
        return self._last_skipped

    def add_target(self, vchannel: str, position: MsgPosition | None = None) -> bool:
        """``AddTarget``: register a vchannel; an existing target is kept as is (False returned)."""
        if vchannel in self._targets:
            return False
        self._targets[vchannel] = Target(vchannel, position)
        return True

    def get_target(self, vchannel: str) -> Target:
        """``GetTarget``."""
        try:
            return self._targets[vchannel]
        except KeyError:
            raise ValueError(f"cannot find target, vchannel={vchannel}") from None

    def get_targets(self) -> list[Target]:
        """``GetTargets``, in registration order."""
        return list(self._targets.values())

    def has_target(self, vchannel: str) -> bool:
        """``HasTarget``."""
        return vchannel in self._targets

    def remove_target(self, vchannel: str) -> bool:
        """``RemoveTarget``: False (Go only warns) when there is no such target."""
        return self._targets.pop(vchannel, None) is not None

    def target_num(self) -> int:
        """``TargetNum``."""
        return len(self._targets)

    def poll(self) -> dict[str, MsgPack] | None:
        """One iteration of ``work``: the next stream pack split per target, or None if none is ready.

        An empty dict means a pack was consumed (``cur_ts`` moved) but no target took it. The stream
        reads one pchannel and always has that channel's tick buffered when it packs, so every pack
        has the one end position ``work`` requires (Go drops a pack that has not).
        """
        pack = self.stream.poll()
        if pack is None:
            return None
        self._cur_ts = pack.end_positions[0].timestamp
        out: dict[str, MsgPack] = {}
        skipped = []
        for vchannel, target_pack in self.grouping_msgs(pack).items():
            target = self._targets[vchannel]
            # The dispatcher seeks from the oldest target; younger targets drop what they already have.
            if target.pos is not None and target_pack.end_ts <= target.pos.timestamp:
                skipped.append(vchannel)
                continue
            out[vchannel] = target_pack
        self._last_skipped = tuple(skipped)
        return out

    def poll_all(self) -> list[dict[str, MsgPack]]:
        """Every dispatch that can be completed now (``poll`` until None)."""
        rounds = []
        while (out := self.poll()) is not None:
            rounds.append(out)
        return rounds

    def grouping_msgs(self, pack: MsgPack) -> dict[str, MsgPack]:
        """``groupingMsgs``: one pack per target, each message routed to the targets it concerns.

        Insert/Delete go to the target named by their ``shard_name`` (dropped if none);
        Create/DropCollection and Create/DropPartition go to every target whose name *contains*
        the collection id as a substring (Go's ``strings.Contains``). Any other type has no
        collection id, and every name contains the empty string, so it goes to every target; so
        does an Insert/Delete with an empty ``shard_name`` (Go branches on the name, not the type).
        Every target that gets no message shares one empty pack (a pack is immutable; most targets
        of most packs get only the time range): the stream's pack itself when it has no message.
        """
        grouped: dict[str, list[TsMsg]] = {vchannel: [] for vchannel in self._targets}
        for msg in pack.msgs:
            if msg.msg_type in (MsgType.INSERT, MsgType.DELETE) and msg.shard_name:
                if msg.shard_name in grouped:
                    grouped[msg.shard_name].append(msg)
                continue
            collection_id = str(msg.collection_id) if msg.msg_type in _DDL_TYPES else ""
            for vchannel, msgs in grouped.items():
                if collection_id in vchannel:
                    msgs.append(msg)
        empty = pack if not pack.msgs else MsgPack(pack.begin_ts, pack.end_ts, (), pack.start_positions,
                                                   pack.end_positions)
        return {
            vchannel: MsgPack(pack.begin_ts, pack.end_ts, tuple(msgs), pack.start_positions, pack.end_positions)
            if msgs else empty
            for vchannel, msgs in grouped.items()
        }
