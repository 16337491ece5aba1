"""DataCoord's meta and catalog (reference §4.7): segment updates all or nothing, checkpoints never back.

The first part ports the applicable cases of Milvus 2.5 ``internal/datacoord/meta_test.go``
(``TestChannelCP``, ``TestMeta_Basic``, ``TestGetUnFlushedSegments``, ``TestUpdateSegmentsInfo``,
``Test_meta_GetSegmentsWithChannel``, ``TestMeta_GetAllSegments``, ``MetaReloadSuite``). The second
pins the catalog's keys and values and the all-or-nothing write on a failing KV. The last part is
property tests: whatever sequence of updates, failures and restarts, a channel checkpoint never
goes back.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.datacoord import (
    MAX_UINT64,
    Catalog,
    CatalogError,
    CollectionInfo,
    Meta,
    add_binlogs_operator,
    create_l0_operator,
    merge_field_binlogs,
    update_as_dropped_if_empty_when_flushing,
    update_check_point_operator,
    update_start_position,
    update_status_operator,
    with_channel,
    with_collection,
)
from milvus_edu.merr import SegmentNotFoundError
from milvus_edu.proto import (
    Binlog,
    CheckPoint,
    FieldBinlog,
    MsgPosition,
    SegmentInfo,
    SegmentLevel,
    SegmentStartPosition,
    SegmentState,
)
from milvus_edu.storage.kv import FaultyKV, KVError, MemoryKV, SQLiteKV

ROOT = "by-dev/meta/datacoord-meta"


def field_binlog(field_id: int, *log_ids: int, entries: int = 1) -> FieldBinlog:
    """Go's ``getFieldBinlogIDsWithEntry``: one binlog per id, each with ``entries`` rows."""
    return FieldBinlog(field_id, tuple(Binlog(entries_num=entries, timestamp_from=0, timestamp_to=0, log_id=i)
                                       for i in log_ids))


def pos(channel: str, ts: int, msg_id: int | None = 0) -> MsgPosition:
    return MsgPosition(channel, msg_id, ts)


class Faults:
    """A switchable ``should_fail`` for :class:`FaultyKV`: fail the chosen ops, or the keys containing a text."""

    def __init__(self):
        self.ops: set[str] = set()
        self.key_part: str | None = None

    def __call__(self, op: str, key: str) -> bool:
        return op in self.ops or (self.key_part is not None and op == "save" and self.key_part in key)


@pytest.fixture
def kv():
    return MemoryKV()


@pytest.fixture
def faults():
    return Faults()


@pytest.fixture
def meta(kv, faults):
    return Meta(Catalog(FaultyKV(kv, faults)), now_ns=lambda: 777)


# =================================================================================================
# Port of meta_test.go
# =================================================================================================

VCH = "fake-by-dev-rootcoord-dml-1-testchannelcp-v0"
PCH_POS = MsgPosition("fake-by-dev-rootcoord-dml-1", 0, 1000)


def test_update_channel_checkpoint_refuses_nil_and_saves_a_position(meta, kv):
    """TestChannelCP/UpdateChannelCheckpoint."""
    with pytest.raises(ValueError, match=f"channelCP is nil, vChannel={VCH}"):
        meta.update_channel_checkpoint(VCH, None)
    with pytest.raises(ValueError, match="channelCP is nil"):
        meta.update_channel_checkpoint(VCH, MsgPosition(VCH, None, 5))
    assert meta.update_channel_checkpoint(VCH, PCH_POS) is True
    assert kv.has(f"{ROOT}/channel-cp/{VCH}")


def test_update_channel_checkpoints_skips_illegal_positions(meta):
    """TestChannelCP/UpdateChannelCheckpoints."""
    assert meta.update_channel_checkpoints([]) == []
    assert meta.get_channel_checkpoints() == {}
    saved = meta.update_channel_checkpoints([PCH_POS, MsgPosition("", 0, 5), None, MsgPosition("x", None, 5)])
    assert saved == [PCH_POS]
    assert list(meta.get_channel_checkpoints()) == [PCH_POS.channel_name]


def test_get_channel_checkpoint_returns_the_stored_position(meta):
    """TestChannelCP/GetChannelCheckpoint: stored as given (even a pchannel name)."""
    assert meta.get_channel_checkpoint(VCH) is None
    meta.update_channel_checkpoint(VCH, PCH_POS)
    got = meta.get_channel_checkpoint(VCH)
    assert got.channel_name == PCH_POS.channel_name and got.timestamp == 1000


def test_drop_channel_checkpoint_removes_memory_and_key(meta, kv):
    """TestChannelCP/DropChannelCheckpoint."""
    meta.drop_channel_checkpoint(VCH)
    meta.update_channel_checkpoint(VCH, PCH_POS)
    meta.drop_channel_checkpoint(VCH)
    assert meta.get_channel_checkpoint(VCH) is None
    assert not kv.has(f"{ROOT}/channel-cp/{VCH}")


def test_meta_basic_segments(meta):
    """TestMeta_Basic/Test Segment: add, get, per collection/partition, drop, set state."""
    meta.add_collection(CollectionInfo(0))
    segs = [SegmentInfo(id=i, collection_id=0, partition_id=p, insert_channel="c1")
            for i, p in ((1, 100), (2, 101), (3, 101))]
    for s in segs:
        meta.add_segment(s)
    assert meta.get_healthy_segment(1) == segs[0]
    assert meta.get_healthy_segment(2) == segs[1]
    assert meta.get_segments_id_of_collection(0) == [1, 2, 3]
    assert meta.get_segments_id_of_partition(0, 100) == [1]
    assert meta.get_segments_id_of_partition(0, 101) == [2, 3]
    assert meta.drop_segment(2) is True
    assert meta.get_segments_id_of_partition(0, 101) == [3]
    meta.set_state(1, SegmentState.SEALED)
    meta.set_state(1, SegmentState.FLUSHED)
    assert meta.get_healthy_segment(1).state == SegmentState.FLUSHED


def test_meta_segment_with_kv_fails(meta, kv, faults):
    """TestMeta_Basic/Test segment with kv fails: a failed write changes neither KV nor memory."""
    faults.ops = {"save"}
    with pytest.raises(KVError):
        meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    assert meta.get_segment(1) is None and kv.load_with_prefix("") == []
    faults.ops = {"remove"}
    assert meta.drop_segment(1) is False  # nothing to drop: no error
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    with pytest.raises(KVError):
        meta.drop_segment(1)
    assert meta.get_segment(1) is not None and kv.has(f"{ROOT}/s/0/0/1")


def test_get_unflushed_segments(meta):
    """TestGetUnFlushedSegments."""
    meta.add_segment(SegmentInfo(id=0, collection_id=0, partition_id=0, insert_channel="", state=SegmentState.GROWING))
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="", state=SegmentState.FLUSHED))
    assert [s.id for s in meta.get_unflushed_segments()] == [0]


def test_update_segments_info_normal(meta):
    """TestUpdateSegmentsInfo/normal: logs merged, start position set, rows from binlog entries (1 + 10)."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c",
                                 binlogs=(field_binlog(1, 222, entries=1),), statslogs=(field_binlog(1, 2),)))
    delta = FieldBinlog(0, (Binlog(1, 100, 200, log_size=1000, log_id=335),))
    changed = meta.update_segments_info(
        update_status_operator(1, SegmentState.GROWING),
        add_binlogs_operator(1, [field_binlog(1, 333, entries=10)], [field_binlog(1, 334)], [delta]),
        update_start_position([SegmentStartPosition(1, MsgPosition("", 123, 0))]),
        update_check_point_operator(1, [CheckPoint(1, None, 10)]),
    )
    updated = meta.get_healthy_segment(1)
    assert changed == (updated,)
    assert updated.start_position == MsgPosition("", 123, 0)
    assert updated.dml_position is None
    assert [b.log_id for b in updated.binlogs[0].binlogs] == [222, 333]
    assert len(updated.statslogs[0].binlogs) == 2
    assert updated.deltalogs == (delta,)
    assert updated.state == SegmentState.GROWING
    assert updated.num_of_rows == 11


@pytest.mark.parametrize("operator", [
    update_status_operator(1, SegmentState.FLUSHING),
    add_binlogs_operator(1),
    update_start_position([SegmentStartPosition(1, MsgPosition("c", 1, 0))]),
    update_check_point_operator(1, [CheckPoint(1, None, 10)]),
    update_as_dropped_if_empty_when_flushing(1),
])
def test_update_non_existed_segment_is_a_no_op(meta, kv, operator):
    """TestUpdateSegmentsInfo/update non-existed segment."""
    assert meta.update_segments_info(operator) == ()
    assert meta.get_segment(1) is None and kv.load_with_prefix("") == []


def test_update_empty_segment_into_flush_drops_it(meta):
    """TestUpdateSegmentsInfo/update empty segment into flush: Flushing with 0 rows -> Dropped, stamped."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    meta.update_segments_info(update_status_operator(1, SegmentState.FLUSHING),
                              update_as_dropped_if_empty_when_flushing(1))
    seg = meta.get_segment(1)
    assert seg.state == SegmentState.DROPPED and seg.dropped_at == 777


def test_update_checkpoint_of_another_segment_creates_nothing(meta):
    """TestUpdateSegmentsInfo/update checkpoints and start position of non existed segment."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    meta.update_segments_info(update_check_point_operator(1, [CheckPoint(2, pos("c", 5), 10)]))
    assert meta.get_healthy_segment(2) is None
    assert meta.get_segment(1).dml_position is None


def test_update_segments_info_save_failed_leaves_memory_and_kv_unchanged(meta, kv, faults):
    """TestUpdateSegmentsInfo/test save etcd failed."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    before = kv.load_with_prefix("")
    faults.ops = {"save"}
    with pytest.raises(KVError, match="etcd unavailable"):
        meta.update_segments_info(
            update_status_operator(1, SegmentState.FLUSHING),
            add_binlogs_operator(1, [field_binlog(1, 2)], [field_binlog(1, 2)],
                                 [FieldBinlog(0, (Binlog(1, 100, 200, log_size=1000, log_id=2),))]),
            update_start_position([SegmentStartPosition(1, MsgPosition("c", 1, 0))]),
            update_check_point_operator(1, [CheckPoint(1, pos("c", 9), 10)]),
        )
    seg = meta.get_healthy_segment(1)
    assert (seg.num_of_rows, seg.state, seg.binlogs, seg.start_position) == (0, SegmentState.GROWING, (), None)
    assert kv.load_with_prefix("") == before


def test_get_segments_by_channel_and_select(meta):
    """Test_meta_GetSegmentsWithChannel."""
    for s in (SegmentInfo(id=1, collection_id=1, partition_id=0, insert_channel="h1", state=SegmentState.FLUSHED),
              SegmentInfo(id=2, collection_id=1, partition_id=0, insert_channel="h2"),
              SegmentInfo(id=3, collection_id=2, partition_id=0, insert_channel="h1", state=SegmentState.FLUSHED)):
        meta.add_segment(s)
    assert [s.id for s in meta.get_segments_by_channel("h1")] == [1, 3]
    assert meta.get_segments_by_channel("h3") == []
    got = meta.select_segments(with_collection(1), with_channel("h1"), lambda s: s.state == SegmentState.FLUSHED)
    assert [s.id for s in got] == [1]


def test_get_healthy_segment_hides_dropped_ones(meta):
    """TestMeta_GetAllSegments."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    meta.add_segment(SegmentInfo(id=2, collection_id=0, partition_id=0, insert_channel="c", state=SegmentState.DROPPED))
    assert meta.get_healthy_segment(1) is not None and meta.get_segment(1) is not None
    assert meta.get_healthy_segment(2) is None and meta.get_segment(2) is not None


def test_reload_names_checkpoints_after_their_key(kv):
    """MetaReloadSuite/ok: a loaded checkpoint takes its key's channel name (issue 22181)."""
    Catalog(kv).save_channel_checkpoint("ch", MsgPosition("cn", 0, 1000))
    Catalog(kv).add_segment(SegmentInfo(id=1, collection_id=1, partition_id=1, insert_channel="ch",
                                        state=SegmentState.FLUSHED))
    meta = Meta(Catalog(kv))
    assert meta.get_channel_checkpoint("ch") == MsgPosition("ch", 0, 1000)
    assert meta.get_segment(1).state == SegmentState.FLUSHED


def test_reload_fails_on_a_failing_kv(kv, faults):
    """MetaReloadSuite/ListSegments_fail and ListChannelCheckpoint_fail."""
    faults.ops = {"load_with_prefix"}
    with pytest.raises(KVError):
        Meta(Catalog(FaultyKV(kv, faults)))


# =================================================================================================
# Exact rules: operators, positions, set_state
# =================================================================================================

def test_segment_dml_position_never_goes_back(meta):
    """UpdateCheckPointOperator: an older or equal checkpoint is ignored; a newer one applies."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    meta.update_segments_info(update_check_point_operator(1, [CheckPoint(1, pos("c", 10, 1), 0)]))
    meta.update_segments_info(update_check_point_operator(1, [CheckPoint(1, pos("c", 10, 2), 0)]))
    meta.update_segments_info(update_check_point_operator(1, [CheckPoint(1, pos("c", 5, 3), 0)]))
    assert meta.get_segment(1).dml_position == pos("c", 10, 1)
    meta.update_segments_info(update_check_point_operator(1, [CheckPoint(1, pos("c", 11, 4), 0)]))
    assert meta.get_segment(1).dml_position == pos("c", 11, 4)
    with pytest.raises(ValueError, match="has no position"):
        meta.update_segments_info(update_check_point_operator(1, [CheckPoint(1, None, 0)]))


def test_row_count_comes_from_binlogs_not_the_report(meta):
    """UpdateCheckPointOperator: NumOfRows = binlog EntriesNum total when positive; the report is ignored."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c", num_of_rows=3))
    meta.update_segments_info(update_check_point_operator(1, [CheckPoint(1, pos("c", 1), 99)]))
    assert meta.get_segment(1).num_of_rows == 3  # no binlogs: count 0 leaves the value
    meta.update_segments_info(add_binlogs_operator(1, [field_binlog(1, 5, entries=7)]),
                              update_check_point_operator(1, [CheckPoint(1, pos("c", 2), 99)]))
    assert meta.get_segment(1).num_of_rows == 7


def test_start_position_with_empty_msg_id_is_ignored(meta):
    """UpdateStartPosition: ``len(MsgID) == 0`` -> skip."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    meta.update_segments_info(update_start_position([SegmentStartPosition(1, MsgPosition("c", None, 5))]))
    assert meta.get_segment(1).start_position is None


def test_status_operator_same_state_changes_nothing(meta):
    """UpdateStatusOperator: already in the state -> no change, no write."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    pack_ops = update_status_operator(1, SegmentState.GROWING)
    assert meta.update_segments_info(pack_ops) == (meta.get_segment(1),)
    meta.update_segments_info(update_status_operator(1, SegmentState.DROPPED))
    assert meta.get_segment(1).dropped_at == 777


def test_create_l0_operator_creates_a_flushed_l0_segment_once(meta):
    """CreateL0Operator: new id -> Flushed L0 segment; an existing id is left as it is."""
    meta.update_segments_info(create_l0_operator(5, 6, 7, "c"))
    seg = meta.get_segment(7)
    assert (seg.collection_id, seg.partition_id, seg.state, seg.level) == (5, 6, SegmentState.FLUSHED, SegmentLevel.L0)
    meta.set_state(7, SegmentState.DROPPED)
    meta.update_segments_info(create_l0_operator(5, 6, 7, "c"))
    assert meta.get_segment(7).state == SegmentState.DROPPED


def test_set_state_on_missing_segment(meta):
    """SetState: dropping an absent segment is idempotent; another state is an error."""
    assert meta.set_state(9, SegmentState.DROPPED) is None
    with pytest.raises(SegmentNotFoundError):
        meta.set_state(9, SegmentState.SEALED)


def test_mark_channel_checkpoint_dropped_blocks_updates(meta):
    """MarkChannelCheckpointDropped: ts = MaxUint64, so no later checkpoint is newer."""
    meta.update_channel_checkpoint("ch", pos("ch", 10))
    assert meta.mark_channel_checkpoint_dropped("ch") == MsgPosition("ch", None, MAX_UINT64)
    assert meta.update_channel_checkpoint("ch", pos("ch", 1 << 62)) is False
    assert meta.update_channel_checkpoints([pos("ch", 1 << 62)]) == []
    assert Meta(meta.catalog).get_channel_checkpoint("ch").timestamp == MAX_UINT64


def test_channel_checkpoint_equal_or_older_is_silently_ignored(meta, kv):
    """UpdateChannelCheckpoint: saves only when absent or strictly newer (quirk 9)."""
    assert meta.update_channel_checkpoint("ch", pos("ch", 10, 1))
    assert meta.update_channel_checkpoint("ch", pos("ch", 10, 2)) is False
    assert meta.update_channel_checkpoint("ch", pos("ch", 9, 3)) is False
    assert meta.get_channel_checkpoint("ch") == pos("ch", 10, 1)
    assert json.loads(kv.load(f"{ROOT}/channel-cp/ch"))["msg_id"] == 1


def test_batch_with_two_positions_of_a_channel_keeps_the_later_one(meta):
    """UpdateChannelCheckpoints compares each with the stored checkpoint only: the later in the list wins."""
    meta.update_channel_checkpoint("ch", pos("ch", 1))
    assert meta.update_channel_checkpoints([pos("ch", 10), pos("ch", 5)]) == [pos("ch", 10), pos("ch", 5)]
    assert meta.get_channel_checkpoint("ch") == pos("ch", 5)
    assert Meta(meta.catalog).get_channel_checkpoint("ch") == pos("ch", 5)


def test_channel_checkpoints_batch_is_all_or_nothing(meta, kv, faults):
    """SaveChannelCheckpoints is one transaction: a failing key leaves every channel as it was."""
    meta.update_channel_checkpoint("a", pos("a", 1))
    faults.key_part = "channel-cp/b"
    with pytest.raises(KVError):
        meta.update_channel_checkpoints([pos("a", 5), pos("b", 5)])
    assert meta.get_channel_checkpoints() == {"a": pos("a", 1)}
    assert json.loads(kv.load(f"{ROOT}/channel-cp/a"))["timestamp"] == 1 and not kv.has(f"{ROOT}/channel-cp/b")


def test_merge_field_binlogs_appends_per_field():
    """mergeFieldBinlogs: same field -> appended; new field -> added at the end."""
    merged = merge_field_binlogs([field_binlog(1, 1), field_binlog(2, 2)], [field_binlog(2, 3), field_binlog(9, 4)])
    assert [(fb.field_id, [b.log_id for b in fb.binlogs]) for fb in merged] == [(1, [1]), (2, [2, 3]), (9, [4])]


# =================================================================================================
# Catalog: keys, values, atomicity, damaged values
# =================================================================================================

def test_catalog_keys_and_compressed_values(meta, kv):
    """Milvus's key layout; binlogs stored by log id (no path), the record without its logs."""
    meta.add_segment(SegmentInfo(id=3, collection_id=1, partition_id=2, insert_channel="c"))
    meta.update_segments_info(add_binlogs_operator(3, [field_binlog(100, 11)], [field_binlog(100, 12)],
                                                   [field_binlog(0, 13)]))
    keys = [k for k, _ in kv.load_with_prefix("")]
    assert keys == [f"{ROOT}/binlog/1/2/3/100", f"{ROOT}/deltalog/1/2/3/0", f"{ROOT}/s/1/2/3",
                    f"{ROOT}/statslog/1/2/3/100"]
    record = json.loads(kv.load(f"{ROOT}/s/1/2/3"))
    assert "binlogs" not in record and record["id"] == 3
    stored = json.loads(kv.load(f"{ROOT}/binlog/1/2/3/100"))
    assert stored["binlogs"][0]["log_id"] == 11 and "log_path" not in stored["binlogs"][0]


def test_partial_failure_in_one_update_rolls_back_every_key(meta, kv, faults):
    """AlterSegments is all or nothing: a fault on the binlog key undoes the record already written."""
    meta.add_segment(SegmentInfo(id=3, collection_id=1, partition_id=2, insert_channel="c"))
    before = kv.load_with_prefix("")
    faults.key_part = "statslog"  # sorted after binlog/ and s/: both are written first, then undone
    with pytest.raises(KVError):
        meta.update_segments_info(update_status_operator(3, SegmentState.FLUSHING),
                                  add_binlogs_operator(3, [field_binlog(100, 11)], [field_binlog(100, 12)]))
    assert kv.load_with_prefix("") == before
    assert meta.get_segment(3).state == SegmentState.GROWING


def test_partial_failure_rolls_back_on_sqlite_too(tmp_path, faults):
    """The same on the durable engine (SQLite's own rollback)."""
    sqlite = SQLiteKV(tmp_path / "meta.db")
    meta = Meta(Catalog(FaultyKV(sqlite, faults)))
    meta.add_segment(SegmentInfo(id=3, collection_id=1, partition_id=2, insert_channel="c"))
    before = sqlite.load_with_prefix("")
    faults.key_part = "statslog"
    with pytest.raises(KVError):
        meta.update_segments_info(update_status_operator(3, SegmentState.FLUSHING),
                                  add_binlogs_operator(3, [field_binlog(100, 11)], [field_binlog(100, 12)]))
    assert sqlite.load_with_prefix("") == before
    sqlite.close()


def test_stored_row_count_is_always_the_binlog_count(meta, kv):
    """AlterSegments (quirk): the stored NumOfRows is recomputed from binlogs even when that is 0."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c", num_of_rows=5))
    assert json.loads(kv.load(f"{ROOT}/s/0/0/1"))["num_of_rows"] == 5  # AddSegment corrects only counts > 0
    meta.set_state(1, SegmentState.SEALED)
    assert meta.get_segment(1).num_of_rows == 5
    assert json.loads(kv.load(f"{ROOT}/s/0/0/1"))["num_of_rows"] == 0
    assert Meta(meta.catalog).get_segment(1).num_of_rows == 0


def test_catalog_refuses_log_id_zero_and_paths(meta, kv):
    """checkLogID: a binlog without id, or still carrying a path, is not stored."""
    with pytest.raises(CatalogError, match="invalid log id"):
        meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c",
                                     binlogs=(field_binlog(1, 0),)))
    with pytest.raises(CatalogError, match="no need to store logpath"):
        meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c",
                                     binlogs=(FieldBinlog(1, (Binlog(1, 0, 0, log_path="a/1", log_id=1),)),)))
    assert kv.load_with_prefix("") == [] and meta.get_segment(1) is None


@pytest.mark.parametrize("key, value", [
    (f"{ROOT}/s/1/2/3", b"\xff\x00 not json"),
    (f"{ROOT}/s/1/2/3", b'{"name": "somebody else"}'),
    (f"{ROOT}/s/1/2/3", b"[1, 2]"),
    (f"{ROOT}/binlog/1/2/3/100", b'{"field_id": 100, "binlogs": [{"log_id": true}]}'),
    (f"{ROOT}/channel-cp/ch", b'{"channel_name": "ch", "msg_id": 1, "timestamp": "late", "msg_group": ""}'),
    (f"{ROOT}/channel-cp/ch", b"null"),
])
def test_damaged_or_foreign_value_is_refused_and_kept(kv, key, value):
    """A value that is damaged or not ours: a one-line error naming the key; the key stays."""
    kv.save(key, value)
    with pytest.raises(CatalogError) as info:
        Meta(Catalog(kv))
    assert key in str(info.value) and "\n" not in str(info.value)
    assert kv.load(key) == value


def test_meta_survives_a_reload_with_logs_and_positions(meta, kv):
    """reloadFromKV: a new Meta over the same KV sees the same segments, logs and checkpoints."""
    meta.add_segment(SegmentInfo(id=1, collection_id=0, partition_id=0, insert_channel="c"))
    meta.update_segments_info(add_binlogs_operator(1, [field_binlog(0, 6, entries=4), field_binlog(1, 5, entries=4)]),
                              update_start_position([SegmentStartPosition(1, pos("c", 3, 7))]),
                              update_check_point_operator(1, [CheckPoint(1, pos("c", 9, 8), 4)]))
    meta.update_channel_checkpoint("c", pos("c", 9, 8))
    again = Meta(Catalog(kv))
    assert again.segments == meta.segments
    assert again.get_channel_checkpoints() == meta.get_channel_checkpoints()


# =================================================================================================
# Property: a channel checkpoint never goes back
# =================================================================================================

update = st.tuples(
    st.sampled_from(["single", "batch", "fail_single", "fail_batch", "restart"]),
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 20)), min_size=1, max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(update, max_size=25))
def test_channel_checkpoint_never_goes_back(steps):
    """Whatever the sequence of single/batch updates, failed writes and restarts, each channel's
    checkpoint (in memory and in the KV) only moves forward, and a successful update to a newer
    position is never lost."""
    kv, faults = MemoryKV(), Faults()
    meta = Meta(Catalog(FaultyKV(kv, faults)))
    high: dict[str, int] = {}
    for kind, items in steps:
        faults.ops = {"save", "remove"} if kind.startswith("fail") else set()
        positions = [pos(ch, ts) for ch, ts in items]
        try:
            if kind == "restart":
                meta = Meta(Catalog(FaultyKV(kv, faults)))
            elif kind.endswith("single"):
                meta.update_channel_checkpoint(positions[0].channel_name, positions[0])
            else:
                meta.update_channel_checkpoints(positions)
        except KVError:
            assert kind.startswith("fail")
        for ch, cp in meta.get_channel_checkpoints().items():
            assert cp.timestamp >= high.get(ch, -1)
            stored = json.loads(kv.load(f"{ROOT}/channel-cp/{ch}"))["timestamp"]
            assert stored == cp.timestamp
            high[ch] = cp.timestamp
        if kind == "single":
            assert meta.get_channel_checkpoint(positions[0].channel_name).timestamp >= positions[0].timestamp
