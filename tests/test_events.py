"""The run log: schema validation, streaming sinks, readers."""

import json

import pyarrow.parquet as pq
import pytest

from milvus_edu.events import (
    EVENT_KINDS, FIELD_NAMES, SCHEMA_VERSION, JsonlSink, MemorySink, ParquetSink, Recorder, RunLogError, arrow_schema,
    load_run,
)


def _record(sinks, n=10):
    rec = Recorder("r1", now_ms=lambda: 1.5, sinks=sinks)
    for i in range(n):
        rec.emit("tso.alloc", "rootcoord-1", ts=(1 << 60) + i, count=1, physical_ms=5, logical=i,
                 window_end_ms=3005, clock_ms=5)
    rec.emit("run.end", "sim", detail={"b": 1, "a": 2})
    rec.close()
    return rec


def test_recorder_rejects_unknown_kind_and_foreign_columns():
    rec = Recorder("r")
    with pytest.raises(ValueError, match="unknown event kind"):
        rec.emit("tso.teleport", "x")
    with pytest.raises(ValueError, match="does not carry"):
        rec.emit("tso.save", "x", ts=5)


def test_recorder_stamps_seq_time_and_sorts_detail_keys():
    mem = MemorySink()
    _record([mem], n=3)
    assert [r["seq"] for r in mem.rows] == [0, 1, 2, 3]
    assert all(r["t_ms"] == 1.5 and r["run_id"] == "r1" for r in mem.rows)
    assert mem.rows[-1]["detail"] == '{"a":2,"b":1}'
    assert set(mem.rows[0]) == set(FIELD_NAMES)


def test_every_kind_documents_the_go_function_and_valid_columns():
    for kind in EVENT_KINDS.values():
        assert kind.go and kind.doc
        assert set(kind.fields) <= set(FIELD_NAMES)


def test_parquet_sink_streams_in_bounded_row_groups_and_keeps_64bit_ts_exact(tmp_path):
    path = tmp_path / "events.parquet"
    _record([ParquetSink(path, batch_rows=4)], n=10)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == 11
    assert meta.num_row_groups == 3  # 4 + 4 + 3: memory holds at most one group
    frame = load_run(path)
    assert int(frame["ts"].iloc[9]) == (1 << 60) + 9  # exact, no float rounding
    assert frame["ts"].isna().iloc[-1]
    assert pq.read_schema(path).metadata[b"milvus_edu.schema_version"] == str(SCHEMA_VERSION).encode()


def test_jsonl_and_parquet_read_back_identically(tmp_path):
    _record([ParquetSink(tmp_path / "events.parquet"), JsonlSink(tmp_path / "events.jsonl")])
    a = load_run(tmp_path / "events.parquet")
    b = load_run(tmp_path / "events.jsonl")
    assert a.equals(b)
    first = json.loads((tmp_path / "events.jsonl").read_text().splitlines()[0])
    assert "error" not in first  # nulls are omitted in JSON Lines


def test_sink_leaves_no_partial_file_until_closed(tmp_path):
    sink = ParquetSink(tmp_path / "events.parquet")
    sink.write({**{n: None for n in FIELD_NAMES}, "run_id": "r", "seq": 0, "t_ms": 0.0, "node": "n", "kind": "run.end"})
    assert not (tmp_path / "events.parquet").exists()
    sink.close()
    assert (tmp_path / "events.parquet").exists()


def test_load_run_errors_are_clear(tmp_path):
    with pytest.raises(RunLogError, match="does not exist"):
        load_run(tmp_path / "nope")
    with pytest.raises(RunLogError, match="no events.parquet"):
        load_run(tmp_path)
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"seq": 0}\nnot json\n')
    with pytest.raises(RunLogError, match="x.jsonl:2"):
        load_run(bad)


def test_arrow_schema_matches_fields():
    schema = arrow_schema()
    assert schema.names == list(FIELD_NAMES)
    assert str(schema.field("ts").type) == "int64"


def test_jsonl_line_that_is_not_an_object_is_a_clear_error(tmp_path):
    bad = tmp_path / "events.jsonl"
    bad.write_text("null\n")
    with pytest.raises(RunLogError, match="events.jsonl:1 is not a JSON object"):
        load_run(bad)
