"""Sync tasks, the meta writer, the serializer and the sync manager (reference §4.6).

Ports Milvus 2.5 ``internal/flushcommon/syncmgr/{task_test.go, meta_writer_test.go,
storage_serializer_test.go, sync_manager_test.go, key_lock_dispatcher_test.go}`` where they apply, then
pins what the ports leave implicit: the exact request, the retry schedule, and that a node crashing
after any effect leaves nothing inconsistent (files written but not reported are only orphans).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.config import MS, S
from milvus_edu.datanode.metacache import (
    MetaCache,
    roll_stats,
    set_start_pos_recorded,
    start_syncing,
    update_buffered_rows,
    with_segment_ids,
)
from milvus_edu.datanode.syncmgr.meta_writer import (
    BrokerMetaWriter,
    DropVirtualChannel,
    NotifyDropPartition,
    RetryConfig,
    Sleep,
    SaveBinlogPaths,
    retry_handle,
    retry_unless_canceled,
)
from milvus_edu.datanode.syncmgr.pack import PK_FIELD_ID, TIMESTAMP_FIELD_ID, DeleteData, InsertData, SyncPack
from milvus_edu.datanode.syncmgr.storage_serializer import (
    StorageSerializer,
    load_stats,
    read_insert_binlog,
    read_stats_log,
)
from milvus_edu.datanode.syncmgr.sync_manager import SyncManager, SyncManagerClosedError
from milvus_edu.datanode.syncmgr.task import (
    PHASE_DISCARDED,
    PHASE_DONE,
    PHASE_FAILED,
    AllocIDs,
    SyncTask,
    WriteObjects,
)
from milvus_edu.datacoord.catalog import compress_field_binlogs
from milvus_edu.datacoord.meta import merge_field_binlogs
from milvus_edu.effects import drive
from milvus_edu.merr import (
    ParameterInvalidError,
    SegmentNotFoundError,
    ServiceNotReadyError,
    wrap_err_channel_not_found,
    wrap_err_segment_not_found,
)
from milvus_edu.proto import Binlog, FieldBinlog, MsgPosition, SegmentInfo, SegmentLevel, SegmentState
from milvus_edu.storage.binlog import parse_insert_log_path
from milvus_edu.storage.objectstore import ChunkManager

COLL, PART, SEG = 1000, 2000, 10001
CH = "by-dev-rootcoord-dml_0_1000v0"
START = MsgPosition(CH, 3, 90)
CHECKPOINT = MsgPosition(CH, 7, 100)


def make_cache(*segments: tuple) -> MetaCache:
    """A metacache with ``(id, state, level, flushed_rows, start_recorded)`` segments, as the write buffer leaves it."""
    cache = MetaCache(COLL, CH)
    for seg_id, state, level, flushed, recorded in segments:
        cache.add_segment(
            SegmentInfo(id=seg_id, collection_id=COLL, partition_id=PART, insert_channel=CH, state=state,
                        level=level, num_of_rows=flushed, start_position=MsgPosition(CH, seg_id, seg_id)),
            set_start_pos_recorded(recorded))
    return cache


def default_cache(state=SegmentState.GROWING, level=SegmentLevel.L1, flushed=0) -> MetaCache:
    return make_cache((SEG, state, level, flushed, False))


def make_pack(cache: MetaCache, rows=((1, 2, 3), (101, 102, 103)), deletes=None, flush=False, drop=False,
              level=SegmentLevel.L1, seg=SEG) -> SyncPack:
    """A pack cut the way ``getSyncTask`` cuts it: the segment's buffered rows move to syncing."""
    pks, ts = rows if rows else ((), ())
    batch = len(pks)
    cache.update_segments(update_buffered_rows(batch), with_segment_ids(seg))
    cache.update_segments(start_syncing(batch), with_segment_ids(seg))
    all_ts = list(ts) + (list(deletes[1]) if deletes else [])
    return SyncPack(
        COLL, PART, seg, CH,
        insert_data=(InsertData(tuple(pks), tuple(ts)),) if pks else (),
        delete_data=DeleteData(*deletes) if deletes else None,
        ts_from=min(all_ts, default=50), ts_to=max(all_ts, default=100),
        start_position=START, checkpoint=CHECKPOINT, batch_rows=batch, level=level, is_flush=flush, is_drop=drop)


def make_task(cache, pack, attempts=10, meta_writer=True) -> SyncTask:
    retry = RetryConfig(attempts=attempts)
    writer = BrokerMetaWriter(server_id=1, retry=retry) if meta_writer else None
    return SyncTask(pack, metacache=cache, serializer=StorageSerializer(cache), meta_writer=writer,
                    write_retry=retry)


class World:
    """The outside of a DataNode: an id allocator, a bucket, and DataCoord's received requests.

    ``failures`` maps an effect type to the errors its next calls raise, in order.
    """

    def __init__(self, failures=None):
        self.bucket = ChunkManager.from_uri("mock://")
        self.next_id = 5000
        self.saved = []
        self.effects = []
        self.failures = {k: list(v) for k, v in (failures or {}).items()}

    def __call__(self, effect):
        self.effects.append(effect)
        pending = self.failures.get(type(effect))
        if pending:
            raise pending.pop(0)
        if isinstance(effect, AllocIDs):
            start, self.next_id = self.next_id, self.next_id + effect.count
            return start
        if isinstance(effect, WriteObjects):
            self.bucket.multi_write(effect.objects)
        elif isinstance(effect, SaveBinlogPaths):
            self.saved.append(effect.request)
        return None

    def kinds(self):
        return [type(e).__name__ for e in self.effects]


def run_until_crash(steps, handle, performed: int):
    """Drive ``steps`` but stop after ``performed`` effects were carried out, before their results
    come back (the node dies while the call is in flight). Returns ``(finished, value)``."""
    count = 0
    try:
        effect = next(steps)
        while True:
            if count == performed:
                steps.close()
                return False, None
            count += 1
            try:
                result, failure = handle(effect), None
            except Exception as exc:  # noqa: BLE001 - a failed call goes back into the task
                result, failure = None, exc
            if count == performed:
                steps.close()
                return False, None
            effect = steps.throw(failure) if failure is not None else steps.send(result)
    except StopIteration as stop:
        return True, stop.value


# =================================================================================================
# Port of task_test.go
# =================================================================================================


def test_run_without_data_still_allocates_writes_and_reports():
    """Ports TestRunNormal/without_data: an empty sync asks Alloc(0), writes nothing, reports its checkpoint."""
    cache = default_cache(flushed=1000)
    world = World()
    task = make_task(cache, make_pack(cache, rows=None))
    assert drive(task.run(), world) == PHASE_DONE
    assert world.kinds() == ["AllocIDs", "WriteObjects", "SaveBinlogPaths"]
    assert world.effects[0] == AllocIDs(0) and dict(world.effects[1].objects) == {}
    (req,) = world.saved
    assert req.field2_binlog_paths == () and req.deltalogs == ()
    assert req.check_points[0].position == CHECKPOINT and req.check_points[0].num_of_rows == 1000


def test_run_with_insert_writes_one_binlog_per_field_and_reports_them():
    """Ports TestRunNormal/with_insert_delete_cp: ids are allocated once, binlog paths carry them."""
    cache = default_cache()
    world = World()
    task = make_task(cache, make_pack(cache))
    drive(task.run(), world)
    assert world.effects[0] == AllocIDs(3)  # Timestamp + pk binlogs + the batch stats log
    (req,) = world.saved
    assert [fb.field_id for fb in req.field2_binlog_paths] == [TIMESTAMP_FIELD_ID, PK_FIELD_ID]
    paths = [fb.binlogs[0].log_path for fb in req.field2_binlog_paths]
    assert paths == [f"files/insert_log/{COLL}/{PART}/{SEG}/1/5000", f"files/insert_log/{COLL}/{PART}/{SEG}/100/5001"]
    assert [parse_insert_log_path(p).log_id for p in paths] == [5000, 5001]
    binlog = req.field2_binlog_paths[1].binlogs[0]
    assert (binlog.entries_num, binlog.timestamp_from, binlog.timestamp_to) == (3, 101, 103)
    assert binlog.log_size == len(world.bucket.read(binlog.log_path))
    assert read_insert_binlog(world.bucket.read(binlog.log_path)).columns == {"pk": (1, 2, 3)}
    assert req.field2_statslog_paths[0].binlogs[0].log_path.endswith(f"/{SEG}/100/5002")
    segment = cache.get_segment_by_id(SEG)
    assert (segment.flushed_rows, segment.syncing_rows, segment.syncing_tasks) == (3, 0, 0)
    assert segment.state == SegmentState.GROWING


def test_run_flush_writes_the_merged_stats_log_under_log_id_1_and_marks_flushed():
    """Ports TestRunNormal/with_statslog: a flush adds the merged stats log (log id 1) and ends Flushed."""
    cache = default_cache(state=SegmentState.FLUSHING, flushed=2)
    cache.update_segments(roll_stats({7, 8}))
    world = World()
    drive(make_task(cache, make_pack(cache, flush=True)).run(), world)
    (req,) = world.saved
    stats = req.field2_statslog_paths[0].binlogs
    assert [b.log_path.rsplit("/", 1)[1] for b in stats] == ["5002", "1"]
    merged = read_stats_log(world.bucket.read(stats[1].log_path))
    assert merged.columns["pk"] == (1, 2, 3, 7, 8)
    assert stats[1].entries_num == 5  # the segment's rows when the task ran: 2 flushed + 3 syncing
    assert req.flushed and not req.dropped
    assert cache.get_segment_by_id(SEG).state == SegmentState.FLUSHED


def test_load_stats_reads_every_batch_log_or_only_the_merged_one():
    """``compaction.LoadStats`` over what DataCoord recorded (log ids only): the pk field's batch stats logs
    together, but the merged log (log id 1) alone once there is one; another field's logs are not read."""
    cache = default_cache(state=SegmentState.FLUSHING)
    world = World()
    drive(make_task(cache, make_pack(cache)).run(), world)
    drive(make_task(cache, make_pack(cache, rows=((4, 5), (104, 105)))).run(), world)

    def recorded(requests):
        stats = merge_field_binlogs((), [fb for r in requests for fb in r.field2_statslog_paths])
        stats += (FieldBinlog(TIMESTAMP_FIELD_ID, (Binlog(1, 0, 0, log_id=777),)),)  # no such object
        return SegmentInfo(id=SEG, collection_id=COLL, partition_id=PART, insert_channel=CH,
                           statslogs=compress_field_binlogs(stats))

    read: list[str] = []

    def reader(path: str) -> bytes:
        read.append(path.rsplit("/", 2)[1:])
        return world.bucket.read(path)

    assert load_stats(reader, recorded(world.saved)) == {1, 2, 3, 4, 5}
    assert read == [[str(PK_FIELD_ID), "5002"], [str(PK_FIELD_ID), "5005"]]  # each task: 2 binlogs, then stats
    cache.update_segments(roll_stats({99}), with_segment_ids(SEG))  # in the merged log only
    drive(make_task(cache, make_pack(cache, rows=((6,), (106,)), flush=True)).run(), world)
    read.clear()
    assert load_stats(reader, recorded(world.saved)) == {1, 2, 3, 4, 5, 6, 99}
    assert read == [[str(PK_FIELD_ID), "1"]]
    assert load_stats(world.bucket.read, SegmentInfo(SEG, COLL, PART, CH)) == frozenset()


def test_run_drop_with_deletes_writes_the_delta_log_and_removes_the_segment():
    """Ports TestRunNormal/with_delta_data: a dropping sync reports Dropped and forgets the segment."""
    cache = default_cache()
    world = World()
    drive(make_task(cache, make_pack(cache, rows=None, deletes=((1, 2), (110, 111)), drop=True)).run(), world)
    (req,) = world.saved
    (delta,) = req.deltalogs[0].binlogs
    assert delta.log_path == f"files/delta_log/{COLL}/{PART}/{SEG}/5000" and delta.entries_num == 2
    assert req.dropped and cache.get_segment_by_id(SEG) is None


def test_run_l0_segment_reports_its_own_start_position_and_syncs_as_flushed():
    """Ports TestRunL0Segment/pure_delete_l0_flush: no merged stats for L0; L0 brings its start position."""
    cache = make_cache((SEG, SegmentState.GROWING, SegmentLevel.L0, 0, False),
                       (SEG + 1, SegmentState.GROWING, SegmentLevel.L1, 0, False))
    world = World()
    pack = make_pack(cache, rows=None, deletes=((1,), (110,)), flush=True, level=SegmentLevel.L0)
    drive(make_task(cache, pack).run(), world)
    (req,) = world.saved
    assert req.field2_statslog_paths == () and req.seg_level == SegmentLevel.L0
    assert [(p.segment_id, p.start_position) for p in req.start_positions] == [
        (SEG + 1, MsgPosition(CH, SEG + 1, SEG + 1)), (SEG, START)]
    assert cache.get_segment_by_id(SEG).state == SegmentState.FLUSHED


def test_run_segment_not_found_fails_unless_dropping():
    """Ports TestRunError/segment_not_found; a dropping sync of a vanished segment is discarded instead."""
    cache = default_cache()
    pack = make_pack(cache)
    task = make_task(cache, pack)
    cache.remove_segments(with_segment_ids(SEG))
    world = World()
    with pytest.raises(SegmentNotFoundError, match=rf"segment not found\[segment={SEG}\]"):
        drive(task.run(), world)
    assert task.phase == PHASE_FAILED and isinstance(task.error, SegmentNotFoundError)
    cache = default_cache()
    task = make_task(cache, make_pack(cache, drop=True))
    cache.remove_segments(with_segment_ids(SEG))
    assert drive(task.run(), world) == PHASE_DISCARDED and world.effects == []


def test_run_alloc_failure_propagates_and_writes_nothing():
    """Ports TestRunError/allocate_id_fail."""
    cache = default_cache()
    world = World({AllocIDs: [ServiceNotReadyError()]})
    with pytest.raises(ServiceNotReadyError):
        drive(make_task(cache, make_pack(cache)).run(), world)
    assert world.bucket.list_with_prefix("files/") == [] and world.saved == []


def test_run_meta_write_failure_leaves_orphan_files_and_unfinished_rows():
    """Ports TestRunError/metawrite_fail (one attempt): the files stay, unreported; rows stay syncing."""
    cache = default_cache()
    world = World({SaveBinlogPaths: [ServiceNotReadyError()]})
    task = make_task(cache, make_pack(cache), attempts=1)
    with pytest.raises(ServiceNotReadyError):
        drive(task.run(), world)
    assert len(world.bucket.list_with_prefix("files/")) == 3 and world.saved == []
    segment = cache.get_segment_by_id(SEG)
    assert (segment.flushed_rows, segment.syncing_rows, segment.start_pos_recorded) == (0, 3, False)
    assert task.request is None and task.phase == PHASE_FAILED


def test_run_write_failure_propagates_before_reporting():
    """Ports TestRunError/chunk_manager_save_fail (one attempt): nothing is reported."""
    cache = default_cache()
    world = World({WriteObjects: [OSError("disk full")]})
    with pytest.raises(OSError, match="disk full"):
        drive(make_task(cache, make_pack(cache), attempts=1).run(), world)
    assert world.kinds() == ["AllocIDs", "WriteObjects", "Sleep"]
    assert world.saved == []


def test_next_id_hands_out_prefetched_ids_then_fails():
    """Ports TestNextID: normal_next, then id_exhausted (Go panics)."""
    cache = default_cache()
    task = make_task(cache, make_pack(cache))
    task._ids = [0]
    assert task.next_id() == 0
    with pytest.raises(RuntimeError, match="pre-fetched ids exhausted"):
        task.next_id()


def test_write_is_retried_then_succeeds():
    """``writeLogs`` retries a failed ``MultiWrite`` after a back-off; the same objects are written."""
    cache = default_cache()
    world = World({WriteObjects: [OSError("flaky"), OSError("flaky")]})
    drive(make_task(cache, make_pack(cache)).run(), world)
    assert world.kinds() == ["AllocIDs", "WriteObjects", "Sleep", "WriteObjects", "Sleep",
                             "WriteObjects", "SaveBinlogPaths"]
    assert world.effects[1] == world.effects[3] == world.effects[5]
    assert [e.duration_ns for e in world.effects if isinstance(e, Sleep)] == [200 * MS, 400 * MS]


def test_task_without_meta_writer_skips_the_report():
    """A Go task with no meta writer writes files and finishes the metacache update directly."""
    cache = default_cache()
    world = World()
    drive(make_task(cache, make_pack(cache), meta_writer=False).run(), world)
    assert world.kinds() == ["AllocIDs", "WriteObjects"]
    assert cache.get_segment_by_id(SEG).flushed_rows == 3


def test_serializer_must_share_the_task_metacache():
    """Building a task with a serializer of another metacache is a ``ValueError`` saying how to fix it."""
    cache = default_cache()
    with pytest.raises(ValueError, match="StorageSerializer\\(metacache\\)"):
        SyncTask(make_pack(cache), metacache=cache, serializer=StorageSerializer(default_cache()))


def test_task_declares_its_steps():
    """Every effect the task yields is named in ``STEPS`` (the simulator's crash points)."""
    assert SyncTask.STEPS == ("alloc_ids", "write_objects", "write_retry_sleep", "save_binlog_paths",
                              "save_retry_sleep")
    assert "alloc_ids" in SyncTask.__doc__ and "save_binlog_paths" in SyncTask.__doc__


# =================================================================================================
# Crashes between effects
# =================================================================================================


@pytest.mark.parametrize("performed", [0, 1, 2, 3])
def test_a_crash_after_any_effect_leaves_a_consistent_state(performed):
    """Whatever the last effect carried out, DataCoord never points at a missing file and the metacache
    counts the rows as flushed only if the task finished; written but unreported files are orphans."""
    cache = default_cache()
    world = World()
    task = make_task(cache, make_pack(cache, deletes=((9,), (120,))))
    finished, _ = run_until_crash(task.run(), world, performed)
    assert not finished
    written = world.bucket.list_with_prefix("files/")
    reported = [b.log_path for req in world.saved
                for group in (req.field2_binlog_paths, req.field2_statslog_paths, req.deltalogs)
                for fb in group for b in fb.binlogs]
    assert set(reported) <= set(written)
    assert len(written) == (4 if performed >= 2 else 0)
    assert len(world.saved) == (1 if performed >= 3 else 0)
    segment = cache.get_segment_by_id(SEG)
    assert segment.flushed_rows == 0 and segment.syncing_tasks == 1 and not segment.start_pos_recorded


def test_a_replayed_sync_after_a_crash_writes_new_files_beside_the_orphans():
    """After a crash past the write, the replayed rows get new log ids: no object is ever rewritten."""
    world = World()
    cache = default_cache()
    run_until_crash(make_task(cache, make_pack(cache)).run(), world, 2)
    orphans = set(world.bucket.list_with_prefix("files/"))
    cache = default_cache()
    drive(make_task(cache, make_pack(cache)).run(), world)
    reported = {b.log_path for fb in world.saved[0].field2_binlog_paths for b in fb.binlogs}
    assert reported and not reported & orphans
    assert orphans < set(world.bucket.list_with_prefix("files/"))


@settings(max_examples=60, deadline=None)
@given(
    failures=st.lists(st.sampled_from(["alloc", "write", "save", "timeout"]), max_size=4),
    performed=st.integers(0, 12),
    flush=st.booleans(),
)
def test_any_failures_and_crash_point_keep_datacoord_and_metacache_consistent(failures, performed, flush):
    """Property: with any injected failures and a crash at any point, every reported path exists, the
    metacache shows flushed rows exactly when the task finished, and files exist only once written."""
    table = {"alloc": (AllocIDs, ServiceNotReadyError()), "write": (WriteObjects, OSError("io")),
             "save": (SaveBinlogPaths, ServiceNotReadyError()), "timeout": (SaveBinlogPaths, TimeoutError())}
    plan = {}
    for name in failures:
        kind, exc = table[name]
        plan.setdefault(kind, []).append(exc)
    cache = default_cache(state=SegmentState.FLUSHING if flush else SegmentState.GROWING)
    world = World(plan)
    task = make_task(cache, make_pack(cache, flush=flush))
    try:
        finished, _ = run_until_crash(task.run(), world, performed)
    except (ServiceNotReadyError, OSError, TimeoutError):
        finished = False
    written = set(world.bucket.list_with_prefix("files/"))
    for req in world.saved:
        for group in (req.field2_binlog_paths, req.field2_statslog_paths, req.deltalogs):
            assert {b.log_path for fb in group for b in fb.binlogs} <= written
    segment = cache.get_segment_by_id(SEG)
    assert (segment.flushed_rows == 3) == finished
    assert (segment.state == SegmentState.FLUSHED) == (finished and flush)
    assert finished == (task.phase == PHASE_DONE)


# =================================================================================================
# Port of meta_writer_test.go, and the request and retry rules
# =================================================================================================


def _update_sync(cache, pack, world, attempts=10):
    writer = BrokerMetaWriter(server_id=1, retry=RetryConfig(attempts=attempts))
    return drive(writer.update_sync(pack, cache, {}, {}, FieldBinlog(0)), world)


def test_meta_writer_normal_save_marks_start_positions_recorded():
    """Ports TestNormalSave."""
    cache = default_cache(flushed=1000)
    world = World()
    req = _update_sync(cache, make_pack(cache), world)
    assert world.saved == [req] and req.source_id == 1
    assert cache.get_segment_by_id(SEG).start_pos_recorded


def test_meta_writer_returns_the_error_after_its_attempts():
    """Ports TestReturnError (one attempt): the error comes back and nothing is marked recorded."""
    cache = default_cache()
    world = World({SaveBinlogPaths: [ServiceNotReadyError()]})
    with pytest.raises(ServiceNotReadyError):
        _update_sync(cache, make_pack(cache), world, attempts=1)
    assert not cache.get_segment_by_id(SEG).start_pos_recorded


def test_request_counts_rows_and_lists_unrecorded_l1_start_positions():
    """``NumOfRows`` = flushed + batch; start positions of Growing/Sealed/Flushing L1 segments not yet
    recorded (not Flushed ones, not recorded ones, not other L0 segments)."""
    cache = make_cache(
        (SEG, SegmentState.GROWING, SegmentLevel.L1, 40, True),
        (SEG + 1, SegmentState.SEALED, SegmentLevel.L1, 0, False),
        (SEG + 2, SegmentState.FLUSHING, SegmentLevel.L1, 0, False),
        (SEG + 3, SegmentState.FLUSHED, SegmentLevel.L1, 0, False),
        (SEG + 4, SegmentState.GROWING, SegmentLevel.L1, 0, True),
        (SEG + 5, SegmentState.GROWING, SegmentLevel.L0, 0, False),
        (SEG + 6, SegmentState.GROWING, SegmentLevel.L1, 0, False),
    )
    req = _update_sync(cache, make_pack(cache), World())
    assert req.check_points[0].num_of_rows == 43 and req.check_points[0].segment_id == SEG
    assert [p.segment_id for p in req.start_positions] == [SEG + 1, SEG + 2, SEG + 6]
    recorded = [s.segment_id for s in cache.get_segments_by() if s.start_pos_recorded]
    assert recorded == [SEG, SEG + 1, SEG + 2, SEG + 4, SEG + 6]
    assert (req.channel, req.collection_id, req.partition_id, req.seg_level) == (CH, COLL, PART, SegmentLevel.L1)


def test_request_of_a_vanished_segment_is_segment_not_found():
    """``UpdateSync`` reads the segment first: gone means ``ErrSegmentNotFound`` and no RPC."""
    cache = default_cache()
    pack = make_pack(cache)
    cache.remove_segments(with_segment_ids(SEG))
    world = World()
    with pytest.raises(SegmentNotFoundError):
        _update_sync(cache, pack, world)
    assert world.effects == []


@pytest.mark.parametrize("flush", [False, True])
@pytest.mark.parametrize("error", [wrap_err_segment_not_found(SEG), wrap_err_channel_not_found(CH)])
def test_segment_or_channel_not_found_stop_retrying_and_count_as_success(flush, error):
    """For flush and non-flush syncs alike, DataCoord's SegmentNotFound/ChannelNotFound ends the retry as
    a success, and the start positions are then marked recorded although DataCoord stored nothing."""
    cache = default_cache(state=SegmentState.FLUSHING if flush else SegmentState.GROWING)
    world = World({SaveBinlogPaths: [error]})
    task = make_task(cache, make_pack(cache, flush=flush))
    assert drive(task.run(), world) == PHASE_DONE
    assert world.kinds().count("SaveBinlogPaths") == 1 and "Sleep" not in world.kinds()
    assert cache.get_segment_by_id(SEG).start_pos_recorded


def test_retry_schedule_is_ten_attempts_doubling_to_three_seconds_with_a_final_sleep():
    """``retry.Handle`` defaults: 10 attempts, 200 ms doubling to a 3 s cap, and a back-off even after
    the last failure; then the last error is raised."""
    world = World({SaveBinlogPaths: [ServiceNotReadyError() for _ in range(10)]})
    with pytest.raises(ServiceNotReadyError):
        drive(retry_handle(SaveBinlogPaths(None), retry_unless_canceled, RetryConfig()), world)
    sleeps = [e.duration_ns // MS for e in world.effects if isinstance(e, Sleep)]
    assert sleeps == [200, 400, 800, 1600, 3000, 3000, 3000, 3000, 3000, 3000]
    assert world.kinds().count("SaveBinlogPaths") == 10
    assert RetryConfig().max_sleep_ns == 3 * S


def test_a_timeout_is_not_retried_and_returns_the_earlier_error():
    """A cancel/timeout stops the retry; after earlier failures Go returns the earlier error instead."""
    world = World({SaveBinlogPaths: [TimeoutError()]})
    with pytest.raises(TimeoutError):
        drive(retry_handle(SaveBinlogPaths(None), retry_unless_canceled, RetryConfig()), world)
    assert world.kinds() == ["SaveBinlogPaths"]
    first = ServiceNotReadyError()
    world = World({SaveBinlogPaths: [first, TimeoutError()]})
    with pytest.raises(ServiceNotReadyError) as info:
        drive(retry_handle(SaveBinlogPaths(None), retry_unless_canceled, RetryConfig()), world)
    assert info.value is first


def test_retry_config_needs_an_attempt():
    """Go's ``Handle`` with 0 attempts never calls the function; the model refuses it."""
    with pytest.raises(ValueError, match="at least 1"):
        RetryConfig(attempts=0)


def test_drop_channel_and_notify_drop_partition_are_retried_rpcs():
    """``DropChannel`` and ``NotifyDropPartition``: one effect each, retried; no partitions is invalid."""
    writer = BrokerMetaWriter(server_id=9)
    world = World({DropVirtualChannel: [ServiceNotReadyError()]})
    drive(writer.drop_channel(CH), world)
    assert world.effects == [DropVirtualChannel(CH, 9), Sleep(200 * MS), DropVirtualChannel(CH, 9)]
    world = World()
    drive(writer.notify_drop_partition(COLL, CH, [PART]), world)
    assert world.effects == [NotifyDropPartition(CH, COLL, (PART,))]
    with pytest.raises(ParameterInvalidError, match=r"invalid parameter\[expected=non-empty partitionIDs\]"):
        drive(writer.notify_drop_partition(COLL, CH, []), world)


# =================================================================================================
# Port of storage_serializer_test.go
# =================================================================================================


def test_serialize_without_data_gives_no_blobs():
    """Ports TestSerializeInsert/without_data (a drop with no rows)."""
    cache = default_cache()
    encoded = StorageSerializer(cache).encode_buffer(make_pack(cache, rows=None, drop=True))
    assert dict(encoded.binlog_blobs) == {} and encoded.batch_stats_blob is None and encoded.delta_blob is None


def test_serialize_normal_data_gives_binlogs_and_batch_stats_and_rolls_pks():
    """Ports TestSerializeInsert/with_normal_data (two fields here: Timestamp and pk)."""
    cache = default_cache()
    encoded = StorageSerializer(cache).encode_buffer(make_pack(cache))
    assert sorted(encoded.binlog_blobs) == [TIMESTAMP_FIELD_ID, PK_FIELD_ID]
    assert encoded.batch_stats_blob is not None and encoded.merged_stats_blob is None
    assert encoded.binlog_blobs[PK_FIELD_ID].row_num == 3
    assert encoded.binlog_blobs[PK_FIELD_ID].memory_size == 3 * 8 + 1  # Go adds binary.Size(Nullable)
    assert cache.get_segment_by_id(SEG).pk_stats == {1, 2, 3}


def test_serialize_flush_of_a_missing_segment_is_segment_not_found():
    """Ports TestSerializeInsert/with_flush_segment_not_found."""
    cache = MetaCache(COLL, CH)
    pack = SyncPack(COLL, PART, SEG, CH, is_flush=True)
    with pytest.raises(SegmentNotFoundError):
        StorageSerializer(cache).encode_buffer(pack)


def test_serialize_flush_gives_the_merged_stats():
    """Ports TestSerializeInsert/with_flush."""
    cache = default_cache(state=SegmentState.FLUSHING)
    encoded = StorageSerializer(cache).encode_buffer(make_pack(cache, flush=True))
    assert encoded.batch_stats_blob is not None
    assert read_stats_log(encoded.merged_stats_blob.value).metadata["merged"] == "true"


def test_serialize_flush_of_an_empty_segment_has_no_merged_stats():
    """An empty segment may be flushed (Go allows it); there is nothing to merge."""
    cache = default_cache(state=SegmentState.FLUSHING)
    encoded = StorageSerializer(cache).encode_buffer(make_pack(cache, rows=None, flush=True))
    assert encoded.merged_stats_blob is None


def test_serialize_delete_gives_the_delta_blob():
    """Ports TestSerializeDelete/serialize_normal."""
    cache = default_cache()
    encoded = StorageSerializer(cache).encode_buffer(make_pack(cache, rows=None, deletes=((1, 2), (5, 6))))
    assert encoded.delta_blob is not None and encoded.delta_row_count == 2


def test_serialize_empty_insert_is_an_error():
    """Ports TestSerializeInsert/with_empty_data."""
    cache = default_cache()
    pack = SyncPack(COLL, PART, SEG, CH, insert_data=(InsertData(),))
    with pytest.raises(ParameterInvalidError):
        StorageSerializer(cache).encode_buffer(pack)


# =================================================================================================
# Port of sync_manager_test.go and key_lock_dispatcher_test.go
# =================================================================================================


class Stub:
    """``NewMockTask``: only a segment id."""

    def __init__(self, segment_id: int, name: str = ""):
        self.segment_id = segment_id
        self.name = name

    def __repr__(self):
        return f"Stub({self.segment_id}, {self.name!r})"


def test_submit_runs_a_task_at_once():
    """Ports TestSubmit / TestCompacted: a lone task may run, and its report names its segment."""
    manager = SyncManager()
    cache = make_cache((1001, SegmentState.GROWING, SegmentLevel.L1, 0, False))
    task = make_task(cache, make_pack(cache, seg=1001))
    assert manager.submit(task) and manager.running == (task,)
    world = World()
    drive(task.run(), world)
    assert world.saved[0].segment_id == 1001
    assert manager.finish(task) == [] and manager.running == ()


def test_submit_after_close_fails():
    """Ports TestClose."""
    manager = SyncManager()
    manager.close()
    with pytest.raises(SyncManagerClosedError, match="sync manager is closed"):
        manager.submit(Stub(1))


def test_resize_pool():
    """Ports TestResizePool: a bad size is refused and the pool kept; doubling it starts waiting tasks."""
    manager = SyncManager(2)
    tasks = [Stub(i) for i in range(4)]
    assert [manager.submit(t) for t in tasks] == [True, True, False, False]
    with pytest.raises(ValueError):
        manager.resize(-1)
    assert manager.cap == 2
    assert manager.resize(4) == tasks[2:] and manager.cap == 4


def test_a_failed_task_still_releases_its_segment():
    """Ports TestUnexpectedError / TestTargetUpdateSameID: whatever ``Run`` returned, the key is freed."""
    manager = SyncManager()
    first, second = Stub(1000, "a"), Stub(1000, "b")
    manager.submit(first)
    assert not manager.submit(second)
    assert manager.finish(first) == [second]


def test_key_lock_serialises_tasks_of_one_segment():
    """Ports TestKeyLock: the second task of a key waits for the first, even with free workers."""
    manager = SyncManager(2)
    t1, t2 = Stub(1, "t1"), Stub(1, "t2")
    assert manager.submit(t1)
    assert not manager.submit(t2) and manager.pending == (t2,) and manager.is_busy(1)
    assert manager.finish(t1) == [t2]
    assert manager.running == (t2,)


def test_cap_limits_tasks_of_different_segments():
    """Ports TestCap: with one worker the second segment's task waits for the first to finish."""
    manager = SyncManager(1)
    t1, t2 = Stub(1), Stub(2)
    assert manager.submit(t1) and not manager.submit(t2)
    assert manager.finish(t1) == [t2]


def test_next_task_of_a_segment_queues_behind_tasks_already_waiting_for_a_worker():
    """The freed key goes to the segment's next task, which then waits its turn for a worker."""
    manager = SyncManager(1)
    a1, b1, a2 = Stub(1, "a1"), Stub(2, "b1"), Stub(1, "a2")
    manager.submit(a1)
    manager.submit(b1)
    manager.submit(a2)
    assert manager.pending == (b1, a2)
    assert manager.finish(a1) == [b1] and manager.pending == (a2,)
    assert manager.finish(b1) == [a2]


def test_misuse_of_the_scheduler_is_refused():
    """Submitting a task twice or finishing one that is not running is a ``ValueError``."""
    manager = SyncManager(1)
    t1, t2 = Stub(1), Stub(2)
    manager.submit(t1)
    manager.submit(t2)
    with pytest.raises(ValueError, match="already submitted"):
        manager.submit(t2)
    with pytest.raises(ValueError, match="not running"):
        manager.finish(t2)
    with pytest.raises(ValueError):
        SyncManager(0)


@settings(max_examples=150, deadline=None)
@given(cap=st.integers(1, 3), ops=st.lists(st.one_of(st.integers(0, 3), st.none()), max_size=40),
       picks=st.randoms(use_true_random=False))
def test_sync_manager_is_serial_per_segment_bounded_fifo_and_work_conserving(cap, ops, picks):
    """Property: never two tasks of a segment running, never more than ``cap``; a segment's tasks start
    in submission order; a free worker never idles while a task with a free key waits; all tasks
    submitted eventually run."""
    manager = SyncManager(cap)
    submitted, started = [], []
    for n, op in enumerate(ops):
        if op is None:
            if manager.running:
                task = picks.choice(manager.running)
                started += manager.finish(task)
        else:
            task = Stub(op, str(n))
            submitted.append(task)
            if manager.submit(task):
                started.append(task)
        segs = [t.segment_id for t in manager.running]
        assert len(segs) == len(set(segs)) and len(segs) <= cap
        assert not (len(manager.running) < cap and manager.waiting_for_worker)
        assert all(manager.is_busy(t.segment_id) for t in manager.pending)
    while manager.running:
        started += manager.finish(manager.running[0])
    assert manager.pending == () and sorted(map(id, started)) == sorted(map(id, submitted))
    for seg in {t.segment_id for t in submitted}:
        assert [t for t in started if t.segment_id == seg] == [t for t in submitted if t.segment_id == seg]
