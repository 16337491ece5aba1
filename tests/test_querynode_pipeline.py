"""The QueryNode's pipeline (filterNode -> insertNode -> deleteNode) and the delegator's exclusion info.

Ports of Milvus 2.5's ``internal/querynodev2/delegator/exclude_info_test.go`` (TestBasic, with an injected clock
instead of a sleep), ``internal/querynodev2/pipeline/filter_node_test.go`` (TestWithLoadCollection,
TestWithLoadPartation), ``insert_node_test.go`` (TestBasic), ``delete_node_test.go`` (TestBasic) and
``pipeline_test.go`` (TestBasic). There are no mocks here: every node drives a real :class:`ShardDelegator`, and the
tests assert on what it then serves. Beyond the Go cases: the pack's time range, exclusion cleaning only when the
clean interval has passed, the insert sort, tsafe published after the deletes (and the window the
``update_tsafe_before_delete`` switch opens), the design documents' insert A -> delete A -> insert A in one pack, buffered
deletes applied to a loaded sealed segment, the growing copy released by ``sync_target_version``; hypothesis
checks that the rows visible at tsafe after every pack equal a brute-force MVCC definition, and that a read returns
of them the newest per key, as 2.5's ``find_first`` and ``MergeSegcoreRetrieveResults`` do.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from milvus_edu.mq.msg import CreateCollectionMsg, DeleteMsg, InsertMsg, MsgPack, TimeTickMsg
from milvus_edu.proto import MsgType
from milvus_edu.querynode import (DeleteNode, ExcludedSegments, GrowingSegment, InsertNode, PackResult,
                                  Pipeline, Row, ShardDelegator, TimeRange)
from milvus_edu.querynode.pipeline import InsertNodeMsg
from milvus_edu.tsoutil import compose_ts

MS = 1_767_225_600_000
COLL, CH, PARTS = 111, "by-dev-rootcoord-dml_0_111v0", (11, 22)
S = 1_000_000_000


def ts(ms: int, logical: int = 0) -> int:
    return compose_ts(MS + ms, logical)


def ins(segment: int, pks, tss, collection: int = COLL, partition: int = PARTS[0]) -> InsertMsg:
    return InsertMsg(shard_name=CH, collection_id=collection, partition_id=partition, segment_id=segment,
                     pks=tuple(pks), timestamps=tuple(tss))


def dele(pks, tss, collection: int = COLL, partition: int = PARTS[0]) -> DeleteMsg:
    return DeleteMsg(shard_name=CH, collection_id=collection, partition_id=partition, pks=tuple(pks),
                     timestamps=tuple(tss))


def raw(kind: str, pks, tss, segment: int = 7):
    """A message our constructors refuse to build (empty or misaligned), as the filter may still receive one."""
    return SimpleNamespace(msg_type=kind, collection_id=COLL, segment_id=segment, pks=tuple(pks),
                           timestamps=tuple(tss), end_ts=lambda: max(tss))


class Clock:
    """A mutable fake wall clock (nanoseconds)."""

    def __init__(self, now: int = 1_000 * S):
        self.now = now

    def __call__(self) -> int:
        return self.now


def rows(d: ShardDelegator, at: int) -> list[tuple]:
    """What a query at ``at`` returns: one row per key, the newest (2.5's ``find_first`` and
    ``MergeSegcoreRetrieveResults``)."""
    return [(r.pk, r.ts) for r in d.read(at)]


def stored(d: ShardDelegator, at: int) -> list[tuple]:
    """Every row visible at ``at`` in every segment, copies of a key included (what ``count(*)`` counts)."""
    segments = [*d.sealed.values(), *d.growing.values()]
    return sorted((r.pk, r.ts) for s in segments for r in s.visible(at))


def new_pipeline(clock=None, switch: bool = False) -> Pipeline:
    d = ShardDelegator(CH, start_ts=ts(0), clean_exclude_interval_ns=60 * S, now_ns=clock or Clock())
    return Pipeline(COLL, CH, d, update_tsafe_before_delete=switch)


# --- exclude_info ----------------------------------------------------------------------------------

def test_exclude_info_basic_verify_then_clean_after_the_interval():
    """exclude_info_test.go TestBasic, the sleep replaced by moving a fake clock."""
    clock = Clock()
    ex = ExcludedSegments(clean_interval_ns=1 * S, now_ns=clock)
    ex.insert({1: 3})
    assert ex.verify(1, 1) is False and ex.verify(1, 3) is False and ex.verify(1, 4) is True
    assert ex.verify(2, 1) is True  # a segment never excluded
    assert ex.should_clean()  # never cleaned: the zero time is long ago
    assert ex.clean_invalid(3) == [] and ex.segments == {1: 3}  # only excludeTs < ts goes
    assert not ex.should_clean()
    clock.now += 1 * S
    assert not ex.should_clean()  # exactly the interval is not more than it
    clock.now += 1
    assert ex.should_clean()
    assert ex.clean_invalid(5) == [1] and ex.segments == {}
    assert ex.verify(1, 1) and ex.verify(1, 4)


def test_a_later_exclusion_replaces_an_earlier_one_even_with_a_smaller_ts():
    ex = ExcludedSegments(now_ns=Clock())
    ex.insert({1: 10, 2: 4})
    ex.insert({1: 5})
    assert ex.segments == {1: 5, 2: 4}
    assert ex.verify(1, 7) and not ex.verify(1, 5) and not ex.verify(2, 4)


# --- filterNode ------------------------------------------------------------------------------------

def go_filter_pack():
    """filter_node_test.go buildMsgPack, with timestamps: valid inserts of segments 3..6 over both partitions, four
    deletes, excluded segments 1 and 2 (exclude ts T1; their inserts end at T1 and T2), an empty insert and delete,
    an insert and a delete of another collection, a misaligned insert and delete."""
    t1, t2 = ts(1), ts(2)
    msgs = [ins(s, [s], [t1], partition=PARTS[s % 2]) for s in (3, 4, 5, 6)]
    msgs += [dele([i], [t1], partition=PARTS[i % 2]) for i in range(4)]
    msgs += [ins(1, [1], [t1]), ins(2, [2], [t2], partition=PARTS[0])]
    msgs += [raw(MsgType.INSERT, [], [], segment=7), raw(MsgType.DELETE, [], [])]
    msgs += [ins(0, [9], [t1], collection=COLL + 1), dele([9], [t1], collection=COLL + 1)]
    msgs += [raw(MsgType.INSERT, [1], [], segment=7), raw(MsgType.DELETE, [1], [t1, t1])]
    return MsgPack(begin_ts=ts(0), end_ts=ts(3), msgs=tuple(msgs))


@pytest.mark.parametrize("loaded_partitions", [PARTS, PARTS[:1]], ids=["load_collection", "load_partition"])
def test_filter_node_keeps_valid_inserts_and_deletes(loaded_partitions):
    """filter_node_test.go TestWithLoadCollection / TestWithLoadPartation: the same messages pass either way (every
    growing row is kept in memory whatever partitions are loaded; the model has no partition filter at all)."""
    p = new_pipeline()
    p.delegator.add_excluded_segments({1: ts(1), 2: ts(1)})
    out = p.filter_node.operate(go_filter_pack())
    assert sorted(m.segment_id for m in out.insert_msgs) == [2, 3, 4, 5, 6]
    assert len(out.delete_msgs) == 4
    assert out.time_range == TimeRange(ts(0), ts(3))
    reasons = [r for _, r in out.dropped]
    assert reasons == ["skip msg due to segment=1 has been excluded",
                       "the length of timestamp field is 0", "the length of timestamp field is 0",
                       "msg not target because of collection", "msg not target because of collection",
                       "the length of timestamps does not match the primary keys",
                       "the length of timestamps does not match the primary keys"]


def test_filter_node_ignores_time_ticks_and_ddl_and_cleans_exclusions_only_every_interval():
    clock = Clock()
    p = new_pipeline(clock)
    d = p.delegator
    d.add_excluded_segments({1: ts(5), 2: ts(50)})
    pack = MsgPack(begin_ts=ts(0), end_ts=ts(10), msgs=(
        TimeTickMsg(timestamp=ts(4)), CreateCollectionMsg(timestamp=ts(4), collection_id=COLL), ins(3, [1], [ts(6)])))
    out = p.filter_node.operate(pack)
    assert [m.segment_id for m in out.insert_msgs] == [3] and out.delete_msgs == [] and out.dropped == []
    assert out.cleaned == [1] and d.excluded.segments == {2: ts(50)}  # first clean: cleaned with the pack's end ts
    later = MsgPack(begin_ts=ts(10), end_ts=ts(100), msgs=())
    clock.now += 30 * S
    assert p.filter_node.operate(later).cleaned == [] and d.excluded.segments == {2: ts(50)}  # too soon
    clock.now += 31 * S
    assert p.filter_node.operate(later).cleaned == [2] and d.excluded.segments == {}


def test_an_excluded_segments_insert_is_dropped_up_to_the_exclude_ts_and_then_refused_a_growing_copy():
    pack = MsgPack(begin_ts=ts(0), end_ts=ts(10), msgs=(ins(8, [1], [ts(5)]), ins(8, [2], [ts(6)])))
    p = new_pipeline()
    p.delegator.add_excluded_segments({8: ts(5)})
    assert p.delegator.try_clean_excluded_segments(ts(0)) == []  # a clean just happened: none falls due now
    res = p.operate(pack)
    assert [(m.segment_id, m.end_ts(), r) for m, r in res.dropped] == [
        (8, ts(5), "skip msg due to segment=8 has been excluded")]
    assert res.inserted == {8: 0} and res.cleaned == ()  # kept by the filter, yet ProcessInsert forbids the copy
    assert 8 not in p.delegator.growing and rows(p.delegator, ts(10)) == []
    # When the clean falls due on this very pack, the filterNode forgets the entry (5 < end 10) before the
    # insertNode runs, as Go's TryCleanExcludedSegments at the end of filterNode.Operate: the copy is created.
    p = new_pipeline()
    p.delegator.add_excluded_segments({8: ts(5)})
    res = p.operate(pack)
    assert len(res.dropped) == 1 and res.cleaned == (8,) and res.inserted == {8: 1}
    assert rows(p.delegator, ts(10)) == [(2, ts(6))]


# --- insertNode ------------------------------------------------------------------------------------

def test_insert_node_groups_rows_per_segment_and_passes_the_deletes_on():
    """insert_node_test.go TestBasic: segments 4 and 3, each message twice, and two deletes."""
    d = ShardDelegator(CH, start_ts=ts(0))
    msgs = [m for s in (4, 3) for m in [ins(s, [s], [ts(1)])] * 2]
    node_msg = InsertNodeMsg(insert_msgs=msgs, delete_msgs=[dele([1], [ts(1)]), dele([2], [ts(1)])],
                             time_range=TimeRange(0, 0))
    assert InsertNode(d).operate(node_msg) == {4: 2, 3: 2}
    assert sorted(d.growing) == [3, 4] and len(node_msg.delete_msgs) == 2
    # Each message is inserted twice, as 2.5's addInsertData appends it (no dedup on insert), but a query returns
    # each key once: find_first takes one row per key from each growing segment.
    assert stored(d, ts(1)) == [(3, ts(1)), (3, ts(1)), (4, ts(1)), (4, ts(1))]
    assert rows(d, ts(1)) == [(3, ts(1)), (4, ts(1))]


def test_insert_node_sorts_inserts_by_begin_ts_before_appending():
    late, early = ins(1, [2], [ts(20)]), ins(1, [1], [ts(10)])
    with pytest.raises(ValueError, match="insert rows in timestamp order"):  # why the sort matters
        seg = GrowingSegment(1)
        for m in (late, early):
            seg.insert([Row(pk, t) for pk, t in zip(m.pks, m.timestamps)])
    d = ShardDelegator(CH, start_ts=ts(0))
    assert InsertNode(d).operate(InsertNodeMsg(insert_msgs=[late, early])) == {1: 2}
    assert [(r.pk, r.ts) for r in d.growing[1].record.rows] == [(1, ts(10)), (2, ts(20))]


# --- deleteNode and pipeline ------------------------------------------------------------------------

def test_delete_node_applies_every_delete_then_publishes_the_range_max():
    """delete_node_test.go TestBasic: deletes of pks 1..4 over two partitions, time range (0, max]."""
    d = ShardDelegator(CH, start_ts=ts(0))
    d.insert(1, [Row(pk, ts(1)) for pk in (1, 2, 3, 4, 5)])
    msg = InsertNodeMsg(delete_msgs=[dele([pk], [ts(2)], partition=PARTS[i % 2]) for i, pk in enumerate((1, 2, 3, 4))],
                        time_range=TimeRange(ts(0), ts(2)))
    node = DeleteNode(d)
    assert node.apply_deletes(msg) == (4, 4)
    assert d.delete_buffer == [(pk, ts(2)) for pk in (1, 2, 3, 4)]
    assert node.publish(msg) and d.get_tsafe() == ts(2)
    assert rows(d, ts(2)) == [(5, ts(1))] and len(rows(d, ts(1))) == 5


def test_pipeline_basic_result_fields():
    """pipeline_test.go TestBasic: inserts of segments 1..3, deletes of pks 1..3, UpdateTSafe(pack end)."""
    p = new_pipeline()
    msgs = [ins(s, [s], [ts(1)], partition=PARTS[i % 2]) for i, s in enumerate((1, 2, 3))]
    msgs += [dele([pk], [ts(2)], partition=PARTS[i % 2]) for i, pk in enumerate((1, 2, 3))]
    msgs.append(ins(9, [9], [ts(1)], collection=COLL + 1))
    res = p.operate(MsgPack(begin_ts=ts(0), end_ts=ts(3), msgs=tuple(msgs)))
    assert isinstance(res, PackResult) and res is p.last_result
    assert res.time_range == TimeRange(ts(0), ts(3)) and res.inserted == {1: 1, 2: 1, 3: 1}
    assert (res.deletes, res.hidden, res.tsafe_before, res.tsafe) == (3, 3, ts(0), ts(3))
    assert [r for _, r in res.dropped] == ["msg not target because of collection"] and res.cleaned == ()
    assert rows(p.delegator, ts(3)) == [] and len(rows(p.delegator, ts(1))) == 3


def test_tsafe_is_the_pack_end_after_every_pack_even_empty_and_never_goes_back():
    p = new_pipeline()
    first = p.operate(MsgPack(begin_ts=ts(0), end_ts=ts(10)))
    assert (first.inserted, first.deletes, first.tsafe_before, first.tsafe) == ({}, 0, ts(0), ts(10))
    older = p.operate(MsgPack(begin_ts=ts(0), end_ts=ts(5)))
    assert (older.tsafe_before, older.tsafe) == (ts(10), ts(10)) and p.delegator.get_tsafe() == ts(10)
    assert p.operate(MsgPack(begin_ts=ts(10), end_ts=ts(11))).tsafe == ts(11)


def test_deletes_are_applied_before_tsafe_is_published():
    p = new_pipeline()
    p.operate(MsgPack(begin_ts=ts(0), end_ts=ts(10), msgs=(ins(1, [1, 2], [ts(5), ts(5)]),)))
    steps = p.operate_steps(MsgPack(begin_ts=ts(10), end_ts=ts(20), msgs=(dele([1], [ts(15)]),)))
    assert list(steps) == []  # no window: exhausted without a yield
    assert p.last_result.hidden == 1 and p.delegator.get_tsafe() == ts(20)
    assert rows(p.delegator, ts(20)) == [(2, ts(5))]


def test_update_tsafe_before_delete_opens_a_window_where_tsafe_covers_an_unapplied_delete():
    p = new_pipeline(switch=True)
    p.operate(MsgPack(begin_ts=ts(0), end_ts=ts(10), msgs=(ins(1, [1, 2], [ts(5), ts(5)]),)))
    steps = p.operate_steps(MsgPack(begin_ts=ts(10), end_ts=ts(20), msgs=(dele([1], [ts(15)]),)))
    assert next(steps) == "tsafe published before deletes"
    assert p.delegator.get_tsafe() == ts(20)
    assert rows(p.delegator, ts(20)) == [(1, ts(5)), (2, ts(5))]  # deleted at 15 <= tsafe, still served
    with pytest.raises(StopIteration):
        next(steps)
    assert p.last_result.hidden == 1 and rows(p.delegator, ts(20)) == [(2, ts(5))]


def test_insert_delete_insert_of_one_pk_in_one_pack():
    """The design documents (book/seeds.md): insert A (t1), delete A (t2), insert A (t3) in one pack. Inserts go before deletes, and MVCC makes it
    right: the delete at t2 hides only the row inserted before it."""
    p = new_pipeline()
    t1, t2, t3 = ts(1), ts(2), ts(3)
    res = p.operate(MsgPack(begin_ts=ts(0), end_ts=ts(4), msgs=(ins(1, ["A"], [t1]), dele(["A"], [t2]),
                                                                  ins(1, ["A"], [t3]))))
    assert res.inserted == {1: 2} and (res.deletes, res.hidden) == (1, 1)
    d = p.delegator
    assert rows(d, t1) == [("A", t1)] and rows(d, t2) == [] and rows(d, t3) == [("A", t3)]
    assert rows(d, ts(4)) == [("A", t3)]


# --- delegator: sealed data, redundant growing ------------------------------------------------------

def test_load_sealed_applies_every_buffered_delete_respecting_timestamps():
    d = ShardDelegator(CH, start_ts=ts(0))
    d.process_delete([1, 2], [ts(20), ts(5)])  # nothing served yet: only buffered
    assert d.delete_buffer == [(1, ts(20)), (2, ts(5))]
    assert d.load_sealed(9, [Row(1, ts(10)), Row(2, ts(10)), Row(3, ts(10))]) == 1  # the delete of 2 is older
    assert rows(d, ts(15)) == [(1, ts(10)), (2, ts(10)), (3, ts(10))]
    assert rows(d, ts(30)) == [(2, ts(10)), (3, ts(10))]
    assert ShardDelegator(CH).load_sealed(9, [Row(1, 1)]) == 0  # nothing buffered


def test_sync_target_version_releases_the_growing_copy_and_the_filter_drops_its_replay():
    p = new_pipeline()
    d = p.delegator
    stream = (ins(7, [1], [ts(10)]), ins(7, [2], [ts(20)]))
    p.operate(MsgPack(begin_ts=ts(0), end_ts=ts(20), msgs=stream))
    d.process_delete([2], [ts(25)])  # a delete before the sealed copy is loaded
    d.load_sealed(7, [Row(1, ts(10)), Row(2, ts(10 + 10))])
    # Until the sync both copies are read (each segment retrieves the key), and MergeSegcoreRetrieveResults
    # returns each key once.
    both = [(1, ts(10)), (2, ts(20))]
    assert [[(r.pk, r.ts) for r in s.retrieve(ts(20))] for s in (d.growing[7], d.sealed[7])] == [both, both]
    assert stored(d, ts(20)) == [(1, ts(10)), (1, ts(10)), (2, ts(20)), (2, ts(20))]
    assert rows(d, ts(20)) == both and rows(d, ts(25)) == [(1, ts(10))]
    assert stored(d, ts(25)) == [(1, ts(10)), (1, ts(10))]
    d.add_excluded_segments({7: ts(20)})  # the checkpoint of the sealed copy (SyncDistribution: UpdateVersion)
    assert d.sync_target_version([7]) == [7] and 7 not in d.growing and d.sync_target_version([7]) == []
    assert d.sync_target_version([], dropped_in_target=[8]) == []
    replay = p.operate(MsgPack(begin_ts=ts(0), end_ts=ts(30), msgs=stream))  # e.g. a replay after a seek
    assert [r for _, r in replay.dropped] == ["skip msg due to segment=7 has been excluded"] * 2
    assert replay.inserted == {} and 7 not in d.growing
    assert stored(d, ts(20)) == rows(d, ts(20)) == both  # one copy left
    assert stored(d, ts(30)) == rows(d, ts(30)) == [(1, ts(10))]


# --- property: the pipeline serves MVCC ---------------------------------------------------------------

op = st.tuples(st.sampled_from(["insert", "delete"]), st.integers(0, 3), st.sampled_from([1, 2]))
packs = st.lists(st.lists(op, max_size=5), min_size=1, max_size=6)


def visible(msgs, at: int) -> list[tuple]:
    """Brute force: (pk, ts) is visible at T iff ts <= T and no delete of pk has ts < dts <= T. Every copy of a
    key is kept: Milvus does not deduplicate keys on insert."""
    deletes = [(pk, t) for kind, pk, _, t in msgs if kind == "delete"]
    return sorted((pk, t) for kind, pk, _, t in msgs
                  if kind == "insert" and t <= at and not any(dp == pk and t < dt <= at for dp, dt in deletes))


def newest_per_key(visible_rows: list[tuple]) -> list[tuple]:
    """What a query returns of the visible rows: one row per key, the largest timestamp (2.5's growing
    ``find_first`` takes a key's newest visible row, and ``MergeSegcoreRetrieveResults`` keeps the largest
    timestamp per key across segments). The ops' timestamps are distinct, so there is no tie to break."""
    newest: dict = {}
    for pk, t in visible_rows:
        newest[pk] = max(t, newest.get(pk, t))
    return sorted(newest.items())


@settings(max_examples=60, deadline=None)
@given(packs, st.randoms(use_true_random=False))
def test_a_read_at_tsafe_after_every_pack_equals_the_mvcc_definition(pack_ops, rnd):
    p = new_pipeline()
    seen: list[tuple] = []  # (kind, pk, segment, ts)
    cursor = 0
    for ops in pack_ops:
        this = [(kind, pk, seg, ts(cursor + i + 1)) for i, (kind, pk, seg) in enumerate(ops)]
        end = ts(cursor + len(ops) + 1)
        msgs = [ins(seg, [pk], [t]) if kind == "insert" else dele([pk], [t]) for kind, pk, seg, t in this]
        rnd.shuffle(msgs)  # the order of inserts inside a pack does not matter (the insertNode sorts them)...
        slots = [i for i, m in enumerate(msgs) if m.msg_type == MsgType.DELETE]
        for i, m in zip(slots, sorted((msgs[i] for i in slots), key=lambda m: m.end_ts())):
            msgs[i] = m  # ...deletes keep their ts order (a row takes the first delete recorded against it)
        res = p.operate(MsgPack(begin_ts=ts(cursor), end_ts=end, msgs=tuple(msgs)))
        seen += this
        cursor += len(ops) + 1
        assert res.tsafe == end == p.delegator.get_tsafe()
        assert stored(p.delegator, end) == visible(seen, end)
        assert rows(p.delegator, end) == newest_per_key(visible(seen, end))
    for *_, t in seen:
        assert stored(p.delegator, t) == visible(seen, t)
        assert rows(p.delegator, t) == newest_per_key(visible(seen, t))
