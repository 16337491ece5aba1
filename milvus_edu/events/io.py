"""Reading run logs back: ``load_run(path)`` -> pandas, with the schema's dtypes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .schema import FIELD_NAMES, arrow_schema


class RunLogError(Exception):
    """A path that is not a readable run log."""


def _resolve(path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.is_dir():
        for name in ("events.parquet", "events.jsonl"):
            if (p / name).is_file():
                return p / name
        raise RunLogError(f"{p} has no events.parquet or events.jsonl; pass a run folder written by `milvus-edu simulate`")
    if not p.exists():
        raise RunLogError(f"{p} does not exist; pass a run folder or an events.parquet/events.jsonl file")
    return p


_TYPES = {pa.int64(): pd.Int64Dtype(), pa.string(): pd.StringDtype()}


def table_to_frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow table of the run-log schema as pandas, keeping 64-bit integers exact.

    (A plain ``to_pandas()`` turns an int64 column with nulls into float64, which rounds hybrid
    timestamps to multiples of 64.)
    """
    return table.to_pandas(types_mapper=_TYPES.get)


def rows_to_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows (dicts with the schema's columns) as a DataFrame with the schema's dtypes."""
    cols = {name: [r.get(name) for r in rows] for name in FIELD_NAMES}
    return table_to_frame(pa.table(cols, schema=arrow_schema()))


def load_run(path: str | os.PathLike) -> pd.DataFrame:
    """Load one run log (a run folder, ``events.parquet`` or ``events.jsonl``) into pandas.

    Columns follow :data:`milvus_edu.events.FIELDS`; integers are nullable ``Int64``, strings are
    pandas ``string``. Rows are in ``seq`` order.
    """
    p = _resolve(path)
    if p.suffix == ".parquet":
        try:
            table = pq.read_table(p, schema=arrow_schema())
        except Exception as exc:  # pyarrow raises several types for a foreign or broken file
            raise RunLogError(f"{p} is not a milvus-edu run log ({exc})") from exc
        frame = table_to_frame(table)
    elif p.suffix == ".jsonl":
        rows = []
        with open(p, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RunLogError(f"{p}:{lineno} is not JSON ({exc.msg})") from exc
                if not isinstance(row, dict):
                    raise RunLogError(f"{p}:{lineno} is not a JSON object")
                rows.append(row)
        frame = rows_to_frame(rows)
    else:
        raise RunLogError(f"{p} is neither .parquet nor .jsonl")
    return frame.sort_values("seq", kind="stable").reset_index(drop=True)
