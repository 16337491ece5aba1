"""The dispatcher: one tick-aligned stream on a pchannel, one pack stream per vchannel (reference §3.5).

Ports Milvus 2.5 ``pkg/mq/msgdispatcher/dispatcher_test.go`` (TestDispatcher, TestGroupMessage without
the replicate cases) and the pub/sub accounting of ``client_test.go``'s SimulationSuite
(TestDispatchToVchannels, TestMerge) onto one :class:`Dispatcher`, then checks with hypothesis that a
target registered at any pack's end position gets exactly the packs and messages after it.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.clock import ManualClock
from milvus_edu.config import MQParams
from milvus_edu.mq import (
    Broker,
    CreateCollectionMsg,
    CreatePartitionMsg,
    DeleteMsg,
    Dispatcher,
    DropCollectionMsg,
    DropPartitionMsg,
    InsertMsg,
    MqTtMsgStream,
    MsgPack,
    SubscriptionPosition,
    TimeTickMsg,
    get_collection_id_from_vchannel,
    get_virtual_channel,
)
from milvus_edu.proto import MsgPosition, MsgType

NO_PURSUIT = MQParams(enable_pursuit_mode=False)
PCHANNEL = "by-dev-rootcoord-dml_0"


def new_dispatcher(broker, position=None, sub_pos=SubscriptionPosition.EARLIEST, pchannel=PCHANNEL):
    return Dispatcher(broker, pchannel, position, sub_pos, now_ns=ManualClock(), params=NO_PURSUIT)


def insert(vchannel, ts, msg_id, rows=1):
    return InsertMsg(msg_id=msg_id, shard_name=vchannel, collection_id=get_collection_id_from_vchannel(vchannel),
                     partition_id=1, segment_id=1, pks=tuple(range(rows)), timestamps=(ts,) * rows)


def delete(vchannel, ts, msg_id, rows=1):
    return DeleteMsg(msg_id=msg_id, shard_name=vchannel, collection_id=get_collection_id_from_vchannel(vchannel),
                     partition_id=1, pks=tuple(range(rows)), timestamps=(ts,) * rows)


def pack_of(*msgs, begin=1, end=10):
    return MsgPack(begin, end, tuple(msgs), (MsgPosition(PCHANNEL, 1, begin),), (MsgPosition(PCHANNEL, 10, end),))


# ---- dispatcher_test.go ------------------------------------------------------------------------------

def test_cur_ts_is_the_end_position_of_the_last_pack():
    """Ports TestDispatcher "test base": ``CurTs`` follows ``EndPositions[0].Timestamp``."""
    b = Broker()
    d = new_dispatcher(b)
    assert d.cur_ts == 0 and d.poll() is None
    b.produce(PCHANNEL, TimeTickMsg(timestamp=100))
    assert d.poll() == {}  # consumed, but no target yet
    assert d.cur_ts == 100


def test_targets_are_added_found_and_removed():
    """Ports TestDispatcher "test target"; an existing target is kept, as Go only warns."""
    d = new_dispatcher(Broker())
    first = MsgPosition("mock_vchannel_0", 1, 5)
    assert d.add_target("mock_vchannel_0", first)
    assert d.add_target("mock_vchannel_1")
    assert d.target_num() == 2
    assert not d.add_target("mock_vchannel_0", MsgPosition("mock_vchannel_0", 2, 9))
    assert d.get_target("mock_vchannel_0").pos == first
    assert d.remove_target("mock_vchannel_0") and not d.remove_target("mock_vchannel_0")
    assert d.target_num() == 1 and not d.has_target("mock_vchannel_0")
    with pytest.raises(ValueError, match="cannot find target, vchannel=mock_vchannel_0"):
        d.get_target("mock_vchannel_0")


def test_every_target_gets_a_pack_with_the_ticks_even_without_messages():
    """Ports TestGroupMessage ("no replicate msg"): Insert routed by shard name, ticks to all."""
    d = new_dispatcher(Broker(), pchannel="mock_pchannel_0")
    d.add_target("mock_pchannel_0_1v0")
    d.add_target("mock_pchannel_0_2v0")
    msg = insert("mock_pchannel_0_1v0", 5, msg_id=1)
    packs = d.grouping_msgs(pack_of(msg))
    assert set(packs) == {"mock_pchannel_0_1v0", "mock_pchannel_0_2v0"}
    assert packs["mock_pchannel_0_1v0"].msgs == (msg,)
    other = packs["mock_pchannel_0_2v0"]
    assert (other.begin_ts, other.end_ts, other.msgs) == (1, 10, ())
    assert other.start_positions[0].timestamp == 1 and other.end_positions[0].timestamp == 10


def test_dml_for_a_vchannel_without_target_is_dropped():
    """``groupingMsgs``: Insert/Delete whose ShardName has no target reach nobody."""
    d = new_dispatcher(Broker())
    v0 = get_virtual_channel(PCHANNEL, 100, 0)
    d.add_target(v0)
    packs = d.grouping_msgs(pack_of(insert(get_virtual_channel(PCHANNEL, 200, 0), 5, 1),
                                    delete(get_virtual_channel(PCHANNEL, 200, 0), 6, 2)))
    assert packs[v0].msgs == ()


def test_dml_with_an_empty_shard_name_goes_to_every_target():
    """``groupingMsgs`` routes by ``vchannel == ""``, not by type: an Insert/Delete without a
    ShardName takes the broadcast branch with an empty collection id, which every name contains."""
    d = new_dispatcher(Broker())
    v1, v2 = (get_virtual_channel(PCHANNEL, c, 0) for c in (100, 200))
    d.add_target(v1)
    d.add_target(v2)
    msgs = (insert("", 5, msg_id=1), delete("", 6, msg_id=2))
    packs = d.grouping_msgs(pack_of(*msgs))
    assert packs[v1].msgs == msgs and packs[v2].msgs == msgs


def test_ddl_goes_to_every_target_whose_name_contains_the_collection_id():
    """``strings.Contains(vchannel, collectionID)``: a substring match, so collection 1's DDL also
    reaches collection 10's vchannel (and anything with a '1' in its name). Real ids are 18 digits."""
    d = new_dispatcher(Broker())
    v1, v10, v2 = (get_virtual_channel(PCHANNEL, c, 0) for c in (1, 10, 2))
    for v in (v1, v10, v2):
        d.add_target(v)
    ddl = [
        CreateCollectionMsg(timestamp=2, collection_id=1),
        CreatePartitionMsg(timestamp=3, collection_id=1, partition_id=7),
        DropPartitionMsg(timestamp=4, collection_id=1, partition_id=7),
        DropCollectionMsg(timestamp=5, collection_id=1),
    ]
    packs = d.grouping_msgs(pack_of(*ddl))
    assert packs[v1].msgs == tuple(ddl) and packs[v10].msgs == tuple(ddl)
    assert packs[v2].msgs == ()


def test_target_skips_packs_not_newer_than_its_position():
    """``work``: ``p.EndTs <= target.pos.Timestamp`` -> the target does not get the pack."""
    b = Broker()
    d = new_dispatcher(b)
    old, young = get_virtual_channel(PCHANNEL, 100, 0), get_virtual_channel(PCHANNEL, 200, 0)
    d.add_target(old)
    d.add_target(young, MsgPosition(young, 2, 200))
    for ts in (100, 200, 300):
        b.produce(PCHANNEL, insert(young, ts, msg_id=ts))
        b.produce(PCHANNEL, TimeTickMsg(timestamp=ts))
    rounds = []
    while (out := d.poll()) is not None:
        rounds.append({v: [m.begin_ts() for m in p.msgs] for v, p in out.items()})
        if len(rounds) < 3:
            assert d.last_skipped == (young,)
    assert rounds == [{old: []}, {old: []}, {old: [], young: [300]}]
    assert d.last_skipped == ()


def test_dispatcher_with_a_vchannel_position_seeks_its_pchannel():
    """``NewDispatcher``: a position with a msg id is renamed to the pchannel and seeked."""
    b = Broker()
    v = get_virtual_channel(PCHANNEL, 100, 0)
    ids = [b.produce(PCHANNEL, m) for m in (insert(v, 5, 1), TimeTickMsg(timestamp=10), insert(v, 15, 2),
                                             TimeTickMsg(timestamp=20))]
    d = new_dispatcher(b, position=MsgPosition(v, ids[1], 10))
    assert d.stream.chan_msg_pos(PCHANNEL) == MsgPosition(PCHANNEL, ids[1], 10)
    d.add_target(v, MsgPosition(v, ids[1], 10))
    assert {k: [m.begin_ts() for m in p.msgs] for k, p in d.poll().items()} == {v: [15]}


def test_dispatcher_with_a_position_without_msg_id_subscribes_instead():
    """``NewDispatcher``: an empty MsgID means "use subPos" (here Latest: only new messages)."""
    b = Broker()
    v = get_virtual_channel(PCHANNEL, 100, 0)
    b.produce(PCHANNEL, insert(v, 5, 1))
    b.produce(PCHANNEL, TimeTickMsg(timestamp=10))
    d = new_dispatcher(b, position=MsgPosition(v, None, 10), sub_pos=SubscriptionPosition.LATEST)
    d.add_target(v)
    assert d.poll() is None
    b.produce(PCHANNEL, insert(v, 15, 2))
    b.produce(PCHANNEL, TimeTickMsg(timestamp=20))
    assert [m.begin_ts() for m in d.poll()[v].msgs] == [15]


# ---- client_test.go SimulationSuite --------------------------------------------------------------------

def _vchannels(n, pchannel=PCHANNEL):
    # Same-length collection ids (as UnixNano ids are) so no id is a substring of another name.
    return [get_virtual_channel(pchannel, 449_000_000_000_000_000 + i, 0) for i in range(n)]


def produce_msgs(broker, vchannels, rng, rounds, pchannel=PCHANNEL):
    """``produceMsgs``: each round, random inserts/deletes/DropCollections at ts = round*100, then a tick.

    Returns ``(pub, per_round)``: published counts per vchannel and, per round, the tick and the
    ``(vchannel, kind)`` of each message.
    """
    pub = {v: Counter() for v in vchannels}
    per_round = []
    msg_id = 0
    for i in range(1, rounds + 1):
        ts = i * 100
        sent = []
        for kind, n in (("ins", rng.randrange(10)), ("del", rng.randrange(2)), ("ddl", rng.randrange(2))):
            for _ in range(n):
                v = rng.choice(vchannels)
                msg_id += 1
                if kind == "ins":
                    msg = insert(v, ts, msg_id, rows=rng.randrange(1, 21))
                elif kind == "del":
                    msg = delete(v, ts, msg_id, rows=rng.randrange(1, 11))
                else:
                    msg = DropCollectionMsg(timestamp=ts, collection_id=get_collection_id_from_vchannel(v))
                broker.produce(pchannel, msg)
                pub[v][kind] += 1
                sent.append((v, kind))
        broker.produce(pchannel, TimeTickMsg(timestamp=ts))
        for v in vchannels:
            pub[v]["pack"] += 1
        per_round.append((ts, sent))
    return pub, per_round


_KIND = {MsgType.INSERT: "ins", MsgType.DELETE: "del", MsgType.DROP_COLLECTION: "ddl"}


def consume_from_targets(dispatcher):
    """``consumeMsgsFromTargets``: count what each target gets; its packs' EndTs must grow."""
    sub = {t.vchannel: Counter() for t in dispatcher.get_targets()}
    last_ts = dict.fromkeys(sub, 0)
    for out in dispatcher.poll_all():
        for v, p in out.items():
            assert p.end_ts > last_ts[v]
            last_ts[v] = p.end_ts
            sub[v]["pack"] += 1
            for m in p.msgs:
                sub[v][_KIND[m.msg_type]] += 1
    return sub


@pytest.mark.parametrize("seed", range(3))
def test_dispatch_to_vchannels_delivers_every_published_message(seed):
    """Ports SimulationSuite.TestDispatchToVchannels: per vchannel, published == received."""
    rng = random.Random(seed)
    b = Broker()
    vchannels = _vchannels(10)
    d = new_dispatcher(b)
    for v in vchannels:
        d.add_target(v)
    pub, _ = produce_msgs(b, vchannels, rng, rounds=30)
    sub = consume_from_targets(d)
    for v in vchannels:
        assert +sub[v] == +pub[v], v


def random_seek_positions(broker, vchannels, rng, pchannel=PCHANNEL):
    """``getRandomSeekPositions``: read packs from the earliest; now and then give the next vchannel
    without a position this pack's end position; count what each skips until it has one."""
    stream = MqTtMsgStream(broker, ManualClock(), NO_PURSUIT)
    stream.as_consumer([pchannel], "probe", SubscriptionPosition.EARLIEST)
    seek_pos = dict.fromkeys(vchannels)
    skipped = {v: Counter() for v in vchannels}
    while any(p is None for p in seek_pos.values()):
        pack = stream.poll()
        assert pack is not None, "ran out of packs before every vchannel got a position"
        for m in pack.msgs:
            if m.msg_type in (MsgType.INSERT, MsgType.DELETE):
                if seek_pos[m.shard_name] is None:
                    skipped[m.shard_name][_KIND[m.msg_type]] += 1
            elif m.msg_type == MsgType.DROP_COLLECTION:
                for v in vchannels:
                    if seek_pos[v] is None and get_collection_id_from_vchannel(v) == m.collection_id:
                        skipped[v]["ddl"] += 1
        for v in vchannels:
            if seek_pos[v] is None:
                skipped[v]["pack"] += 1
        if rng.randrange(5) == 0:
            v = next(v for v in vchannels if seek_pos[v] is None)
            seek_pos[v] = pack.end_positions[0]
    return seek_pos, skipped


@pytest.mark.parametrize("seed", range(3))
def test_targets_at_different_positions_get_exactly_what_follows_their_position(seed):
    """Ports SimulationSuite.TestMerge on one dispatcher seeked to the oldest target position:
    per vchannel, published - skipped == received (messages and packs)."""
    rng = random.Random(seed)
    b = Broker()
    vchannels = _vchannels(10)
    pub, _ = produce_msgs(b, vchannels, rng, rounds=200)
    seek_pos, skipped = random_seek_positions(b, vchannels, rng)
    oldest = min(seek_pos.values(), key=lambda p: p.timestamp)
    d = new_dispatcher(b, position=oldest, sub_pos=SubscriptionPosition.UNKNOWN)
    for v in vchannels:
        d.add_target(v, MsgPosition(v, seek_pos[v].msg_id, seek_pos[v].timestamp))
    sub = consume_from_targets(d)
    for v in vchannels:
        assert +sub[v] == +(pub[v] - skipped[v]), v


@settings(deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 4), st.data())
def test_each_target_gets_one_pack_per_newer_tick_and_only_its_newer_messages(seed, rounds, n_targets, data):
    """For targets registered at arbitrary pack end positions (or none), the dispatcher seeked to the
    oldest one (or reading from the earliest) delivers to each target exactly one pack per tick above
    its position, holding exactly the messages routed to it with a timestamp above its position."""
    rng = random.Random(seed)
    b = Broker()
    vchannels = _vchannels(n_targets)
    _, per_round = produce_msgs(b, vchannels, rng, rounds)
    probe = MqTtMsgStream(b, ManualClock(), NO_PURSUIT)
    probe.as_consumer([PCHANNEL], "probe")
    ends = [p.end_positions[0] for p in probe.poll_all()]
    choice = {v: data.draw(st.sampled_from([None] + ends)) for v in vchannels}
    # A target without a position needs everything, so then the dispatcher starts at the earliest.
    oldest = None if None in choice.values() else min(choice.values(), key=lambda p: p.timestamp)
    d = new_dispatcher(b, position=oldest)
    for v in vchannels:
        d.add_target(v, None if choice[v] is None else MsgPosition(v, choice[v].msg_id, choice[v].timestamp))

    got = {v: [] for v in vchannels}
    for out in d.poll_all():
        for v, p in out.items():
            got[v].append((p.end_ts, sorted(_KIND[m.msg_type] for m in p.msgs)))
    for v in vchannels:
        floor = 0 if choice[v] is None else choice[v].timestamp
        want = [(ts, sorted(kind for target, kind in sent if target == v)) for ts, sent in per_round if ts > floor]
        assert got[v] == want, v


@pytest.mark.parametrize("pursuit, packs, first_end_ms", [(True, 101, 50_000), (False, 600, 100)])
def test_a_reader_far_behind_merges_tick_rounds_until_within_pursuit_lag(pursuit, packs, first_end_ms):
    """Lab 2's pursuit-mode cell: 60 s of 100 ms ticks read at 60 s. Pursuit mode merges rounds while the pack
    ends more than mq.pursuitLag (10 s) before now, so the first pack covers (0, 50 s] and each later tick is
    a pack of its own; without it every tick is a pack."""
    from milvus_edu.config import MS
    from milvus_edu.tsoutil import compose_ts, physical_time

    broker = Broker()
    broker.create_channel(PCHANNEL)
    for i in range(1, 601):
        broker.produce(PCHANNEL, TimeTickMsg(timestamp=compose_ts(i * 100, 0)))
    vchannel = get_virtual_channel(PCHANNEL, 100, 0)
    reader = Dispatcher(broker, PCHANNEL, now_ns=lambda: 60_000 * MS, params=MQParams(enable_pursuit_mode=pursuit))
    reader.add_target(vchannel)
    got = [out[vchannel] for out in reader.poll_all()]
    assert len(got) == packs
    assert (got[0].begin_ts, physical_time(got[0].end_ts)) == (0, first_end_ms)
    assert all(physical_time(p.end_ts) - physical_time(p.begin_ts) == 100 for p in got[1:])


def test_targets_without_messages_get_one_equal_empty_pack():
    """Every target that gets no message receives the same empty pack, equal to the one it would get alone."""
    d = new_dispatcher(Broker(), pchannel="mock_pchannel_0")
    for v in ("mock_pchannel_0_1v0", "mock_pchannel_0_2v0", "mock_pchannel_0_3v0"):
        d.add_target(v)
    msg = insert("mock_pchannel_0_1v0", 5, msg_id=1)
    pack = pack_of(msg)
    packs = d.grouping_msgs(pack)
    empty = MsgPack(pack.begin_ts, pack.end_ts, (), pack.start_positions, pack.end_positions)
    assert packs["mock_pchannel_0_2v0"] == empty and packs["mock_pchannel_0_3v0"] == empty
    assert packs["mock_pchannel_0_1v0"].msgs == (msg,)
    ticks_only = pack_of()
    assert all(p == ticks_only for p in d.grouping_msgs(ticks_only).values())
