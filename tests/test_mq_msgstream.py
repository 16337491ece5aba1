"""The broker, the messages and ``MqTtMsgStream`` (reference §3.2-3.4).

Ports the TtMsgStream tests of Milvus 2.5 ``pkg/mq/msgstream/mq_msgstream_test.go`` (Pulsar) and
``mq_rocksmq_msgstream_test.go`` (RocksMQ) onto the in-memory :class:`Broker`, then pins each rule
of ``bufMsgPackToChannel``/``Seek`` one branch at a time, and checks three invariants with hypothesis:

1. the exact rule the Go loop implements, for any log (late messages included): a message is emitted
   in the first successful round whose closing tick follows it in its channel and is ``>= EndTs``;
2. under the watermark promise (after a tick ``t`` every message has ``ts > t``), each pack holds
   exactly the messages with ``lastTs < EndTs <= tt``, pursuit mode or not;
3. seeking to any pack's end positions replays exactly the messages not delivered yet.

No test sleeps: the stream's clock is a :class:`ManualClock` or a list of readings.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.clock import ManualClock
from milvus_edu.config import MS, S, MQParams
from milvus_edu.mq import (
    FIRST_MSG_ID,
    Broker,
    CreateCollectionMsg,
    CreatePartitionMsg,
    DeleteMsg,
    DropCollectionMsg,
    InsertMsg,
    MqTtMsgStream,
    SeekError,
    SubscriptionPosition,
    TimeTickMsg,
    is_dml_msg,
)
from milvus_edu.proto import MsgPosition, MsgType
from milvus_edu.tsoutil import compose_ts

NO_PURSUIT = MQParams(enable_pursuit_mode=False)
_ids = iter(range(1, 10**9))


def ins(ts, msg_id=None, shard="0", timestamps=None) -> InsertMsg:
    """``getTsMsg(Insert, reqID)``: one row at ``ts``; ``msg_id`` defaults to a fresh unique id."""
    rows = tuple(timestamps) if timestamps is not None else (ts,)
    return InsertMsg(
        msg_id=next(_ids) if msg_id is None else msg_id, shard_name=shard, collection_id=1,
        partition_id=1, segment_id=1, pks=tuple(range(len(rows))), timestamps=rows,
    )


def tt(ts) -> TimeTickMsg:
    """``getTimeTickMsg(ts)``."""
    return TimeTickMsg(timestamp=ts)


def produce(broker, channel, *msgs) -> list[int]:
    return [broker.produce(channel, m) for m in msgs]


def new_stream(broker, channels, params=NO_PURSUIT, clock=None, position=SubscriptionPosition.EARLIEST):
    stream = MqTtMsgStream(broker, clock or ManualClock(), params)
    stream.as_consumer(channels, "sub", position)
    return stream


def seek_stream(broker, positions, params=NO_PURSUIT, clock=None):
    """``getPulsarTtOutputStreamAndSeek``: subscribe with Unknown, then seek."""
    stream = MqTtMsgStream(broker, clock or ManualClock(), params)
    stream.as_consumer([p.channel_name for p in positions], "seek-sub", SubscriptionPosition.UNKNOWN)
    stream.seek(positions)
    return stream


def key(msg):
    return (msg.position.channel_name, msg.position.msg_id)


# ---- broker -------------------------------------------------------------------------------------------

def test_msg_ids_start_at_one_and_grow_per_channel():
    """Each channel numbers its own messages 1, 2, 3, ...; 0 is never an id."""
    b = Broker()
    assert produce(b, "a", tt(1), tt(2)) == [FIRST_MSG_ID, FIRST_MSG_ID + 1] == [1, 2]
    assert produce(b, "b", tt(1)) == [1]
    assert b.latest_msg_id("a") == 2 and b.next_msg_id("a") == 3 and b.earliest_msg_id("a") == 1


def test_produced_message_keeps_its_position():
    """The stored copy carries ``(channel, msg_id, BeginTs)``; the caller's object is untouched."""
    b = Broker()
    m = ins(7)
    msg_id = b.produce("a", m)
    stored = b.get("a", msg_id)
    assert stored.position == MsgPosition("a", msg_id, 7)
    assert m.position is None and stored.pks == m.pks


def test_read_is_inclusive_and_bounded():
    """``read(channel, id)`` starts at ``id`` itself; an empty channel has no latest id."""
    b = Broker()
    b.create_channel("e")
    assert b.latest_msg_id("e") is None and b.read("e", 1) == []
    produce(b, "a", tt(1), tt(2), tt(3))
    assert [m.timestamp for m in b.read("a", 2)] == [2, 3]
    assert [m.timestamp for m in b.read("a", 1, limit=2)] == [1, 2]


def test_broadcast_appends_one_copy_per_channel():
    """``Broadcast`` returns every channel's id; each copy has its own position."""
    b = Broker()
    produce(b, "a", tt(1))
    ids = b.broadcast(["a", "b"], tt(5))
    assert ids == {"a": 2, "b": 1}
    assert b.get("a", 2).position.channel_name == "a" and b.get("b", 1).position.channel_name == "b"


def test_watch_reports_every_append_until_cancelled():
    """The simulator wakes a consumer from the broker's growth callbacks."""
    b = Broker()
    seen = []
    cancel = b.watch("a", lambda ch, msg_id: seen.append((ch, msg_id)))
    produce(b, "a", tt(1), tt(2))
    produce(b, "b", tt(1))
    cancel()
    produce(b, "a", tt(3))
    assert seen == [("a", 1), ("a", 2)]


def test_broker_watch_filters_by_msg_type():
    """A watch with ``msg_types`` hears only those messages (a tick-driven consumer is not called per
    DML message); cancelling one of two watches of the same callback leaves the other."""
    b = Broker()
    ticks, every = [], []
    cancel_ticks = b.watch("a", lambda ch, msg_id: ticks.append(msg_id), msg_types=[MsgType.TIME_TICK])
    b.watch("a", lambda ch, msg_id: every.append(msg_id))
    produce(b, "a", ins(5), tt(10), ins(12), tt(20))
    assert ticks == [2, 4]
    assert every == [1, 2, 3, 4]
    cancel_ticks()
    produce(b, "a", tt(30))
    assert ticks == [2, 4] and every == [1, 2, 3, 4, 5]
    b.watch("a", lambda ch, msg_id: ticks.append(msg_id), msg_types=MsgType.INSERT)  # one name alone
    produce(b, "a", ins(31), tt(40))
    assert ticks == [2, 4, 6]


_WATCH_OPS = st.lists(st.one_of(
    st.tuples(st.just("watch"), st.sampled_from("ab"),
              st.none() | st.sets(st.sampled_from([MsgType.TIME_TICK, MsgType.INSERT, MsgType.DELETE]), min_size=1)),
    st.tuples(st.just("cancel"), st.integers(0, 9)),
    st.tuples(st.just("produce"), st.sampled_from("ab"), st.sampled_from(["tt", "ins"])),
), max_size=30)


@settings(max_examples=200, deadline=None)
@given(_WATCH_OPS)
def test_broker_calls_exactly_the_watchers_whose_types_match_through_watches_and_cancels(ops):
    """Whatever the order of watches, cancels and produces, every produce calls, in watch order, each
    live watcher of its channel that wants its type (the broker's per-channel summary of the wanted
    types never skips one nor adds one)."""
    b = Broker()
    calls, expected, live, cancels = [], [], [], []
    for op in ops:
        if op[0] == "watch":
            _, ch, types = op
            n = len(cancels)
            cancels.append(b.watch(ch, lambda c, msg_id, n=n: calls.append((n, c, msg_id)), msg_types=types))
            live.append((n, ch, types))
        elif op[0] == "cancel":
            if op[1] < len(cancels):
                cancels[op[1]]()
                live = [w for w in live if w[0] != op[1]]
        else:
            _, ch, kind = op
            msg = tt(5) if kind == "tt" else ins(5)
            msg_id = b.produce(ch, msg)
            expected += [(n, ch, msg_id) for n, wch, types in live
                         if wch == ch and (types is None or msg.msg_type in types)]
    assert calls == expected


@pytest.mark.parametrize("msg_types", [[], ["Tick"], ["TimeTick", 3]])
def test_broker_watch_rejects_unknown_msg_types(msg_types):
    """An empty or misspelt ``msg_types`` is a clear error, not a watch that never fires."""
    with pytest.raises(ValueError, match="unknown; pass MsgType names"):
        Broker().watch("a", lambda ch, msg_id: None, msg_types=msg_types)


def test_bad_broker_reads_raise_value_error():
    """Unknown channels and ids that were never produced are rejected."""
    b = Broker()
    produce(b, "a", tt(1))
    with pytest.raises(ValueError, match="does not exist"):
        b.get("nope", 1)
    with pytest.raises(ValueError, match="no message 2"):
        b.get("a", 2)
    with pytest.raises(ValueError):
        b.produce("", tt(1))
    with pytest.raises(ValueError):
        b.produce("a", "not a message")


# ---- messages -----------------------------------------------------------------------------------------

def test_dml_begin_and_end_are_min_and_max_row_timestamps():
    """``InsertMsg/DeleteMsg.Unmarshal``; other messages use ``Base.Timestamp`` for both."""
    m = ins(0, timestamps=(30, 10, 20))
    assert (m.begin_ts(), m.end_ts()) == (10, 30)
    d = DeleteMsg(shard_name="v", collection_id=1, partition_id=1, pks=(1, 2), timestamps=(5, 9))
    assert (d.begin_ts(), d.end_ts()) == (5, 9) and is_dml_msg(d)
    t = tt(42)
    assert (t.begin_ts(), t.end_ts(), t.base.timestamp, t.type()) == (42, 42, 42, MsgType.TIME_TICK)
    c = CreateCollectionMsg(timestamp=11, collection_id=5)
    assert (c.begin_ts(), c.end_ts()) == (11, 11) and not is_dml_msg(c)


def test_size_estimate_grows_with_rows_and_payload():
    """``Size()`` is what pursuit mode sums against ``mq.pursuitBufferSize``."""
    one = ins(1)
    three = ins(1, timestamps=(1, 1, 1))
    heavy = InsertMsg(shard_name="0", collection_id=1, partition_id=1, segment_id=1, pks=(1,),
                      timestamps=(1,), payload_bytes=512)
    assert one.size() < three.size()
    assert heavy.size() == one.size() + 512


def test_rows_must_have_one_timestamp_each():
    """An Insert/Delete with no rows, or pks and timestamps of different lengths, is rejected."""
    with pytest.raises(ValueError, match="at least one row"):
        InsertMsg(shard_name="0", collection_id=1, partition_id=1, segment_id=1, pks=(), timestamps=())
    with pytest.raises(ValueError, match="num_rows"):
        DeleteMsg(shard_name="0", collection_id=1, partition_id=1, pks=(1, 2), timestamps=(3,))


# ---- ported Go tests ----------------------------------------------------------------------------------

def test_tt_stream_delivers_messages_between_two_ticks():
    """Ports TestStream_RmqTtMsgStream_Insert / TestStream_PulsarTtMsgStream_Insert."""
    b = Broker()
    channels = ["insert1", "insert2"]
    stream = new_stream(b, channels)
    b.broadcast(channels, tt(0))
    produce(b, "insert2", ins(1), ins(3))
    b.broadcast(channels, tt(5))
    pack = stream.poll()
    assert (pack.begin_ts, pack.end_ts) == (0, 5)
    assert [m.begin_ts() for m in pack.msgs] == [1, 3]
    assert stream.poll() is None


def _seek_log(b, channel):
    produce(b, channel, tt(0), ins(1), ins(3), ins(19), tt(5), ins(14), ins(9), tt(11),
            ins(12), ins(13), tt(15), tt(20))


def test_tt_stream_packs_and_seek_to_start_positions():
    """Ports TestStream_RmqTtMsgStream_Seek: late messages wait for their tick; seek replays them."""
    b = Broker()
    _seek_log(b, "c1")
    stream = new_stream(b, ["c1"])
    packs = stream.poll_all()
    expected = [(0, 5, [1, 3]), (5, 11, [9]), (11, 15, [14, 12, 13]), (15, 20, [19])]
    assert [(p.begin_ts, p.end_ts, [m.begin_ts() for m in p.msgs]) for p in packs] == expected
    for p in packs:
        assert p.start_positions[0].timestamp == p.begin_ts
        assert p.end_positions[0].timestamp == p.end_ts

    seeked = seek_stream(b, packs[2].start_positions)
    assert [m.begin_ts() for m in seeked.poll().msgs] == [14, 12, 13]
    assert [m.begin_ts() for m in seeked.poll().msgs] == [19]
    assert seeked.poll() is None


def test_tt_stream_seek_to_end_positions():
    """Ports the end-position half of TestStream_PulsarTtMsgStream_Seek."""
    b = Broker()
    _seek_log(b, "c1")
    packs = new_stream(b, ["c1"]).poll_all()
    seeked = seek_stream(b, packs[2].end_positions)
    pack = seeked.poll()
    assert [m.begin_ts() for m in pack.msgs] == [19]
    assert [m.begin_ts() for m in seeked.seek_skipped("c1") if m.msg_type == MsgType.INSERT] == [14, 9, 12, 13]


def test_duplicated_dml_ids_are_dropped_but_ddl_is_kept():
    """Ports TestStream_RmqTtMsgStream_DuplicatedIDs: dedup by ``Base.MsgID`` for Insert/Delete only.

    The Go test then seeks to the pack's start position and ignores the error: that position has no
    msg id, so here the seek error is asserted and a fresh Earliest stream replays the same pack.
    """
    b = Broker()
    produce(b, "c1", tt(0), ins(1, msg_id=1), ins(1, msg_id=1), ins(1, msg_id=1),
            CreateCollectionMsg(msg_id=2, timestamp=11, collection_id=5),
            CreateCollectionMsg(msg_id=2, timestamp=11, collection_id=5), tt(15))
    pack = new_stream(b, ["c1"]).poll()
    assert (pack.begin_ts, pack.end_ts) == (0, 15)
    assert [m.msg_type for m in pack.msgs] == [MsgType.INSERT, MsgType.CREATE_COLLECTION, MsgType.CREATE_COLLECTION]
    assert pack.msgs[0].begin_ts() == 1
    assert pack.start_positions[0].msg_id is None
    with pytest.raises(SeekError, match="please use AsConsumer interface"):
        seek_stream(b, pack.start_positions)
    assert new_stream(b, ["c1"]).poll() == pack


def test_drop_collection_ends_pursuit_buffering():
    """Ports TestStream_PulsarTtMsgStream_DropCollection, with pursuit mode on and far behind.

    Without the drop, the far-behind stream would merge the tick rounds 5 and 9 into one pack.
    """
    channels = ["c1", "c2"]
    clock = ManualClock(60 * S)
    for with_drop in (True, False):
        b = Broker()
        stream = new_stream(b, channels, params=MQParams(), clock=clock)
        b.broadcast(channels, tt(0))
        produce(b, "c1", ins(1))
        if with_drop:
            b.broadcast(channels, DropCollectionMsg(timestamp=3, collection_id=5))
        b.broadcast(channels, tt(5))
        produce(b, "c2", ins(7))
        b.broadcast(channels, tt(9))
        first = stream.poll()
        if with_drop:
            assert first.end_ts == 5
            assert [m.msg_type for m in first.msgs] == [MsgType.INSERT, MsgType.DROP_COLLECTION,
                                                        MsgType.DROP_COLLECTION]
        else:
            assert first is None  # still merging: waits for a third tick round
            assert stream.last_timestamp == 0


def _rand_insert_pack(rng, num, start, end):
    """``getRandInsertMsgPack``: ``num`` inserts with distinct ts in ``(start, end)``."""
    tss = rng.sample(range(start + 1, end), num)
    return [ins(ts) for ts in tss]


def _rand_msg_packs(rng, msgs_in_pack, num_packs=10, delta=10):
    """``createRandMsgPacks``: inserts with ts up to two ticks ahead, then a tick, ..., then tt(100)."""
    out = []
    for i in range(num_packs):
        if i % 2 == 0:
            out.append(_rand_insert_pack(rng, msgs_in_pack, i // 2 * delta, (i // 2 + 2) * delta + 2))
        else:
            out.append([tt((i + 1) // 2 * delta)])
    out.append([tt(num_packs * delta)])
    return out


def _send(b, channel, packs):
    for msgs in packs:
        produce(b, channel, *msgs)


def _tick_count(packs):
    return sum(isinstance(msgs[0], TimeTickMsg) for msgs in packs)


@pytest.mark.parametrize("seed", range(5))
def test_two_channels_with_early_messages_deliver_all_within_pack_bounds(seed):
    """Ports TestStream_PulsarTtMsgStream_1: every msg has ``BeginTs`` in ``(pack.BeginTs, pack.EndTs]``."""
    rng = random.Random(seed)
    b = Broker()
    packs1, packs2 = _rand_msg_packs(rng, 3), _rand_msg_packs(rng, 5)
    _send(b, "c1", packs1)
    _send(b, "c2", packs2)
    stream = new_stream(b, ["c1", "c2"])
    count = 0
    for _ in range(_tick_count(packs1)):
        pack = stream.poll()
        count += len(pack.msgs)
        for m in pack.msgs:
            assert pack.begin_ts < m.begin_ts() <= pack.end_ts
    assert count == 5 * 3 + 5 * 5
    assert stream.poll() is None


@pytest.mark.parametrize("seed", range(5))
def test_resuming_from_each_packs_end_positions_loses_nothing(seed):
    """Ports TestStream_PulsarTtMsgStream_2: a new stream per pack, seeking to the last end positions."""
    rng = random.Random(seed)
    b = Broker()
    packs1 = _rand_msg_packs(rng, 3)
    _send(b, "c1", packs1)
    _send(b, "c2", _rand_msg_packs(rng, 5))
    received = []
    count = 0
    for _ in range(_tick_count(packs1)):
        if not received:
            stream = new_stream(b, ["c1", "c2"])
        else:
            stream = seek_stream(b, received[-1].end_positions)
        pack = stream.poll()
        received.append(pack)
        for m in pack.msgs:
            assert pack.begin_ts < m.begin_ts() <= pack.end_ts
        count += len(pack.msgs)
    assert count == 5 * 3 + 5 * 5


def test_two_streams_from_earliest_see_identical_packs():
    """Ports TestStream_PulsarTtMsgStream_NoSeek (the model's consumers keep no shared cursor)."""
    b = Broker()
    produce(b, "c1", tt(0), ins(1), ins(19), tt(5), ins(14), ins(9), tt(11), tt(15))
    first = new_stream(b, ["c1"]).poll_all()
    second = new_stream(b, ["c1"]).poll_all()
    assert [p.begin_ts for p in first] == [0, 5, 11] and first == second


def test_latest_subscription_only_sees_new_messages():
    """Ports TestStream_RmqTtMsgStream_AsConsumerWithPosition on the Tt stream."""
    b = Broker()
    produce(b, "insert1", *[tt(i) for i in range(100)])
    stream = new_stream(b, ["insert1"], position=SubscriptionPosition.LATEST)
    assert stream.poll() is None
    produce(b, "insert1", ins(999), tt(1000))
    pack = stream.poll()
    assert [m.begin_ts() for m in pack.msgs] == [999] and pack.end_ts == 1000


def test_seek_on_unsubscribed_channel_fails():
    """Ports TestMqMsgStream_SeekNotSubscribed; the text is Go's whole message, ``Seek``'s
    "failed to seek, error " wrapper included (mq_msgstream.go, MqTtMsgStream.Seek)."""
    b = Broker()
    produce(b, "a", tt(1))
    stream = new_stream(b, ["a"])
    with pytest.raises(SeekError, match="^failed to seek, error please subcribe the channel, channel name =b$"):
        stream.seek([MsgPosition("b", 1, 0)])


def test_seek_to_a_msg_id_the_channel_never_had_fails():
    """``mq.ignoreBadPosition`` is false by default: a bad message id is an error."""
    b = Broker()
    produce(b, "a", tt(1))
    with pytest.raises(SeekError, match="not in 'a'"):
        seek_stream(b, [MsgPosition("a", 5, 0)])


class TestContinueBuffering:
    """Ports TestMqttStream_continueBuffering (both sub-tests)."""

    def test_without_pursuit_mode_only_the_first_round_buffers(self):
        clock = ManualClock()
        stream = MqTtMsgStream(Broker(), clock, MQParams(enable_pursuit_mode=False, pursuit_buffer_size=1024))
        now_ts = compose_ts(clock() // MS, 0)
        assert stream.continue_buffering(0, 0, clock())
        assert not stream.continue_buffering(1, 10, clock())
        assert not stream.continue_buffering(now_ts, 10, clock())
        assert not stream.continue_buffering(10, 0, clock() - 3600 * S)

    def test_with_pursuit_mode_buffering_goes_on_while_far_behind(self):
        clock = ManualClock()
        stream = MqTtMsgStream(Broker(), clock, MQParams(pursuit_lag_ns=10 * S, pursuit_buffer_size=1024))
        now_ts = compose_ts(clock() // MS, 0)
        assert stream.continue_buffering(0, 0, clock())
        assert stream.continue_buffering(1, 10, clock())
        assert not stream.continue_buffering(now_ts, 10, clock())
        assert not stream.continue_buffering(1, 2048, clock())
        assert not stream.continue_buffering(1, 10, clock() - 61 * S)


# ---- the rules, one at a time -------------------------------------------------------------------------

def test_channel_already_at_the_max_tick_is_not_read_further():
    """``allChanReachSameTtMsg``: the ahead channel is marked synced and waits for the laggard."""
    b = Broker()
    stream = new_stream(b, ["a", "b"])
    produce(b, "a", tt(100))
    produce(b, "b", tt(200), ins(250), tt(300))
    assert stream.poll() is None
    assert stream.chan_tt_msg_sync("b") and not stream.chan_tt_msg_sync("a")
    assert stream.pending_consumers == ["a"]
    assert [m.msg_type for m in stream.buffered("b")] == [MsgType.TIME_TICK]
    assert stream.cursor("b") == 2  # ins(250) not read yet
    produce(b, "a", ins(150), tt(200))
    pack = stream.poll()
    assert pack.end_ts == 200 and [m.begin_ts() for m in pack.msgs] == [150]
    assert stream.cursor("b") == 2 and stream.buffered("b") == ()


def test_end_position_is_the_first_message_not_emitted_stamped_with_the_tick():
    """§3.3: the end position points at the first kept message, with Timestamp = tt and the sub name."""
    b = Broker()
    ids = produce(b, "c", ins(3), ins(50), ins(4), ins(60), tt(10))
    pack = new_stream(b, ["c"]).poll()
    assert [m.begin_ts() for m in pack.msgs] == [3, 4]
    assert pack.end_positions == (MsgPosition("c", ids[1], 10, "sub"),)


def test_end_position_is_the_tick_when_everything_was_emitted():
    """With nothing kept, the end position is the tick message itself."""
    b = Broker()
    ids = produce(b, "c", ins(3), tt(10))
    pack = new_stream(b, ["c"]).poll()
    assert pack.end_positions == (MsgPosition("c", ids[1], 10, "sub"),)


def test_first_pack_starts_at_a_position_without_msg_id():
    """``addConsumer`` sets ``chanMsgPos`` to an empty MsgID stamped with ``lastTimeStamp`` (0)."""
    b = Broker()
    produce(b, "c", ins(3), tt(10), tt(20))
    packs = new_stream(b, ["c"]).poll_all()
    assert packs[0].start_positions == (MsgPosition("c", None, 0),)
    assert packs[1].start_positions == packs[0].end_positions


def test_a_tick_not_newer_than_the_last_pack_makes_no_pack():
    """``currTs <= lastTimeStamp`` -> no pack; the messages wait for the next newer tick."""
    b = Broker()
    produce(b, "c", tt(0), ins(3), tt(10), ins(12), tt(10), tt(20))
    packs = new_stream(b, ["c"]).poll_all()
    assert [(p.begin_ts, p.end_ts) for p in packs] == [(0, 10), (10, 20)]
    assert [m.begin_ts() for m in packs[1].msgs] == [12]


def test_late_message_is_delivered_in_the_next_pack_below_its_begin_ts():
    """A message that breaks the watermark (ts <= an earlier tick) is still delivered, but late."""
    b = Broker()
    produce(b, "c", tt(100), ins(50), tt(200))
    packs = new_stream(b, ["c"]).poll_all()
    assert [(p.begin_ts, p.end_ts) for p in packs] == [(0, 100), (100, 200)]
    assert packs[1].msgs[0].end_ts() == 50 <= packs[1].begin_ts


def test_dedup_only_works_within_one_pack():
    """The same DML id in two packs is delivered twice."""
    b = Broker()
    produce(b, "c", ins(5, msg_id=7), tt(10), ins(15, msg_id=7), tt(20))
    packs = new_stream(b, ["c"]).poll_all()
    assert [[m.msg_id for m in p.msgs] for p in packs] == [[7], [7]]


def test_a_ddl_id_marks_a_later_dml_with_the_same_id_as_duplicate():
    """Quirk: non-DML messages are never dropped, but their id enters the seen set."""
    b = Broker()
    produce(b, "c", CreatePartitionMsg(msg_id=9, timestamp=2, collection_id=1, partition_id=3),
            ins(4, msg_id=9), tt(10))
    pack = new_stream(b, ["c"]).poll()
    assert [m.msg_type for m in pack.msgs] == [MsgType.CREATE_PARTITION]


def test_kept_drop_collection_still_ends_buffering():
    """Quirk: a DropCollection with EndTs > tt stays buffered but still ends the pursuit loop.

    While it waits for its tick, every round becomes its own pack; the far-behind stream without
    it merges all rounds.
    """
    drop = DropCollectionMsg(timestamp=30, collection_id=5)
    b = Broker()
    produce(b, "c", drop, tt(10), tt(20), tt(40))
    packs = new_stream(b, ["c"], params=MQParams(), clock=ManualClock(60 * S)).poll_all()
    assert [(p.end_ts, [m.msg_type for m in p.msgs]) for p in packs] == [
        (10, []), (20, []), (40, [MsgType.DROP_COLLECTION]),
    ]
    b2 = Broker()
    produce(b2, "c", tt(10), tt(20), tt(40))
    assert new_stream(b2, ["c"], params=MQParams(), clock=ManualClock(60 * S)).poll_all() == []


def test_pursuit_mode_merges_rounds_until_the_lag_is_small():
    """Far behind (``now - phys(tt) > mq.pursuitLag``), tick rounds merge into one pack."""
    clock = ManualClock(30_000 * MS)
    b = Broker()
    stream = new_stream(b, ["c"], params=MQParams(), clock=clock)
    ticks = [compose_ts(ms, 0) for ms in (5_000, 10_000, 15_000, 20_000, 25_000)]
    for t in ticks:
        produce(b, "c", ins(t - 1), tt(t))
    first = stream.poll()
    # After the 20 s round the lag is exactly 10 s, which is not "more than" pursuitLag.
    assert (first.begin_ts, first.end_ts, len(first.msgs)) == (0, ticks[3], 4)
    second = stream.poll()
    assert (second.begin_ts, second.end_ts, len(second.msgs)) == (ticks[3], ticks[4], 1)


def test_far_behind_stream_holds_its_pack_until_the_next_tick():
    """In pursuit, the pack is only handed out after a round that ends the pursuit (Go blocks)."""
    clock = ManualClock(30_000 * MS)
    b = Broker()
    stream = new_stream(b, ["c"], params=MQParams(), clock=clock)
    produce(b, "c", ins(compose_ts(4_000, 0)), tt(compose_ts(5_000, 0)))
    assert stream.poll() is None and stream.last_timestamp == 0
    assert stream.pending_consumers == ["c"]
    produce(b, "c", tt(compose_ts(25_000, 0)))
    pack = stream.poll()
    assert pack.end_ts == compose_ts(25_000, 0) and len(pack.msgs) == 1


def test_pursuit_stops_merging_when_the_buffer_is_full():
    """``size > mq.pursuitBufferSize`` ends the pack even while far behind."""
    b = Broker()
    one = ins(1).size()
    stream = new_stream(b, ["c"], params=MQParams(pursuit_buffer_size=one), clock=ManualClock(60 * S))
    produce(b, "c", ins(1), tt(10), ins(11), tt(20), ins(21), tt(30), ins(31), tt(40))
    packs = stream.poll_all()
    # size == limit after one round is not "more than": two rounds per pack.
    assert [(p.begin_ts, p.end_ts, len(p.msgs)) for p in packs] == [(0, 20, 2), (20, 40, 2)]


def test_pursuit_stops_merging_after_the_buffer_time():
    """``now - startBufTime > mq.pursuitBufferTime`` (60 s) ends the pack even while far behind."""
    clock = ManualClock(600 * S)
    b = Broker()
    stream = new_stream(b, ["c"], params=MQParams(), clock=clock)
    produce(b, "c", ins(1), tt(10))
    assert stream.poll() is None
    clock.advance(61 * S)
    produce(b, "c", ins(11), tt(20))
    pack = stream.poll()
    assert (pack.begin_ts, pack.end_ts, len(pack.msgs)) == (0, 20, 2)


# ---- seek -------------------------------------------------------------------------------------------

def test_seek_skips_old_messages_buffers_newer_and_stops_at_the_first_tick_at_or_after_it():
    """§3.4: skip ``BeginTs <= pos.ts``, buffer the rest, stop at a tick with ``BeginTs >= pos.ts``."""
    b = Broker()
    ids = produce(b, "c", ins(30), tt(5), ins(8), tt(9), ins(12), tt(10), ins(11), tt(20))
    stream = seek_stream(b, [MsgPosition("c", ids[0], 10)])
    assert [m.begin_ts() for m in stream.buffered("c")] == [30, 12]
    assert [m.begin_ts() for m in stream.seek_skipped("c")] == [5, 8, 9]
    assert stream.chan_msg_pos("c") == MsgPosition("c", ids[0], 10)
    assert stream.chan_tt_msg_time("c") == 0
    pack = stream.poll()
    # lastTimeStamp is not restored by Seek, so the first pack starts at 0.
    assert (pack.begin_ts, pack.end_ts) == (0, 20)
    assert [m.begin_ts() for m in pack.msgs] == [12, 11]
    assert pack.start_positions == (MsgPosition("c", ids[0], 10),)


def test_seek_waits_for_its_stop_tick_before_any_pack():
    """A seek whose stop tick is not produced yet keeps the stream silent (Go's Seek would block)."""
    b = Broker()
    ids = produce(b, "c", ins(12), tt(5))
    stream = seek_stream(b, [MsgPosition("c", ids[0], 10)])
    assert stream.seeking and stream.poll() is None
    produce(b, "c", ins(13), tt(10))
    assert stream.poll() is None and not stream.seeking
    assert [m.begin_ts() for m in stream.buffered("c")] == [12, 13]
    produce(b, "c", tt(20))
    pack = stream.poll()
    assert [m.begin_ts() for m in pack.msgs] == [12, 13]


def test_seek_drops_an_insert_whose_rows_straddle_the_tick():
    """Quirk: Seek tests ``BeginTs`` while packing tests ``EndTs``.

    An Insert with rows at 90 and 150 is kept by the round at tick 100 (EndTs 150 > 100), so the end
    position points at it; seeking there skips it (BeginTs 90 <= 100) and it is never delivered.
    Milvus's proxy gives every row of a request the same timestamp, so this cannot happen there.
    """
    b = Broker()
    produce(b, "c", ins(0, timestamps=(90, 150)), tt(100), tt(200))
    packs = new_stream(b, ["c"]).poll_all()
    assert [len(p.msgs) for p in packs] == [0, 1]
    replay = seek_stream(b, packs[0].end_positions).poll_all()
    assert [len(p.msgs) for p in replay] == [0]
    assert [m.end_ts() for m in seek_stream(b, packs[0].end_positions).seek_skipped("c")] == [150]


def test_a_repeated_tick_after_seek_gives_an_extra_empty_pack():
    """Quirk: Seek stops at the first tick ``>= pos.ts`` and does not restore ``lastTimeStamp``.

    If the tick value repeats, the replay's first pack ends at ``pos.ts`` itself - a pack the
    original stream never made; the dispatcher's ``EndTs <= target.pos.ts`` skip hides it.
    """
    b = Broker()
    produce(b, "c", ins(150), tt(100), tt(100), tt(200))
    packs = new_stream(b, ["c"]).poll_all()
    assert [(p.begin_ts, p.end_ts) for p in packs] == [(0, 100), (100, 200)]
    replay = seek_stream(b, packs[0].end_positions).poll_all()
    assert [(p.begin_ts, p.end_ts, len(p.msgs)) for p in replay] == [(0, 100, 0), (100, 200, 1)]


# ---- properties -----------------------------------------------------------------------------------------

class ListClock:
    """A clock that returns the given readings in turn, forever."""

    def __init__(self, readings):
        self.readings = list(readings)
        self.i = 0

    def __call__(self) -> int:
        value = self.readings[self.i % len(self.readings)]
        self.i += 1
        return value


def _make_msg(kind, tss, msg_id):
    if kind == "insert":
        return InsertMsg(msg_id=msg_id, shard_name="v", collection_id=1, partition_id=1, segment_id=1,
                         pks=tuple(range(len(tss))), timestamps=tss)
    if kind == "delete":
        return DeleteMsg(msg_id=msg_id, shard_name="v", collection_id=1, partition_id=1,
                         pks=tuple(range(len(tss))), timestamps=tss)
    return CreatePartitionMsg(msg_id=msg_id, timestamp=tss[0], collection_id=1, partition_id=msg_id)


def _draw_msgs(draw, low, high, next_id, single_ts):
    msgs = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(("insert", "delete", "ddl")))
        n_rows = 1 if kind == "ddl" or single_ts else draw(st.integers(1, 3))
        tss = tuple(draw(st.lists(st.integers(low, high), min_size=n_rows, max_size=n_rows)))
        msgs.append(_make_msg(kind, tss, next_id()))
    return msgs


def _draw_schedule(draw, logs):
    """A random interleaving of the channels' produce steps, and after which ones to poll."""
    order = draw(st.permutations([ch for ch, seq in logs.items() for _ in seq]))
    polls = draw(st.lists(st.booleans(), min_size=len(order), max_size=len(order)))
    return order, polls


def _counter():
    n = iter(range(1, 10**9))
    return lambda: next(n)


@st.composite
def aligned_logs(draw):
    """Every channel gets the same ticks (non-decreasing, may start at 0 and repeat); messages
    anywhere with any ts, so late messages (ts <= an earlier tick) happen."""
    channels = [f"c{i}" for i in range(draw(st.integers(1, 3)))]
    ticks = [draw(st.integers(0, 20))]
    for step in draw(st.lists(st.integers(0, 30), max_size=5)):
        ticks.append(ticks[-1] + step)
    next_id = _counter()
    logs = {}
    for ch in channels:
        seq = []
        for j in range(len(ticks) + 1):
            seq += [("msg", j, m) for m in _draw_msgs(draw, 1, ticks[-1] + 40, next_id, single_ts=False)]
            if j < len(ticks):
                seq.append(("tt", j, tt(ticks[j])))
        logs[ch] = seq
    return channels, ticks, logs, *_draw_schedule(draw, logs)


def _first_fit_packs(channels, ticks, logs):
    """The Go rule, written from the log: a message goes into the first successful round (tick newer
    than the last pack) whose tick follows it in its channel and is >= its EndTs."""
    delivered = set()
    packs = []
    last = 0
    prev_end = tuple(MsgPosition(ch, None, 0) for ch in channels)
    for j, tick in enumerate(ticks):
        if tick <= last:
            continue
        keys, end = [], []
        for ch in channels:
            first_kept = None
            for idx, (kind, seg, m) in enumerate(logs[ch]):
                msg_id = FIRST_MSG_ID + idx
                if kind == "tt" and seg == j:
                    tick_id = msg_id
                if kind != "msg" or seg > j or (ch, msg_id) in delivered:
                    continue
                if m.end_ts() <= tick:
                    delivered.add((ch, msg_id))
                    keys.append((ch, msg_id))
                elif first_kept is None:
                    first_kept = msg_id
            end.append(MsgPosition(ch, first_kept or tick_id, tick, "sub"))
        packs.append((last, tick, keys, prev_end, tuple(end)))
        prev_end, last = tuple(end), tick
    return packs


def _produce_and_poll(broker, stream, logs, order, polls):
    cursors = dict.fromkeys(logs, 0)
    packs = []
    for ch, do_poll in zip(order, polls):
        broker.produce(ch, logs[ch][cursors[ch]][2])
        cursors[ch] += 1
        if do_poll:
            packs += stream.poll_all()
    return packs + stream.poll_all()


def _summary(p):
    return (p.begin_ts, p.end_ts, [key(m) for m in p.msgs], p.start_positions, p.end_positions)


@pytest.mark.slow
@settings(deadline=None)
@given(aligned_logs())
def test_each_message_goes_to_the_first_pack_whose_tick_follows_and_covers_it(case):
    """Invariant 1 (any log, late messages included), whenever ``poll`` is called.

    Pack of round ``j``: every message read before channel tick ``j`` with ``EndTs <= T_j`` that no
    earlier pack took; end position = first message left behind, else tick ``j``; start position =
    the previous pack's end position. Packs, positions and contents match that rule exactly.
    """
    channels, ticks, logs, order, polls = case
    b = Broker()
    stream = new_stream(b, channels)
    got = _produce_and_poll(b, stream, logs, order, polls)
    assert [_summary(p) for p in got] == _first_fit_packs(channels, ticks, logs)


@st.composite
def watermark_logs(draw, single_ts=False):
    """Strictly increasing tick values; each channel gets a subset that ends with the last one; every
    message is newer than its channel's previous tick (the promise rootcoord's ticks make)."""
    channels = [f"c{i}" for i in range(draw(st.integers(1, 3)))]
    ticks = [draw(st.integers(1, 20))]
    for step in draw(st.lists(st.integers(1, 30), max_size=5)):
        ticks.append(ticks[-1] + step)
    high = ticks[-1] + 30
    next_id = _counter()
    logs = {}
    for ch in channels:
        mine = sorted(draw(st.sets(st.integers(0, len(ticks) - 1))) | {len(ticks) - 1})
        seq, prev = [], 0
        for j in mine:
            seq += [("msg", j, m) for m in _draw_msgs(draw, prev + 1, high, next_id, single_ts)]
            seq.append(("tt", j, tt(ticks[j])))
            prev = ticks[j]
        seq += [("msg", len(ticks), m) for m in _draw_msgs(draw, prev + 1, high, next_id, single_ts)]
        logs[ch] = seq
    return channels, ticks, logs, *_draw_schedule(draw, logs)


@settings(deadline=None)
@given(watermark_logs(), st.booleans(), st.sampled_from([1, 100, 10**9]),
       st.lists(st.sampled_from([0, 11 * S, 70 * S]), min_size=1, max_size=4))
def test_with_the_watermark_each_pack_holds_exactly_last_ts_to_tt(case, pursuit, buffer_size, readings):
    """Invariant 2: if no message is older than an earlier tick of its channel, each pack holds
    exactly the messages with ``lastTs < EndTs <= tt`` (late leftovers included), pursuit or not;
    packs tile the time line and no message is delivered twice."""
    channels, ticks, logs, order, polls = case
    params = MQParams(enable_pursuit_mode=pursuit, pursuit_buffer_size=buffer_size)
    b = Broker()
    stream = new_stream(b, channels, params=params, clock=ListClock(readings))
    got = _produce_and_poll(b, stream, logs, order, polls)
    produced = [m for ch in channels for m in b.read(ch, FIRST_MSG_ID) if m.msg_type != MsgType.TIME_TICK]
    last, seen = 0, set()
    for p in got:
        assert p.begin_ts == last < p.end_ts
        keys = [key(m) for m in p.msgs]
        assert len(set(keys)) == len(keys) and not seen & set(keys)
        assert set(keys) == {key(m) for m in produced if last < m.end_ts() <= p.end_ts}
        seen |= set(keys)
        last = p.end_ts
    if not pursuit:
        assert last == ticks[-1]


@settings(deadline=None)
@given(watermark_logs(single_ts=True), st.data())
def test_seeking_to_any_packs_end_positions_replays_exactly_the_rest(case, data):
    """Invariant 3: a new stream seeked to pack ``k``'s end positions hands out the same packs as
    the original after ``k`` (only the first BeginTs is 0: Seek keeps ``lastTimeStamp``)."""
    channels, ticks, logs, _, _ = case
    b = Broker()
    for ch in channels:
        for _, _, m in logs[ch]:
            b.produce(ch, m)
    packs = new_stream(b, channels).poll_all()
    k = data.draw(st.integers(0, len(packs) - 1))
    replay = seek_stream(b, packs[k].end_positions).poll_all()

    def strip(positions):  # the replay's consumer has its own subscription name (MsgGroup)
        return tuple((q.channel_name, q.msg_id, q.timestamp) for q in positions)

    def shape(p):
        return (p.end_ts, [key(m) for m in p.msgs], strip(p.start_positions), strip(p.end_positions))

    assert [shape(p) for p in replay] == [shape(p) for p in packs[k + 1:]]
    assert all(p.begin_ts == 0 for p in replay[:1])


def test_a_broker_watch_can_drive_the_stream_one_message_at_a_time():
    """How the simulator uses the pure stream: poll whenever a consumed channel grows.

    Packs come out at the moment their closing tick is produced, and equal a single poll at the end.
    """
    b = Broker()
    stream = new_stream(b, ["a", "b"])
    out = []

    def on_grow(_channel, _msg_id):
        produced = sum(b.next_msg_id(ch) - FIRST_MSG_ID for ch in ("a", "b"))
        out.extend((produced, p) for p in stream.poll_all())

    for ch in stream.consumer_channels:
        b.watch(ch, on_grow)
    steps = [("a", tt(10)), ("a", ins(15)), ("b", ins(12)), ("b", tt(10)), ("b", tt(20)), ("a", tt(20))]
    for ch, m in steps:
        b.produce(ch, m)
    assert [(n, p.end_ts) for n, p in out] == [(4, 10), (6, 20)]
    assert [p for _, p in out] == new_stream(b, ["a", "b"]).poll_all()
