"""``MqTtMsgStream``: consume pchannels and hand out one ``MsgPack`` per time-tick round.

Models ``pkg/mq/msgstream/mq_msgstream.go`` (Milvus 2.5): ``addConsumer``, ``AsConsumer``,
``continueBuffering``, ``bufMsgPackToChannel``, ``consumeToTtMsg``, ``allChanReachSameTtMsg`` and
``Seek`` of ``MqTtMsgStream``.

The rule: a consumer buffers every message of its channel until a time tick arrives; once every
channel has reached the same tick ``tt`` (and ``tt`` is newer than the last pack), every buffered
message with ``EndTs <= tt`` goes into the pack and the rest stays buffered for a later round. So a
pack of ``(lastTs, tt]`` also carries "late leftovers": messages read in an earlier round whose
``EndTs`` only fits now. Each channel's end position points at its first message *not* emitted (or at
the tick when all were), stamped with ``tt``; seeking there replays exactly what was not delivered
(given the watermark promise and, as in Milvus, one timestamp for all rows of a message).

The Go stream runs ``bufMsgPackToChannel`` in a goroutine that blocks in ``consumeToTtMsg``. Here the
same loop is **poll-driven**: :meth:`MqTtMsgStream.poll` reads what the broker holds, advances the
loop as far as it can, and returns the next pack once it is complete (else ``None``); the loop state
(open round, consumers still waiting for their tick, the pack being built) is kept between calls,
so no message is lost or read twice. Call ``poll`` until it returns ``None`` whenever a channel grows.

Simplification: ``consumeToTtMsg`` also returns after 3 s without any message
(``MQParams.consume_idle_timeout_ns``); not modelled - a consumer waits for its tick. It only
matters when ticks stop while a pursuit-mode pack is open: Go then re-checks every 3 s and hands the
pack out once ``mq.pursuitBufferTime`` has passed; here the pack waits for the next tick.
Simplification: ``Seek`` reads synchronously until its stop tick in Go; here :meth:`seek` reads what
is there and :meth:`poll` finishes the seek before buffering starts.
Simplification: packs list channels (and messages of different channels) in subscription order,
where Go iterates maps in random order.
Simplification: no replicate messages, context cancellation, retries, bad-position handling
(``mq.ignoreBadPosition`` = false behaviour only) or consumer close.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..config import MS, MQParams
from ..proto import MsgPosition, MsgType
from ..tsoutil import physical_time
from .broker import FIRST_MSG_ID, Broker
from .msg import MsgPack, TsMsg, is_dml_msg

#: Messages a consumer takes from the broker per read (a read copies them; a tick usually comes sooner).
_READ_CHUNK = 256


class SubscriptionPosition:
    """``common.SubscriptionInitialPosition``: where a new consumer starts."""

    LATEST = "Latest"
    """Only messages produced after subscribing."""
    EARLIEST = "Earliest"
    """From the first message of the channel."""
    UNKNOWN = "Unknown"
    """No explicit start (RocksMQ then starts at the earliest); used before a ``seek``."""

    ALL = (LATEST, EARLIEST, UNKNOWN)


class SeekError(ValueError):
    """``MqTtMsgStream.Seek`` refused a position (Milvus's message is kept verbatim)."""


@dataclass
class _Consumer:
    """A consumer of one channel: ``mqwrapper.Consumer`` reduced to its cursor and subscription."""

    channel: str
    sub_name: str
    next_id: int
    seek_pos: MsgPosition | None = None
    """Set while a seek is still skipping messages up to its stop tick."""


class MqTtMsgStream:
    """``MqTtMsgStream``: tick-aligned packs over one or more pchannels of a :class:`Broker`.

    ``now_ns`` is the consumer's wall clock (Unix ns), read only by pursuit mode.
    """

    def __init__(self, broker: Broker, now_ns: Callable[[], int], params: MQParams | None = None):
        self.broker = broker
        self.now_ns = now_ns
        self.params = params or MQParams()
        self._consumers: dict[str, _Consumer] = {}
        self._chan_msg_buf: dict[str, list[TsMsg]] = {}
        self._chan_msg_pos: dict[str, MsgPosition | None] = {}
        self._chan_tt_msg_time: dict[str, int] = {}
        self._chan_tt_msg_sync: dict[str, bool] = {}
        self._last_timestamp = 0
        self._seek_skipped: dict[str, list[TsMsg]] = {}
        # The pack being built by the current bufMsgPackToChannel iteration.
        self._packing = False
        self._time_tick_buf: list[TsMsg] = []
        self._start_positions: dict[str, MsgPosition] = {}
        self._end_positions: dict[str, MsgPosition] = {}
        self._end_ts = 0
        self._size = 0
        self._start_buf_time = 0
        self._contains_end_buffer_msg = False
        # The current round: consumers still reading up to their next time tick.
        self._round_open = False
        self._pending: list[str] = []

    # ---- read-only state ------------------------------------------------------------------------
    @property
    def last_timestamp(self) -> int:
        """``lastTimeStamp``: the EndTs of the last pack handed out (the next pack's BeginTs)."""
        return self._last_timestamp

    @property
    def consumer_channels(self) -> list[str]:
        """``consumerChannels``: subscribed channels, in subscription order."""
        return list(self._consumers)

    @property
    def seeking(self) -> bool:
        """Whether some seek has not reached its stop tick yet (no pack before it does)."""
        return any(c.seek_pos is not None for c in self._consumers.values())

    @property
    def pending_consumers(self) -> list[str]:
        """Channels of the open round still reading towards their next time tick."""
        return list(self._pending) if self._round_open else []

    def buffered(self, channel: str) -> tuple[TsMsg, ...]:
        """``chanMsgBuf[channel]``: messages read but not yet emitted (time ticks included)."""
        return tuple(self._chan_msg_buf[self._known(channel)])

    def chan_msg_pos(self, channel: str) -> MsgPosition | None:
        """``chanMsgPos[channel]``: where the channel's next pack starts."""
        return self._chan_msg_pos[self._known(channel)]

    def chan_tt_msg_time(self, channel: str) -> int:
        """``chanTtMsgTime[channel]``: the last time tick read from the channel (0 before any)."""
        return self._chan_tt_msg_time[self._known(channel)]

    def chan_tt_msg_sync(self, channel: str) -> bool:
        """``chanTtMsgSync[channel]``: True while the channel waits at the max tick for the others."""
        return self._chan_tt_msg_sync.get(self._known(channel), False)

    def cursor(self, channel: str) -> int:
        """The msg id the channel's consumer reads next."""
        return self._consumers[self._known(channel)].next_id

    def seek_skipped(self, channel: str) -> tuple[TsMsg, ...]:
        """Messages the last seek on ``channel`` skipped (``BeginTs <= position.Timestamp``)."""
        return tuple(self._seek_skipped.get(self._known(channel), ()))

    # ---- subscription -----------------------------------------------------------------------------
    def add_consumer(self, consumer: _Consumer, channel: str) -> None:
        """``addConsumer``: (re)register a consumer with an empty buffer, no tick, no msg id yet."""
        self._consumers[channel] = consumer
        self._chan_msg_buf[channel] = []
        self._chan_msg_pos[channel] = MsgPosition(channel, None, self._last_timestamp)
        self._chan_tt_msg_time[channel] = 0

    def as_consumer(
        self, channels: Iterable[str], sub_name: str, position: str = SubscriptionPosition.EARLIEST
    ) -> None:
        """``AsConsumer``: subscribe every channel not yet subscribed, starting at ``position``."""
        if position not in SubscriptionPosition.ALL:
            raise ValueError(f"unknown subscription position {position!r}; use one of {SubscriptionPosition.ALL}")
        for channel in channels:
            if channel in self._consumers:
                continue
            self.broker.create_channel(channel)
            if position == SubscriptionPosition.LATEST:
                start = self.broker.next_msg_id(channel)
            else:
                start = self.broker.earliest_msg_id(channel)
            self.add_consumer(_Consumer(channel, sub_name, start), channel)

    def seek(self, positions: Sequence[MsgPosition]) -> None:
        """``Seek(positions, includeCurrentMsg)``: restart each channel at a position (inclusive).

        For each position, in order: the channel must be subscribed and the position must carry a
        msg id; the consumer is re-added (empty buffer, tick 0) with ``chanMsgPos`` = the position,
        then reads from the msg id on: a message with ``BeginTs <= pos.Timestamp`` is skipped, any
        other non-tick message is buffered, and the first time tick with ``BeginTs >= pos.Timestamp``
        ends the seek (that tick is not buffered). ``includeCurrentMsg`` is ignored by the Tt stream,
        so there is no such argument.
        """
        for pos in positions:
            if pos.msg_id is None:
                raise SeekError("when msgID's length equal to 0, please use AsConsumer interface")
            consumer = self._consumers.get(pos.channel_name)
            if consumer is None:
                raise SeekError(f"failed to seek, error please subcribe the channel, channel name ={pos.channel_name}")
            upper = self.broker.next_msg_id(pos.channel_name)
            if not FIRST_MSG_ID <= pos.msg_id <= upper:
                raise SeekError(
                    f"failed to seek, msg id {pos.msg_id} is not in {pos.channel_name!r} "
                    f"(valid: {FIRST_MSG_ID}..{upper}); seek to a position this broker produced"
                )
            consumer.next_id = pos.msg_id
            self.add_consumer(consumer, pos.channel_name)
            self._chan_msg_pos[pos.channel_name] = pos
            consumer.seek_pos = pos
            self._seek_skipped[pos.channel_name] = []
            self._seek_read(consumer)

    def _seek_read(self, consumer: _Consumer) -> None:
        """The synchronous read loop at the end of ``Seek``, as far as the broker holds messages."""
        pos = consumer.seek_pos
        while pos is not None and consumer.next_id < self.broker.next_msg_id(consumer.channel):
            msg = self.broker.get(consumer.channel, consumer.next_id)
            consumer.next_id += 1
            if msg.msg_type == MsgType.TIME_TICK and msg.begin_ts() >= pos.timestamp:
                consumer.seek_pos = pos = None
            elif msg.begin_ts() > pos.timestamp:
                self._chan_msg_buf[consumer.channel].append(msg)
            else:
                self._seek_skipped[consumer.channel].append(msg)

    # ---- the buffering loop -----------------------------------------------------------------------
    def continue_buffering(self, end_ts: int, size: int, start_time_ns: int) -> bool:
        """``continueBuffering``: whether to merge one more tick round into the current pack.

        The first round always buffers; after it, only pursuit mode keeps going, and only while the
        pack is small (``mq.pursuitBufferSize``), young (``mq.pursuitBufferTime``) and the stream is
        far behind (``now - phys(endTs) > mq.pursuitLag``).
        """
        if end_ts == 0:
            return True
        p = self.params
        if not p.enable_pursuit_mode:
            return False
        if size > p.pursuit_buffer_size:
            return False
        now = self.now_ns()
        if now - start_time_ns > p.pursuit_buffer_time_ns:
            return False
        return now - physical_time(end_ts) * MS > p.pursuit_lag_ns

    def consume_to_tt_msg(self, channel: str) -> bool:
        """``consumeToTtMsg``: buffer the channel's messages up to and including its next time tick.

        Returns True once a tick was read (``chanTtMsgTime`` updated), False if the broker ran out
        first; what was read stays buffered and the next call goes on from there.
        """
        consumer = self._consumers[channel]
        buffered = self._chan_msg_buf[channel]
        while msgs := self.broker.read(channel, consumer.next_id, limit=_READ_CHUNK):
            for msg in msgs:
                consumer.next_id += 1
                buffered.append(msg)
                if msg.msg_type == MsgType.TIME_TICK:
                    self._chan_tt_msg_time[channel] = msg.timestamp
                    return True
        return False

    def all_chan_reach_same_tt_msg(self) -> tuple[int, bool]:
        """``allChanReachSameTtMsg``: ``(tt, True)`` when every channel's last tick is the same.

        Otherwise ``(0, False)``, and a channel already at the max tick is marked synced so the next
        round does not read it further (it waits for the laggards).
        """
        times = self._chan_tt_msg_time
        max_time = max(times.values(), default=0)
        if len(set(times.values())) <= 1:
            for channel in times:
                self._chan_tt_msg_sync[channel] = False
            return max_time, True
        for channel, t in times.items():
            self._chan_tt_msg_sync[channel] = t == max_time
        return 0, False

    def poll(self) -> MsgPack | None:
        """Advance ``bufMsgPackToChannel`` with what the broker holds; the next pack, or None.

        Never returns a pack before every seek has reached its stop tick. One call returns at most
        one pack: call again until None.
        """
        if not self._consumers:
            return None
        seeking = False  # self.seeking after the reads, worked out in the same pass (poll runs on every append)
        for consumer in self._consumers.values():
            if consumer.seek_pos is not None:
                self._seek_read(consumer)
                seeking = seeking or consumer.seek_pos is not None
        if seeking:
            return None
        if not self._packing:
            self._begin_pack()
        while True:
            if not self._round_open:
                more = self.continue_buffering(self._end_ts, self._size, self._start_buf_time)
                if not more or self._contains_end_buffer_msg:
                    return self._emit_pack()
                self._round_open = True
                self._pending = [ch for ch in self._consumers if not self._chan_tt_msg_sync.get(ch, False)]
            self._pending = [ch for ch in self._pending if not self.consume_to_tt_msg(ch)]
            if self._pending:
                return None
            self._round_open = False
            curr_ts, ok = self.all_chan_reach_same_tt_msg()
            if not ok or curr_ts <= self._last_timestamp:
                continue
            self._end_ts = curr_ts
            self._take_round(curr_ts)

    def poll_all(self) -> list[MsgPack]:
        """Every pack that can be completed now (``poll`` until None)."""
        packs = []
        while (pack := self.poll()) is not None:
            packs.append(pack)
        return packs

    def _begin_pack(self) -> None:
        self._packing = True
        self._time_tick_buf = []
        self._start_positions = {}
        self._end_positions = {}
        self._end_ts = 0
        self._size = 0
        self._start_buf_time = self.now_ns()
        self._contains_end_buffer_msg = False

    def _take_round(self, curr_ts: int) -> None:
        """One successful round of ``bufMsgPackToChannel``: move every message with EndTs <= tt out."""
        for channel, msgs in self._chan_msg_buf.items():
            if not msgs:
                continue
            start_pos = self._chan_msg_pos[channel]
            name = start_pos.channel_name
            self._start_positions.setdefault(name, start_pos)
            keep: list[TsMsg] = []
            time_tick_msg = None
            for msg in msgs:
                if msg.msg_type == MsgType.TIME_TICK:
                    time_tick_msg = msg
                    continue
                if msg.end_ts() <= curr_ts:
                    self._size += msg.size()
                    self._time_tick_buf.append(msg)
                else:
                    keep.append(msg)
                # Even a DropCollection kept for a later round ends this pack's buffering.
                if msg.msg_type == MsgType.DROP_COLLECTION:
                    self._contains_end_buffer_msg = True
            self._chan_msg_buf[channel] = keep
            anchor = keep[0] if keep else time_tick_msg
            new_pos = None
            if anchor is not None:
                new_pos = MsgPosition(
                    anchor.position.channel_name, anchor.position.msg_id, curr_ts,
                    self._consumers[channel].sub_name,
                )
                self._end_positions[name] = new_pos
            self._chan_msg_pos[channel] = new_pos

    def _emit_pack(self) -> MsgPack:
        """Close the pack: de-duplicate DML by ``msg_id`` (first wins), advance ``lastTimeStamp``."""
        seen: set[int] = set()
        unique: list[TsMsg] = []
        for msg in self._time_tick_buf:
            if is_dml_msg(msg) and msg.msg_id in seen:
                continue
            # Non-DML messages are never dropped, but their id still counts as seen.
            seen.add(msg.msg_id)
            unique.append(msg)
        pack = MsgPack(
            begin_ts=self._last_timestamp,
            end_ts=self._end_ts,
            msgs=tuple(unique),
            start_positions=tuple(self._start_positions.values()),
            end_positions=tuple(self._end_positions.values()),
        )
        self._last_timestamp = self._end_ts
        self._begin_pack()
        return pack

    def _known(self, channel: str) -> str:
        if channel not in self._consumers:
            raise ValueError(f"channel {channel!r} is not consumed by this stream; as_consumer it first")
        return channel
