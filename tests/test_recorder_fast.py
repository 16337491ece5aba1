"""The recorder's fast path equals its readable one.

The file sinks encode the recorder's rows a batch and a column at a time (:class:`RowBatch`,
``write_batch``); ``json_line`` and ``arrow_table`` are the row-by-row definitions. These tests run
real scenarios through both paths and compare rows, tables and file bytes, and pin the pieces the
fast path relies on (float texts, the once-built JSON encoders, validation of each new layout).
"""

import json
import math
import struct

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu  # noqa: F401  (registers the mechanisms' kinds and scenarios)
from milvus_edu.config import BugSwitches, Config
from milvus_edu.events import (JsonlSink, MemorySink, ParquetSink, Recorder, arrow_schema, load_run, rows_to_frame,
                               table_to_frame)
from milvus_edu.events.fast import float_texts
from milvus_edu.events.recorder import KeptBatches, RowBatch, arrow_table, encode_detail, json_line
from milvus_edu.registry import get_scenario, scenario_options
from milvus_edu.sim.kernel import Simulation

#: (scenario, switches, simulated ms): failover, clock jumps, a bug switch, the TimeTick mechanism.
RUNS = [
    ("tso-basics", [], 10_000.0),
    ("tso-failover", [], 80_000.0),
    ("tso-failover", ["tso_skip_load_on_init"], 80_000.0),
    ("tso-clock-skew", [], 20_000.0),
    pytest.param("timetick-basics", [], 2_000.0, marks=pytest.mark.slow),  # 1.5-2.5 CPU s a test
]


class BatchGrabber:
    """A batch sink that keeps every batch it is handed."""

    def __init__(self):
        self.batches: list[RowBatch] = []

    def write_batch(self, batch: RowBatch) -> None:
        self.batches.append(batch)

    def write(self, row: dict) -> None:
        raise AssertionError("a batch sink is never handed single rows")

    def close(self) -> None:
        pass


class RowByRow:
    """Hides a file sink's ``write_batch``, so the recorder hands it rows one at a time (the readable path)."""

    def __init__(self, sink):
        self.write = sink.write
        self.close = sink.close


def _run(scenario: str, switches: list[str], until_ms: float, sinks: list, batch_rows: int = 1000) -> Recorder:
    spec = get_scenario(scenario)
    recorder = Recorder(f"{scenario}-s3", sinks=sinks, batch_rows=batch_rows)
    sim = Simulation(3, recorder, Config(switches=BugSwitches.from_names(switches)))
    spec.build(sim, **scenario_options(spec, None))
    recorder.emit("run.start", "sim", detail={"scenario": scenario})
    sim.run(until_ms)
    recorder.emit("run.end", "sim", detail={"events": recorder.seq + 1})
    recorder.close()
    return recorder


@pytest.mark.parametrize("scenario,switches,until_ms", RUNS)
def test_batches_hold_the_rows_in_order_and_encode_them_as_the_row_by_row_definitions(scenario, switches, until_ms):
    memory, grabber = MemorySink(), BatchGrabber()
    _run(scenario, switches, until_ms, [memory, grabber])
    assert [row for batch in grabber.batches for row in batch.rows()] == memory.rows
    schema = arrow_schema()
    for batch in grabber.batches:
        rows = batch.rows()
        assert batch.json_lines() == "".join(json_line(row) + "\n" for row in rows)
        assert batch.table().equals(arrow_table(rows, schema))
    assert len(grabber.batches) > 1  # several batches, the last one short


@pytest.mark.parametrize("scenario,switches,until_ms", RUNS)
def test_file_sinks_write_the_same_bytes_by_batch_as_row_by_row(tmp_path, scenario, switches, until_ms):
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    fast.mkdir()
    slow.mkdir()
    # Recorder batches of 1000 rows, Parquet row groups of 8192 and of 300: groups cut across batches.
    _run(scenario, switches, until_ms, [
        ParquetSink(fast / "a.parquet"), ParquetSink(fast / "b.parquet", batch_rows=300), JsonlSink(fast / "e.jsonl"),
    ])
    _run(scenario, switches, until_ms, [
        RowByRow(ParquetSink(slow / "a.parquet")), RowByRow(ParquetSink(slow / "b.parquet", batch_rows=300)),
        RowByRow(JsonlSink(slow / "e.jsonl")),
    ])
    for name in ("a.parquet", "b.parquet", "e.jsonl"):
        assert (fast / name).read_bytes() == (slow / name).read_bytes(), name


#: Runs whose kept log is compared with a MemorySink's: a TSO failover, and a flush and a query run (every layout
#: of the DataNode's and the QueryNode's events in a short run, and several recorder batches of 1000 rows).
KEPT_RUNS = [RUNS[1], ("flush-basics", [], 6_000.0), ("insert-then-search", [], 12_000.0)]


@pytest.mark.parametrize("scenario,switches,until_ms", KEPT_RUNS)
def test_kept_batches_give_the_rows_and_the_frame_a_memory_sink_gives(scenario, switches, until_ms):
    """Two runs of the same seed, one kept as batches (no row sink: every layout on the fast path), one by a
    MemorySink (every row a dict as it is emitted): the same rows, and the same DataFrame."""
    kept, memory = KeptBatches(), MemorySink()
    _run(scenario, switches, until_ms, [kept])
    _run(scenario, switches, until_ms, [memory])
    assert len(kept._batches) > 1
    assert kept.rows() == memory.rows
    assert kept.table().equals(arrow_table(memory.rows, arrow_schema()))
    pd.testing.assert_frame_equal(table_to_frame(kept.table()), rows_to_frame(memory.rows))


def test_kept_batches_of_a_run_that_logged_nothing_are_an_empty_log():
    kept = KeptBatches()
    assert kept.rows() == [] and kept.table().num_rows == 0
    assert list(table_to_frame(kept.table()).columns) == list(rows_to_frame([]).columns)


def test_a_kept_run_holds_what_its_folder_holds(tmp_path):
    """``simulate`` keeps the log as batches: ``run.events`` is the frame ``load_run`` reads back from the folder,
    ``run.rows`` are the lines of events.jsonl; a run that kept nothing reads its folder."""
    run = milvus_edu.simulate("insert-then-search", seed=2, duration_s=6.0, out_dir=tmp_path / "kept")
    pd.testing.assert_frame_equal(run.events, load_run(tmp_path / "kept"))
    lines = (tmp_path / "kept" / "events.jsonl").read_text(encoding="ascii").splitlines()
    assert [json_line(row) for row in run.rows] == lines and run.kept
    assert run.events is not run.events  # a new frame each time: changing one leaves the run's log as it was
    bare = milvus_edu.simulate("insert-then-search", seed=2, duration_s=6.0, out_dir=tmp_path / "bare",
                               keep_events=False)
    assert bare.rows == [] and not bare.kept
    pd.testing.assert_frame_equal(bare.events, run.events)


def test_recorder_batch_size_does_not_change_the_files(tmp_path):
    for batch_rows in (1, 777, 8192):
        out = tmp_path / str(batch_rows)
        out.mkdir()
        _run("tso-basics", [], 5_000.0, [ParquetSink(out / "e.parquet"), JsonlSink(out / "e.jsonl")], batch_rows)
    for name in ("e.parquet", "e.jsonl"):
        assert len({(tmp_path / str(b) / name).read_bytes() for b in (1, 777, 8192)}) == 1, name


def _batch_of(emits: list[tuple[str, str, dict]]) -> RowBatch:
    grabber = BatchGrabber()
    recorder = Recorder("odd-values", sinks=[grabber], batch_rows=len(emits))
    for kind, node, fields in emits:
        recorder.emit(kind, node, **fields)
    recorder.close()
    (batch,) = grabber.batches
    return batch


def test_json_lines_equal_json_line_for_values_the_column_cut_cannot_handle():
    """Lists and objects of several items, non-ASCII and control characters, bools, floats and ints
    beyond 64 bits in columns, and a node of None: each line still equals ``json_line``."""
    alloc = dict(count=1, physical_ms=5, logical=1, window_end_ms=9, clock_ms=5)
    batch = _batch_of([
        ("tso.alloc", "rootcoord-1", {"ts": 1, **alloc}),
        ("tso.alloc", "rootcoord-1", {"ts": [1, 2], **alloc}),
        ("tso.alloc", "rootcoord-2", {"ts": {"a": 1, "b": [2, 3]}, **alloc}),
        ("rpc.drop", "client-\u00e9", {"peer": "tab\there\nnew \u2028 \x7f \"q\" \\", "detail": {"z": "\u00fc"}}),
        ("rpc.drop", None, {"peer": None, "detail": None}),
        ("tso.alloc", "rootcoord-1", {"ts": True, **{**alloc, "count": 2.5, "logical": 1 << 70}}),
        ("tso.alloc", "rootcoord-1", {"ts": float("nan"), **{**alloc, "count": -0.0, "logical": 1e-7}}),
    ])
    assert batch.json_lines() == "".join(json_line(row) + "\n" for row in batch.rows())


def test_json_lines_fall_back_when_run_id_is_null():
    grabber = BatchGrabber()
    recorder = Recorder(None, sinks=[grabber])
    recorder.emit("rpc.drop", "client-0", peer="rootcoord-1")
    recorder.close()
    (batch,) = grabber.batches
    assert batch.json_lines() == json_line(batch.rows()[0]) + "\n" == '{"seq":0,"t_ms":0.0,"node":"client-0",' \
        '"kind":"rpc.drop","peer":"rootcoord-1"}\n'


_SPECIAL_FLOATS = [0.0, -0.0, 1e-4, 0.00009999999999999999, 1e16, 9999999999999998.0, 1e15, 5e-324, 50.0, -123.0,
                   59.724530622290985, float("inf"), float("-inf"), float("nan"), 12345678901.5, 1.7976931348623157e308]


def test_float_texts_equal_pythons_json_on_special_and_spread_floats():
    spread = [struct.unpack("d", struct.pack("Q", (i * 0x9E3779B97F4A7C15) % (1 << 64)))[0] for i in range(20_000)]
    spread += [i / 7 for i in range(20_000)] + [i * 1e9 / 3 for i in range(5_000)] + [i / 1e7 for i in range(5_000)]
    values = _SPECIAL_FLOATS + spread
    assert float_texts(values) == [json.dumps(v) for v in values]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=50))
def test_float_texts_equal_pythons_json_on_any_floats(values):
    assert float_texts(values) == [json.dumps(v) for v in values]


def test_encode_detail_equals_json_dumps_and_recovers_after_an_error():
    detail = {"b": [1.5, None, "\u00e9"], "a": {"y": float("nan"), "x": True}, "c": 1 << 80}
    assert encode_detail(detail) == json.dumps(detail, sort_keys=True, separators=(",", ":"))
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        encode_detail(loop)
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode_detail({"x": object()})
    assert encode_detail(detail) == json.dumps(detail, sort_keys=True, separators=(",", ":"))


def test_every_new_layout_is_validated_and_a_bad_one_raises_every_time():
    recorder = Recorder("r")
    recorder.emit("tso.save", "rootcoord-1", window_end_ms=5, clock_ms=1)
    for _ in range(2):  # a rejected layout is not remembered as checked
        with pytest.raises(ValueError, match="does not carry"):
            recorder.emit("tso.save", "rootcoord-1", window_end_ms=5, ts=1)
        with pytest.raises(ValueError, match="unknown event kind"):
            recorder.emit("tso.teleport", "rootcoord-1")
    with pytest.raises(ValueError, match="does not carry"):  # same columns, other order: a new layout
        recorder.emit("tso.save", "rootcoord-1", ts=1, window_end_ms=5)
    assert recorder.seq == 1


def test_sinks_get_only_the_kinds_they_declare_and_rows_emitted_after_they_came():
    class Picky(MemorySink):
        kinds = frozenset({"tso.save"})

    picky, everything, grabber = Picky(), MemorySink(), BatchGrabber()
    recorder = Recorder("r", sinks=[picky])
    recorder.emit("tso.save", "rootcoord-1", window_end_ms=5, clock_ms=1)
    recorder.sinks += [everything, grabber]
    recorder.emit("rpc.drop", "client-0", peer="rootcoord-1")
    recorder.emit("tso.save", "rootcoord-1", window_end_ms=6, clock_ms=2)
    recorder.close()
    assert [row["seq"] for row in picky.rows] == [0, 2]
    assert [row["seq"] for row in everything.rows] == [1, 2]
    assert [row["seq"] for batch in grabber.batches for row in batch.rows()] == [1, 2]


def test_row_sinks_get_the_full_row_and_batch_sinks_the_same_values():
    memory, grabber = MemorySink(), BatchGrabber()
    recorder = Recorder("r", now_ms=lambda: 2, sinks=[memory, grabber])
    assert recorder.emit("tso.save", "rootcoord-1", window_end_ms=5, clock_ms=1, seq=99) is None  # stamped columns win
    recorder.close()
    (row,) = memory.rows
    assert grabber.batches[0].rows() == [row]
    assert list(row) == list(arrow_schema().names)
    recorder = Recorder("r", sinks=[memory, grabber])
    recorder.emit("tso.save", "rootcoord-1", run_id="other", t_ms=9.0, window_end_ms=5)
    recorder.close()
    assert memory.rows[1]["run_id"] == grabber.batches[1].rows()[0]["run_id"] == "r"
    assert memory.rows[1]["t_ms"] == grabber.batches[1].table()["t_ms"][0].as_py() == 0.0
    assert (row["seq"], row["t_ms"], row["window_end_ms"], row["ts"]) == (0, 2.0, 5, None)
    assert isinstance(row["t_ms"], float) and not math.isnan(row["t_ms"])


def test_parquet_sink_mixing_single_rows_and_batches_keeps_order_and_group_sizes(tmp_path):
    rows = MemorySink()
    grabber = BatchGrabber()
    _run("tso-basics", [], 3_000.0, [rows, grabber], batch_rows=50)
    path = tmp_path / "mixed.parquet"
    sink = ParquetSink(path, batch_rows=64)
    batches = grabber.batches
    for i, batch in enumerate(batches):
        if i % 2:
            sink.write_batch(batch)
        else:
            for row in batch.rows():
                sink.write(row)
    sink.close()
    table = pq.read_table(path, schema=arrow_schema())
    assert table.equals(arrow_table(rows.rows, arrow_schema()))
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups - 1)] == [64] * (meta.num_row_groups - 1)


# ---------------------------------------------------------------------------------------------
# Bound emitters (Recorder.emitter) record exactly what emit records.

#: (kind, column names, strategy of one value per column): layouts the hot call sites use, with a detail.
_EMITTER_LAYOUTS = [
    ("proxy.enqueue", ("ts", "count", "channel", "min_ts", "max_ts")),
    ("tso.update", ("clock_ms", "detail", "physical_ms", "logical", "window_end_ms")),
    ("mq.produce", ("ts", "channel", "vchannel", "msg_id", "msg_type", "begin_ts", "end_ts", "count", "segment")),
]
_INTS = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1))
_TEXT = st.one_of(st.none(), st.sampled_from(["a", "by-dev-rootcoord-dml_0", "é\"\\"]))
_DETAIL = st.one_of(st.none(), st.text(max_size=3), st.dictionaries(st.sampled_from(["reason", "jet_lag_ms", "x"]),
                    st.one_of(st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=2), st.booleans(),
                              st.lists(st.integers(0, 3), max_size=2)), max_size=3))
_VALUE = {"detail": _DETAIL, "channel": _TEXT, "vchannel": _TEXT, "msg_type": _TEXT}


@st.composite
def _emit_plans(draw):
    """A list of (layout index, node, values, bound?) and the step at which a row sink is added (or never)."""
    steps = []
    for _ in range(draw(st.integers(0, 40))):
        i = draw(st.integers(0, len(_EMITTER_LAYOUTS) - 1))
        _, names = _EMITTER_LAYOUTS[i]
        values = tuple(draw(_VALUE.get(name, _INTS)) for name in names)
        steps.append((i, draw(st.sampled_from(["p1", "p2"])), values, draw(st.booleans())))
    return steps, draw(st.one_of(st.none(), st.integers(0, 40)))


def _record(plan, row_sink_at, bound: bool):
    """Run ``plan`` through emit only (``bound=False``) or through emitters where the plan says so."""
    steps, row_sink_at = plan, row_sink_at
    grabber, memory = BatchGrabber(), MemorySink()
    clock = iter(range(10_000))
    rec = Recorder("r", now_ms=lambda: next(clock) / 4, sinks=[grabber], batch_rows=7)
    emitters = [rec.emitter(kind, *names) for kind, names in _EMITTER_LAYOUTS]
    for step, (i, node, values, use_emitter) in enumerate(steps):
        if step == row_sink_at:
            rec.sinks.append(memory)
        kind, names = _EMITTER_LAYOUTS[i]
        if bound and use_emitter:
            emitters[i](node, *values)
        else:
            rec.emit(kind, node, **dict(zip(names, values)))
    rec.close()
    rows = [row for batch in grabber.batches for row in batch.rows()]
    tables = [batch.table().to_pylist() for batch in grabber.batches]
    return rows, tables, memory.rows, rec.counts, rec.seq


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(_emit_plans())
def test_bound_emitters_record_the_same_rows_as_emit(plan):
    steps, row_sink_at = plan
    assert _record(steps, row_sink_at, bound=True) == _record(steps, row_sink_at, bound=False)


def test_an_emitter_checks_its_layout_once_and_its_arity_every_time():
    rec = Recorder("r", sinks=[BatchGrabber()])
    with pytest.raises(ValueError, match="does not carry"):
        rec.emitter("proxy.enqueue", "ts", "no_such_column")
    with pytest.raises(ValueError, match="unknown event kind"):
        rec.emitter("no.such.kind", "ts")
    with pytest.raises(ValueError, match="named twice"):
        rec.emitter("proxy.enqueue", "ts", "ts")
    emit = rec.emitter("proxy.finish", "ts", "channel")
    with pytest.raises(TypeError, match="takes 2 values"):
        emit("p1", 5)
    emit("p1", 5, "c")
    assert rec.seq == 1 and rec.counts == {"proxy.finish": 1}


def test_the_null_recorders_emitters_validate_and_drop():
    from milvus_edu.events import NULL_RECORDER
    with pytest.raises(ValueError):
        NULL_RECORDER.emitter("proxy.enqueue", "nope")
    NULL_RECORDER.emitter("proxy.finish", "ts")("p", 1)
    assert NULL_RECORDER.seq == 0


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_EMITTER_LAYOUTS) - 1), st.sampled_from(["p1", "p2"]),
                          st.integers(0, 5), st.data()), max_size=15), st.integers(1, 9))
def test_emitting_rows_at_once_equals_one_call_per_row(groups, batch_rows):
    """``emitter(...).rows(node, rows)`` records what that many single emits record, across batch ends."""
    plan = []
    for i, node, n, data in groups:
        _, names = _EMITTER_LAYOUTS[i]
        plan.append((i, node, [tuple(data.draw(_VALUE.get(name, _INTS)) for name in names) for _ in range(n)]))

    def record(at_once: bool):
        grabber = BatchGrabber()
        clock = iter(range(10_000))
        rec = Recorder("r", now_ms=lambda: next(clock) / 4, sinks=[grabber], batch_rows=batch_rows)
        emitters = [rec.emitter(kind, *names) for kind, names in _EMITTER_LAYOUTS]
        for i, node, rows in plan:
            if at_once:
                emitters[i].rows(node, rows)
            else:
                for values in rows:
                    emitters[i](node, *values)
        rec.close()
        return [row for batch in grabber.batches for row in batch.rows()], rec.counts, rec.seq

    at_once, one_by_one = record(True), record(False)
    # one call stamps its rows with one reading of the clock; single calls read it once each
    for rows in (at_once[0], one_by_one[0]):
        for row in rows:
            row["t_ms"] = None
    assert at_once == one_by_one


def test_emitting_rows_checks_each_rows_arity_and_keeps_the_rows_before():
    rec = Recorder("r", sinks=[BatchGrabber()])
    emit = rec.emitter("proxy.finish", "ts", "channel")
    with pytest.raises(TypeError, match="takes 2 values"):
        emit.rows("p1", [(1, "a"), (2, "b"), (3,)])
    emit.rows("p1", [(4, "c")])
    assert rec.seq == 3 and rec.counts == {"proxy.finish": 3}


def test_emitting_rows_that_fail_midway_leaves_the_recorder_consistent():
    grabber = BatchGrabber()
    rec = Recorder("r", sinks=[grabber], batch_rows=4)
    emit = rec.emitter("proxy.finish", "ts", "channel")

    def rows_then_trouble():
        yield (1, "a")
        yield (2, "b")
        raise RuntimeError("the caller's generator failed")

    with pytest.raises(RuntimeError):
        emit.rows("p1", rows_then_trouble())
    with pytest.raises(TypeError):
        emit.rows("p1", [(3, "c"), 5])
    emit.rows("p1", [(4, "d")])
    rec.close()
    rows = [row for batch in grabber.batches for row in batch.rows()]
    assert [row["seq"] for row in rows] == [0, 1, 2, 3] and [row["ts"] for row in rows] == [1, 2, 3, 4]
    assert rec.counts == {"proxy.finish": 4}


def test_emit_turns_numpy_scalars_into_python_values():
    import numpy as np

    memory = MemorySink()
    rec = Recorder("r", sinks=[memory, BatchGrabber()])
    rec.emit("tso.alloc", "rc", ts=np.int64(5), clock_ms=np.float64(1.5), count=3)
    row = memory.rows[0]
    assert (row["ts"], row["clock_ms"], row["count"]) == (5, 1.5, 3)
    assert type(row["ts"]) is int and type(row["clock_ms"]) is float
