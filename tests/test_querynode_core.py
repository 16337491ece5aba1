"""The QueryNode's core: segcore MVCC and the delegator's tsafe and wait.

Ports the DeletedRecord cases of ``internal/core/unittest/test_delete_record.cpp`` that apply (a delete hides
rows of its pk inserted strictly earlier, never one with the same ts, a row counted once) and the delegator's
``wait_tsafe_timeout``, ``tsafe_behind_max_lag`` and ``downgrade_tsafe`` cases (delegator_test.go TestSearch /
TestQuery), their ``cluster_not_serviceable`` case (a closed delegator refuses a read before any wait: the
``lifetime.Add`` check), plus the delegator-closed path of ``waitTSafe``; hypothesis checks MVCC against a brute-force
definition.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.effects import drive
from milvus_edu.merr import ChannelNotAvailableError, ServiceNotReadyError
from milvus_edu.querynode import (DeadlineExceeded, GrowingSegment, Row, SealedSegment, ShardDelegator, TSafeChanged,
                                  TsLagTooLargeError)
from milvus_edu.tsoutil import compose_ts

MS = 1_767_225_600_000


def ts(ms: int, logical: int = 0) -> int:
    return compose_ts(MS + ms, logical)


def pks(rows) -> list[int]:
    return [r.pk for r in rows]


# --- segcore -------------------------------------------------------------------------------------

def test_a_read_sees_rows_inserted_at_or_before_its_ts():
    seg = GrowingSegment(1)
    seg.insert([Row(1, 10), Row(2, 20), Row(3, 20), Row(4, 30)])
    assert seg.get_active_count(19) == 1 and seg.get_active_count(20) == 3 and seg.get_active_count(99) == 4
    assert pks(seg.visible(20)) == [1, 2, 3]
    with pytest.raises(ValueError, match="insert rows in timestamp order"):
        seg.insert([Row(5, 25)])


def test_a_delete_hides_earlier_rows_of_its_pk_from_reads_at_or_after_it():
    """test_delete_record.cpp: the delete applies to rows of its pk with insert_ts < dts, at reads ts >= dts."""
    seg = GrowingSegment(1)
    seg.insert([Row(7, 10), Row(8, 10), Row(7, 30)])
    assert seg.delete([7], [20]) == 1  # only the row inserted at 10; the one at 30 is later than the delete
    assert pks(seg.visible(19)) == [7, 8]
    assert pks(seg.visible(20)) == [8]
    assert sorted(pks(seg.visible(30))) == [7, 8]  # the re-insert at 30 is visible


def test_a_delete_never_hides_a_row_with_its_own_timestamp():
    seg = GrowingSegment(1)
    seg.insert([Row(7, 20)])
    assert seg.delete([7], [20]) == 0
    assert pks(seg.visible(50)) == [7]


def test_a_row_takes_only_the_first_delete_recorded_against_it():
    seg = GrowingSegment(1)
    seg.insert([Row(7, 10)])
    assert seg.delete([7], [40]) == 1
    assert seg.delete([7], [20]) == 0  # already masked: the earlier delete arriving later is not recorded
    assert pks(seg.visible(30)) == [7]  # segcore's rule, faithfully: visible between 20 and 40
    assert pks(seg.visible(40)) == []


def test_the_seeds_insert_delete_insert_in_one_pack():
    """insert A (t1) -> delete A (t2) -> insert A (t3): at t3 exactly one A, the second."""
    seg = GrowingSegment(1)
    seg.insert([Row(1, 10, "first"), Row(1, 30, "second")])
    seg.delete([1], [20])
    assert [r.payload for r in seg.visible(30)] == ["second"]
    assert [r.payload for r in seg.visible(15)] == ["first"]


def test_delete_ignores_timestamps_hides_the_reinsert_and_the_past_too():
    seg = GrowingSegment(1, delete_ignores_timestamps=True)
    seg.insert([Row(1, 10), Row(1, 30)])
    seg.delete([1], [20])
    assert pks(seg.visible(15)) == [] and pks(seg.visible(30)) == []


def test_a_sealed_segment_masks_by_timestamp_whatever_the_row_order():
    seg = SealedSegment(9, [Row(3, 30), Row(1, 10), Row(2, 20)])
    assert pks(seg.visible(20)) == [1, 2]
    seg.delete([1], [25])
    assert pks(seg.visible(24)) == [1, 2] and sorted(pks(seg.visible(40))) == [2, 3]


def deleted_offsets(seg, read_ts: int) -> list[int]:
    """``DeletedRecord::Query`` over the whole segment: the offsets a read at ``read_ts`` finds deleted, sorted."""
    return sorted(seg.deleted.query(read_ts, len(seg.record)))


def test_delete_mvcc_common_case_on_a_sealed_segment():
    """test_delete_record.cpp DeleteMVCC.common_case: pks 0..9 inserted at ts 0..9 into a sealed segment; a delete is
    recorded once per row, a repeated delete of a deleted row adds no entry, and a delete at the row's own ts none."""
    seg = SealedSegment(1, [Row(i, i) for i in range(10)])
    assert seg.delete([1], [10]) == 1 and len(seg.deleted) == 1
    assert deleted_offsets(seg, 9) == [] and deleted_offsets(seg, 10) == [1] and deleted_offsets(seg, 11) == [1]
    assert seg.delete([5], [12]) == 1 and len(seg.deleted) == 2
    assert deleted_offsets(seg, 12) == [1, 5]
    assert seg.delete([1], [13]) == 0 and len(seg.deleted) == 2  # already deleted: no new entry
    assert seg.delete([9], [9]) == 0 and len(seg.deleted) == 2  # inserted at ts 9 too: the delete does not apply
    assert deleted_offsets(seg, 14) == [1, 5]


def test_delete_mvcc_with_duplicate_pks_on_a_growing_segment():
    """test_delete_record.cpp DeleteMVCC.delete_exist_duplicate_pks: pks (0,1,1,2,2,3,4,3,2,5) at ts 0..9. A delete
    takes every earlier row of its key not yet deleted, so a later delete of the same key picks up only the copies
    inserted between the two deletes."""
    seg = GrowingSegment(1)
    seg.insert([Row(pk, t) for t, pk in enumerate([0, 1, 1, 2, 2, 3, 4, 3, 2, 5])])
    steps = [((2, 5), 2, [3, 4]), ((3, 6), 3, [3, 4, 5]), ((3, 9), 4, [3, 4, 5, 7]), ((2, 9), 5, [3, 4, 5, 7, 8])]
    for (pk, dts), entries, deleted in steps:
        seg.delete([pk], [dts])
        assert len(seg.deleted) == entries
        assert deleted_offsets(seg, 10) == deleted
    assert deleted_offsets(seg, 8) == [3, 4, 5]  # the deletes at ts 9 are not seen by a read at ts 8


ops = st.lists(st.tuples(st.sampled_from(["insert", "delete"]), st.integers(0, 4), st.integers(1, 12)),
               max_size=40)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_mvcc_matches_the_definition_for_every_read_ts(operations):
    """Inserts appended in ts order, deletes at any ts, applied in arrival order: at every T the visible rows are
    the rows inserted at <= T whose first recorded delete (pk equal, insert_ts < dts, recorded when present) is <= T."""
    seg = GrowingSegment(1)
    rows: list[Row] = []
    first_delete: dict[int, int] = {}  # row index -> dts of the first delete recorded against it
    clock = 0
    for op, pk, t in operations:
        if op == "insert":
            clock = max(clock, t)
            row = Row(pk, clock)
            seg.insert([row])
            rows.append(row)
        else:
            seg.delete([pk], [t])
            for i, r in enumerate(rows):
                if r.pk == pk and r.ts < t and i not in first_delete:
                    first_delete[i] = t
    for read in range(0, 14):
        want = [r for i, r in enumerate(rows) if r.ts <= read and not (i in first_delete and first_delete[i] <= read)]
        assert seg.visible(read) == want


# --- delegator -----------------------------------------------------------------------------------

def test_tsafe_never_goes_back():
    d = ShardDelegator("v0", start_ts=ts(0))
    assert d.update_tsafe(ts(10)) and not d.update_tsafe(ts(5)) and not d.update_tsafe(ts(10))
    assert d.get_tsafe() == ts(10)


def test_a_read_at_or_below_tsafe_is_served_at_once_at_tsafe():
    d = ShardDelegator("v0", start_ts=ts(100))
    d.insert(1, [Row(1, ts(50)), Row(2, ts(100)), Row(3, ts(150))])
    read_ts, rows = drive(d.query(ts(80)), lambda e: pytest.fail(f"must not wait: {e}"))
    assert read_ts == ts(100) and pks(rows) == [1, 2]  # the read ts is tsafe, not the guarantee


def test_a_read_waits_until_tsafe_reaches_its_guarantee_and_reads_at_the_tsafe_then():
    d = ShardDelegator("v0", start_ts=ts(100))
    d.insert(1, [Row(1, ts(50)), Row(2, ts(180)), Row(3, ts(260))])
    steps = iter([ts(150), ts(250)])
    waits = []

    def handler(effect):
        assert isinstance(effect, TSafeChanged) and effect.guarantee_ts == ts(200)
        waits.append(effect)
        d.update_tsafe(next(steps))

    read_ts, rows = drive(d.query(ts(200)), handler)
    assert len(waits) == 2 and read_ts == ts(250) and pks(rows) == [1, 2]


def test_wait_tsafe_timeout():
    """delegator_test.go wait_tsafe_timeout: the context runs out while waiting."""
    d = ShardDelegator("v0", start_ts=ts(100))
    gen = d.wait_tsafe(ts(200), deadline=1_500.0)
    assert next(gen) == TSafeChanged(ts(200), "v0", 1_500.0)  # the driver needs the channel and the context's deadline
    with pytest.raises(DeadlineExceeded, match="context deadline exceeded"):
        gen.throw(DeadlineExceeded())


def test_tsafe_behind_max_lag():
    """delegator_test.go tsafe_behind_max_lag: refused at once with Milvus's text."""
    d = ShardDelegator("v0", start_ts=ts(0))
    with pytest.raises(TsLagTooLargeError, match=r"^Timestamp lag too large lag\(24h0m0.001s\) max\(24h0m0s\)$"):
        next(d.wait_tsafe(ts(86_400_001)))
    gen = d.wait_tsafe(ts(86_400_000))  # exactly the maximum lag still waits
    assert isinstance(next(gen), TSafeChanged)


def test_downgrade_tsafe_reads_below_the_guarantee():
    """delegator_test.go downgrade_tsafe."""
    d = ShardDelegator("v0", start_ts=ts(100), downgrade_tsafe=True)
    assert drive(d.wait_tsafe(ts(500)), lambda e: pytest.fail("must not wait")) == ts(100)


def test_a_delegator_closed_during_the_wait_fails_the_read():
    d = ShardDelegator("v0", start_ts=ts(100))
    with pytest.raises(ChannelNotAvailableError, match=r"delegator closed during wait tsafe: channel not available"
                                                       r"\[channel=v0\]"):
        drive(d.wait_tsafe(ts(200)), lambda e: d.close())


@pytest.mark.parametrize("guarantee", [0, 100, 200])
def test_a_closed_delegator_refuses_a_read_before_waiting_on_tsafe(guarantee):
    """delegator_test.go TestSearch / TestQuery cluster_not_serviceable: after ``Close`` a read fails at
    ``lifetime.Add(IsWorking)``, also one whose guarantee (0, or tsafe itself) needs no wait."""
    d = ShardDelegator("v0", start_ts=ts(200), node_id=30)
    d.insert(1, [Row("A", ts(150))])
    assert drive(d.query(ts(guarantee)), lambda e: pytest.fail("must not wait")) == (ts(200), [Row("A", ts(150))])
    d.close()
    with pytest.raises(ServiceNotReadyError, match=r"^service not ready\[querynode=30\]: Stopped$"):
        drive(d.query(ts(guarantee)), lambda e: pytest.fail("a closed delegator must not wait"))


def test_process_delete_reaches_sealed_and_growing_segments():
    d = ShardDelegator("v0", start_ts=ts(0))
    d.sealed[5] = SealedSegment(5, [Row(1, ts(10))])
    d.insert(6, [Row(1, ts(20)), Row(2, ts(20))])
    assert d.process_delete([1], [ts(30)]) == 2
    assert pks(d.read(ts(30))) == [2]
    # key 1 is in both segments at 25: the merge returns it once, the newer (growing) row
    assert d.read(ts(25)) == [Row(1, ts(20)), Row(2, ts(20))]


def test_a_batch_of_deletes_is_applied_in_timestamp_order_whatever_the_message_order():
    """SegmentGrowingImpl::Delete sorts a batch by timestamp: a row takes the earliest delete after its insert, so a
    read between two deletes of its key (given out of order, as two proxies may put them in one pack) misses it."""
    seg = GrowingSegment(1)
    seg.insert([Row(7, 10)])
    assert seg.delete([7, 7], [30, 20]) == 1
    assert pks(seg.visible(19)) == [7] and pks(seg.visible(25)) == []
