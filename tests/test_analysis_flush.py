"""milvus_edu.mechanisms.flush.analysis: checkpoint lag, flush latency, sync sizes, and the binlogs read back by Spark.

Every events analysis is checked against its pandas twin on real runs (a crash run and an RPC-failure run):
same columns, same dtypes, same numbers. Hand-built logs pin what the numbers mean; the binlog counts are checked
against the runs' own audits; a damaged binlog gives a one-line error and is left as it was.
"""

from __future__ import annotations

import pandas as pd
import pytest

import milvus_edu
from milvus_edu.analysis import load_events, spark_schema, to_pandas
from milvus_edu.mechanisms.flush.analysis import (
    ANALYSES, BINLOG_COLUMNS, BINLOG_META_COLUMNS, CHECKPOINT_LAG_COLUMNS, FLUSH_LATENCY_COLUMNS, SYNC_SIZES_COLUMNS,
    binlog_rows, binlog_rows_pd, binlog_vs_meta, binlog_vs_meta_pd, checkpoint_lag, checkpoint_lag_pd, flush_latency,
    flush_latency_pd, sync_sizes, sync_sizes_pd,
)
from milvus_edu.events import FIELD_NAMES, SIM_EPOCH_MS, load_run, rows_to_frame

SMALL = {"inserts_per_s": 60.0, "deletes_per_s": 3.0, "workload_s": 14.0}
RUNS = [("datanode-crash-recovery", 1, {**SMALL, "crash_at_s": 12.0, "restart_after_s": 1.0}),
        ("checkpoint-rpc-failures", 2, {**SMALL, "rpc_failure_rate": 0.3})]
KEYS = {"checkpoint_lag": ["run_id", "vchannel"], "flush_latency": ["run_id", "flush_ts"],
        "sync_sizes": ["run_id", "vchannel"]}
COLUMNS = {"checkpoint_lag": CHECKPOINT_LAG_COLUMNS, "flush_latency": FLUSH_LATENCY_COLUMNS,
           "sync_sizes": SYNC_SIZES_COLUMNS}
V = "v0"


def hybrid(ms_after_epoch: int, logical: int = 0) -> int:
    return ((SIM_EPOCH_MS + ms_after_epoch) << 18) + logical


def row(seq, kind, t_ms, **fields):
    return {"run_id": "hand", "seq": seq, "t_ms": float(t_ms), "node": "n", "kind": kind, **fields}


def both(spark, rows):
    events = spark.createDataFrame([tuple(r.get(n) for n in FIELD_NAMES) for r in rows], spark_schema())
    return rows_to_frame(rows), events


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("flush-runs")
    out = {}
    for scenario, seed, options in RUNS:
        result = milvus_edu.simulate(scenario, seed=seed, options=options, duration_s=35.0,
                                     out_dir=base / f"{scenario}-s{seed}", keep_events=False)
        assert result.summary["flush"]["audited"]
        out[result.summary["run_id"]] = (result.out_dir, result.summary)
    return out


@pytest.fixture(scope="module")
def frame(runs):
    return pd.concat([load_run(p) for p, _ in runs.values()], ignore_index=True)


@pytest.fixture(scope="module")
def loaded(spark, runs):
    return load_events(spark, [p for p, _ in runs.values()])


def _same(spark_frame, pandas_frame, keys):
    got = spark_frame.sort_values(keys).reset_index(drop=True)
    want = pandas_frame.reset_index(drop=True)
    assert list(got.columns) == list(want.columns)
    pd.testing.assert_frame_equal(got, want, check_dtype=False, check_exact=False, rtol=1e-9)
    assert [str(t) for t in got.dtypes] == [str(t) for t in want.dtypes]


# --- no JVM needed -------------------------------------------------------------------------------

def test_registry_pairs_each_spark_function_with_its_twin():
    assert ANALYSES == {"checkpoint_lag": (checkpoint_lag, checkpoint_lag_pd),
                        "flush_latency": (flush_latency, flush_latency_pd), "sync_sizes": (sync_sizes, sync_sizes_pd)}
    assert milvus_edu.registry.get_mechanism("flush").analyses() == ANALYSES


def test_checkpoint_lag_by_hand():
    rows = [row(0, "datacoord.channel_cp", 100, vchannel=V, ts=hybrid(50), detail='{"saved":true}'),
            row(1, "datanode.buffer", 1_000, vchannel=V, end_ts=hybrid(900)),
            row(2, "datacoord.channel_cp", 1_200, vchannel=V, ts=hybrid(400), detail='{"saved":true}'),
            row(3, "datacoord.channel_cp", 1_300, vchannel=V, ts=hybrid(300), detail='{"saved":false}'),
            row(4, "datacoord.channel_cp", 1_400, vchannel=V, ts=hybrid(500), error="etcd down")]
    got = checkpoint_lag_pd(rows_to_frame(rows)).iloc[0]
    assert got.checkpoints == 2  # the ignored and the failed ones do not count
    assert got.max_lag_ms == 800.0 and got.mean_lag_ms == 425.0 and got.p50_lag_ms == 50.0 and got.p95_lag_ms == 800.0
    assert got.max_behind_consumed_ms == 500  # consumed 900 ms, stored 400 ms


def test_flush_latency_by_hand_keeps_a_flush_that_never_cleared():
    f1, f2 = hybrid(1_000), hybrid(5_000)
    rows = [row(0, "client.flush", 1_001, ts=f1, detail='{"flushed":false}'),
            row(1, "datanode.flush_ts", 1_001, vchannel="a", ts=f1, detail='{"set":true}'),
            row(2, "datanode.flush_ts", 1_400, vchannel="a", ts=f1, detail='{"set":false}'),
            row(3, "datanode.flush_ts", 1_600, vchannel="b", ts=f1, detail='{"set":false}'),
            row(4, "client.flush", 2_001, ts=f1, detail='{"flushed":true}'),
            row(5, "client.flush", 5_001, ts=f2, detail='{"flushed":false}'),
            row(6, "client.flush", 5_501, ts=f2, detail='{"flushed":true}'),
            row(7, "client.flush", 6_000, error="connection refused")]
    got = flush_latency_pd(rows_to_frame(rows))
    assert list(got.flush_ts) == [f1, f2]
    first, second = got.iloc[0], got.iloc[1]
    assert (first.latency_ms, first.reset_latency_ms, first.vchannels_cleared) == (1_000.0, 599.0, 2)
    assert second.latency_ms == 500.0 and pd.isna(second.cleared_ms) and second.vchannels_cleared == 0


def test_sync_sizes_by_hand():
    rows = [row(0, "datanode.sync", 1, vchannel=V, count=10, detail='{"flush":false,"level":"L1"}'),
            row(1, "datanode.sync", 2, vchannel=V, count=30, detail='{"flush":true,"level":"L1"}'),
            row(2, "datanode.sync", 3, vchannel=V, count=0, detail='{"flush":true,"level":"L0"}'),
            row(3, "datanode.sync_done", 4, vchannel=V, error="timeout"),
            row(4, "datanode.sync_done", 5, vchannel=V)]
    got = sync_sizes_pd(rows_to_frame(rows)).iloc[0]
    assert (got.syncs, got.rows, got.max_rows, got.flush_syncs, got.l0_syncs, got.failed_syncs) == (3, 40, 30, 2, 1, 1)
    assert got.mean_rows == pytest.approx(40 / 3)


def test_binlog_counts_equal_the_audit_and_every_segment_matches_the_meta(runs, frame):
    dirs = [p for p, _ in runs.values()]
    logs = binlog_rows_pd(dirs)
    assert list(logs.columns) == BINLOG_COLUMNS
    for run_id, (_, summary) in runs.items():
        mine = logs[logs.run_id == run_id]
        assert int(mine.binlog_rows.sum()) == summary["flush"]["audit_rows"] == summary["flush"]["acknowledged_rows"]
        assert int(mine.deleted_pks.sum()) == summary["flush"]["audit_deleted_keys"]
        assert (mine.binlog_rows == mine.distinct_pks).all()  # nothing twice
    vs = binlog_vs_meta_pd(frame, dirs)
    assert list(vs.columns) == BINLOG_META_COLUMNS and len(vs) >= 4
    assert vs["match"].all() and (vs.audit_rows == vs.binlog_rows).all()


@pytest.mark.slow
def test_rows_written_twice_still_match_the_meta_and_only_distinct_pks_shows_them(tmp_path):
    # Without the ddNode's recovery filter the restarted DataNode replays rows a sync already wrote; DataCoord
    # counts binlog entries, so its meta counts them twice too: `match` cannot see it, distinct keys can.
    result = milvus_edu.simulate("datanode-crash-recovery", seed=1, switches=["skip_recovery_filter"],
                                 out_dir=tmp_path / "run", keep_events=False)
    frame = load_run(result.out_dir)
    vs = binlog_vs_meta_pd(frame, result.out_dir)
    assert len(vs) >= 4 and vs["match"].all()
    logs = binlog_rows_pd(result.out_dir)
    twice = logs[logs.binlog_rows > logs.distinct_pks]
    assert len(twice) >= 1 and set(twice.segment) <= set(vs.segment)


def test_a_damaged_binlog_is_named_in_one_line_and_left_untouched(runs, tmp_path):
    import shutil

    src = next(iter(runs.values()))[0]
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    victim = sorted((copy / "objects" / "a-bucket" / "files" / "insert_log").rglob("*"))[-1]
    victim.write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=r"not a readable Parquet binlog") as err:
        binlog_rows_pd([copy])
    assert str(victim) in str(err.value) and "\n" not in str(err.value)
    assert victim.read_bytes() == b"not parquet at all"
    with pytest.raises(ValueError, match="not a milvus-edu run folder"):
        binlog_rows_pd([tmp_path])


# --- Spark ---------------------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_spark_equals_its_pandas_twin_on_real_runs(loaded, frame, name):
    spark_fn, pandas_fn = ANALYSES[name]
    want = pandas_fn(frame)
    assert len(want) >= 2
    _same(to_pandas(spark_fn(loaded.events)), want, KEYS[name])


@pytest.mark.spark
def test_spark_equals_the_twin_on_the_hand_built_logs(spark):
    f1 = hybrid(1_000)
    rows = [row(0, "datacoord.channel_cp", 100, vchannel=V, ts=hybrid(50), detail='{"saved":true}'),
            row(1, "datanode.buffer", 1_000, vchannel=V, end_ts=hybrid(900)),
            row(2, "datacoord.channel_cp", 1_200, vchannel=V, ts=hybrid(400), detail='{"saved":true}'),
            row(3, "client.flush", 1_001, ts=f1, detail='{"flushed":false}'),
            row(4, "datanode.flush_ts", 1_400, vchannel="a", ts=f1, detail='{"set":false}'),
            row(5, "client.flush", 2_001, ts=f1, detail='{"flushed":true}'),
            row(6, "datanode.sync", 3, vchannel=V, count=10, detail='{"flush":true,"level":"L1"}')]
    pdf, events = both(spark, rows)
    for name, (spark_fn, pandas_fn) in ANALYSES.items():
        _same(to_pandas(spark_fn(events)), pandas_fn(pdf), KEYS[name])


@pytest.mark.spark
def test_spark_reads_the_binlogs_and_agrees_with_pyarrow(spark, loaded, frame, runs):
    dirs = [p for p, _ in runs.values()]
    _same(to_pandas(binlog_rows(spark, dirs)), binlog_rows_pd(dirs), ["run_id", "segment"])
    _same(to_pandas(binlog_vs_meta(spark, loaded.events, dirs)), binlog_vs_meta_pd(frame, dirs), ["run_id", "segment"])
