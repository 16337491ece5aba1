"""milvus_edu.analysis: the Spark session, the run-log loader and the first TSO analyses.

One Spark session (local[2]) serves the whole module. Every analysis is checked against its pandas
twin on real runs (tso-basics, tso-failover with two seeds): same columns, same dtypes, same
numbers. Tests that need no JVM (settings, Java detection, import without pyspark) are not marked
``spark``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pandas as pd
import pyarrow as pa
import pytest

import milvus_edu
from milvus_edu.analysis import (
    ENV_CONF, ENV_DRIVER_MEMORY, ENV_MASTER, EventPathError, SparkConfError, SparkUnavailableError,
    check_spark_available, load_events, resolve_event_paths, spark_conf, spark_schema, to_pandas,
)
from milvus_edu.events import FIELD_NAMES, arrow_schema, load_run
from milvus_edu.mechanisms.tso.analysis import (allocations_per_window, allocations_per_window_pd, failover_gaps,
                                                failover_gaps_pd, kv_saves_per_second, kv_saves_per_second_pd)

RUNS = [("tso-basics", 1), ("tso-failover", 1), ("tso-failover", 2)]
KILL_T_MS = 10_000.0  # the tso-failover scenario kills rootcoord-1 at 10 s


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run folders of RUNS, keyed by run_id."""
    base = tmp_path_factory.mktemp("runs")
    out = {}
    for scenario, seed in RUNS:
        result = milvus_edu.simulate(scenario, seed=seed, out_dir=base / f"{scenario}-s{seed}", keep_events=False)
        out[result.summary["run_id"]] = result.out_dir
    return out


@pytest.fixture(scope="module")
def loaded(spark, runs):
    return load_events(spark, list(runs.values()))


@pytest.fixture(scope="module")
def frame(runs):
    return pd.concat([load_run(p) for p in runs.values()], ignore_index=True)


def _spark_types():
    from pyspark.sql import types as T

    return {pa.string(): T.StringType(), pa.int64(): T.LongType(), pa.float64(): T.DoubleType()}


# --- no JVM needed -------------------------------------------------------------------------------

@pytest.mark.slow
def test_imports_without_pyspark():
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "pyspark" or name.startswith("pyspark."):
                    raise ImportError("pyspark blocked by the test")
        sys.meta_path.insert(0, Block())
        import milvus_edu.analysis as a
        assert "pyspark" not in sys.modules
        try:
            a.spark_session()
        except a.SparkUnavailableError as e:
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'milvus-edu[spark]'" in out.stdout


def test_conf_defaults_and_env(monkeypatch):
    monkeypatch.delenv(ENV_MASTER, raising=False)
    monkeypatch.delenv(ENV_DRIVER_MEMORY, raising=False)
    monkeypatch.delenv(ENV_CONF, raising=False)  # tests/conftest.py sets it for the suite
    conf = spark_conf()
    assert "spark.sql.adaptive.enabled" not in conf  # Spark's own default, unless asked
    assert conf["spark.master"] == "local[*]" and conf["spark.driver.memory"] == "1g"
    assert conf["spark.ui.enabled"] == "false" and conf["spark.ui.showConsoleProgress"] == "false"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    monkeypatch.setenv(ENV_MASTER, "spark://example:7077")
    monkeypatch.setenv(ENV_DRIVER_MEMORY, "3g")
    assert spark_conf()["spark.master"] == "spark://example:7077"
    assert spark_conf()["spark.driver.memory"] == "3g"
    assert spark_conf(master="local[2]", driver_memory="512m")["spark.master"] == "local[2]"


def test_more_settings_come_from_the_environment_and_a_bad_one_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(ENV_CONF, " spark.sql.adaptive.enabled=false ; spark.sql.shuffle.partitions=3;; ")
    conf = spark_conf()
    assert conf["spark.sql.adaptive.enabled"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "3"  # overrides the module's default of 8
    assert conf["spark.ui.enabled"] == "false"  # the others stay
    for bad in ("spark.sql.adaptive.enabled", "adaptive=false", "spark.ui.enabled=", "=x"):
        monkeypatch.setenv(ENV_CONF, f"spark.sql.shuffle.partitions=3;{bad}")
        with pytest.raises(SparkConfError, match=r"^MILVUS_EDU_SPARK_CONF: '.*' is not a Spark setting; give key=value "
                                                 r"pairs separated by ';'") as err:
            spark_conf()
        assert bad.strip() in str(err.value) and "\n" not in str(err.value)


def test_missing_or_old_java_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    with pytest.raises(SparkUnavailableError, match=r"no Java runtime found on JAVA_HOME; Spark needs Java \d+\+"):
        check_spark_available()
    fake = tmp_path / "old-jdk" / "bin" / "java"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho \'openjdk version "1.8.0_392"\' >&2\n')
    fake.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "old-jdk"))
    import pyspark

    if int(pyspark.__version__.split(".")[0]) >= 4:
        with pytest.raises(SparkUnavailableError, match=r"Java 8 found on JAVA_HOME, but this Spark needs Java 17\+"):
            check_spark_available()


def test_bad_paths(tmp_path):
    with pytest.raises(EventPathError, match="does not exist"):
        resolve_event_paths(tmp_path / "nope")
    with pytest.raises(EventPathError, match="matches no file"):
        resolve_event_paths(str(tmp_path / "*.parquet"))
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(EventPathError, match="holds no events"):
        resolve_event_paths(tmp_path)


def test_paths_mix_folders_files_and_globs(runs):
    folders = list(runs.values())
    parent = folders[0].parent
    # A folder of runs, a glob and an explicit file naming the same runs: each file once, Parquet
    # preferred over the JSON Lines copy in the same run folder.
    files = resolve_event_paths([parent, str(parent / "*failover*"), folders[1] / "events.parquet"])
    assert sorted(files) == sorted(f / "events.parquet" for f in folders)
    assert resolve_event_paths(folders[1] / "events.jsonl") == [folders[1] / "events.jsonl"]


# --- Spark ---------------------------------------------------------------------------------------

@pytest.mark.spark
def test_schema_derived_from_events_schema(spark):
    schema, arrow = spark_schema(), arrow_schema()
    types = _spark_types()
    assert schema.names == arrow.names == list(FIELD_NAMES)
    for sf, af in zip(schema.fields, arrow):
        assert sf.dataType == types[af.type], sf.name
        assert sf.nullable == af.nullable, sf.name


@pytest.mark.spark
def test_parquet_and_jsonl_read_to_identical_rows(spark, runs):
    run = runs["tso-failover-s1"]
    from_parquet = load_events(spark, run / "events.parquet")
    from_jsonl = load_events(spark, run / "events.jsonl")
    assert from_parquet.events.schema == spark_schema() == from_jsonl.events.schema
    a = to_pandas(from_parquet.events).sort_values("seq").reset_index(drop=True)
    b = to_pandas(from_jsonl.events).sort_values("seq").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, load_run(run))  # and both equal the pandas reader, dtypes included
    assert from_parquet.malformed_count == from_jsonl.malformed_count == 0


@pytest.mark.spark
def test_malformed_jsonl_lines_are_counted_and_set_aside(spark, runs, tmp_path):
    lines = (runs["tso-basics-s1"] / "events.jsonl").read_text().splitlines()
    garbage = ["this is not json", '{"run_id":"tso-basics-s1","seq":17,"t_ms":']
    mixed = lines[:5] + [garbage[0]] + lines[5:200] + ["", garbage[1]] + lines[200:]
    path = tmp_path / "damaged.jsonl"
    path.write_text("\n".join(mixed) + "\n")
    loaded = load_events(spark, path)
    assert loaded.malformed_count == 2
    assert loaded.events.schema == spark_schema()
    got = to_pandas(loaded.events).sort_values("seq").reset_index(drop=True)
    assert len(got) == len(lines)
    assert list(got["seq"]) == [json.loads(line)["seq"] for line in lines]
    bad = loaded.malformed.orderBy("line").collect()
    assert sorted(r["line"] for r in bad) == sorted(garbage)
    assert all(r["source"].endswith("/damaged.jsonl") for r in bad)
    assert list(loaded.malformed.columns) == ["source", "line", "reason"]


@pytest.mark.spark
def test_valid_json_without_required_columns_is_malformed(spark, runs, tmp_path):
    lines = (runs["tso-basics-s1"] / "events.jsonl").read_text().splitlines()[:50]
    path = tmp_path / "partial.jsonl"
    path.write_text("\n".join(lines + ['{"kind":"tso.save","seq":5}', '{"seq":"five"}']) + "\n")
    loaded = load_events(spark, path)
    assert loaded.malformed_count == 2 and loaded.events.count() == 50
    reasons = sorted(r["reason"] for r in loaded.malformed.collect())
    assert reasons == ["missing required column(s): run_id,t_ms,node", "not a JSON object of the run-log schema"]


@pytest.mark.spark
def test_the_running_session_has_every_setting_of_spark_conf(spark):
    # spark_conf reads the master and the driver memory from the environment (tested above, without a JVM); this is
    # the JVM's side: every setting spark_session passed is the one Spark runs with, so the environment's reach it.
    # (A second session with another master would need another process and JVM: ~12 s of the suite for no more.)
    running = dict(spark.sparkContext.getConf().getAll())
    want = spark_conf(master="local[2]")
    java = "spark.driver.extraJavaOptions"  # Spark puts its own JVM options before ours
    assert running[java].endswith(want.pop(java))
    assert {key: running.get(key) for key in want} == want
    assert spark.sparkContext.master == "local[2]" and spark.conf.get("spark.sql.session.timeZone") == "UTC"


@pytest.mark.spark
def test_the_sessions_python_tasks_run_in_this_python(spark):
    # pyspark starts its Python workers with $PYSPARK_PYTHON, else the first `python3` on PATH: here that is pyenv's
    # shim, another path than this Python's (elsewhere, a Jupyter kernel's PATH may lead to another Python altogether,
    # without milvus-edu). spark_session sets it to this Python unless the user did; a task reports where it ran.
    where = spark.sparkContext.parallelize(range(2), 2).map(lambda _: __import__("sys").executable).collect()
    assert where == [sys.executable, sys.executable]


ANALYSES = [
    (allocations_per_window, allocations_per_window_pd, ["run_id", "node", "window"]),
    (kv_saves_per_second, kv_saves_per_second_pd, ["run_id", "node", "second"]),
    (failover_gaps, failover_gaps_pd, ["run_id", "kill_seq", "client"]),
]


@pytest.mark.spark
@pytest.mark.parametrize("spark_fn, pandas_fn, keys", ANALYSES, ids=[a[0].__name__ for a in ANALYSES])
def test_analysis_equals_pandas_twin(loaded, frame, spark_fn, pandas_fn, keys):
    assert loaded.malformed_count == 0
    got = to_pandas(spark_fn(loaded.events)).sort_values(keys).reset_index(drop=True)
    want = pandas_fn(frame)
    assert len(want) > 0
    pd.testing.assert_frame_equal(got, want)


@pytest.mark.spark
def test_failover_gap_timestamps_increase(loaded, runs):
    gaps = to_pandas(failover_gaps(loaded.events))
    failover_runs = sorted(r for r in runs if r.startswith("tso-failover"))
    assert sorted(gaps["run_id"].unique()) == failover_runs  # tso-basics has no kill: no rows
    for run_id in failover_runs:
        rows = gaps[gaps["run_id"] == run_id]
        assert sorted(rows["client"]) == ["client-0", "client-1"]
        assert (rows["killed_node"] == "rootcoord-1").all()
        assert (rows["kill_t_ms"] == KILL_T_MS).all()
        assert rows["increased"].eq(True).all()
        assert (rows["before_t_ms"] < KILL_T_MS).all() and (rows["after_t_ms"] > KILL_T_MS).all()
        assert (rows["gap_ms"] == rows["after_t_ms"] - rows["before_t_ms"]).all()
        # the same gap the run's summary reports (its first answer after minus last before, any client)
        summary = json.loads((runs[run_id] / "summary.json").read_text())["failover"]
        assert summary["killed_at_ms"] == KILL_T_MS
        assert rows["after_t_ms"].min() - rows["before_t_ms"].max() == pytest.approx(summary["client_gap_ms"])


@pytest.mark.spark
def test_allocations_per_window_add_up(loaded, runs):
    windows = to_pandas(allocations_per_window(loaded.events))
    assert windows["window"].notna().all()  # no allocation before a node's first save
    for run_id, folder in runs.items():
        tso = json.loads((folder / "summary.json").read_text())["tso"]
        rows = windows[windows["run_id"] == run_id]
        assert rows["allocations"].sum() == tso["allocations"]
        assert rows["timestamps"].sum() == tso["timestamps_handed_out"]
        assert len(rows) == tso["window_saves"]
