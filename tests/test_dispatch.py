"""One dispatcher feeds the checkers and summaries rows or batches, and both give the same report.

A checker or summary declares a handler per kind (``milvus_edu.events.dispatch.on``); ``write(row)`` (what
``check_frame`` uses on DataFrames) and ``write_batch(batch)`` (what the recorder uses, reading the declared
columns straight from the batch's tuples) are the dispatcher's. These tests feed the same batches both ways
and compare everything a run reports: the violations (in the order they were found, and as ``result()``
sorts them), the counts per invariant, the summary sections (as JSON text, so an int that became a float
would show), and the whole internal state.

The batches come from real runs of scenarios that break invariants (bug switches) and of clean ones,
cut at 300 rows so kinds interleave across layouts and batches; and from random event streams
(hypothesis) with odd values (bools, floats, None) that send a layout down the row-dict fallback.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import milvus_edu  # noqa: F401  (registers the mechanisms' kinds and scenarios)
from milvus_edu.mechanisms.flush.check import FlushChecker
from milvus_edu.mechanisms.query.check import QueryChecker
from milvus_edu.mechanisms.timetick.check import TimeTickChecker
from milvus_edu.mechanisms.tso.check import TSOChecker
from milvus_edu.events import MemorySink, Recorder
from milvus_edu.events.dispatch import Dispatch, on
from milvus_edu.events.recorder import RowBatch
from milvus_edu.events.schema import detail_object
from milvus_edu.mechanisms.flush.summary import FlushSummary
from milvus_edu.mechanisms.query.summary import QuerySummary
from milvus_edu.mechanisms.timetick.summary import TimeTickSummary
from milvus_edu.mechanisms.tso.summary import TSOSummary
from test_recorder_fast import BatchGrabber
from test_recorder_fast import _run as _record_run

CHECKERS = [TimeTickChecker, TSOChecker, FlushChecker, QueryChecker]
SUMMARIES = [TimeTickSummary, TSOSummary, FlushSummary, QuerySummary]

#: (scenario, switches, simulated ms, invariant the readable checker must find broken, or None for a clean run)
RUNS = [
    ("timetick-basics", [], 3_000.0, None),
    ("timetick-unlocked-enqueue", ["allocate_outside_enqueue_lock"], 5_000.0, "watermark"),
    ("timetick-proxy-stall", [], 8_000.0, None),
    ("tso-failover", [], 80_000.0, None),
    ("tso-failover", ["tso_skip_load_on_init"], 80_000.0, "global-monotonic"),
    ("tso-basics", ["tso_no_window_save"], 10_000.0, "window"),
    ("flush-basics", [], 40_000.0, None),
    ("flush-ts-slow-store", ["reset_flush_ts_inclusive", "checkpoint_ignores_syncing_segments"], 40_000.0,
     "flush-durable"),
    ("flush-stuck-memory-sync", [], 80_000.0, "flush-completes"),
    ("checkpoint-during-sync", ["checkpoint_ignores_syncing_segments"], 70_000.0, "checkpoint-safe"),
    ("checkpoint-rpc-lost", ["drop_failed_checkpoint_tasks"], 40_000.0, "checkpoint-retried"),
    ("insert-then-search", [], 8_000.0, None),
    ("insert-then-search", ["session_uses_zero_ts"], 8_000.0, "session-sees-own"),
    ("seed-example", ["skip_wait_tsafe"], 8_000.0, "read-after-guarantee"),
    ("delete-then-read", ["update_tsafe_before_delete"], 3_000.0, "mvcc-exact"),
]


def _run(scenario: str, switches: list[str], until_ms: float, batch_rows: int = 300,
         row_sink: bool = False) -> tuple[list[RowBatch], dict]:
    """The batches of a run (and its event counts), built by ``tests/test_recorder_fast.py``'s ``_run``.

    With ``row_sink`` a MemorySink listens too: the recorder then hands the batches the row dicts it built.
    """
    grabber = BatchGrabber()
    recorder = _record_run(scenario, switches, until_ms, [grabber] + ([MemorySink()] if row_sink else []), batch_rows)
    return grabber.batches, recorder.counts


def _batched(cls, batches: list[RowBatch]):
    sink = cls()
    for batch in batches:
        sink.write_batch(batch)
    sink.close()
    return sink


def _rows(cls, batches: list[RowBatch]):
    sink = cls()
    for batch in batches:
        for row in batch.rows(cls.kinds):
            sink.write(row)
    sink.close()
    return sink


def _assert_same(fast, slow, counts: dict) -> None:
    """Everything the two sinks report, and their whole state, are equal."""
    if hasattr(slow, "result"):
        assert fast.violations == slow.violations  # found in the same order
        assert fast.result() == slow.result()
        assert fast.counts == slow.counts
        assert fast.tried == slow.tried and fast.vacuous() == slow.vacuous()  # what the run tested
        assert json.dumps(fast.stalls) == json.dumps(slow.stalls)  # the stalls explained, as the summary has them
        assert json.dumps([v.to_dict() for v in fast.result()]) == json.dumps([v.to_dict() for v in slow.result()])
    else:
        assert json.dumps(fast.sections(counts), sort_keys=True) == json.dumps(slow.sections(counts), sort_keys=True)
    assert vars(fast) == vars(slow)


@pytest.mark.slow
@pytest.mark.parametrize("scenario,switches,until_ms,broken", RUNS)
def test_batches_report_what_rows_report_on_real_runs(scenario, switches, until_ms, broken):
    batches, counts = _run(scenario, switches, until_ms)
    assert len(batches) > 1
    for cls in CHECKERS + SUMMARIES:
        slow = _rows(cls, batches)
        _assert_same(_batched(cls, batches), slow, counts)
        if broken is not None and broken in getattr(slow, "counts", {}):
            assert slow.counts[broken] > 0  # the comparison covers violations, not only clean runs


def test_batches_equal_rows_when_the_recorder_built_the_row_dicts():
    batches, counts = _run("timetick-unlocked-enqueue", ["allocate_outside_enqueue_lock"], 5_000.0, row_sink=True)
    assert any(batch._rows for batch in batches)  # the recorder handed over its row dicts
    for cls in CHECKERS + SUMMARIES:
        _assert_same(_batched(cls, batches), _rows(cls, batches), counts)


def test_the_recorder_batch_size_does_not_change_what_the_sinks_report():
    reports = []
    for batch_rows in (1, 333, 8192):
        batches, counts = _run("timetick-unlocked-enqueue", ["allocate_outside_enqueue_lock"], 2_000.0, batch_rows)
        reports.append([(vars(_batched(cls, batches))) for cls in CHECKERS + SUMMARIES])
    assert reports[0] == reports[1] == reports[2]


def test_the_timetick_and_tso_sinks_read_batches_without_row_dicts():
    batches, _ = _run("timetick-basics", [], 2_000.0)
    for cls in (TimeTickChecker, TSOChecker, TimeTickSummary, TSOSummary):
        _batched(cls, batches)
    assert all(not batch._rows for batch in batches)


def _stream(emits: list[tuple[str, str, dict]], batch_rows: int) -> list[RowBatch]:
    grabber = BatchGrabber()
    recorder = Recorder("made", sinks=[grabber], batch_rows=batch_rows)
    for kind, node, fields in emits:
        recorder.emit(kind, node, **fields)
    recorder.close()
    return grabber.batches


@pytest.mark.parametrize("batch_rows", [1, 3, 100])
def test_an_enqueue_is_late_exactly_when_its_proxys_latest_report_is_at_or_above_its_ts(batch_rows):
    ch = "by-dev-rootcoord-dml_0"
    batches = _stream([
        ("proxy.enqueue", "proxy-1", {"ts": 1, "channel": ch}),  # no report yet
        ("proxy.report", "proxy-1", {"ts": 5, "detail": {"channels": {ch: 7}}}),
        ("proxy.enqueue", "proxy-1", {"ts": 7, "channel": ch}),  # at the reported value: late
        ("proxy.enqueue", "proxy-1", {"ts": 8, "channel": ch}),  # above it
        ("proxy.enqueue", "proxy-1", {"ts": 5, "channel": "other"}),  # the report's default covers other pchannels
        ("proxy.enqueue", "proxy-2", {"ts": 2, "channel": ch}),  # another proxy's report does not count
        ("proxy.report", "proxy-1", {"ts": 3}),  # replaces the first
        ("proxy.enqueue", "proxy-1", {"ts": 6, "channel": ch}),
        ("proxy.enqueue", "proxy-1", {"ts": 3, "channel": ch}),
        ("mq.produce", "rootcoord-1", {"channel": ch, "msg_type": "TimeTick", "tick_ts": 9}),
        ("mq.produce", "proxy-1", {"channel": ch, "msg_type": "Insert", "end_ts": 7, "msg_id": 1}),
    ], batch_rows)
    slow = _rows(TimeTickChecker, batches)
    assert sorted(slow._late) == [("proxy-1", 3, ch), ("proxy-1", 5, "other"), ("proxy-1", 7, ch)]
    assert [len(v.seqs) for v in slow.violations] == [4]  # the broken watermark names the late enqueue
    _assert_same(_batched(TimeTickChecker, batches), slow, {})


# ---- the dispatcher on hand-made batches

def _batch_of(emits: list[tuple[str, str, dict]], batch_rows: int | None = None) -> list[RowBatch]:
    grabber = BatchGrabber()
    recorder = Recorder("odd", sinks=[grabber], batch_rows=batch_rows or max(1, len(emits)))
    for kind, node, fields in emits:
        recorder.emit(kind, node, **fields)
    recorder.close()
    return grabber.batches


class _Calls(Dispatch):
    """Notes every handler call."""

    def __init__(self):
        self.calls = []

    @on("mq.produce", columns=("channel", "tick_ts", "end_ts"))
    def _produce(self, seq, *values):
        self.calls.append(("produce", seq, values))

    @on("mq.consume", columns=("ts", "msg_id"), ints=("ts", "msg_id"))
    def _consume(self, seq, *values):
        self.calls.append(("consume", seq, values))

    @on("mq.pack", "querynode.load")
    def _row(self, row):
        self.calls.append(("row", row["seq"], row["kind"]))

    @on("querynode.pack", columns=())
    def _count(self, seq):
        self.calls.append(("count", seq, ()))


def test_a_sink_reads_the_kinds_it_declares():
    assert _Calls.kinds == {"mq.produce", "mq.consume", "mq.pack", "querynode.load", "querynode.pack"}
    assert _Calls.handlers["mq.consume"].ints == ("ts", "msg_id")


def test_the_dispatcher_calls_handlers_in_seq_order_and_reads_a_missing_column_as_none():
    emits = [
        ("mq.produce", "p", {"channel": "c", "msg_type": "Insert", "end_ts": 5}),
        ("mq.consume", "q", {"vchannel": "v", "msg_id": 1, "ts": 2}),
        ("mq.produce", "p", {"msg_type": "TimeTick", "tick_ts": 7, "channel": "c"}),
        ("mq.pack", "q", {"vchannel": "v", "begin_ts": 1, "end_ts": 7}),
        ("querynode.pack", "q", {}),
        ("proxy.report", "p", {"ts": 3}),
        ("mq.produce", "p", {"channel": "d", "msg_type": "Insert", "end_ts": 6}),
    ]
    (batch,) = _batch_of(emits)
    sink = _Calls()
    sink.write_batch(batch)
    expected = [("produce", 0, ("c", None, 5)), ("consume", 1, (2, 1)), ("produce", 2, ("c", 7, None)),
                ("row", 3, "mq.pack"), ("count", 4, ()), ("produce", 6, ("d", None, 6))]
    assert sink.calls == expected
    rows = _Calls()
    for row in batch.rows():
        rows.write(row)
    assert rows.calls == expected


def test_a_group_whose_ints_are_not_all_ints_is_read_as_rows_and_converted():
    (batch,) = _batch_of([("mq.consume", "q", {"vchannel": "v", "msg_id": 1, "ts": 2}),
                          ("mq.consume", "q", {"vchannel": "v", "msg_id": 1, "ts": 2.0}),
                          ("mq.consume", "q", {"ts": 5, "vchannel": "v", "msg_id": True}),
                          ("mq.consume", "q", {"vchannel": "v", "msg_id": 1, "ts": None})])
    sink = _Calls()
    sink.write_batch(batch)
    assert sink.calls == [("consume", 0, (2, 1)), ("consume", 1, (2, 1)), ("consume", 2, (5, 1)),
                          ("consume", 3, (None, 1))]
    assert all(type(value) is int for _, _, values in sink.calls[:3] for value in values)


class _Folds(Dispatch):
    """Notes every fold call."""

    def __init__(self):
        self.calls = []

    @on("mq.consume", columns=("ts", "vchannel"), ints=("ts",), fold=True)
    def _consumed(self, seqs, tss, vchannels):
        self.calls.append((seqs, tss, vchannels))


def test_a_fold_handler_gets_its_kinds_columns_in_seq_order_across_layouts_and_rows_as_lists_of_one():
    emits = [("mq.consume", "q", {"vchannel": "v", "msg_id": 1, "ts": 2}),
             ("mq.produce", "p", {"channel": "c", "msg_type": "Insert", "end_ts": 5}),
             ("mq.consume", "q", {"ts": 4, "msg_id": 2}),  # another layout, without a vchannel
             ("mq.consume", "q", {"vchannel": "w", "msg_id": 3, "ts": 6.0})]  # a float: converted as write does
    (batch,) = _batch_of(emits)
    sink = _Folds()
    sink.write_batch(batch)
    assert sink.calls == [([0, 2, 3], [2, 4, 6], ["v", None, "w"])]
    assert type(sink.calls[0][1][2]) is int
    rows = _Folds()
    for row in batch.rows():
        rows.write(row)
    assert rows.calls == [([0], [2], ["v"]), ([2], [4], [None]), ([3], [6], ["w"])]


def test_a_fold_handler_must_take_columns():
    with pytest.raises(ValueError, match="fold handler takes columns"):
        on("mq.pack", fold=True)


class _Details(Dispatch):
    """Notes the detail objects it is handed, row by row and folded."""

    def __init__(self):
        self.seen, self.folded = [], []

    @on("proxy.report", columns=("node", "detail"), objects=("detail",))
    def _report(self, seq, node, detail):
        self.seen.append((seq, node, detail))

    @on("fault.stall", columns=("detail",), fold=True, objects=("detail",))
    def _stalls(self, seqs, details):
        self.folded.extend(details)


def test_object_columns_come_decoded_once_per_batch_and_shared_by_every_sink():
    report = {"channels": {"c0": 5}}
    emits = [("proxy.report", "p1", {"ts": 1, "detail": report}),
             ("proxy.report", "p2", {"ts": 2, "detail": report}),  # the same text
             ("proxy.report", "p1", {"ts": 3}),  # a layout without detail
             ("proxy.report", "p1", {"ts": 4, "detail": None}),
             ("fault.stall", "p1", {"detail": {"duration_ms": 9}})]
    (batch,) = _batch_of(emits)
    one, two = _Details(), _Details()
    one.write_batch(batch)
    two.write_batch(batch)
    assert [(seq, node, d) for seq, node, d in one.seen] == [(0, "p1", report), (1, "p2", report), (2, "p1", {}),
                                                             (3, "p1", {})]
    assert one.seen[0][2] is one.seen[1][2] is two.seen[0][2]  # decoded once, for both sinks
    assert one.folded == [{"duration_ms": 9}]
    rows = _Details()
    for row in batch.rows():
        rows.write(row)
    assert rows.seen == one.seen and rows.folded == one.folded


@pytest.mark.parametrize("options, message", [
    ({"columns": ("ts",), "objects": ("detail",)}, "objects"),
    ({"objects": ("detail",)}, "objects"),
    ({"columns": ("detail",), "ints": ("detail",), "objects": ("detail",)}, "either an int or an object"),
])
def test_object_columns_must_be_declared_columns_and_not_ints(options, message):
    with pytest.raises(ValueError, match=message):
        on("proxy.report", **options)


@pytest.mark.slow
def test_no_checker_or_summary_changes_the_detail_objects_it_shares():
    """The sinks of a batch share its decoded details: after every checker and summary read real runs' batches,
    each object still equals a fresh decoding of its text."""
    shared = 0
    for scenario, switches, until_ms in (("insert-then-search", [], 8_000.0), ("timetick-proxy-stall", [], 8_000.0),
                                         ("flush-manual", [], 20_000.0)):
        batches, _ = _run(scenario, switches, until_ms, batch_rows=2048)
        for cls in CHECKERS + SUMMARIES:
            _batched(cls, batches)
        for batch in batches:
            for (layout, name), objects in batch._objects.items():
                texts = [values[layout.positions[name]] for values in batch.groups[layout]]
                assert objects == [detail_object(text) for text in texts], (scenario, layout.kind)
                shared += len(objects)
    assert shared > 1_000


# ---- random event streams

_NODES = st.sampled_from(["proxy-1", "proxy-2", "rootcoord-1"])
_CHANNELS = st.sampled_from(["by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"])
_VCHANNELS = st.sampled_from(["by-dev-rootcoord-dml_0_100v0", "by-dev-rootcoord-dml_1_100v1"])
_INT = st.integers(0, 6)
#: Mostly small ints (so reports, ticks and messages collide); now and then a value ``int()`` would change.
_NUM = st.one_of(_INT, _INT, _INT, _INT, _INT, st.sampled_from([True, 3.0, 2.5]))
_PKS = st.lists(st.integers(0, 5), max_size=3)


def _fields(**columns) -> st.SearchStrategy[dict]:
    """A dict of the required columns (strategies), then optional ones (``name=(strategy, optional)``) in a
    shuffled order: another order or another set of names is another layout."""
    required = {k: v for k, v in columns.items() if not isinstance(v, tuple)}
    optional = {k: v[0] for k, v in columns.items() if isinstance(v, tuple)}
    return st.tuples(st.fixed_dictionaries(required, optional=optional), st.randoms(use_true_random=False)).map(
        lambda pair: dict(sorted(pair[0].items(), key=lambda _: pair[1].random())))


_EVENTS = st.one_of(
    st.tuples(st.just("proxy.enqueue"), _NODES, _fields(ts=_NUM, channel=_CHANNELS, count=(_INT, True))),
    st.tuples(st.just("proxy.report"), _NODES, _fields(
        ts=_NUM, detail=st.one_of(st.none(), st.builds(lambda chs: {"channels": chs},
                                                        st.dictionaries(_CHANNELS, _INT, max_size=2))))),
    st.tuples(st.just("mq.produce"), _NODES, _fields(
        msg_type=st.sampled_from(["Insert", "Delete", "TimeTick", "CreateCollection"]), channel=_CHANNELS,
        vchannel=(st.one_of(st.none(), _VCHANNELS), True), msg_id=_NUM, end_ts=_NUM, tick_ts=_NUM, ts=_NUM,
        count=_INT, segment=(st.one_of(st.none(), st.integers(1, 3)), True),
        detail=(st.one_of(st.builds(lambda pks: {"pks": pks}, _PKS), st.just({"min_from": "proxy-1"})), True))),
    st.tuples(st.just("mq.consume"), _NODES, _fields(vchannel=_VCHANNELS, msg_id=_NUM, ts=_NUM,
                                                     tick_ts=(_INT, True))),
    st.tuples(st.just("mq.pack"), _NODES, _fields(vchannel=_VCHANNELS, begin_ts=_NUM, end_ts=_NUM,
                                                  count=(_INT, True))),
    st.tuples(st.just("rootcoord.timetick_update"), _NODES, _fields(
        detail=st.one_of(st.none(), st.builds(lambda sent: {"sent": sent}, st.booleans()), st.just('{"sent":true}'),
                         st.builds(lambda names: {"sent": False, "waiting_for": names},
                                   st.lists(_NODES, max_size=2))))),
    st.tuples(st.just("rootcoord.session_del"), _NODES, _fields(peer=_NODES)),
    st.tuples(st.just("fault.stall"), _NODES, _fields(detail=st.builds(lambda ms: {"duration_ms": ms},
                                                                       st.sampled_from([0.0, 1.0, 3.0])))),
    st.tuples(st.just("run.end"), st.just("sim"), st.just({})),
    st.tuples(st.just("querynode.watch"), _NODES, _fields(vchannel=_VCHANNELS, channel=_CHANNELS, ts=_INT)),
    st.tuples(st.just("client.read_start"), _NODES, _fields(request=st.integers(1, 3),
                                                            level=(st.sampled_from(["Strong", "Session"]), True))),
    st.tuples(st.just("client.read"), _NODES, _fields(request=st.integers(1, 3), error=st.just("x"))),
    st.tuples(st.just("rootcoord.alloc_timestamp"), _NODES, _fields(
        ts=_NUM, count=st.integers(1, 3), error=(st.one_of(st.none(), st.just("x")), True))),
    st.tuples(st.just("client.recv"), _NODES, _fields(ts=st.one_of(st.none(), _NUM), peer=(_NODES, True))),
    st.tuples(st.just("tso.alloc"), _NODES, _fields(ts=_NUM, physical_ms=_NUM,
                                                    window_end_ms=(st.one_of(st.none(), _NUM), True))),
    st.tuples(st.sampled_from(["fault.kill", "fault.pause", "session.keepalive", "session.active"]), _NODES,
              st.just({})),
    st.tuples(st.sampled_from(["client.insert", "client.delete"]), _NODES, _fields(
        ts=_INT, count=_NUM, detail=st.builds(lambda pks: {"pks": pks}, _PKS),
        error=(st.one_of(st.none(), st.just("x")), True))),
    st.tuples(st.just("datacoord.save_binlog_paths"), _NODES, _fields(segment=st.integers(1, 3), ts=_INT)),
    st.tuples(st.just("datacoord.channel_cp"), _NODES, _fields(
        vchannel=_VCHANNELS, ts=_INT, detail=st.builds(lambda saved: {"saved": saved}, st.booleans()))),
    st.tuples(st.just("querynode.tsafe"), _NODES, _fields(vchannel=_VCHANNELS, ts=_NUM)),
    st.tuples(st.just("querynode.wait"), _NODES, _fields(level=st.sampled_from(["Strong", "Bounded"]),
                                                         request=(st.integers(1, 3), True), vchannel=(_VCHANNELS, True),
                                                         guarantee_ts=(_INT, True))),
    st.tuples(st.sampled_from(["querynode.pack", "querynode.load"]), _NODES, st.just({})),
    st.tuples(st.just("querynode.read"), _NODES, _fields(
        level=st.sampled_from(["Strong", "Bounded"]), error=st.just("x"),
        detail=st.builds(lambda ms: {"waited_ms": ms}, st.one_of(st.none(), st.floats(0, 100))))),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_EVENTS, max_size=80), st.integers(1, 30))
def test_batches_equal_rows_on_any_event_stream(events, batch_rows):
    # keep t_ms moving, so a summary's gaps and "after the kill" differ between events
    grabber = BatchGrabber()
    clock = iter(range(10**6))
    recorder = Recorder("random", now_ms=lambda: float(next(clock) // 2), sinks=[grabber], batch_rows=batch_rows)
    for kind, node, fields in events:
        recorder.emit(kind, node, **fields)
    recorder.close()
    for cls in CHECKERS + SUMMARIES:
        _assert_same(_batched(cls, grabber.batches), _rows(cls, grabber.batches), recorder.counts)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_EVENTS, max_size=80), st.integers(1, 30), st.sampled_from([150.0, 400.0, 1200.0]))
def test_batches_equal_rows_when_time_passes_the_progress_bounds(events, batch_rows, step_ms):
    # events far apart in time: ticks, tsafe and reads wait longer than the 1 s progress bounds, stalls are explained
    grabber = BatchGrabber()
    clock = iter(range(10**6))
    recorder = Recorder("slow", now_ms=lambda: next(clock) * step_ms, sinks=[grabber], batch_rows=batch_rows)
    for kind, node, fields in events:
        recorder.emit(kind, node, **fields)
    recorder.close()
    for cls in (TimeTickChecker, QueryChecker):
        _assert_same(_batched(cls, grabber.batches), _rows(cls, grabber.batches), recorder.counts)
