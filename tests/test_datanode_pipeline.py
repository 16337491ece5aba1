"""The DataNode flowgraph nodes: input skip mode, ddNode's drops and recovery filter, writeNode, ttNode.

Ports of ``internal/flushcommon/pipeline/flow_graph_dd_node_test.go`` and
``internal/util/flowgraph/input_node_test.go`` (Milvus 2.5). Go has no unit test of the writeNode and the
ttNode; their rules (``flow_graph_write_node.go``, ``flow_graph_time_tick_node.go``) are pinned here one at a
time with a recording buffer manager and checkpoint updater, as is ``initMetaCache``'s choice of which
segments' pk statistics to load.
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from milvus_edu.config import DataNodeParams, S
from milvus_edu.datanode.pipeline import (
    DataSyncService,
    DDNode,
    FlowGraphMsg,
    InputNode,
    MsgStreamMsg,
    TTNode,
    WriteNode,
    init_meta_cache,
)
from milvus_edu.merr import wrap_err_channel_not_found
from milvus_edu.mq.msg import DeleteMsg, DropCollectionMsg, DropPartitionMsg, InsertMsg, MsgPack, TimeTickMsg
from milvus_edu.proto import MsgPosition, SegmentInfo, SegmentState
from milvus_edu.tsoutil import compose_ts

CHANNEL = "by-dev-rootcoord-dml_0_1v0"
OTHER_CHANNEL = "by-dev-rootcoord-dml_0_1v1"


def insert(segment_id: int, ts: int, channel: str = CHANNEL, collection_id: int = 1) -> InsertMsg:
    """``getInsertMsg`` / ``getInsertMsgWithChannel``: one row of ``segment_id`` at ``ts``."""
    return InsertMsg(shard_name=channel, collection_id=collection_id, partition_id=10, segment_id=segment_id,
                     pks=(ts,), timestamps=(ts,))


def segment(segment_id: int, dml_ts: int) -> SegmentInfo:
    """``getSegmentInfo``: a segment whose DmlPosition is at ``dml_ts``."""
    return SegmentInfo(segment_id, 1, 10, CHANNEL, dml_position=MsgPosition(CHANNEL, 1, dml_ts))


def dd(dropped=(), sealed=(), growing=(), **kw) -> DDNode:
    return DDNode(1, CHANNEL, dropped, sealed, growing, **kw)


FILTER_CASES = [
    ("test dropped segments true", [100], [], [], insert(100, 10000), True),
    ("test dropped segments true 2", [100, 101, 102], [], [], insert(102, 10000), True),
    ("test sealed segments msgTs <= segmentTs true", [], [segment(200, 50000), segment(300, 50000)], [],
     insert(200, 10000), True),
    ("test sealed segments msgTs == segmentTs true", [], [segment(200, 50000), segment(300, 50000)], [],
     insert(200, 50000), True),
    ("test sealed segments msgTs > segmentTs false", [], [segment(200, 50000), segment(300, 50000)], [],
     insert(222, 70000), False),
    ("test growing segments msgTs <= segmentTs true", [], [], [segment(200, 50000), segment(300, 50000)],
     insert(200, 10000), True),
    ("test growing segments msgTs > segmentTs false", [], [], [segment(200, 50000), segment(300, 50000)],
     insert(200, 70000), False),
    ("test not exist", [], [segment(500, 50000), segment(400, 50000)], [segment(200, 50000), segment(300, 50000)],
     insert(111, 70000), False),
    ("test insert msg with different channelName", [100], [], [], insert(100, 10000, OTHER_CHANNEL), True),
]


@pytest.mark.parametrize("sealed,growing", [
    ([segment(100, 10000), segment(101, 10000), segment(102, 10000)], [segment(200, 10000)]),
    ([], []),
], ids=["3 sealed segments and 1 growing segment", "0 sealed segments and 0 growing segment"])
def test_new_dd_node_keeps_the_watch_time_segments_by_id(sealed, growing):
    """Ports ``TestFlowGraph_DDNode_newDDNode``: the flushed and unflushed records given at watch time become
    the sealed and growing filter maps."""
    node = dd(sealed=sealed, growing=growing)
    assert sorted(node.sealed_seg_info) == [s.id for s in sealed]
    assert sorted(node.growing_seg_info) == [s.id for s in growing]


@pytest.mark.parametrize("description,dropped,sealed,growing,msg,expected", FILTER_CASES,
                         ids=[c[0] for c in FILTER_CASES])
def test_filter_segment_insert_messages(description, dropped, sealed, growing, msg, expected):
    """Ports ``TestFlowGraph_DDNode_filterMessages`` (table cases)."""
    assert dd(dropped, sealed, growing).try_to_filter_segment_insert_messages(msg) is expected


@pytest.mark.parametrize("sealed,msg,filtered,remained", [
    ([segment(100, 50000), segment(101, 50000)], insert(100, 10000), True, True),
    ([segment(100, 50000), segment(101, 50000)], insert(100, 50000), True, True),
    ([segment(100, 70000), segment(101, 50000)], insert(300, 60000), False, False),
], ids=["msgTs<segTs", "msgTs==segTs", "msgTs>segTs"])
def test_sealed_segments_are_pruned_by_any_newer_message(sealed, msg, filtered, remained):
    """Ports ``Test delete segment from sealed segments``: a newer message of *another* segment prunes too (quirk 10)."""
    node = dd(sealed=sealed)
    assert node.try_to_filter_segment_insert_messages(msg) is filtered
    assert len(node.sealed_seg_info) == (2 if remained else 1)
    assert (msg.segment_id in node.sealed_seg_info) is remained


@pytest.mark.parametrize("msg,filtered,remained", [
    (insert(100, 10000), True, True),
    (insert(100, 50000), True, True),
    (insert(100, 60000), False, False),
], ids=["msgTs<segTs", "msgTs==segTs", "msgTs>segTs"])
def test_growing_segment_filter_ends_at_its_first_newer_message(msg, filtered, remained):
    """Ports ``Test delete segment from growing segments``."""
    node = dd(growing=[segment(100, 50000), segment(101, 50000)])
    assert node.try_to_filter_segment_insert_messages(msg) is filtered
    assert len(node.growing_seg_info) == (2 if remained else 1)
    assert (100 in node.growing_seg_info) is remained


@pytest.mark.parametrize("segment_id,expected", [(1, True), (2, True), (3, True), (4, False)])
def test_is_dropped(segment_id, expected):
    """Ports ``TestFlowGraph_DDNode_isDropped``."""
    assert dd(dropped=[1, 2, 3]).try_to_filter_segment_insert_messages(insert(segment_id, 5)) is expected


def test_no_dropped_segments_filters_nothing():
    """Ports the last ``isDropped`` case: no dropped segments."""
    assert dd().try_to_filter_segment_insert_messages(insert(5, 5)) is False


def _stream(*msgs) -> MsgStreamMsg:
    return MsgStreamMsg(tuple(msgs), 0, 0, (MsgPosition(CHANNEL, 1, 0),), (MsgPosition(CHANNEL, 2, 9),))


@pytest.mark.parametrize("msg_collection,drop", [(1, True), (2, False)])
def test_drop_collection_enters_drop_mode_only_for_own_collection(msg_collection, drop):
    """Ports ``Test DDNode Operate DropCollection Msg``; after a drop nothing flows any more."""
    node = dd()
    out = node.operate(_stream(DropCollectionMsg(timestamp=5, collection_id=msg_collection)))
    assert out is not None and out.drop_collection is drop
    assert node.drop_mode is drop
    after = node.operate(_stream(insert(7, 8)))
    assert (after is None) is drop


@pytest.mark.parametrize("msg_collection,expected", [(1, (101,)), (2, ())])
def test_drop_partition_is_forwarded_for_own_collection(msg_collection, expected):
    """Ports ``Test DDNode Operate DropPartition Msg``."""
    out = dd().operate(_stream(DropPartitionMsg(timestamp=5, collection_id=msg_collection, partition_id=101)))
    assert out.drop_partitions == expected


@pytest.mark.parametrize("msg_collection,expected", [(1, 1), (2, 0)])
def test_delete_of_other_collection_is_dropped(msg_collection, expected):
    """Ports ``Test DDNode Operate Delete Msg``; deletes are never filtered by segment."""
    msg = DeleteMsg(shard_name=CHANNEL, collection_id=msg_collection, partition_id=10, pks=(1,), timestamps=(4000,))
    out = dd(sealed=[segment(100, 9999)]).operate(_stream(msg))
    assert len(out.delete_messages) == expected


def test_operate_keeps_positions_and_reports_what_it_filtered():
    """The recovery filter's victims are reported (for the run log), the rest flows with the pack's positions."""
    node = dd(growing=[segment(100, 50000)])
    old, new = insert(100, 40000), insert(100, 60000)
    out = node.operate(_stream(old, new, insert(7, 1, collection_id=2)))
    assert out.insert_messages == (new,)
    assert node.filtered == [old]
    assert out.start_positions[0].msg_id == 1 and out.end_positions[0].timestamp == 9


def test_close_message_passes_positions_even_in_drop_mode():
    """``ddNode.Operate``: a close message is forwarded before the drop-mode check."""
    node = dd()
    node.operate(_stream(DropCollectionMsg(timestamp=5, collection_id=1)))
    out = node.operate(MsgStreamMsg((), 1, 9, (MsgPosition(CHANNEL, 1, 1),), (MsgPosition(CHANNEL, 3, 9),), True))
    assert out.is_close and out.end_positions[0].msg_id == 3


def test_skip_recovery_filter_switch_lets_flushed_rows_through():
    """Bug switch ``skip_recovery_filter``: an insert at or before the segment's DmlPosition is buffered again."""
    node = dd(sealed=[segment(200, 50000)], skip_recovery_filter=True)
    assert node.try_to_filter_segment_insert_messages(insert(200, 10000)) is False
    assert node.try_to_filter_segment_insert_messages(insert(200, 10000, OTHER_CHANNEL)) is True


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 100)), max_size=40),
       st.dictionaries(st.integers(1, 4), st.integers(1, 100), max_size=4))
def test_filter_never_drops_a_row_newer_than_its_segment_checkpoint(msgs, growing_ts):
    """Property: whatever the order, an insert newer than its segment's DmlPosition is never filtered."""
    node = dd(growing=[segment(s, ts) for s, ts in growing_ts.items()])
    for seg, ts in msgs:
        dropped = node.try_to_filter_segment_insert_messages(insert(seg, ts))
        if ts > growing_ts.get(seg, 0):
            assert not dropped


def _tick_pack(ts: int) -> MsgPack:
    return MsgPack(ts - 1, ts, (TimeTickMsg(timestamp=ts),))


def test_input_node_skip_mode():
    """Ports ``Test_InputNodeSkipMode`` (coldTime 3 s, skipNum 1), with the node's clock injected."""
    now = [0]
    params = DataNodeParams(skip_mode_cold_time_ns=3 * S, skip_mode_skip_num=1)
    node = InputNode(params, lambda: now[0])
    out = [node.operate(_tick_pack(1))]
    assert out[-1] is not None and node.skip_mode is False
    now[0] += 3001
    out.append(node.operate(_tick_pack(2)))
    assert out[-1] is not None and node.skip_mode is True
    out.append(node.operate(_tick_pack(3)))
    assert out[-1] is None and node.skip_mode is True
    out.append(node.operate(_tick_pack(4)))
    assert out[-1] is not None and node.skip_mode is True
    assert sum(o is not None for o in out) == 3
    woke = node.operate(MsgPack(4, 5, (insert(1, 5),)))
    assert woke is not None and node.skip_mode is False and node.skip_count == 0


def test_input_node_never_skips_a_dispatcher_tick_pack():
    """Quirk: the dispatcher's tick packs carry no message, so skip mode never engages on that path."""
    now = [0]
    node = InputNode(DataNodeParams(), lambda: now[0])
    now[0] += 3_600_000
    outs = [node.operate(MsgPack(i, i + 1)) for i in range(20)]
    assert all(o is not None for o in outs) and node.skip_mode is False


def test_input_node_close_carries_the_last_positions():
    """``InputNode.Operate`` on a closed input: a close message with the last pack's positions."""
    node = InputNode(DataNodeParams(), lambda: 0)
    assert node.operate(None).end_positions == ()
    node.operate(MsgPack(3, 9, (), (MsgPosition(CHANNEL, 1, 3),), (MsgPosition(CHANNEL, 2, 9),)))
    closed = node.operate(None)
    assert closed.is_close and closed.end_positions[0].msg_id == 2 and closed.timestamp_max == 9


class _RecordingBuffers:
    """A buffer manager that records the positions ``buffer_data`` gets and cuts no sync."""

    def __init__(self):
        self.calls = []

    def buffer_data(self, channel, insert_msgs, delete_msgs, start_pos, end_pos):
        self.calls.append((channel, start_pos, end_pos))
        return []


def test_write_node_names_positions_after_its_vchannel_pack_after_pack():
    """Each pack's positions reach the buffer named after the vchannel, equal to a renamed copy, whether or not
    the pack starts where the one before ended (then the position renamed for that end is handed on)."""
    buffers = _RecordingBuffers()
    node = WriteNode(CHANNEL, buffers)
    p0, p1, p2 = (MsgPosition("by-dev-rootcoord-dml_0", i, 100 * i, "g") for i in (1, 2, 3))
    other = MsgPosition("by-dev-rootcoord-dml_0", 7, 700)
    for start, end in ((p0, p1), (p1, p2), (other, p0)):
        out, _ = node.operate(FlowGraphMsg(start_positions=(start,), end_positions=(end,)))
        expected = (MsgPosition(CHANNEL, start.msg_id, start.timestamp, start.msg_group),
                    MsgPosition(CHANNEL, end.msg_id, end.timestamp, end.msg_group))
        assert buffers.calls[-1] == (CHANNEL, *expected)
        assert (out.start_positions, out.end_positions) == ((expected[0],), (expected[1],))


def test_write_node_drops_a_pack_without_positions_and_passes_a_close_message():
    """``writeNode.Operate``: a close message passes untouched; a pack without start or end positions emits
    nothing and buffers nothing."""
    buffers = _RecordingBuffers()
    node = WriteNode(CHANNEL, buffers)
    close = FlowGraphMsg(is_close=True)
    assert node.operate(close) == (close, [])
    p = MsgPosition("by-dev-rootcoord-dml_0", 1, 100)
    assert node.operate(FlowGraphMsg(start_positions=(p,))) == (None, [])
    assert node.operate(FlowGraphMsg(end_positions=(p,))) == (None, [])
    assert buffers.calls == []


class _DroppingBuffers(_RecordingBuffers):
    """Also records drops, in the order they come."""

    def drop_channel(self, channel):
        self.calls.append(("drop_channel", channel))
        return []

    def drop_partitions(self, channel, partition_ids):
        self.calls.append(("drop_partitions", channel, tuple(partition_ids)))


def test_write_node_buffers_then_drops_the_channel_and_partitions():
    """``writeNode.Operate``: the pack is buffered first, then a dropped collection drops the channel's buffer
    and dropped partitions go to the manager; the message for ttNode keeps ``dropCollection``."""
    buffers = _DroppingBuffers()
    p = MsgPosition("by-dev-rootcoord-dml_0", 1, 100)
    out, _ = WriteNode(CHANNEL, buffers).operate(
        FlowGraphMsg(start_positions=(p,), end_positions=(p,), drop_collection=True, drop_partitions=(10, 11)))
    assert [c[0] for c in buffers.calls] == [CHANNEL, "drop_channel", "drop_partitions"]
    assert buffers.calls[2] == ("drop_partitions", CHANNEL, (10, 11))
    assert out.drop_collection and out.drop_partitions == ()


# =================================================================================================
# ttNode (flow_graph_time_tick_node.go; Go has no unit test of it)
# =================================================================================================

INTERVAL_MS = DataNodeParams().update_channel_checkpoint_interval_ns // 1_000_000  # 60 s


class _Manager:
    """The buffer manager as ttNode sees it: a checkpoint, a ``need_update`` flag, and the notifications."""

    def __init__(self, cp: MsgPosition | None = MsgPosition(CHANNEL, 1, 7), need_update: bool = False):
        self.cp, self.need_update, self.missing = cp, need_update, False
        self.notified: list[tuple[str, int]] = []

    def get_checkpoint(self, channel):
        if self.missing:
            raise wrap_err_channel_not_found(channel)
        return self.cp, self.need_update

    def notify_checkpoint_updated(self, channel, ts):
        self.notified.append((channel, ts))


class _Updater:
    def __init__(self):
        self.tasks: list[tuple[MsgPosition | None, bool, object]] = []

    def add_task(self, pos, flush, callback):
        self.tasks.append((pos, flush, callback))
        return flush


def _fg(ms: int, **kw) -> FlowGraphMsg:
    """A pack whose TimestampMax is at physical time ``ms`` (message time, all ttNode looks at)."""
    return FlowGraphMsg(timestamp_max=compose_ts(ms, 0), **kw)


def _tt(manager=None, dropped=None):
    manager = manager or _Manager()
    updater = _Updater()
    return TTNode(CHANNEL, manager, updater, DataNodeParams(), drop_callback=dropped), manager, updater


def test_tt_node_first_pack_submits_then_waits_the_interval_of_message_time():
    """``lastUpdateTime`` starts at the zero time, so the first pack submits; the next periodic submission
    comes once ``curTs - lastUpdateTime >= updateChannelCheckpointInterval`` (60 s), inclusive."""
    node, _, updater = _tt()
    first = node.operate(_fg(1_000))
    assert (first.flush, first.periodic) == (False, True) and node.last_update_ms == 1_000
    assert node.operate(_fg(1_000 + INTERVAL_MS - 1)) is None
    again = node.operate(_fg(1_000 + INTERVAL_MS))
    assert again.periodic and len(updater.tasks) == 2
    assert node.last_update_ms == 1_000 + INTERVAL_MS


def test_tt_node_need_update_submits_a_flush_task_between_periodic_ones():
    manager = _Manager(need_update=False)
    node, _, updater = _tt(manager)
    node.operate(_fg(1_000))
    manager.need_update = True
    sub = node.operate(_fg(2_000))
    assert (sub.flush, sub.periodic) == (True, False)
    assert updater.tasks[-1][1] is True and node.last_update_ms == 2_000


def test_tt_node_periodic_path_wins_over_need_update_quirk_6():
    """Quirk 6: when the interval has passed, the periodic (non-flush) submission returns first, so a flush
    waiting on the same pack is submitted without the flush flag."""
    node, manager, updater = _tt(_Manager(need_update=True))
    sub = node.operate(_fg(5_000))
    assert (sub.flush, sub.periodic) == (False, True)
    assert [flush for _, flush, _ in updater.tasks] == [False]


def test_tt_node_callback_reports_the_submitted_checkpoint_timestamp():
    """The callback (run by the updater after DataCoord stored the task) tells the manager the timestamp of the
    position submitted with it; a missing position reports 0 (Go's ``GetTimestamp`` of nil)."""
    manager = _Manager(cp=MsgPosition(CHANNEL, 4, 42))
    node, _, updater = _tt(manager)
    node.operate(_fg(1_000))
    manager.cp = None
    node.operate(_fg(1_000 + INTERVAL_MS))
    for _, _, callback in updater.tasks:
        callback()
    assert manager.notified == [(CHANNEL, 42), (CHANNEL, 0)]


def test_tt_node_channel_not_found_submits_nothing_and_keeps_its_clock():
    manager = _Manager()
    manager.missing = True
    node, _, updater = _tt(manager)
    assert node.operate(_fg(1_000)) is None
    assert updater.tasks == [] and node.last_update_ms is None


def test_tt_node_close_message_submits_once_if_it_has_end_positions():
    """``flowgraph is closing, force update channel CP``: a close message with end positions submits the
    checkpoint (no flush), even inside the interval; one without end positions submits nothing."""
    node, _, updater = _tt()
    node.operate(_fg(1_000))
    assert node.operate(_fg(1_500, is_close=True)) is None
    sub = node.operate(_fg(2_000, is_close=True, end_positions=(MsgPosition(CHANNEL, 3, 9),)))
    assert (sub.flush, sub.periodic) == (False, False) and len(updater.tasks) == 2


def test_tt_node_drop_mode_submits_nothing_ever_again():
    """A dropped collection puts ttNode in drop mode (the drop callback runs once): no checkpoint is
    submitted for it, not even by the close message."""
    dropped = []
    node, _, updater = _tt(dropped=lambda: dropped.append(True))
    assert node.operate(_fg(1_000, drop_collection=True)) is None
    assert node.operate(_fg(1_000 + 2 * INTERVAL_MS)) is None
    assert node.operate(_fg(1_000 + 3 * INTERVAL_MS, is_close=True,
                            end_positions=(MsgPosition(CHANNEL, 3, 9),))) is None
    assert updater.tasks == [] and dropped == [True]


# =================================================================================================
# initMetaCache (data_sync_service.go)
# =================================================================================================

def _record(segment_id: int, state: str) -> SegmentInfo:
    return SegmentInfo(segment_id, 1, 10, CHANNEL, state=state, dml_position=MsgPosition(CHANNEL, 1, 5))


@pytest.mark.parametrize("skip_bf_stats_load, flushed_loaded", [(True, False), (False, True)])
def test_init_meta_cache_loads_unflushed_stats_always_and_flushed_ones_only_without_skip(
        skip_bf_stats_load, flushed_loaded):
    """``initMetaCache``: growing segments' pk stats are always loaded; flushed ones' only when
    ``dataNode.skip.BFStats.Load`` is off. Unflushed segments come back Growing."""
    asked = []

    def load(info):
        asked.append(info.id)
        return {info.id * 10}

    cache = init_meta_cache(1, CHANNEL, DataNodeParams(skip_bf_stats_load=skip_bf_stats_load), load,
                            flushed=[_record(1, SegmentState.FLUSHED)], unflushed=[_record(2, SegmentState.SEALED)])
    assert sorted(asked) == ([1, 2] if flushed_loaded else [2])
    assert cache.get_segment_by_id(2).pk_stats == {20} and cache.get_segment_by_id(2).state == SegmentState.GROWING
    assert cache.get_segment_by_id(1).pk_stats == ({10} if flushed_loaded else frozenset())


class _FlowManager(_DroppingBuffers, _Manager):
    """Everything the four nodes call on the buffer manager."""

    def __init__(self):
        _DroppingBuffers.__init__(self)
        _Manager.__init__(self)


def test_data_sync_service_says_which_packs_the_write_node_buffered():
    """``written`` (Go's writeNode then reports the pack's end timestamp to the time-tick sender): a pack with
    positions, the one carrying a DropCollection included; not the packs after it (drop mode), the close, or a
    pack without positions."""
    service = DataSyncService(1, CHANNEL, _FlowManager(), _Updater(), DataNodeParams(), lambda: 0)

    def pack(ts, *msgs):
        p = MsgPosition("by-dev-rootcoord-dml_0", ts, ts)
        return MsgPack(ts - 1, ts, msgs, (p,), (p,))

    assert service.operate(pack(10, insert(1, 10))).written
    assert service.operate(pack(20, DropCollectionMsg(timestamp=20, collection_id=1))).written
    assert not service.operate(pack(30, insert(1, 30))).written
    assert not service.operate(None).written
    fresh = DataSyncService(1, CHANNEL, _FlowManager(), _Updater(), DataNodeParams(), lambda: 0)
    assert not fresh.operate(MsgPack(39, 40)).written  # no positions: the writeNode drops it
