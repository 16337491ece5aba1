"""DataCoord's half of a flush that completes: flushable sealed segments on a DataNode time tick, postFlush.

Ports the applicable cases of Milvus 2.5 ``internal/datacoord/segment_manager_test.go``
(``TestGetFlushableSegments``) and of Milvus 2.3's ``server_test.go`` ``TestDataNodeTtChannel`` (a sealed
segment is sent to its DataNode for flushing on the node's time tick; 2.5 has no test of
``handleDataNodeTtMsg``, the last ones went with the MQ-reported DataNode time tick in milvus#34421), reduced to
what the model keeps.
"""

from __future__ import annotations

import itertools

import pytest

from milvus_edu.config import S
from milvus_edu.datacoord import Catalog, Server
from milvus_edu.merr import SegmentNotFoundError
from milvus_edu.proto import (
    Binlog, CheckPoint, FieldBinlog, MsgPosition, SaveBinlogPathsRequest, SegmentState,
)
from milvus_edu.storage.kv import MemoryKV
from milvus_edu.tsoutil import compose_ts

CH = "by-dev-rootcoord-dml_0_100v0"
TT = compose_ts(10_000, 0)  # a DataNode time tick well past every allocation's expiry (2 s after clock 0)


def _server(clock):
    ids = itertools.count(1000)
    server = Server(Catalog(MemoryKV()), lambda: next(ids), now_ns=lambda: clock[0])
    server.add_collection(100, [CH])
    server.channel_manager.add_node(7)
    server.channel_manager.watch(CH, 7)
    return server


def _sync(server, segment_id, rows, flushed=False):
    binlog = FieldBinlog(100, (Binlog(rows, 1, 2, log_path=f"files/insert_log/100/1001/{segment_id}/100/{9000 + rows}",
                                      log_id=9000 + rows),))
    server.save_binlog_paths(SaveBinlogPathsRequest(
        segment_id=segment_id, collection_id=100, partition_id=1001, channel=CH,
        field2_binlog_paths=(binlog,), check_points=(CheckPoint(segment_id, MsgPosition(CH, 5, 50), rows),),
        flushed=flushed, source_id=7))


def test_sealed_segment_without_rows_is_not_flushable_yet():
    """``flushPolicyL1``: ``NumOfRows != 0`` — rows only count once a sync put them in a binlog."""
    clock = [0]
    server = _server(clock)
    seg = server.assign_segment_id(100, 1001, CH, 3)
    server.segment_manager.seal_all_segments(CH)
    assert server.handle_data_node_tt_msg(CH, TT, 7) == []
    _sync(server, seg, 3)
    assert [s.id for s in server.handle_data_node_tt_msg(CH, TT, 7)] == [seg]


def test_a_sealed_segment_is_flushable_only_once_its_last_allocation_expired():
    """``flushPolicyL1``: ``LastExpireTime <= ts``; every ``AllocSegment`` pushes it to now + 2 s
    (``dataCoord.segment.assignmentExpiration``), so an insert granted the segment before the seal is consumed before
    its flush."""
    clock = [0]
    server = _server(clock)
    seg = server.assign_segment_id(100, 1001, CH, 3)
    _sync(server, seg, 3)
    clock[0] = 1 * S
    assert server.assign_segment_id(100, 1001, CH, 1) == seg
    expire = server.segment_manager.last_expire_time(seg)
    assert expire == compose_ts(3_000, 0)
    server.segment_manager.seal_all_segments(CH)
    assert server.handle_data_node_tt_msg(CH, expire - 1, 7) == []
    assert [s.id for s in server.handle_data_node_tt_msg(CH, expire, 7)] == [seg]


def test_flush_is_asked_again_only_after_the_flush_interval():
    """``setLastFlushTime`` + ``segmentFlushInterval`` (2 s): no second ask within the interval."""
    clock = [0]
    server = _server(clock)
    seg = server.assign_segment_id(100, 1001, CH, 3)
    _sync(server, seg, 3)
    server.segment_manager.seal_all_segments(CH)
    assert len(server.handle_data_node_tt_msg(CH, TT, 7)) == 1
    clock[0] += 2 * S - 1
    assert server.handle_data_node_tt_msg(CH, TT + 1, 7) == []
    clock[0] += 1
    assert len(server.handle_data_node_tt_msg(CH, TT + 2, 7)) == 1


def test_growing_segment_is_never_flushable():
    clock = [0]
    server = _server(clock)
    seg = server.assign_segment_id(100, 1001, CH, 3)
    _sync(server, seg, 3)
    assert server.handle_data_node_tt_msg(CH, TT, 7) == []


def test_report_from_a_node_that_does_not_watch_the_channel_is_ignored():
    """``handleDataNodeTtMsg``: ``!channelManager.Match(sourceID, channel)`` -> nothing."""
    clock = [0]
    server = _server(clock)
    seg = server.assign_segment_id(100, 1001, CH, 3)
    _sync(server, seg, 3)
    server.segment_manager.seal_all_segments(CH)
    assert server.handle_data_node_tt_msg(CH, TT, 8) == []
    assert len(server.handle_data_node_tt_msg(CH, TT, 7)) == 1


def test_flushed_report_then_post_flush_ends_in_flushed_and_leaves_the_sealed_set():
    """``SaveBinlogPaths(Flushed)`` -> Flushing and the segment manager forgets it; ``postFlush`` -> Flushed."""
    clock = [0]
    server = _server(clock)
    seg = server.assign_segment_id(100, 1001, CH, 3)
    server.segment_manager.seal_all_segments(CH)
    _sync(server, seg, 3, flushed=True)
    assert server.meta.get_segment(seg).state == SegmentState.FLUSHING
    assert server.segment_manager.sealed_segments(CH) == ()
    assert server.post_flush(seg).state == SegmentState.FLUSHED
    with pytest.raises(SegmentNotFoundError, match="might be a faked segment"):
        server.post_flush(424242)
