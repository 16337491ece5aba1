"""What every lesson's analyses share: Spark results as exact pandas frames, sorting, percentiles.

A lesson's analysis (``milvus_edu/mechanisms/<lesson>/analysis.py``) pairs each Spark function with a pandas
twin that returns the same columns, sorted by its keys, with dtypes ``Int64`` / ``float64`` / ``string`` /
``boolean``; :func:`to_pandas` turns the Spark result into exactly those dtypes, so the two compare cell by cell.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from ..events.io import table_to_frame

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
