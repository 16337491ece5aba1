"""A key inserted twice: what a query returns (issue 24's "duplicate primary key" surprise).

Ports the ``MergeSegcoreRetrieveResults`` cases of ``internal/querynodev2/segments/result_test.go`` (Milvus 2.5:
"test skip dupPK 2", "test_duppk_multipke_segment", "test nil results", "test merge" limited / int ID / string ID);
a row's ``payload`` stands for its field data. Then segcore's ``find_first`` on a growing and a sealed segment, a
hypothesis check of the merge against its definition, and the workload of the issue on the simulated cluster:
insert 7 and 8, then 7 again; Strong queries ``id in [7, 8, 9]`` and ``id in [8]`` before and after a flush.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.mechanisms.query.levels import reads
from milvus_edu.querynode import GrowingSegment, Row, SealedSegment, ShardDelegator, merge_segcore_retrieve_results
from milvus_edu.querynode.segcore import select_min_pk_with_timestamp


def pks(rows) -> list:
    return [r.pk for r in rows]


# --- result_test.go: TestResult_MergeSegcoreRetrieveResults -------------------------------------------------


def test_skip_dup_pk_keeps_the_row_with_the_larger_timestamp():
    """"test skip dupPK 2": two results with keys 0 and 1, the second one's rows newer."""
    r1 = [Row(0, 1000, "r1-0"), Row(1, 2000, "r1-1")]
    r2 = [Row(0, 2000, "r2-0"), Row(1, 3000, "r2-1")]
    got = merge_segcore_retrieve_results([r1, r2])
    assert pks(got) == [0, 1]
    assert [r.payload for r in got] == ["r2-0", "r2-1"]


def test_dup_pk_within_and_across_segments_gives_one_row():
    """"test_duppk_multipke_segment": key 1 twice in one result (ts 2000, 3000) and once in another (2500)."""
    r1 = [Row(1, 2000, "a"), Row(1, 3000, "b")]
    r2 = [Row(1, 2500, "c")]
    got = merge_segcore_retrieve_results([r1, r2])
    assert pks(got) == [1] and got[0].payload == "b"


def test_nil_and_empty_results_merge_to_nothing():
    """"test nil results" and "test no offset" (a result without rows is skipped)."""
    assert merge_segcore_retrieve_results([]) == []
    assert merge_segcore_retrieve_results([[], []]) == []


R1 = [Row(1, 1000, "r1-0"), Row(3, 2000, "r1-1")]
R2 = [Row(2, 2000, "r2-0"), Row(4, 3000, "r2-1")]


@pytest.mark.parametrize("limit", [1, 2, 3, 4])
def test_merge_limited(limit):
    """"test merge" / "test limited": keys 1..4 from two results, cut at the limit."""
    got = merge_segcore_retrieve_results([R1, R2], limit)
    assert pks(got) == [1, 2, 3, 4][:limit]
    assert [r.payload for r in got] == ["r1-0", "r2-0", "r1-1", "r2-1"][:limit]


def test_merge_int_and_string_ids_in_key_order():
    """"test int ID" and "test string ID"."""
    assert pks(merge_segcore_retrieve_results([R1, R2])) == [1, 2, 3, 4]
    s1 = [Row("a", 1000), Row("c", 2000)]
    s2 = [Row("b", 2000), Row("d", 3000)]
    assert pks(merge_segcore_retrieve_results([s1, s2])) == ["a", "b", "c", "d"]


def test_select_min_pk_prefers_the_larger_timestamp_of_equal_keys():
    """``SelectMinPKWithTimestamp``: smallest key; of equal keys the newer row; the first result on a full tie."""
    results = [[Row(5, 10)], [Row(5, 30)], [Row(5, 30)], [Row(6, 99)]]
    assert select_min_pk_with_timestamp(results, [0, 0, 0, 0]) == 1
    assert select_min_pk_with_timestamp(results, [1, 1, 1, 0]) == 3
    assert select_min_pk_with_timestamp(results, [1, 1, 1, 1]) == -1


rows_st = st.lists(st.tuples(st.integers(0, 6), st.integers(1, 9)), max_size=8)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(rows_st, max_size=4), st.one_of(st.just(-1), st.integers(0, 8)))
def test_merge_keeps_the_newest_row_of_each_key_in_key_order(segments, limit):
    """Each result sorted by key (as ``find_first`` gives them): the merge is, per key, a row with its newest
    timestamp, keys ascending, the first ``limit`` keys — except that the merge stops as soon as it holds
    ``limit`` keys, so the last key's row is the first one met, not necessarily its newest."""
    results = [sorted((Row(pk, ts, (i, j)) for j, (pk, ts) in enumerate(seg)), key=lambda r: r.pk)
               for i, seg in enumerate(segments)]
    newest: dict[int, Row] = {}
    for res in results:
        for row in res:
            if row.pk not in newest or row.ts > newest[row.pk].ts:
                newest[row.pk] = row
    want = [(newest[k].pk, newest[k].ts) for k in sorted(newest)]
    got = [(r.pk, r.ts) for r in merge_segcore_retrieve_results(results, limit)]
    if limit == -1 or limit > len(want):
        assert got == want
    else:
        assert got[:-1] == want[:limit - 1] if limit else got == []
        assert [pk for pk, _ in got] == [pk for pk, _ in want[:limit]]


def test_a_limit_stops_the_merge_before_a_newer_copy_of_the_last_key():
    """``availableCount < limit`` ends the loop once ``limit`` keys are held: a newer row of the last key, later in
    its result, is never looked at."""
    got = merge_segcore_retrieve_results([[Row(2, 1, "old"), Row(2, 2, "new")]], 1)
    assert [(r.pk, r.payload) for r in got] == [(2, "old")]


# --- segcore find_first ------------------------------------------------------------------------------------

ROWS = [Row(7, 10, "first"), Row(8, 10, "first"), Row(7, 20, "second")]


def test_a_growing_segment_gives_each_key_once_its_newest_visible_row():
    """``OffsetOrderedMap::find_first`` (2.5): keys in order, offsets newest first, one hit per key."""
    seg = GrowingSegment(1)
    seg.insert(ROWS)
    assert len(seg.visible(20)) == 3  # count(*): the rows, not the keys
    assert [(r.pk, r.payload) for r in seg.retrieve(20)] == [(7, "second"), (8, "first")]
    assert [(r.pk, r.payload) for r in seg.retrieve(15)] == [(7, "first"), (8, "first")]
    assert pks(seg.retrieve(20, lambda pk, f: pk == 8)) == [8]
    assert pks(seg.retrieve(20, limit=1)) == [7]


def test_a_filter_is_applied_before_the_newest_row_is_picked():
    """The filter is in the bitset find_first reads: a key's older row that passes it is returned, the newer one
    that fails it is not."""
    seg = GrowingSegment(1)
    seg.insert([Row(7, 10, fields={"v": 1}), Row(7, 20, fields={"v": 2})])
    old = seg.retrieve(20, lambda pk, f: f["v"] == 1)
    assert [(r.pk, r.ts) for r in old] == [(7, 10)]


def test_a_sealed_segment_gives_every_visible_row_and_its_limit_counts_rows():
    """``OffsetOrderedArray::find_first``: every visible row in (key, offset) order; a limit of 2 is used up by
    the two copies of 7, so the merge returns 7 alone (Milvus 2.5 counts a sealed segment's limit before the
    merge removes duplicates)."""
    seg = SealedSegment(2, ROWS)
    assert [(r.pk, r.payload) for r in seg.retrieve(20)] == [(7, "first"), (7, "second"), (8, "first")]
    assert [(r.pk, r.payload) for r in merge_segcore_retrieve_results([seg.retrieve(20)])] == [
        (7, "second"), (8, "first")]
    assert pks(merge_segcore_retrieve_results([seg.retrieve(20, limit=2)], 2)) == [7]


def test_the_delegator_returns_one_row_per_key_from_sealed_and_growing():
    d = ShardDelegator("v0", start_ts=0)
    d.load_sealed(2, ROWS[:2])
    d.insert(3, [ROWS[2]])
    assert [(r.pk, r.payload) for r in d.read(20)] == [(7, "second"), (8, "first")]
    assert [(r.pk, r.payload) for r in d.read(15)] == [(7, "first"), (8, "first")]


# --- the workload, on the simulated cluster -------------------------------------------------------


def _strong_query(at, label, flt):
    return {"at": at, "client": "c", "op": "query", "collection": "X", "filter": flt,
            "consistency_level": "Strong", "label": label}


DUP_STEPS = [
    {"at": 0.5, "client": "c", "op": "create_collection", "collection": "X"},
    {"at": 1.0, "client": "c", "op": "insert", "collection": "X", "data": [{"id": 7, "v": 1}, {"id": 8, "v": 1}]},
    {"at": 1.2, "client": "c", "op": "insert", "collection": "X", "data": [{"id": 7, "v": 2}]},
    _strong_query(1.5, "growing 7,8,9", "id in [7, 8, 9]"),
    _strong_query(1.5, "growing 8", "id in [8]"),
    _strong_query(1.5, "growing v == 1", "v == 1"),
    {"at": 2.0, "client": "c", "op": "flush", "collection": "X"},
    _strong_query(3.0, "sealed 7,8,9", "id in [7, 8, 9]"),
    _strong_query(3.0, "sealed 8", "id in [8]"),
    _strong_query(3.0, "sealed v == 2", "v == 2"),
]


def test_a_key_inserted_twice_is_returned_once_growing_and_sealed():
    """Milvus 2.5 answers [7, 8] and [8] whether the rows are in a growing or, after the flush, a sealed segment
    (Milvus 2.3.5's growing segment answered [7] alone: see book/quirks.md). The filter on ``v`` reads every row
    of 7, so ``v == 1`` still finds the first 7 and ``v == 2`` the second."""
    run = milvus_edu.simulate("workload", seed=1, options={"steps": DUP_STEPS})
    frame = reads(run.events)
    got = dict(zip(frame["label"], frame["rows"].map(list)))
    assert got == {"growing 7,8,9": [7, 8], "growing 8": [8], "growing v == 1": [7, 8],
                   "sealed 7,8,9": [7, 8], "sealed 8": [8], "sealed v == 2": [7]}
    loads = run.events[run.events["kind"] == "querynode.load"]
    assert int(loads["count"].sum()) == 3  # the sealed segment holds all three rows
    assert run.summary["checks"]["ok"], run.summary["checks"]["violations"][:1]


def test_the_merge_hides_update_tsafe_before_delete_in_the_reorder_scenario():
    """insert A, delete A, insert A in one pack: with the switch, a read woken before the delete lands sees both
    copies of A; the merge returns one, the second insert's, which is the right answer, so no check fails — the
    switch shows in delete-then-read instead, where the deleted key has no newer copy."""
    run = milvus_edu.simulate("insert-delete-reorder", seed=1, switches="update_tsafe_before_delete")
    assert all(list(r) == ["A", "B"] for r in reads(run.events)["rows"])
    assert run.summary["checks"]["ok"]
    seed = milvus_edu.simulate("delete-then-read", seed=1, switches="update_tsafe_before_delete")
    assert seed.summary["checks"]["violation_counts"]["mvcc-exact"] > 0
