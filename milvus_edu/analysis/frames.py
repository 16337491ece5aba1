"""What every lesson's analyses share: Spark results as exact pandas frames, sorting, percentiles.

A lesson's analysis (``milvus_edu/mechanisms/<lesson>/analysis.py``) pairs each Spark function with a pandas
twin that returns the same columns, sorted by its keys, with dtypes ``Int64`` / ``float64`` / ``string`` /
``boolean``; :func:`to_pandas` turns the Spark result into exactly those dtypes, so the two compare cell by cell.
"""

from __future__ import annotations

import functools
import os

import pandas as pd
import pyarrow as pa

from ..events.io import table_to_frame
from ..events.schema import FIELD_NAMES

#: The percentiles the lag analyses report (``p50_*``, ``p95_*`` columns).
PERCENTILES = (50, 95)


def _arrow_to_frame(table: pa.Table) -> pd.DataFrame:
    frame = table_to_frame(table)
    for name, typ in zip(table.column_names, table.schema.types):
        if pa.types.is_boolean(typ):
            frame[name] = frame[name].astype("boolean")
        elif pa.types.is_integer(typ):
            frame[name] = frame[name].astype("Int64")
    return frame


def to_pandas(sdf) -> pd.DataFrame:
    """A Spark DataFrame as pandas with exact nullable integers (``Int64``), ``string`` and ``boolean``.

    (Spark's ``toPandas()`` turns a long column with nulls into float64, which rounds hybrid
    timestamps.)
    """
    if hasattr(sdf, "toArrow"):  # Spark >= 4.0
        return _arrow_to_frame(sdf.toArrow())
    from pyspark.sql import types as T  # Spark 3.5: collect rows, build Arrow with matching types

    kinds = {T.LongType: pa.int64(), T.IntegerType: pa.int64(), T.DoubleType: pa.float64(),
             T.StringType: pa.string(), T.BooleanType: pa.bool_()}
    schema = pa.schema([pa.field(f.name, kinds[type(f.dataType)]) for f in sdf.schema.fields])
    rows = [r.asDict() for r in sdf.collect()]
    return _arrow_to_frame(pa.Table.from_pylist(rows, schema=schema))


def sorted_by(frame: pd.DataFrame, keys: list[str], columns: list[str]) -> pd.DataFrame:
    """``frame``'s ``columns`` in that order, rows sorted by ``keys`` (stable), index reset: a pandas twin's result."""
    return frame[columns].sort_values(keys, kind="stable").reset_index(drop=True)


def as_strings(out: pd.DataFrame, *columns: str) -> None:
    """Give ``columns`` of ``out`` pandas' ``string`` dtype, in place (what :func:`to_pandas` gives Spark's strings)."""
    for c in columns:
        out[c] = out[c].astype("string")


def nearest_rank(n, pct: int):
    """1-based rank of the ``pct``-th percentile among ``n`` sorted values: ``ceil(pct * n / 100)``
    in integers, so no float rounding can move it (Spark spells it ``(n * pct + 99) div 100``)."""
    return (n * pct + 99) // 100


def with_percentiles(out: pd.DataFrame, rows: pd.DataFrame, keys: list[str], value: str,
                     percentiles: tuple[int, ...] = PERCENTILES) -> pd.DataFrame:
    """``out`` with a ``p{P}_{value}`` column per one of ``percentiles``: per ``keys`` group of ``rows``, the
    nearest-rank percentile of ``value`` (ties broken by ``seq``, as the Spark versions order them)."""
    ranked = rows.sort_values(keys + [value, "seq"], kind="stable")
    ranked = ranked.assign(rank=ranked.groupby(keys, sort=False).cumcount() + 1,
                           n=ranked.groupby(keys, sort=False)["seq"].transform("size"))
    for p in percentiles:
        chosen = ranked[ranked["rank"] == nearest_rank(ranked["n"], p)]
        out = out.merge(chosen[keys + [value]].rename(columns={value: f"p{p}_{value}"}), on=keys, how="left")
    return out


# --- what an analysis is given ----------------------------------------------------------------------

def _is_spark_frame(value) -> bool:
    return type(value).__module__.startswith("pyspark.sql") and hasattr(value, "schema")


def _kind_of(value) -> str:
    """What ``value`` is, in the words of the hint that goes with it: a path, a run, loaded events, a Spark or
    pandas DataFrame, or its type's name."""
    if isinstance(value, (str, os.PathLike)):
        return "path"
    if isinstance(value, pd.DataFrame):
        return "pandas"
    if _is_spark_frame(value):
        return "spark"
    if hasattr(value, "malformed") and hasattr(value, "events"):
        return "loaded"  # load_events's LoadedEvents
    if hasattr(value, "summary") and hasattr(type(value), "events"):
        return "run"  # simulate's RunResult
    return type(value).__name__


def check_events_frame(frame, name: str) -> None:
    """Refuse, in one line, anything but a run log's events as a pandas DataFrame as the first argument of
    the pandas analysis ``name``: a ``TypeError`` saying what to pass instead (for a path, a run, a Spark
    DataFrame...), or a ``ValueError`` naming the run-log columns a frame lacks."""
    kind = _kind_of(frame)
    if kind == "pandas":
        missing = [c for c in FIELD_NAMES if c not in frame.columns]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise ValueError(f"{name}: the frame is not a run log's events (it lacks the column(s) {shown}); "
                             f"pass milvus_edu.load_run(folder) or simulate(...).events, filtered by rows only")
        return
    hint = {
        "path": f"read the run first: {name}(milvus_edu.load_run({str(frame)!r}))",
        "run": f"pass the run's events: {name}(run.events)",
        "spark": f"for a Spark DataFrame call {name.removesuffix('_pd')} (the Spark version), "
                 f"or pass to_pandas(events)",
        "loaded": f"for load_events's result call {name.removesuffix('_pd')}(loaded.events), "
                  f"or pass to_pandas(loaded.events)",
    }.get(kind, "pass milvus_edu.load_run(folder) or simulate(...).events")
    raise TypeError(f"{name} takes a run log's events as a pandas DataFrame, not {_article(kind)}: {hint}")


def check_events_spark(events, name: str) -> None:
    """Refuse, in one line, anything but a Spark DataFrame of run-log events as the first argument of the
    Spark analysis ``name``: a ``TypeError`` saying what to pass instead."""
    kind = _kind_of(events)
    if kind == "spark":
        return
    hint = {
        "loaded": f"pass the events of what load_events gave: {name}(loaded.events)",
        "pandas": f"for a pandas DataFrame call {name}_pd (the pandas twin)",
        "run": f"for a run in memory call {name}_pd(run.events), or load its folder with load_events",
        "path": f"load it first: {name}(load_events(spark, {str(events)!r}).events)",
    }.get(kind, "pass load_events(spark, paths).events")
    raise TypeError(f"{name} takes run-log events as a Spark DataFrame, not {_article(kind)}: {hint}")


def _article(kind: str) -> str:
    return {"path": "a path", "pandas": "a pandas DataFrame", "spark": "a Spark DataFrame",
            "loaded": "a LoadedEvents", "run": "a RunResult", "NoneType": "None"}.get(kind, f"a {kind}")


def pandas_analysis(fn):
    """Mark ``fn`` as a pandas twin whose first argument is a run log's events: a wrong argument is refused
    by :func:`check_events_frame` before ``fn`` runs, instead of failing inside it on a missing column."""

    @functools.wraps(fn)
    def checked(frame, *args, **kwargs):
        check_events_frame(frame, fn.__name__)
        return fn(frame, *args, **kwargs)

    return checked


def spark_analysis(fn):
    """Mark ``fn`` as a Spark analysis whose first argument is run-log events as a Spark DataFrame: a wrong
    argument is refused by :func:`check_events_spark` before ``fn`` runs."""

    @functools.wraps(fn)
    def checked(events, *args, **kwargs):
        check_events_spark(events, fn.__name__)
        return fn(events, *args, **kwargs)

    return checked
