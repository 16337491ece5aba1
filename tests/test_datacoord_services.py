"""DataCoord's RPCs (reference §4.7) and the recovery seek position (§4.8 step 1).

Ports the applicable cases of Milvus 2.5 ``internal/datacoord/services_test.go`` (``TestGetFlushState_*``,
``TestSaveBinlogPath_*``, ``TestFlush_*``), ``server_test.go`` (``TestGetSegmentInfo``,
``TestDataCoordServer_UpdateChannelCheckpoint``, ``TestGetChannelSeekPosition``) and
``handler_test.go`` (``TestGetDataVChanPositions``); then pins the rules one at a time (Flush's
effects and retries, the segment manager, a restart over SQLite).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from milvus_edu.datacoord import (
    AllocTimestamp,
    Catalog,
    FlushChannels,
    Server,
    Sleep,
    StateCode,
)
from milvus_edu.effects import drive
from milvus_edu.mq.names import to_physical_channel
from milvus_edu.merr import (
    ChannelNotFoundError,
    CollectionNotFoundError,
    ParameterInvalidError,
    SegmentNotFoundError,
    ServiceNotReadyError,
)
from milvus_edu.proto import (
    Binlog,
    CheckPoint,
    FieldBinlog,
    MsgPosition,
    SaveBinlogPathsRequest,
    SegmentInfo,
    SegmentLevel,
    SegmentStartPosition,
    SegmentState,
)
from milvus_edu.storage.kv import FaultyKV, KVError, MemoryKV, SQLiteKV
from milvus_edu.tsoutil import compose_ts

FLUSH_TS = compose_ts(1_700_000_000_123, 5)


def new_server(kv=None, **kwargs) -> Server:
    ids = itertools.count(1000)
    return Server(Catalog(kv if kv is not None else MemoryKV()), lambda: next(ids), now_ns=lambda: 42, **kwargs)


@pytest.fixture
def server():
    return new_server()


@pytest.fixture
def faults_kv():
    """A MemoryKV behind a FaultyKV that fails the operations named in ``faults.ops``."""

    class Faults:
        def __init__(self):
            self.ops: set[str] = set()

        def __call__(self, op, key):
            return op in self.ops

    faults = Faults()
    return FaultyKV(MemoryKV(), faults), faults


def add(server: Server, segment_id: int, state: str = SegmentState.GROWING, channel: str = "ch1", **kw) -> None:
    server.meta.add_segment(SegmentInfo(id=segment_id, collection_id=kw.pop("collection_id", 0),
                                        partition_id=kw.pop("partition_id", 0), insert_channel=channel,
                                        state=state, **kw))


def paths(field_id: int, *names: str, entries: int = 5) -> FieldBinlog:
    return FieldBinlog(field_id, tuple(Binlog(entries, 0, 0, log_path=n) for n in names))


def answer(ts: int = FLUSH_TS, fail: Callable | None = None):
    """An effect handler for ``drive``: timestamps, FlushChannels (optionally failing), sleeps; records them."""
    seen = []

    def handle(effect):
        seen.append(effect)
        if isinstance(effect, AllocTimestamp):
            return ts
        if isinstance(effect, FlushChannels) and fail is not None and fail(effect):
            raise ConnectionError(f"datanode {effect.node_id} unreachable")
        return None

    handle.seen = seen
    return handle


# =================================================================================================
# Port of services_test.go: GetFlushState
# =================================================================================================

@pytest.mark.parametrize("flush_ts, expected", [(11, True), (12, True), (13, False)],
                         ids=["channel cp > flush ts", "channel cp = flush ts", "channel cp < flush ts"])
def test_get_flush_state_by_flush_ts(server, flush_ts, expected):
    """TestGetFlushState_ByFlushTs."""
    server.add_collection(0, ["ch1"])
    server.meta.update_channel_checkpoint("ch1", MsgPosition("ch1", 1, 12))
    assert server.get_flush_state(collection_id=0, flush_ts=flush_ts) is expected


def test_get_flush_state_collection_without_channels_is_flushed(server):
    """TestGetFlushState_ByFlushTs: collection 1 has no channels -> flushed (compatibility)."""
    assert server.get_flush_state(collection_id=1, flush_ts=13) is True


@pytest.mark.parametrize("seg_id, state, expected", [
    (1, SegmentState.FLUSHED, True), (2, SegmentState.FLUSHING, True),
    (3, SegmentState.SEALED, False), (4, SegmentState.DROPPED, True), (5, None, True),
], ids=["flushed", "flushing", "sealed", "compacted/dropped", "absent"])
def test_get_flush_state_by_segment(server, seg_id, state, expected):
    """TestGetFlushState_BySegment (plus Flushing and an absent segment)."""
    server.add_collection(0, ["ch1"])
    if state is not None:
        add(server, seg_id, state)
    server.meta.update_channel_checkpoint("ch1", MsgPosition("ch1", 1, 12))
    assert server.get_flush_state(segment_ids=[seg_id], collection_id=0) is expected


def test_get_flush_state_needs_every_channel_checkpoint(server):
    """Rule 3: a channel without a checkpoint is not flushed, watched or not."""
    server.add_collection(0, ["a", "b"])
    server.meta.update_channel_checkpoint("a", MsgPosition("a", 1, 20))
    assert server.get_flush_state(collection_id=0, flush_ts=10) is False
    server.meta.update_channel_checkpoint("b", MsgPosition("b", 1, 10))
    assert server.get_flush_state(collection_id=0, flush_ts=10) is True


# =================================================================================================
# Port of services_test.go: SaveBinlogPaths
# =================================================================================================

def test_save_binlog_path_closed_server(server):
    """TestSaveBinlogPath_ClosedServer."""
    server.update_state_code(StateCode.ABNORMAL)
    with pytest.raises(ServiceNotReadyError, match=r"^service not ready\[datacoord=1\]: Abnormal$"):
        server.save_binlog_paths(SaveBinlogPathsRequest(1, 0, 0, "test"), node_id=0)


def test_save_binlog_path_channel_not_match(server):
    """TestSaveBinlogPath_ChannelNotMatch."""
    with pytest.raises(ChannelNotFoundError, match=r"^for node 0: channel not found\[channel=test\]$"):
        server.save_binlog_paths(SaveBinlogPathsRequest(1, 0, 0, "test"), node_id=0)


@pytest.mark.parametrize("seg_id, error", [(1, SegmentNotFoundError), (2, None), (3, SegmentNotFoundError)],
                         ids=["segment not exist", "segment dropped", "segment not in meta"])
def test_save_binlog_path_save_unhealthy_segment(server, seg_id, error):
    """TestSaveBinlogPath_SaveUnhealthySegment: NotExist/absent -> SegmentNotFound; Dropped -> ignored."""
    server.add_collection(0, ["ch1"])
    server.channel_manager.watch("ch1", 0)
    add(server, 1, SegmentState.NOT_EXIST)
    add(server, 2, SegmentState.DROPPED)
    req = SaveBinlogPathsRequest(seg_id, 0, 0, "ch1", field2_binlog_paths=(paths(1, "a/0/1/1/1/7"),))
    if error is None:
        assert server.save_binlog_paths(req, node_id=0) is None
        assert server.meta.get_segment(2).binlogs == ()
    else:
        with pytest.raises(error, match=rf"segment not found\[segment={seg_id}\]"):
            server.save_binlog_paths(req, node_id=0)


@pytest.mark.parametrize("seg_id, dropped, flushed, rows, expected", [
    (0, True, False, 100, SegmentState.DROPPED),
    (1, False, True, 100, SegmentState.FLUSHING),
    (2, False, True, 0, SegmentState.DROPPED),
], ids=["flushed to dropped", "sealed to flushing", "empty sealed to dropped"])
def test_save_binlog_path_save_dropped_segment(server, seg_id, dropped, flushed, rows, expected):
    """TestSaveBinlogPath_SaveDroppedSegment: flags set the state; an empty flushing segment is dropped."""
    server.add_collection(0, ["ch1"])
    server.channel_manager.watch("ch1", 0)
    add(server, 0, SegmentState.FLUSHED, num_of_rows=100)
    add(server, 1, SegmentState.SEALED, num_of_rows=100)
    add(server, 2, SegmentState.SEALED, num_of_rows=0)
    seg = server.save_binlog_paths(SaveBinlogPathsRequest(seg_id, 0, 0, "ch1", flushed=flushed, dropped=dropped),
                                   node_id=0)
    assert seg == server.meta.get_segment(seg_id)
    assert (seg.binlogs, seg.num_of_rows, seg.state) == ((), rows, expected)


def test_save_binlog_path_l0_segment(server):
    """TestSaveBinlogPath_L0Segment: an L0 report creates its Flushed L0 segment; paths become ids."""
    server.add_collection(0, ["ch1"])
    server.channel_manager.watch("ch1", 0)
    assert server.meta.get_healthy_segment(1) is None
    seg = server.save_binlog_paths(SaveBinlogPathsRequest(
        1, 0, 1, "ch1", seg_level=SegmentLevel.L0, flushed=True,
        deltalogs=(paths(1, "/by-dev/test/0/1/1/1/1", "/by-dev/test/0/1/1/1/2"),),
        check_points=(CheckPoint(1, MsgPosition("ch1", 123, 0), 12),),
    ), node_id=0)
    assert seg.level == SegmentLevel.L0 and seg.state == SegmentState.FLUSHED
    assert [(b.log_id, b.log_path) for b in seg.deltalogs[0].binlogs] == [(1, ""), (2, "")]
    assert server.meta.get_healthy_segment(1) == seg


def test_save_binlog_path_normal_case(server):
    """TestSaveBinlogPath_NormalCase: ids from paths, DmlPosition from the checkpoint, rows from binlogs."""
    server.add_collection(0, ["ch1"])
    server.channel_manager.watch("ch1", 0)
    for i in (0, 1, 2):
        add(server, i)
    server.save_binlog_paths(SaveBinlogPathsRequest(
        1, 0, 0, "ch1",
        field2_binlog_paths=(paths(1, "/by-dev/test/0/1/1/1/1", "/by-dev/test/0/1/1/1/2"),),
        field2_statslog_paths=(paths(1, "/by-dev/test_stats/0/1/1/1/1", "/by-dev/test_stats/0/1/1/1/2"),),
        check_points=(CheckPoint(1, MsgPosition("ch1", 123, 0), 12),),
    ), node_id=0)
    seg = server.meta.get_healthy_segment(1)
    assert len(seg.binlogs) == 1 and seg.binlogs[0].field_id == 1
    assert [(b.log_path, b.log_id) for b in seg.binlogs[0].binlogs] == [("", 1), ("", 2)]
    assert seg.dml_position == MsgPosition("ch1", 123, 0)
    assert seg.num_of_rows == 10
    seg2 = server.save_binlog_paths(SaveBinlogPathsRequest(2, 0, 0, "ch1", flushed=True), node_id=0)
    assert seg2.state == SegmentState.DROPPED


def test_save_binlog_paths_uses_the_request_source_id(server):
    """``req.GetBase().GetSourceID()`` is the node when none is passed."""
    server.add_collection(0, ["ch1"])
    server.channel_manager.watch("ch1", 7)
    add(server, 1)
    assert server.save_binlog_paths(SaveBinlogPathsRequest(1, 0, 0, "ch1", source_id=7)).id == 1
    with pytest.raises(ChannelNotFoundError):
        server.save_binlog_paths(SaveBinlogPathsRequest(1, 0, 0, "ch1", source_id=8))


def test_save_binlog_paths_bad_path_is_parameter_invalid(server):
    """CompressSaveBinlogPaths: a path without ``/`` cannot give a log id."""
    server.add_collection(0, ["ch1"])
    server.channel_manager.watch("ch1", 0)
    add(server, 1)
    with pytest.raises(ParameterInvalidError, match="invalid binlog path: nolog"):
        server.save_binlog_paths(SaveBinlogPathsRequest(1, 0, 0, "ch1", field2_binlog_paths=(paths(1, "nolog"),)), 0)


def test_save_binlog_paths_failed_write_changes_no_meta_but_stops_allocation(faults_kv):
    """A failed catalog write leaves the segment as it was; the segment manager already let it go (Go's order)."""
    kv, faults = faults_kv
    server = new_server(kv)
    server.add_collection(0, ["ch1"])
    server.channel_manager.watch("ch1", 0)
    seg_id = server.assign_segment_id(0, 0, "ch1", 10)
    faults.ops = {"save"}
    with pytest.raises(KVError):
        server.save_binlog_paths(SaveBinlogPathsRequest(
            seg_id, 0, 0, "ch1", flushed=True, field2_binlog_paths=(paths(1, "x/5"),),
            start_positions=(SegmentStartPosition(seg_id, MsgPosition("ch1", 1, 1)),),
            check_points=(CheckPoint(seg_id, MsgPosition("ch1", 2, 2), 5),)), 0)
    seg = server.meta.get_segment(seg_id)
    assert (seg.state, seg.binlogs, seg.start_position, seg.dml_position) == (SegmentState.GROWING, (), None, None)
    assert server.segment_manager.growing_segments("ch1") == ()
    faults.ops = set()
    assert server.assign_segment_id(0, 0, "ch1", 10) != seg_id


# =================================================================================================
# Port of server_test.go: UpdateChannelCheckpoint
# =================================================================================================

MOCK_VCH = "fake-by-dev-rootcoord-dml-1-testchannelcp-v0"


def test_update_channel_checkpoint_success(server):
    """TestDataCoordServer_UpdateChannelCheckpoint/UpdateChannelCheckpoint_Success (legacy, then batch)."""
    server.channel_manager.watch(MOCK_VCH, 1, collection_id=0)
    cp = MsgPosition(MOCK_VCH, 0, 1000)
    assert server.update_channel_checkpoint(1, vchannel=MOCK_VCH, position=cp) == [cp]
    assert server.meta.get_channel_checkpoint(MOCK_VCH) == cp
    server.meta.drop_channel_checkpoint(MOCK_VCH)
    assert server.update_channel_checkpoint(1, vchannel=MOCK_VCH, positions=[cp]) == [cp]
    assert server.meta.get_channel_checkpoint(MOCK_VCH) == cp


def test_update_channel_checkpoint_node_not_match(server):
    """TestDataCoordServer_UpdateChannelCheckpoint/UpdateChannelCheckpoint_NodeNotMatch."""
    server.channel_manager.watch(MOCK_VCH, 2, collection_id=0)
    cp = MsgPosition(MOCK_VCH, 0, 1000)
    with pytest.raises(ChannelNotFoundError, match=rf"^from node 1: channel not found\[channel={MOCK_VCH}\]$"):
        server.update_channel_checkpoint(1, vchannel=MOCK_VCH, position=cp)
    assert server.meta.get_channel_checkpoint(MOCK_VCH) is None
    assert server.update_channel_checkpoint(1, vchannel=MOCK_VCH, positions=[cp]) == []
    assert server.meta.get_channel_checkpoint(MOCK_VCH) is None


def test_batch_checkpoint_keeps_only_the_nodes_channels(server):
    """Batch form: foreign channels dropped silently, non-advancing ones ignored, the rest saved."""
    server.channel_manager.watch("a", 1, collection_id=0)
    server.channel_manager.watch("b", 1, collection_id=0)
    server.channel_manager.watch("c", 2, collection_id=0)
    server.meta.update_channel_checkpoint("b", MsgPosition("b", 0, 50))
    saved = server.update_channel_checkpoint(1, positions=[MsgPosition("a", 0, 10), MsgPosition("b", 0, 50),
                                                           MsgPosition("c", 0, 10), None])
    assert saved == [MsgPosition("a", 0, 10)]
    assert server.meta.get_channel_checkpoint("c") is None


def test_update_channel_checkpoint_on_unhealthy_server(server):
    """Every RPC checks the state first."""
    server.update_state_code(StateCode.INITIALIZING)
    with pytest.raises(ServiceNotReadyError, match="Initializing"):
        server.update_channel_checkpoint(1, positions=[])


# =================================================================================================
# Port of services_test.go: Flush
# =================================================================================================

def test_flush_normal_case(server):
    """TestFlush_NormalCase: the growing segment is sealed, every DataNode is told flushTs."""
    server.add_collection(0, ["channel-1"])
    server.channel_manager.watch("channel-1", 1)
    server.meta.update_channel_checkpoint("channel-1", MsgPosition("channel-1", 3, 77))
    seg_id = server.assign_segment_id(0, 1, "channel-1", 1)
    handle = answer()
    result = drive(server.flush(0), handle)
    assert handle.seen == [AllocTimestamp(), FlushChannels(1, FLUSH_TS, ("channel-1",))]
    assert result.segment_ids == (seg_id,) and result.flush_segment_ids == ()
    assert result.flush_ts == FLUSH_TS and result.time_of_seal == 1_700_000_000
    assert result.channel_cps == {"channel-1": MsgPosition("channel-1", 3, 77)}
    assert server.meta.get_segment(seg_id).state == SegmentState.SEALED
    assert server.segment_manager.sealed_segments("channel-1") == (seg_id,)


def test_flush_collection_not_exist(server):
    """TestFlush_CollectionNotExist: CollectionNotFound, after the timestamp was taken."""
    handle = answer()
    with pytest.raises(CollectionNotFoundError, match=r"collection not found\[collection=0\]"):
        drive(server.flush(0), handle)
    assert handle.seen == [AllocTimestamp()]


def test_flush_closed_server(server):
    """TestFlush_ClosedServer: ServiceNotReady before any effect."""
    server.update_state_code(StateCode.ABNORMAL)
    handle = answer()
    with pytest.raises(ServiceNotReadyError):
        drive(server.flush(0), handle)
    assert handle.seen == []


def test_flush_reports_flushed_segments_and_already_sealed_ones(server):
    """flushCollection: sealed ids (old and new) apart from the other Flushing/Flushed L1 segments."""
    server.add_collection(0, ["ch1", "ch2"])
    add(server, 1, SegmentState.FLUSHED)
    add(server, 2, SegmentState.FLUSHING, channel="ch2")
    add(server, 3, SegmentState.FLUSHED, level=SegmentLevel.L0)
    add(server, 4, SegmentState.SEALED)
    server.segment_manager.load_segments_from_meta()
    new_id = server.assign_segment_id(0, 0, "ch2", 5)
    result = drive(server.flush(0), answer())
    assert result.segment_ids == (4, new_id)
    assert result.flush_segment_ids == (1, 2)
    assert result.channel_cps == {"ch1": None, "ch2": None}


def test_flush_calls_every_datanode_even_without_channels(server):
    """GetNodeChannelsByCollectionID lists every node (Go's channel store), so each gets FlushChannels."""
    server.add_collection(0, ["a", "b"])
    server.add_collection(9, ["z"])
    server.channel_manager.watch("b", 3)
    server.channel_manager.watch("a", 3)
    server.channel_manager.watch("z", 1)
    server.channel_manager.add_node(2)
    handle = answer()
    drive(server.flush(0), handle)
    assert handle.seen[1:] == [FlushChannels(1, FLUSH_TS, ()), FlushChannels(2, FLUSH_TS, ()),
                               FlushChannels(3, FLUSH_TS, ("a", "b"))]


def test_flush_retries_the_whole_round_with_backoff(server):
    """retry.Do: a failed FlushChannels restarts the round after 200 ms, 400 ms, ... ."""
    server.add_collection(0, ["a", "b"])
    server.channel_manager.watch("a", 1)
    server.channel_manager.watch("b", 2)
    failures = iter([True, True])
    handle = answer(fail=lambda e: e.node_id == 2 and next(failures, False))
    drive(server.flush(0), handle)
    calls = [e for e in handle.seen if not isinstance(e, AllocTimestamp)]
    assert calls == [FlushChannels(1, FLUSH_TS, ("a",)), FlushChannels(2, FLUSH_TS, ("b",)), Sleep(200_000_000),
                     FlushChannels(1, FLUSH_TS, ("a",)), FlushChannels(2, FLUSH_TS, ("b",)), Sleep(400_000_000),
                     FlushChannels(1, FLUSH_TS, ("a",)), FlushChannels(2, FLUSH_TS, ("b",))]


def test_flush_gives_up_after_60_attempts_but_keeps_the_seal(server):
    """60 failed rounds (each followed by a sleep, capped at 3 s) -> the last error; sealing stays."""
    server.add_collection(0, ["a"])
    server.channel_manager.watch("a", 1)
    seg_id = server.assign_segment_id(0, 0, "a", 1)
    handle = answer(fail=lambda e: True)
    with pytest.raises(ConnectionError, match="datanode 1 unreachable"):
        drive(server.flush(0), handle)
    sleeps = [e.duration_ns for e in handle.seen if isinstance(e, Sleep)]
    assert len(sleeps) == 60 and sleeps[:5] == [200_000_000, 400_000_000, 800_000_000, 1_600_000_000, 3_000_000_000]
    assert set(sleeps[4:]) == {3_000_000_000}
    assert server.meta.get_segment(seg_id).state == SegmentState.SEALED


def test_flush_with_segment_ids_seals_only_those(server):
    """SealAllSegments with ids: only the listed growing segments are sealed."""
    server.add_collection(0, ["a"])
    s1 = server.assign_segment_id(0, 1, "a", 1)
    s2 = server.assign_segment_id(0, 2, "a", 1)
    result = drive(server.flush(0, segment_ids=[s2]), answer())
    assert result.segment_ids == (s2,)
    assert server.meta.get_segment(s1).state == SegmentState.GROWING


# =================================================================================================
# Port of server_test.go: GetSegmentInfo
# =================================================================================================

def test_get_segment_info_normal_case_corrects_rows(server):
    """TestGetSegmentInfo/normal case: NumOfRows corrected from 100 to the binlogs' 60."""
    logs = FieldBinlog(1, tuple(Binlog(20, 0, 0, log_id=i) for i in (801, 802, 803)))
    add(server, 0, SegmentState.FLUSHED, channel="", num_of_rows=100, binlogs=(logs,))
    result = server.get_segment_info([0])
    assert [i.num_of_rows for i in result.infos] == [60]


def test_get_segment_info_with_wrong_segment_id(server):
    """TestGetSegmentInfo/with wrong segmentID."""
    add(server, 0, SegmentState.FLUSHED)
    with pytest.raises(SegmentNotFoundError, match=r"segment not found\[segment=1\]"):
        server.get_segment_info([0, 1])


def test_get_segment_info_with_closed_server(server):
    """TestGetSegmentInfo/with closed server."""
    server.update_state_code(StateCode.ABNORMAL)
    with pytest.raises(ServiceNotReadyError):
        server.get_segment_info([])


def test_get_segment_info_with_dropped_segment(server):
    """TestGetSegmentInfo/with dropped segment: only with include_unhealthy."""
    add(server, 0, SegmentState.DROPPED)
    with pytest.raises(SegmentNotFoundError):
        server.get_segment_info([0])
    assert len(server.get_segment_info([0], include_unhealthy=True).infos) == 1


def test_get_segment_info_with_channel_checkpoint(server):
    """TestGetSegmentInfo/with channel checkpoint."""
    vch, cp = "fake-by-dev-rootcoord-dml-1-testgetsegmentinfo-v0", MsgPosition("fake-by-dev-rootcoord-dml-1", 0, 1000)
    add(server, 0, SegmentState.FLUSHED, channel="")
    assert server.get_segment_info([0]).channel_checkpoints == {}
    server.meta.update_channel_checkpoint(vch, cp)
    assert server.get_segment_info([0]).channel_checkpoints == {}
    add(server, 2, SegmentState.FLUSHED, channel=vch)
    assert server.get_segment_info([2]).channel_checkpoints == {vch: cp}


# =================================================================================================
# Port of server_test.go TestGetChannelSeekPosition and handler_test.go TestGetDataVChanPositions
# =================================================================================================

@pytest.mark.parametrize("channel_cp, seg_positions, coll_start, expected", [
    (MsgPosition("ch1", 0, 100), [MsgPosition("ch1", 0, 50), MsgPosition("ch1", 0, 200)], [("ch1", 123)],
     MsgPosition("ch1", 0, 100)),
    (None, [MsgPosition("ch1", 0, 50), MsgPosition("ch1", 0, 200)], [("ch1", 123)], MsgPosition("ch1", 0, 50)),
    (None, [], [("ch1", 123)], MsgPosition("ch1", 123, 0)),
    (None, [], [("ch2", 456)], None),
    (None, [], None, None),
], ids=["with-channelCP", "with-segmentDMLPos", "with-collStartPos", "non-exist-channel-1", "non-exist-channel-2"])
def test_get_channel_seek_position(server, channel_cp, seg_positions, coll_start, expected):
    """TestGetChannelSeekPosition: checkpoint, else earliest segment position, else collection start."""
    if coll_start is not None:
        server.add_collection(0, ["ch1"], start_positions=coll_start)
    for i, p in enumerate(seg_positions):
        add(server, i, dml_position=p)
    if channel_cp is not None:
        server.meta.update_channel_checkpoint(channel_cp.channel_name, channel_cp)
    assert server.handler.get_channel_seek_position("ch1", collection_id=0) == expected


def test_seek_position_uses_start_position_and_skips_dropped(server):
    """getEarliestSegmentDMLPos: DmlPosition else StartPosition; dropped segments do not count."""
    add(server, 1, dml_position=MsgPosition("ch1", 5, 50))
    add(server, 2, start_position=MsgPosition("ch1", 3, 30))
    add(server, 3, SegmentState.DROPPED, dml_position=MsgPosition("ch1", 1, 10))
    add(server, 4, SegmentState.FLUSHED, dml_position=MsgPosition("ch1", 4, 40))
    assert server.handler.get_channel_seek_position("ch1") == MsgPosition("ch1", 3, 30)


def test_collection_start_position_is_stamped_with_created_at(server):
    """getCollectionStartPosition: MsgID of the vchannel's pchannel, Timestamp = CreatedAt."""
    vch = "by-dev-rootcoord-dml_3_100v0"
    server.add_collection(100, [vch], start_positions=[("by-dev-rootcoord-dml_2", 9), ("by-dev-rootcoord-dml_3", 17)],
                          created_at=4242)
    assert server.get_data_vchan_positions(vch).seek_position == MsgPosition(vch, 17, 4242)


@pytest.fixture
def vchan_server(server):
    """TestGetDataVChanPositions' meta: collection 0 on ch1, collection 1 on ch0; three segments of ch1."""
    server.add_collection(0, ["ch1"], start_positions=[("ch1", 8910)])
    server.add_collection(1, ["ch0_suffix"], start_positions=[("ch0", 8910)])
    add(server, 1, SegmentState.FLUSHED, dml_position=MsgPosition("ch1", 123, 0))
    add(server, 2, start_position=MsgPosition("ch1", 8910, 0), dml_position=MsgPosition("ch1", 123, 1))
    add(server, 3, partition_id=1, start_position=MsgPosition("ch1", 8910, 0),
        dml_position=MsgPosition("ch1", 111213, 2))
    add(server, 4)  # no position yet: skipped
    return server


def test_get_data_vchan_positions_unexisted_channel(vchan_server):
    """TestGetDataVChanPositions/get unexisted channel."""
    info = vchan_server.handler.get_data_vchan_positions("chx1", collection_id=0)
    assert info.unflushed_segment_ids == () and info.flushed_segment_ids == ()


def test_get_data_vchan_positions_existed_channel(vchan_server):
    """TestGetDataVChanPositions/get existed channel."""
    info = vchan_server.get_data_vchan_positions("ch1")
    assert info.flushed_segment_ids == (1,) and info.unflushed_segment_ids == (2, 3)
    assert info.collection_id == 0 and info.seek_position == MsgPosition("ch1", 123, 0)


def test_get_data_vchan_positions_empty_collection(vchan_server):
    """TestGetDataVChanPositions/empty collection ("ch0_suffix" is a pchannel name to ToPhysicalChannel,
    so the start position recorded for "ch0" does not apply and there is no seek position)."""
    info = vchan_server.get_data_vchan_positions("ch0_suffix")
    assert info.collection_id == 1 and info.flushed_segment_ids == () and info.unflushed_segment_ids == ()
    assert info.seek_position is None


def test_get_data_vchan_positions_filter_partition(vchan_server):
    """TestGetDataVChanPositions/filter partition."""
    info = vchan_server.get_data_vchan_positions("ch1", partition_id=1)
    assert info.collection_id == 0 and info.flushed_segment_ids == () and info.unflushed_segment_ids == (3,)


def test_get_data_vchan_positions_empty_collection_with_passed_positions(vchan_server):
    """TestGetDataVChanPositions/empty collection with passed positions (the collection's, here)."""
    vch = "ch_no_segment_1"
    vchan_server.add_collection(5, [vch], start_positions=[(to_physical_channel(vch), 141516)], created_at=9)
    info = vchan_server.get_data_vchan_positions(vch)
    assert info.channel_name == vch and info.seek_position == MsgPosition(vch, 141516, 9)


def test_get_data_vchan_positions_lists_dropped_segments(vchan_server):
    """Dropped segments (with a position) are listed apart, and not in the seek computation."""
    add(vchan_server, 9, SegmentState.DROPPED, dml_position=MsgPosition("ch1", 1, 0))
    info = vchan_server.get_data_vchan_positions("ch1")
    assert info.dropped_segment_ids == (9,) and 9 not in info.flushed_segment_ids + info.unflushed_segment_ids


def test_get_recovery_info_lists_flushed_binlogs(vchan_server):
    """GetRecoveryInfo: channel views plus the binlogs of flushed segments that have some."""
    logs = FieldBinlog(1, (Binlog(7, 0, 0, log_id=5),))
    add(vchan_server, 6, SegmentState.FLUSHED, dml_position=MsgPosition("ch1", 1, 3), binlogs=(logs,))
    info = vchan_server.get_recovery_info(0)
    assert [c.channel_name for c in info.channels] == ["ch1"]
    assert [(b.segment_id, b.num_of_rows, b.field_binlogs) for b in info.binlogs] == [(6, 7, (logs,))]
    with pytest.raises(CollectionNotFoundError):
        vchan_server.get_recovery_info(77)


# =================================================================================================
# Segment manager and channel manager rules
# =================================================================================================

def test_assign_reuses_the_growing_segment_per_partition_and_channel(server):
    """AllocSegment (reduced): one growing segment per (partition, channel) until it is sealed."""
    server.add_collection(0, ["a", "b"])
    s1 = server.assign_segment_id(0, 1, "a", 10)
    assert server.assign_segment_id(0, 1, "a", 99) == s1
    s2 = server.assign_segment_id(0, 2, "a", 1)
    s3 = server.assign_segment_id(0, 1, "b", 1)
    assert len({s1, s2, s3}) == 3
    assert server.meta.get_segment(s1) == SegmentInfo(id=s1, collection_id=0, partition_id=1, insert_channel="a")
    server.segment_manager.seal_all_segments("a")
    assert server.assign_segment_id(0, 1, "a", 1) not in (s1, s2)


def test_assign_refuses_bad_requests(server):
    """A non-positive count is a ValueError; an unknown collection CollectionNotFound."""
    server.add_collection(0, ["a"])
    with pytest.raises(ValueError, match="at least one row"):
        server.assign_segment_id(0, 1, "a", 0)
    with pytest.raises(CollectionNotFoundError, match="failed to get collection"):
        server.assign_segment_id(5, 1, "a", 1)


def test_seal_all_segments_with_ids_ignores_the_channel(server):
    """SealAllSegments quirk: listed ids of another channel are sealed and recorded under this channel,
    and stay in their own channel's growing set, where the allocator still picks them."""
    server.add_collection(0, ["a", "b"])
    on_b = server.assign_segment_id(0, 1, "b", 1)
    assert server.segment_manager.seal_all_segments("a", [on_b]) == [on_b]
    assert server.segment_manager.sealed_segments("a") == (on_b,)
    assert server.segment_manager.growing_segments("b") == (on_b,)
    assert server.meta.get_segment(on_b).state == SegmentState.SEALED
    assert server.assign_segment_id(0, 1, "b", 1) == on_b  # rows still go to the sealed segment


def test_channel_manager_watch_and_release(server):
    """Match follows watch/release/remove_node; watching an unknown channel needs its collection."""
    cm = server.channel_manager
    with pytest.raises(ValueError, match="belongs to no collection"):
        cm.watch("x", 1)
    server.add_collection(0, ["x", "y"])
    cm.watch("x", 1)
    cm.watch("y", 1)
    assert cm.match(1, "x") and not cm.match(2, "x")
    cm.watch("x", 2)
    assert cm.find_watcher("x") == 2 and not cm.match(1, "x")
    cm.release("x")
    assert cm.find_watcher("x") is None and cm.get_channels_by_collection_id(0) == ["x", "y"]
    assert cm.remove_node(1) == ["y"] and not cm.match(1, "y")


# =================================================================================================
# Restart: SQLite meta survives
# =================================================================================================

def test_restarted_datacoord_sees_the_same_meta(tmp_path):
    """A DataCoord over the same SQLite file after a restart: segments, logs, states, checkpoints, growing set."""
    path = tmp_path / "datacoord.db"
    kv = SQLiteKV(path)
    server = new_server(kv)
    server.add_collection(0, ["ch1"])
    server.channel_manager.watch("ch1", 1)
    growing = server.assign_segment_id(0, 0, "ch1", 5)
    flushed = server.assign_segment_id(0, 1, "ch1", 5)
    server.save_binlog_paths(SaveBinlogPathsRequest(
        flushed, 0, 1, "ch1", flushed=True, field2_binlog_paths=(paths(1, "files/insert_log/0/1/9/1/31"),),
        start_positions=(SegmentStartPosition(flushed, MsgPosition("ch1", 2, 20)),),
        check_points=(CheckPoint(flushed, MsgPosition("ch1", 4, 40), 5),)), node_id=1)
    server.update_channel_checkpoint(1, positions=[MsgPosition("ch1", 4, 40)])
    before_segments, before_cps = dict(server.meta.segments), server.meta.get_channel_checkpoints()
    kv.close()

    kv = SQLiteKV(path)
    again = new_server(kv)
    assert dict(again.meta.segments) == before_segments
    assert again.meta.get_channel_checkpoints() == before_cps
    assert again.meta.get_segment(flushed).state == SegmentState.FLUSHING
    assert again.meta.get_segment(flushed).binlogs[0].binlogs[0].log_id == 31
    assert again.segment_manager.growing_segments("ch1") == (growing,)
    again.add_collection(0, ["ch1"])
    assert again.get_data_vchan_positions("ch1").seek_position == MsgPosition("ch1", 4, 40)
    kv.close()
