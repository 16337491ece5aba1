"""Flush analyses over many runs, each in Spark and as a pandas twin with the same numbers, and the binlogs read
back by Spark and by pyarrow.

Like :mod:`milvus_edu.mechanisms.timetick.analysis`: every events function takes the events DataFrame of
:func:`~milvus_edu.analysis.load_events` and returns a Spark DataFrame; its ``_pd`` twin takes the pandas frame of
:func:`milvus_edu.events.load_run` (or several concatenated) and returns the same columns, sorted by the keys, with
dtypes ``Int64`` / ``float64`` / ``string`` / ``boolean``; ``to_pandas(f(events))`` equals ``f_pd(frame)``. Order
inside a vchannel is ``seq``. Only run-log columns are read; nothing of the model runs again.

* :func:`checkpoint_lag` -- how far each stored channel checkpoint trails true time and the consumed position.
* :func:`flush_latency` -- per flush call: when GetFlushState said flushed, and when the DataNode cleared flushTs.
* :func:`sync_sizes` -- per vchannel: how many syncs, how many rows each, how many were flushes, how many failed.
* :func:`binlog_rows` -- the Parquet binlogs themselves, read from each run folder's object store: rows and
  deleted keys per segment.
* :func:`binlog_vs_meta` -- those counts against DataCoord's meta as the run log recorded it.

:data:`ANALYSES` maps the events-only analyses to their ``(spark_fn, pandas_fn)`` pairs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd

from ...analysis.frames import PERCENTILES, as_strings, pandas_analysis, sorted_by, spark_analysis, with_percentiles
from ...events.schema import SIM_EPOCH_MS
from ...narrate import detail_dict
from ...tsoutil import LOGICAL_BITS

KEYS_VCHANNEL = ["run_id", "vchannel"]
KEYS_FLUSH = ["run_id", "flush_ts"]
KEYS_SEGMENT = ["run_id", "segment"]

CHECKPOINT_LAG_COLUMNS = ["run_id", "vchannel", "checkpoints", "mean_lag_ms", "p50_lag_ms", "p95_lag_ms",
                          "max_lag_ms", "max_behind_consumed_ms"]
FLUSH_LATENCY_COLUMNS = ["run_id", "flush_ts", "called_ms", "flushed_ms", "cleared_ms", "vchannels_cleared",
                         "latency_ms", "reset_latency_ms"]
SYNC_SIZES_COLUMNS = ["run_id", "vchannel", "syncs", "rows", "mean_rows", "max_rows", "flush_syncs", "l0_syncs",
                      "failed_syncs"]
BINLOG_COLUMNS = ["run_id", "segment", "binlog_rows", "distinct_pks", "deleted_pks"]
BINLOG_META_COLUMNS = ["run_id", "segment", "binlog_rows", "meta_rows", "audit_rows", "match"]

#: The primary-key field's id (its insert binlogs are counted) and where a run keeps its bucket.
PK_FIELD = 100
BUCKET = Path("objects") / "a-bucket" / "files"
_SEGMENT = re.compile(r"(?:insert_log|delta_log)/\d+/-?\d+/(\d+)/")
_ONE_PHYSICAL_MS = 1 << LOGICAL_BITS


# --- checkpoint lag ------------------------------------------------------------------------------

@spark_analysis
def checkpoint_lag(events):
    """Per run and vchannel, how far the channel checkpoints DataCoord stored trail (Spark).

    Over ``datacoord.channel_cp`` rows that stored a checkpoint (no ``error``, ``detail.saved`` true): the lag is
    true time when it was stored minus the checkpoint's physical part, ``t_ms - ((ts >> 18) - SIM_EPOCH_MS)`` ms:
    how much a DataNode restarting at that moment would replay. ``max_behind_consumed_ms`` is the largest gap
    between the consumed position (the furthest pack end the vchannel's flowgraph reached before it, by ``seq``:
    a ``datanode.buffer`` row's ``end_ts`` or a ``datanode.checkpoint`` row's ``tick_ts``) and the stored
    checkpoint, in physical ms (null when nothing was consumed yet). Columns: run_id,
    vchannel, checkpoints, mean_lag_ms, p50_lag_ms, p95_lag_ms (nearest rank), max_lag_ms, max_behind_consumed_ms.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    vch = Window.partitionBy(*KEYS_VCHANNEL)
    so_far = vch.orderBy("seq").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    saved = ((F.col("kind") == "datacoord.channel_cp") & F.col("error").isNull()
             & (F.get_json_object("detail", "$.saved") == "true"))
    consumed = F.when(F.col("kind") == "datanode.buffer", F.col("end_ts")).when(
        F.col("kind") == "datanode.checkpoint", F.col("tick_ts"))
    rows = (events.filter(saved | F.col("kind").isin("datanode.buffer", "datanode.checkpoint"))
            .select(*KEYS_VCHANNEL, "seq", "t_ms", "ts", saved.alias("is_cp"), consumed.alias("buf_end"))
            .withColumn("consumed", F.max("buf_end").over(so_far))
            .filter(F.col("is_cp"))
            .withColumn("lag_ms", F.col("t_ms") - (F.shiftright("ts", LOGICAL_BITS) - F.lit(SIM_EPOCH_MS)).cast("double"))
            .withColumn("behind_ms", (F.shiftright("consumed", LOGICAL_BITS) - F.shiftright("ts", LOGICAL_BITS)))
            .withColumn("rank", F.row_number().over(vch.orderBy("lag_ms", "seq")))
            .withColumn("n", F.count(F.lit(1)).over(vch)))
    pick = {p: F.max(F.when(F.col("rank") == F.expr(f"(n * {p} + 99) div 100"), F.col("lag_ms"))) for p in PERCENTILES}
    return (rows.groupBy(*KEYS_VCHANNEL)
            .agg(F.count(F.lit(1)).alias("checkpoints"), F.avg("lag_ms").alias("mean_lag_ms"),
                 pick[50].alias("p50_lag_ms"), pick[95].alias("p95_lag_ms"), F.max("lag_ms").alias("max_lag_ms"),
                 F.max("behind_ms").alias("max_behind_consumed_ms"))
            .select(*CHECKPOINT_LAG_COLUMNS))


def _details(frame: pd.DataFrame) -> pd.Series:
    return frame["detail"].map(detail_dict)


@pandas_analysis
def checkpoint_lag_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`checkpoint_lag` (same columns and numbers), sorted."""
    cps = frame[(frame["kind"] == "datacoord.channel_cp") & frame["error"].isna()]
    saved = cps[_details(cps).map(lambda d: bool(d.get("saved")))]
    flow = frame[frame["kind"].isin(["datanode.buffer", "datanode.checkpoint"])]
    rows = pd.concat([saved, flow])[KEYS_VCHANNEL + ["seq", "t_ms", "ts", "end_ts", "tick_ts", "kind"]]
    rows = rows.sort_values(KEYS_VCHANNEL + ["seq"], kind="stable").reset_index(drop=True)
    rows["buf_end"] = (rows["end_ts"].astype("Int64").where(rows["kind"] == "datanode.buffer")
                       .fillna(rows["tick_ts"].astype("Int64").where(rows["kind"] == "datanode.checkpoint")))
    grouped = rows.groupby(KEYS_VCHANNEL, sort=False)["buf_end"]
    rows["consumed"] = grouped.cummax().groupby([rows["run_id"], rows["vchannel"]], sort=False).ffill()
    rows = rows[rows["kind"] == "datacoord.channel_cp"].copy()
    physical = rows["ts"].astype("Int64") // _ONE_PHYSICAL_MS
    rows["lag_ms"] = rows["t_ms"].astype("float64") - (physical - SIM_EPOCH_MS).astype("float64")
    rows["behind_ms"] = (rows["consumed"].astype("Int64") // _ONE_PHYSICAL_MS - physical).astype("Int64")
    out = (rows.groupby(KEYS_VCHANNEL, sort=False)
           .agg(checkpoints=("seq", "size"), mean_lag_ms=("lag_ms", "mean"), max_lag_ms=("lag_ms", "max"),
                max_behind_consumed_ms=("behind_ms", "max"))
           .reset_index())
    out = with_percentiles(out, rows, KEYS_VCHANNEL, "lag_ms")
    out["checkpoints"] = out["checkpoints"].astype("Int64")
    out["max_behind_consumed_ms"] = out["max_behind_consumed_ms"].astype("Int64")
    for c in ("mean_lag_ms", "p50_lag_ms", "p95_lag_ms", "max_lag_ms"):
        out[c] = out[c].astype("float64")
    as_strings(out, *KEYS_VCHANNEL)
    return sorted_by(out, KEYS_VCHANNEL, CHECKPOINT_LAG_COLUMNS)


# --- flush latency -------------------------------------------------------------------------------

@spark_analysis
def flush_latency(events):
    """Per run and flush call, how long the flush took to finish, for the client and for the DataNode (Spark).

    A flush is a ``client.flush`` row without ``error`` whose ``detail.flushed`` is false: ``flush_ts`` is its
    ``ts`` and ``called_ms`` its ``t_ms``. ``flushed_ms``: the first ``client.flush`` with the same ``ts`` and
    ``detail.flushed`` true (GetFlushState said so); ``cleared_ms`` / ``vchannels_cleared``: the last time, and on
    how many vchannels, a DataNode cleared that flushTs (``datanode.flush_ts`` with ``detail.set`` false), null /
    0 when it never did (a later flush overwrote it, or the run ended). ``latency_ms = flushed_ms - called_ms``;
    ``reset_latency_ms = cleared_ms - called_ms``.
    """
    from pyspark.sql import functions as F

    flushed = F.get_json_object("detail", "$.flushed") == "true"
    call = (F.col("kind") == "client.flush") & F.col("error").isNull() & ~flushed
    done = (F.col("kind") == "client.flush") & F.col("error").isNull() & flushed
    clear = (F.col("kind") == "datanode.flush_ts") & (F.get_json_object("detail", "$.set") == "false")
    rows = events.filter(call | done | clear).select(
        "run_id", F.col("ts").alias("flush_ts"), "t_ms", "vchannel", call.alias("call"), done.alias("done"),
        clear.alias("clear"))
    return (rows.groupBy(*KEYS_FLUSH)
            .agg(F.min(F.when(F.col("call"), F.col("t_ms"))).alias("called_ms"),
                 F.min(F.when(F.col("done"), F.col("t_ms"))).alias("flushed_ms"),
                 F.max(F.when(F.col("clear"), F.col("t_ms"))).alias("cleared_ms"),
                 F.countDistinct(F.when(F.col("clear"), F.col("vchannel"))).alias("vchannels_cleared"))
            .filter(F.col("called_ms").isNotNull())
            .withColumn("latency_ms", F.col("flushed_ms") - F.col("called_ms"))
            .withColumn("reset_latency_ms", F.col("cleared_ms") - F.col("called_ms"))
            .select(*FLUSH_LATENCY_COLUMNS))


@pandas_analysis
def flush_latency_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`flush_latency`, sorted."""
    frame = frame[frame["kind"].isin(["client.flush", "datanode.flush_ts"])]
    d = _details(frame)
    ok = frame["error"].isna()
    client = (frame["kind"] == "client.flush") & ok
    rows = frame.assign(call=client & ~d.map(lambda x: bool(x.get("flushed"))),
                        done=client & d.map(lambda x: bool(x.get("flushed"))),
                        clear=(frame["kind"] == "datanode.flush_ts") & d.map(lambda x: x.get("set") is False))
    rows = rows[rows["call"] | rows["done"] | rows["clear"]].rename(columns={"ts": "flush_ts"})
    rows["flush_ts"] = rows["flush_ts"].astype("Int64")
    if rows.empty:  # no flush in these runs: groupby.apply would give a frame without the columns (KeyError below)
        out = pd.DataFrame(columns=[*KEYS_FLUSH, "called_ms", "flushed_ms", "cleared_ms", "vchannels_cleared"])
    else:
        out = (rows.groupby(KEYS_FLUSH, sort=False)
               .apply(lambda g: pd.Series({
                   "called_ms": g.loc[g["call"], "t_ms"].min(),
                   "flushed_ms": g.loc[g["done"], "t_ms"].min(),
                   "cleared_ms": g.loc[g["clear"], "t_ms"].max(),
                   "vchannels_cleared": g.loc[g["clear"], "vchannel"].nunique()}), include_groups=False)
               .reset_index())
    out = out[out["called_ms"].notna()].copy()
    for c in ("called_ms", "flushed_ms", "cleared_ms"):
        out[c] = out[c].astype("float64")
    out["vchannels_cleared"] = out["vchannels_cleared"].astype("Int64")
    out["latency_ms"] = out["flushed_ms"] - out["called_ms"]
    out["reset_latency_ms"] = out["cleared_ms"] - out["called_ms"]
    out["flush_ts"] = out["flush_ts"].astype("Int64")
    as_strings(out, "run_id")
    return sorted_by(out, KEYS_FLUSH, FLUSH_LATENCY_COLUMNS)


# --- sync sizes ----------------------------------------------------------------------------------

@spark_analysis
def sync_sizes(events):
    """Per run and vchannel, the syncs the write buffer cut (Spark).

    Over ``datanode.sync`` rows: syncs, rows (sum of ``count``), mean_rows and max_rows per sync, flush_syncs
    (``detail.flush``: a segment's last sync), l0_syncs (``detail.level`` L0: delete-only segments); failed_syncs
    counts ``datanode.sync_done`` rows with an ``error``.
    """
    from pyspark.sql import functions as F

    sync = F.col("kind") == "datanode.sync"
    failed = (F.col("kind") == "datanode.sync_done") & F.col("error").isNotNull()
    rows = events.filter(sync | failed).select(
        *KEYS_VCHANNEL, sync.alias("sync"), failed.alias("failed"),
        F.when(sync, F.col("count")).alias("rows"),
        (sync & (F.get_json_object("detail", "$.flush") == "true")).cast("long").alias("flush"),
        (sync & (F.get_json_object("detail", "$.level") == "L0")).cast("long").alias("l0"))
    return (rows.groupBy(*KEYS_VCHANNEL)
            .agg(F.sum(F.col("sync").cast("long")).alias("syncs"), F.sum("rows").alias("rows"),
                 F.avg("rows").alias("mean_rows"), F.max("rows").alias("max_rows"),
                 F.sum("flush").alias("flush_syncs"), F.sum("l0").alias("l0_syncs"),
                 F.sum(F.col("failed").cast("long")).alias("failed_syncs"))
            .select(*SYNC_SIZES_COLUMNS))


@pandas_analysis
def sync_sizes_pd(frame: pd.DataFrame) -> pd.DataFrame:
    """The pandas twin of :func:`sync_sizes`, sorted."""
    frame = frame[frame["kind"].isin(["datanode.sync", "datanode.sync_done"])]
    d = _details(frame)
    sync = frame["kind"] == "datanode.sync"
    failed = (frame["kind"] == "datanode.sync_done") & frame["error"].notna()
    rows = frame.assign(sync=sync.astype("int64"), failed=failed.astype("int64"),
                        rows=frame["count"].astype("Int64").where(sync),
                        flush=(sync & d.map(lambda x: bool(x.get("flush")))).astype("int64"),
                        l0=(sync & d.map(lambda x: x.get("level") == "L0")).astype("int64"))[sync | failed]
    out = (rows.groupby(KEYS_VCHANNEL, sort=False)
           .agg(syncs=("sync", "sum"), rows=("rows", "sum"), mean_rows=("rows", "mean"), max_rows=("rows", "max"),
                flush_syncs=("flush", "sum"), l0_syncs=("l0", "sum"), failed_syncs=("failed", "sum"))
           .reset_index())
    for c in ("syncs", "rows", "max_rows", "flush_syncs", "l0_syncs", "failed_syncs"):
        out[c] = out[c].astype("Int64")
    out["mean_rows"] = out["mean_rows"].astype("float64")
    as_strings(out, *KEYS_VCHANNEL)
    return sorted_by(out, KEYS_VCHANNEL, SYNC_SIZES_COLUMNS)


# --- the binlogs themselves ----------------------------------------------------------------------

def _run_id(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["run_id"])
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{run_dir}: not a milvus-edu run folder (no readable summary.json with a run_id)") from exc


def _binlog_files(run_dirs) -> list[tuple[str, str, int, Path]]:
    """``(run_id, "insert" | "delta", segment, path)`` of every pk insert binlog and delta log of the runs, each
    checked to be a readable Parquet file (a damaged one: ``ValueError`` naming it; nothing is changed)."""
    import pyarrow.parquet as pq

    if isinstance(run_dirs, (str, os.PathLike)):  # one folder, not the characters of its name
        run_dirs = [run_dirs]
    out = []
    for run_dir in (Path(d) for d in run_dirs):
        run_id = _run_id(run_dir)
        bucket = run_dir / BUCKET
        if not bucket.is_dir():
            raise ValueError(f"{run_dir}: no binlogs ({BUCKET} is missing); run a flush scenario with --out")
        files = [("insert", p) for p in sorted(bucket.glob(f"insert_log/*/*/*/{PK_FIELD}/*"))]
        files += [("delta", p) for p in sorted(bucket.glob("delta_log/*/*/*/*"))]
        for what, path in files:
            try:
                pq.read_metadata(path)
            except Exception as exc:
                raise ValueError(f"{path}: not a readable Parquet binlog ({exc})") from None
            m = _SEGMENT.search(path.as_posix())
            out.append((run_id, what, int(m.group(1)), path))
    return out


def binlog_rows_pd(run_dirs) -> pd.DataFrame:
    """Per run and segment, what its binlogs hold, read with pyarrow (the twin of :func:`binlog_rows`); ``run_dirs``
    is a list of run folders, or one."""
    import pyarrow.parquet as pq

    acc: dict[tuple[str, int], dict] = {}
    for run_id, what, segment, path in _binlog_files(run_dirs):
        pks = pq.read_table(path, columns=["pk"]).column("pk").to_pylist()
        a = acc.setdefault((run_id, segment), {"rows": 0, "pks": set(), "deleted": 0})
        if what == "insert":
            a["rows"] += len(pks)
            a["pks"].update(pks)
        else:
            a["deleted"] += len(pks)
    out = pd.DataFrame([{"run_id": r, "segment": s, "binlog_rows": a["rows"], "distinct_pks": len(a["pks"]),
                         "deleted_pks": a["deleted"]} for (r, s), a in acc.items()], columns=BINLOG_COLUMNS)
    for c in ("segment", "binlog_rows", "distinct_pks", "deleted_pks"):
        out[c] = out[c].astype("Int64")
    as_strings(out, "run_id")
    return sorted_by(out, KEYS_SEGMENT, BINLOG_COLUMNS)


def binlog_rows(spark, run_dirs):
    """Per run and segment, what its binlogs hold, read by Spark from the object stores of ``run_dirs`` (a list of run
    folders, or one).

    Insert binlogs of the primary-key field (``insert_log/{collection}/{partition}/{segment}/100/{logID}``) and
    delta logs (``delta_log/{collection}/{partition}/{segment}/{logID}``) are plain Parquet; the segment comes
    from the path. Columns: run_id, segment, binlog_rows (rows in insert binlogs), distinct_pks, deleted_pks
    (rows in delta logs: an L0 segment holds the deletes). A file that is not a readable Parquet binlog:
    ``ValueError`` naming it (checked with pyarrow first; nothing is modified).
    """
    from pyspark.sql import functions as F

    files = _binlog_files(run_dirs)
    parts = []
    for what in ("insert", "delta"):
        by_run: dict[str, list[str]] = {}
        for run_id, w, _seg, path in files:
            if w == what:
                by_run.setdefault(run_id, []).append(str(path))
        for run_id, paths in by_run.items():
            df = (spark.read.format("parquet").load(paths).select("pk")
                  .withColumn("file", F.input_file_name())
                  .withColumn("segment", F.regexp_extract("file", r"(?:insert_log|delta_log)/\d+/-?\d+/(\d+)/", 1)
                              .cast("long"))
                  .withColumn("run_id", F.lit(run_id)).withColumn("what", F.lit(what)))
            parts.append(df.select("run_id", "segment", "what", "pk"))
    if not parts:
        return spark.createDataFrame([], "run_id string, segment long, binlog_rows long, distinct_pks long, "
                                         "deleted_pks long")
    rows = parts[0]
    for p in parts[1:]:
        rows = rows.unionByName(p)
    insert = F.col("what") == "insert"
    return (rows.groupBy(*KEYS_SEGMENT)
            .agg(F.sum(insert.cast("long")).alias("binlog_rows"),
                 F.countDistinct(F.when(insert, F.col("pk"))).alias("distinct_pks"),
                 F.sum((~insert).cast("long")).alias("deleted_pks"))
            .select(*BINLOG_COLUMNS))


def _meta_pd(frame: pd.DataFrame) -> pd.DataFrame:
    saves = frame[(frame["kind"] == "datacoord.save_binlog_paths") & frame["error"].isna() & frame["count"].notna()]
    saves = saves.sort_values(KEYS_SEGMENT + ["seq"], kind="stable").groupby(KEYS_SEGMENT, sort=False).tail(1)
    audit = frame[frame["kind"] == "storage.audit"].groupby(KEYS_SEGMENT, sort=False)["count"].sum()
    meta = saves[KEYS_SEGMENT + ["count"]].rename(columns={"count": "meta_rows"})
    return meta.merge(audit.rename("audit_rows").reset_index(), on=KEYS_SEGMENT, how="outer")


@pandas_analysis
def binlog_vs_meta_pd(frame: pd.DataFrame, run_dirs) -> pd.DataFrame:
    """The pandas twin of :func:`binlog_vs_meta`, sorted."""
    meta = _meta_pd(frame)
    meta["segment"] = meta["segment"].astype("Int64")
    as_strings(meta, "run_id")
    logs = binlog_rows_pd(run_dirs)[KEYS_SEGMENT + ["binlog_rows"]]
    out = logs.merge(meta, on=KEYS_SEGMENT, how="outer")
    for c in ("binlog_rows", "meta_rows", "audit_rows"):
        out[c] = out[c].astype("Int64")
    out = out[(out["binlog_rows"].fillna(0) > 0) | (out["meta_rows"].fillna(0) > 0)].copy()
    out["match"] = (out["binlog_rows"].fillna(0) == out["meta_rows"].fillna(0)).astype("boolean")
    return sorted_by(out, KEYS_SEGMENT, BINLOG_META_COLUMNS)


def binlog_vs_meta(spark, events, run_dirs):
    """Per run and segment, the rows in its binlogs (:func:`binlog_rows`) against DataCoord's meta (Spark).

    ``meta_rows``: the segment's row count in the last ``datacoord.save_binlog_paths`` DataCoord accepted (by
    ``seq``), i.e. what DataCoord's meta says at the end; ``audit_rows``: what the final audit read back
    (``storage.audit``, null when the run ended before it). Segments with no row on either side (L0 segments:
    deletes only) are left out. ``match``: binlog rows equal meta rows (nulls as 0). On a healthy run every
    segment matches. It compares counts only: DataCoord counts a segment's rows from its binlogs' entries, so rows
    a DataNode wrote twice (a restart that replays past the checkpoint without the ddNode's filter, switch
    ``skip_recovery_filter``) are in both counts and still match; :func:`binlog_rows`'s ``distinct_pks`` below its
    ``binlog_rows`` shows them.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    last = Window.partitionBy(*KEYS_SEGMENT).orderBy(F.col("seq").desc())
    meta = (events.filter((F.col("kind") == "datacoord.save_binlog_paths") & F.col("error").isNull()
                          & F.col("count").isNotNull())
            .withColumn("k", F.row_number().over(last)).filter(F.col("k") == 1)
            .select(*KEYS_SEGMENT, F.col("count").alias("meta_rows")))
    audit = (events.filter(F.col("kind") == "storage.audit").groupBy(*KEYS_SEGMENT)
             .agg(F.sum("count").alias("audit_rows")))
    logs = binlog_rows(spark, run_dirs).select(*KEYS_SEGMENT, "binlog_rows")
    out = (logs.join(meta, KEYS_SEGMENT, "full_outer").join(audit, KEYS_SEGMENT, "full_outer")
           .filter((F.coalesce("binlog_rows", F.lit(0)) > 0) | (F.coalesce("meta_rows", F.lit(0)) > 0))
           .withColumn("match", F.coalesce("binlog_rows", F.lit(0)) == F.coalesce("meta_rows", F.lit(0))))
    return out.select(*BINLOG_META_COLUMNS)


#: Each flush analysis over the run log by name: ``(spark_fn, pandas_fn)``.
ANALYSES = {
    "checkpoint_lag": (checkpoint_lag, checkpoint_lag_pd),
    "flush_latency": (flush_latency, flush_latency_pd),
    "sync_sizes": (sync_sizes, sync_sizes_pd),
}
