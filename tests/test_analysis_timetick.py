"""milvus_edu.mechanisms.timetick.analysis: tick lag, DML reordering and pack sizes over many TimeTick runs.

Every analysis is checked against its pandas twin on real runs (timetick-basics seeds 1 and 2,
timetick-proxy-stall seed 1): same columns, same dtypes, same numbers. Other tests pin what the
numbers mean: hand-built logs whose answers are worked out by hand, the run summaries' own counts,
and the stall's three silent seconds. Tests that need no JVM are not marked ``spark``.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import milvus_edu
from milvus_edu.analysis import load_events, spark_schema, to_pandas
from milvus_edu.mechanisms.timetick.analysis import (
    ANALYSES, KEYS_CHANNEL, KEYS_PACK, PACK_COLUMNS, REORDER_COLUMNS, TICK_LAG_COLUMNS, pack_sizes, pack_sizes_pd,
    produce_reorder, produce_reorder_pd, tick_lag, tick_lag_pd,
)
from milvus_edu.events import FIELD_NAMES, SIM_EPOCH_MS, load_run, rows_to_frame
from milvus_edu.narrate import detail_dict

RUNS = [("timetick-basics", 1), ("timetick-basics", 2), ("timetick-proxy-stall", 1)]
STALL = "timetick-proxy-stall-s1"
BASICS = ["timetick-basics-s1", "timetick-basics-s2"]
PCHANNELS = [f"by-dev-rootcoord-dml_{i}" for i in range(4)]
KEYS = {"tick_lag": KEYS_CHANNEL, "produce_reorder": KEYS_CHANNEL, "pack_sizes": KEYS_PACK}
COLUMNS = {"tick_lag": TICK_LAG_COLUMNS, "produce_reorder": REORDER_COLUMNS, "pack_sizes": PACK_COLUMNS}


def hybrid(ms_after_epoch: int, logical: int = 0) -> int:
    """A hybrid timestamp ``ms_after_epoch`` simulated ms after SIM_EPOCH_MS."""
    return ((SIM_EPOCH_MS + ms_after_epoch) << 18) + logical


def tick(seq, t_ms, tick_ts, run_id="hand", channel="ch-0"):
    return {"run_id": run_id, "seq": seq, "t_ms": t_ms, "node": "rootcoord-1", "kind": "mq.produce",
            "channel": channel, "msg_type": "TimeTick", "ts": tick_ts, "tick_ts": tick_ts}


def insert(seq, end_ts, run_id="hand", channel="ch-0"):
    return {"run_id": run_id, "seq": seq, "t_ms": float(seq), "node": "proxy-1", "kind": "mq.produce",
            "channel": channel, "vchannel": f"{channel}_100v0", "msg_type": "Insert", "count": 1,
            "ts": end_ts, "begin_ts": end_ts, "end_ts": end_ts}


def pack(seq, count, run_id="hand", channel="ch-0"):
    return {"run_id": run_id, "seq": seq, "t_ms": 200.0 * seq, "node": "consumer-0", "kind": "mq.pack",
            "channel": channel, "vchannel": f"{channel}_100v0", "count": count}


def both(spark, rows):
    """The same hand-built log as a pandas frame and as Spark events."""
    events = spark.createDataFrame([tuple(r.get(n) for n in FIELD_NAMES) for r in rows], spark_schema())
    return rows_to_frame(rows), events


def larger_before(end_ts):
    """The definition, brute force: for each message, the earlier ones with a larger end_ts."""
    return [sum(e > x for e in end_ts[:i]) for i, x in enumerate(end_ts)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run folders of RUNS, keyed by run_id."""
    base = tmp_path_factory.mktemp("tt-runs")
    out = {}
    for scenario, seed in RUNS:
        result = milvus_edu.simulate(scenario, seed=seed, out_dir=base / f"{scenario}-s{seed}", keep_events=False)
        out[result.summary["run_id"]] = result.out_dir
    return out


@pytest.fixture(scope="module")
def summaries(runs):
    return {run_id: json.loads((folder / "summary.json").read_text())["timetick"] for run_id, folder in runs.items()}


@pytest.fixture(scope="module")
def loaded(spark, runs):
    return load_events(spark, list(runs.values()))


@pytest.fixture(scope="module")
def frame(runs):
    return pd.concat([load_run(p) for p in runs.values()], ignore_index=True)


@pytest.fixture(scope="module")
def results(loaded):
    """Each analysis's Spark result on the real runs, as pandas sorted by its keys."""
    return {name: to_pandas(fn(loaded.events)).sort_values(KEYS[name]).reset_index(drop=True)
            for name, (fn, _) in ANALYSES.items()}


# --- no JVM needed -------------------------------------------------------------------------------

def test_analyses_registry_pairs_each_spark_function_with_its_twin():
    assert ANALYSES == {"tick_lag": (tick_lag, tick_lag_pd), "produce_reorder": (produce_reorder, produce_reorder_pd),
                        "pack_sizes": (pack_sizes, pack_sizes_pd)}
    for name, (spark_fn, pandas_fn) in ANALYSES.items():
        assert pandas_fn.__name__ == spark_fn.__name__ + "_pd" == name + "_pd"


def test_no_tick_is_fresher_than_the_ddl_minimum_is_old_when_rootcoord_sends_it(frame):
    # Every round's tick is at most rootcoord's DDL minimum, which syncTsLoop took sync_ts_phase_ms before
    # startTimeTickLoop sends it: that age is the floor of the tick lag.
    lag = tick_lag_pd(frame)
    starts = frame[frame["kind"] == "rootcoord.ticker_start"]
    phase = {r.run_id: float(detail_dict(r.detail)["sync_ts_phase_ms"]) for r in starts.itertuples()}
    assert set(lag.run_id) == set(phase)
    for r in lag.itertuples():
        assert phase[r.run_id] <= r.min_lag_ms


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 12), min_size=1, max_size=30), min_size=1, max_size=3))
def test_pandas_reorder_counts_match_the_definition(channels):
    """Per channel: out of order iff below an earlier end_ts; distances as defined, ties in order."""
    rows, seq = [], 0
    for c, values in enumerate(channels):
        for v in values:
            rows.append(insert(seq, hybrid(10 * v, logical=v % 3), channel=f"ch-{c}"))
            seq += 1
    got = produce_reorder_pd(rows_to_frame(rows))
    assert list(got["channel"]) == [f"ch-{c}" for c in range(len(channels))]
    for c, values in enumerate(channels):
        ts = [hybrid(10 * v, logical=v % 3) for v in values]
        behind = larger_before(ts)
        late = [i for i in range(len(ts)) if ts[i] < max(ts[:i], default=ts[i])]
        assert late == [i for i, b in enumerate(behind) if b > 0]
        ms = [(max(ts[:i]) >> 18) - (ts[i] >> 18) for i in late]
        row = got.iloc[c]
        assert row["messages"] == len(ts) and row["out_of_order"] == len(late)
        assert row["share_out_of_order"] == len(late) / len(ts)
        assert row["max_distance_ms"] == max(ms, default=0)
        assert row["max_distance_msgs"] == max(behind)
        if late:
            assert row["mean_distance_ms"] == pytest.approx(sum(ms) / len(late))
            assert row["mean_distance_msgs"] == pytest.approx(sum(behind) / len(late))
        else:
            assert pd.isna(row["mean_distance_ms"]) and pd.isna(row["mean_distance_msgs"])


# --- Spark: hand-built logs ----------------------------------------------------------------------

@pytest.mark.spark
def test_tick_lag_of_three_ticks_by_hand(spark):
    # lags 50, 10, 250 ms (the logical part does not count); gaps 200 and 350 ms
    rows = [tick(0, 100.0, hybrid(50, 7)), tick(1, 300.0, hybrid(290)), tick(2, 650.0, hybrid(400, 262143))]
    frame, events = both(spark, rows)
    want = pd.DataFrame({"run_id": ["hand"], "channel": ["ch-0"], "ticks": [3], "min_lag_ms": [10.0],
                         "mean_lag_ms": [310 / 3], "p50_lag_ms": [50.0], "p95_lag_ms": [250.0],
                         "max_lag_ms": [250.0], "max_gap_ms": [350.0]}).astype(
        {"run_id": "string", "channel": "string", "ticks": "Int64"})
    pd.testing.assert_frame_equal(tick_lag_pd(frame), want)
    pd.testing.assert_frame_equal(to_pandas(tick_lag(events)), want)


@pytest.mark.spark
def test_produce_reorder_of_three_messages_by_hand(spark):
    # the third message has the physical ms of the first but a smaller logical part: it is below
    # both earlier messages, 1050 - 1000 = 50 ms behind the largest
    rows = [insert(0, hybrid(1000, 1)), insert(1, hybrid(1050)), insert(2, hybrid(1000))]
    frame, events = both(spark, rows)
    want = pd.DataFrame({"run_id": ["hand"], "channel": ["ch-0"], "messages": [3], "out_of_order": [1],
                         "share_out_of_order": [1 / 3], "max_distance_ms": [50], "mean_distance_ms": [50.0],
                         "max_distance_msgs": [2], "mean_distance_msgs": [2.0]}).astype(
        {"run_id": "string", "channel": "string", "messages": "Int64", "out_of_order": "Int64",
         "max_distance_ms": "Int64", "max_distance_msgs": "Int64"})
    pd.testing.assert_frame_equal(produce_reorder_pd(frame), want)
    pd.testing.assert_frame_equal(to_pandas(produce_reorder(events)), want)


@pytest.mark.spark
def test_pack_sizes_of_three_packs_by_hand(spark):
    frame, events = both(spark, [pack(0, 0), pack(1, 3), pack(2, 5)])
    want = pd.DataFrame({"run_id": ["hand"], "channel": ["ch-0"], "vchannel": ["ch-0_100v0"], "packs": [3],
                         "messages": [8], "mean_per_pack": [8 / 3], "max_per_pack": [5], "empty_packs": [1]}).astype(
        {"run_id": "string", "channel": "string", "vchannel": "string", "packs": "Int64", "messages": "Int64",
         "max_per_pack": "Int64", "empty_packs": "Int64"})
    pd.testing.assert_frame_equal(pack_sizes_pd(frame), want)
    pd.testing.assert_frame_equal(to_pandas(pack_sizes(events)), want)


@pytest.mark.spark
def test_spark_reorder_counts_exactly_across_blocks_ties_and_runs(spark):
    """Spark counts larger earlier messages per block; the count must equal the definition's."""
    physical = [10, 30, 20, 25, 5, 40, 40, 35, 50, 45, 45, 60, 1]  # a late message reaches back to the start
    rows = [insert(i, hybrid(p)) for i, p in enumerate(physical)]
    rows += [insert(100 + i, hybrid(p), run_id="hand-2") for i, p in enumerate([3, 2, 1])]
    rows += [tick(200, 5.0, hybrid(1), run_id="hand-2")]  # not DML: ignored
    frame, events = both(spark, rows)
    got = to_pandas(produce_reorder(events)).sort_values(KEYS_CHANNEL).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, produce_reorder_pd(frame))
    behind = larger_before([hybrid(p) for p in physical])
    assert behind == [0, 0, 1, 1, 4, 0, 0, 2, 0, 1, 1, 0, 12]
    first = got.iloc[0]
    assert first["out_of_order"] == 7 and first["max_distance_msgs"] == 12
    assert first["mean_distance_msgs"] == pytest.approx(22 / 7)
    assert first["max_distance_ms"] == 59  # 60 before 1
    second = got.iloc[1]
    assert (second["messages"], second["out_of_order"], second["max_distance_msgs"]) == (3, 2, 2)


@pytest.mark.spark
def test_tick_lag_of_a_single_tick_has_no_gap(spark):
    rows = [tick(0, 100.0, hybrid(60), run_id="a"), tick(1, 100.0, hybrid(60), run_id="b", channel="ch-1"),
            tick(2, 150.0, hybrid(90), run_id="b", channel="ch-1")]
    frame, events = both(spark, rows)
    got = to_pandas(tick_lag(events)).sort_values(KEYS_CHANNEL).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, tick_lag_pd(frame))
    assert list(got["ticks"]) == [1, 2]
    assert list(got["p50_lag_ms"]) == [40.0, 40.0] and list(got["p95_lag_ms"]) == [40.0, 60.0]
    assert pd.isna(got["max_gap_ms"].iloc[0]) and got["max_gap_ms"].iloc[1] == 50.0


# --- Spark: real runs ----------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.parametrize("name", list(ANALYSES))
def test_analysis_equals_pandas_twin(loaded, frame, results, name):
    assert loaded.malformed_count == 0
    want = ANALYSES[name][1](frame)
    assert list(want.columns) == COLUMNS[name]
    assert sorted(want["run_id"].unique()) == sorted(BASICS + [STALL])
    pd.testing.assert_frame_equal(results[name], want)


@pytest.mark.spark
def test_stall_silences_every_pchannel_for_about_three_seconds(results, summaries):
    lag = results["tick_lag"]
    stall = lag[lag["run_id"] == STALL]
    assert list(stall["channel"]) == PCHANNELS
    assert stall["max_gap_ms"].between(2900.0, 3500.0).all()
    basics = lag[lag["run_id"].isin(BASICS)]
    assert len(basics) == 8 and (basics["max_gap_ms"] < 1000.0).all()  # a round every ~200 ms
    for run_id, rows in lag.groupby("run_id"):
        assert rows["max_gap_ms"].max() == pytest.approx(summaries[run_id]["longest_tick_gap_ms"], abs=1e-3)
        assert rows["ticks"].sum() == summaries[run_id]["time_ticks"]
    # no tick was written while proxy-2 was silent, so the ticks written trail true time no further than usual
    assert (stall["ticks"] < 8 / 5 * basics.groupby("channel")["ticks"].max().to_numpy()).all()


@pytest.mark.spark
def test_tick_lag_is_never_negative_and_percentiles_are_ordered(results):
    lag = results["tick_lag"]
    assert (lag["min_lag_ms"] >= 0).all()
    assert (lag["min_lag_ms"] <= lag["p50_lag_ms"]).all() and (lag["p50_lag_ms"] <= lag["p95_lag_ms"]).all()
    assert (lag["p95_lag_ms"] <= lag["max_lag_ms"]).all()
    assert ((lag["min_lag_ms"] <= lag["mean_lag_ms"]) & (lag["mean_lag_ms"] <= lag["max_lag_ms"])).all()


@pytest.mark.spark
def test_basics_writes_out_of_order_on_every_pchannel(results, summaries):
    reorder = results["produce_reorder"]
    for run_id in BASICS:
        rows = reorder[reorder["run_id"] == run_id]
        assert list(rows["channel"]) == PCHANNELS
        assert (rows["out_of_order"] > 0).all() and (rows["max_distance_msgs"] > 0).all()
    for run_id, rows in reorder.groupby("run_id"):
        assert rows["messages"].sum() == summaries[run_id]["dml_messages"]
        assert rows["out_of_order"].sum() == summaries[run_id]["out_of_order_messages"]
    assert (reorder["share_out_of_order"] == reorder["out_of_order"] / reorder["messages"]).all()
    # the TSO hands out physical time in 50 ms steps, so a late message is behind by whole steps (a task held up
    # behind the proxy's atLock and statsLock can miss more than one)
    distances = set(reorder["max_distance_ms"])
    assert all(d > 0 and d % 50 == 0 for d in distances)


@pytest.mark.spark
def test_packs_carry_every_consumed_message(results, frame, summaries):
    packs = results["pack_sizes"]
    consumed = frame[frame["kind"] == "mq.consume"].groupby(KEYS_PACK).size()
    per_vchannel = packs.set_index(KEYS_PACK)["messages"]
    assert per_vchannel.to_dict() == consumed.to_dict()
    for run_id, rows in packs.groupby("run_id"):
        assert rows["packs"].sum() == summaries[run_id]["packs"]
    assert len(packs[packs["run_id"] == STALL]) == 6  # collection 100 on 4 pchannels, 101 on 2
    stall_max = packs[packs["run_id"] == STALL]["max_per_pack"].to_numpy()
    basics_max = packs[packs["run_id"] == BASICS[0]]["max_per_pack"].to_numpy()
    assert (stall_max > 3 * basics_max).all()  # the first pack after the stall holds 3 s of writes
