"""The message queue: every pchannel is an append-only log of messages.

Models what Milvus 2.5 needs from its MQ (RocksMQ, Pulsar or Kafka behind
``pkg/mq/msgstream/mqwrapper``): ``Producer.Send`` returning a ``MessageID``, topics that exist once
written to, and a consumer that can start at the earliest or latest message or at a given
``MessageID`` (inclusive). The consumer side (cursor, buffering) lives in ``msgstream.py``.

Message ids are integers that start at 1 (:data:`FIRST_MSG_ID`) in every channel and grow by one
per message, so a position's ``msg_id`` is never 0 and ``None`` keeps meaning "no id" (Milvus's
empty ``MsgID``).

Simplification: one partition per topic, no retention (nothing is ever truncated), no acks.
Simplification: a subscription name keeps no cursor in the broker; each consumer starts where it is
told (earliest, latest or a seek).
Simplification: a produced message is stamped with a position ``(channel, msg_id, BeginTs)``; the Go
``MqTtMsgStream`` sets only channel and id on consume (the plain ``mqMsgStream`` also sets BeginTs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from ..proto import MsgPosition, MsgType
from .msg import DeleteMsg, InsertMsg, TimeTickMsg, TsMsg

#: The id of the first message of every channel.
FIRST_MSG_ID = 1

GrowCallback = Callable[[str, int], None]
#: The messages produced on every DML task and tick: known to be ``TsMsg`` without asking the ABC.
_PRODUCIBLE = frozenset({InsertMsg, DeleteMsg, TimeTickMsg})
#: Every ``MsgType`` name (what ``watch``'s ``msg_types`` may name).
_MSG_TYPES = frozenset(v for k, v in vars(MsgType).items() if k.isupper())


class Broker:
    """All pchannels of one MQ: ``produce``/``broadcast`` append, consumers ``read`` from an id on."""

    def __init__(self) -> None:
        self._logs: dict[str, list[TsMsg]] = {}
        self._watchers: dict[str, list[tuple[GrowCallback, frozenset[str] | None]]] = {}
        # Per watched channel: whether a watcher wants every type, and the types the others want. Looked
        # up on every produce, so that a DML message on a channel watched for time ticks only (each
        # consumer's) costs one set lookup, not a pass over the watchers.
        self._woken: dict[str, tuple[bool, frozenset[str]]] = {}

    def create_channel(self, channel: str) -> None:
        """Create ``channel`` if it does not exist (topics are created on first use, as in Pulsar/RocksMQ)."""
        if not channel:
            raise ValueError("channel name is empty; pass a pchannel name such as 'by-dev-rootcoord-dml_0'")
        self._logs.setdefault(channel, [])

    def has_channel(self, channel: str) -> bool:
        """Whether ``channel`` exists."""
        return channel in self._logs

    def channels(self) -> list[str]:
        """Every channel, in creation order."""
        return list(self._logs)

    def produce(self, channel: str, msg: TsMsg) -> int:
        """``Producer.Send``: append ``msg`` to ``channel``; return its msg id.

        The stored message carries its position from now on: a copy of ``msg`` with it, or ``msg``
        itself when it was built with exactly that position (``channel``, :meth:`next_msg_id`, its
        ``BeginTs``, no group), as the simulator's DML path builds its messages. Watchers of the
        channel are called after the append, with ``(channel, msg_id)``.
        """
        if type(msg) not in _PRODUCIBLE and not isinstance(msg, TsMsg):
            raise ValueError(f"can only produce a TsMsg, got {type(msg).__name__}")
        log = self._logs.get(channel)
        if log is None:
            self.create_channel(channel)
            log = self._logs[channel]
        msg_id = FIRST_MSG_ID + len(log)
        pos = msg.position
        if (pos is None or pos.msg_id != msg_id or pos.channel_name != channel or pos.msg_group
                or pos.timestamp != msg.begin_ts()):
            msg = dataclasses.replace(msg, position=MsgPosition(channel, msg_id, msg.begin_ts()))
        log.append(msg)
        woken = self._woken.get(channel)
        if woken is not None and (woken[0] or msg.msg_type in woken[1]):
            msg_type = msg.msg_type
            for callback, msg_types in tuple(self._watchers[channel]):  # a callback may cancel its own watch
                if msg_types is None or msg_type in msg_types:
                    callback(channel, msg_id)
        return msg_id

    def broadcast(self, channels: Iterable[str], msg: TsMsg) -> dict[str, int]:
        """``Broadcast``: produce ``msg`` to every channel; return ``{channel: msg_id}``."""
        return {channel: self.produce(channel, msg) for channel in channels}

    def get(self, channel: str, msg_id: int) -> TsMsg:
        """The message with ``msg_id`` in ``channel``."""
        log = self._log(channel)
        if not FIRST_MSG_ID <= msg_id < FIRST_MSG_ID + len(log):
            raise ValueError(f"no message {msg_id} in {channel!r}; its ids are {self._id_range(channel)}")
        return log[msg_id - FIRST_MSG_ID]

    def read(self, channel: str, msg_id: int, limit: int | None = None) -> list[TsMsg]:
        """Messages of ``channel`` from ``msg_id`` (inclusive) on, at most ``limit`` of them."""
        if msg_id < FIRST_MSG_ID:
            raise ValueError(f"msg id {msg_id} is below the first id {FIRST_MSG_ID}")
        start = msg_id - FIRST_MSG_ID
        stop = None if limit is None else start + limit
        return list(self._log(channel)[start:stop])

    def earliest_msg_id(self, channel: str) -> int:
        """Where an ``Earliest`` subscription starts (the first id, even while the channel is empty)."""
        self._log(channel)
        return FIRST_MSG_ID

    def latest_msg_id(self, channel: str) -> int | None:
        """``GetLatestMsgID``: the id of the last message, ``None`` for an empty channel."""
        n = len(self._log(channel))
        return FIRST_MSG_ID + n - 1 if n else None

    def next_msg_id(self, channel: str) -> int:
        """The id the next produced message will get (where a ``Latest`` subscription starts)."""
        return FIRST_MSG_ID + len(self._log(channel))

    def watch(self, channel: str, callback: GrowCallback, msg_types: Iterable[str] | None = None) -> Callable[[], None]:
        """Call ``callback(channel, msg_id)`` after every message produced to ``channel``.

        With ``msg_types`` (``MsgType`` names), only after messages of those types: a consumer that
        wakes on time ticks alone is then not called for every DML message. Creates the channel if
        needed. Returns a function that cancels the watch.
        """
        types = None
        if msg_types is not None:
            types = frozenset((msg_types,) if isinstance(msg_types, str) else msg_types)
            unknown = sorted(map(repr, types - _MSG_TYPES))
            if not types or unknown:
                raise ValueError(f"msg_types {', '.join(unknown) or '(none)'} unknown; pass MsgType names, "
                                 f"one or more of {', '.join(sorted(_MSG_TYPES))}")
        self.create_channel(channel)
        watchers = self._watchers.setdefault(channel, [])
        entry = (callback, types)
        watchers.append(entry)
        self._update_woken(channel)

        def cancel() -> None:
            if entry in watchers:
                watchers.remove(entry)
                self._update_woken(channel)

        return cancel

    def _update_woken(self, channel: str) -> None:
        """Work out which produced types call a watcher of ``channel`` (after a watch or a cancel)."""
        watchers = self._watchers.get(channel)
        if not watchers:
            self._woken.pop(channel, None)
            return
        self._woken[channel] = (any(types is None for _, types in watchers),
                                frozenset().union(*(types for _, types in watchers if types is not None)))

    def _log(self, channel: str) -> list[TsMsg]:
        try:
            return self._logs[channel]
        except KeyError:
            raise ValueError(f"channel {channel!r} does not exist; produce to it or create_channel first") from None

    def _id_range(self, channel: str) -> str:
        n = len(self._logs[channel])
        return f"{FIRST_MSG_ID}..{FIRST_MSG_ID + n - 1}" if n else "none (empty channel)"
