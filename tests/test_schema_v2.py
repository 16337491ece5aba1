"""Run-log schema version 2: typed message-stream columns, exact integers for a plain pandas read,
version-1 logs readable everywhere, and a one-line refusal of a newer version.

``tests/data/v1-run-tso-failover`` is a run folder written by milvus-edu before schema version 2
(``tso-failover``, seed 1, 62 s): it is the real thing, not a file faked for the test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import milvus_edu
from milvus_edu.mechanisms.tso.check import check_tso
from milvus_edu.cli import main
from milvus_edu.events import FIELD_NAMES, SCHEMA_VERSION, RunLogError, load_run, schema_version_of

V1 = Path(__file__).parent / "data" / "v1-run-tso-failover"
V2 = Path(__file__).parent / "data" / "v2-run-timetick"  # timetick-basics, 1 s, written before version 3
V3 = Path(__file__).parent / "data" / "v3-run-flush"  # flush-basics, 0.45 s, written before version 4
V2_COLUMNS = ("vchannel", "msg_id", "msg_type", "begin_ts", "end_ts", "min_ts", "max_ts", "tick_ts")


@pytest.fixture(scope="module")
def v2_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("v2") / "run"
    milvus_edu.simulate("tso-failover", seed=1, duration_s=62, out_dir=out, keep_events=False)
    return out


def test_schema_version_two_has_the_typed_stream_columns():
    assert SCHEMA_VERSION >= 2
    assert set(V2_COLUMNS) <= set(FIELD_NAMES)


def test_schema_version_three_adds_the_segment_column():
    assert SCHEMA_VERSION >= 3
    assert "segment" in FIELD_NAMES


def test_schema_version_four_adds_the_read_columns():
    assert SCHEMA_VERSION == 4
    assert {"request", "level", "guarantee_ts"} <= set(FIELD_NAMES)


def test_version_three_run_loads_with_read_columns_null():
    assert schema_version_of(V3 / "events.parquet") == 3
    for name in ("events.parquet", "events.jsonl"):
        ev = load_run(V3 / name)
        assert list(ev.columns) == list(FIELD_NAMES)
        assert ev["request"].isna().all() and ev["level"].isna().all() and ev["guarantee_ts"].isna().all()
        assert ev["segment"].notna().any()
        assert len(ev) == json.loads((V3 / "summary.json").read_text())["events"]


def test_version_two_run_loads_with_segment_null():
    assert schema_version_of(V2 / "events.parquet") == 2
    for name in ("events.parquet", "events.jsonl"):
        ev = load_run(V2 / name)
        assert list(ev.columns) == list(FIELD_NAMES)
        assert ev["segment"].isna().all()
        assert ev["msg_id"].notna().any()
        assert len(ev) == json.loads((V2 / "summary.json").read_text())["events"]


def test_plain_read_parquet_gives_exact_int64_timestamps(v2_run):
    frame = pd.read_parquet(v2_run / "events.parquet")  # no options, as a learner would
    assert str(frame["ts"].dtype) == "Int64"
    exact = [json.loads(line)["ts"] for line in (v2_run / "events.jsonl").read_text().splitlines()
             if '"ts":' in line]
    got = [int(v) for v in frame["ts"].dropna()]
    assert got == exact
    # A float64 column would have rounded these: hybrid timestamps exceed 2**53.
    assert any(v % 64 for v in exact)


def test_version_one_run_loads_with_new_columns_null():
    assert schema_version_of(V1 / "events.parquet") == 1
    for name in ("events.parquet", "events.jsonl"):
        ev = load_run(V1 / name)
        assert list(ev.columns) == list(FIELD_NAMES)
        assert ev[list(V2_COLUMNS)].isna().all().all()
        assert len(ev) == json.loads((V1 / "summary.json").read_text())["events"]
        assert check_tso(ev) == []


def test_version_one_run_steps_and_prints_a_timeline(capsys):
    from milvus_edu.viz import TimelineStepper

    st = TimelineStepper(V1)
    assert st.jump_to_next("fault.kill") is not None
    assert st.state()["active"] == "rootcoord-1"
    assert main(["timeline", str(V1)]) == 0
    assert "rootcoord-1 is killed" in capsys.readouterr().out


def _newer_copy(tmp_path: Path) -> Path:
    run = tmp_path / "future"
    shutil.copytree(V1, run)
    table = pq.read_table(run / "events.parquet")
    meta = dict(table.schema.metadata)
    meta[b"milvus_edu.schema_version"] = b"99"
    pq.write_table(table.replace_schema_metadata(meta), run / "events.parquet")
    return run


def test_newer_version_is_refused_in_one_line(tmp_path, capsys):
    run = _newer_copy(tmp_path)
    with pytest.raises(RunLogError, match="schema version 99"):
        load_run(run)
    assert main(["timeline", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "version 99" in err and "upgrade" in err


@pytest.mark.spark
def test_spark_reads_version_one_and_two_together_and_refuses_newer(spark, v2_run, tmp_path):
    from milvus_edu.analysis import EventPathError, load_events, to_pandas

    loaded = load_events(spark, [V1, v2_run])
    frame = to_pandas(loaded.events)
    assert loaded.malformed_count == 0
    assert len(frame) == len(load_run(V1)) + len(load_run(v2_run))
    v1_rows = frame[frame["run_id"] == "tso-failover-s1"]
    assert v1_rows["msg_id"].isna().all()
    with pytest.raises(EventPathError, match="version 99"):
        load_events(spark, [_newer_copy(tmp_path)])
