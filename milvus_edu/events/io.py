"""Reading run logs back: ``load_run(path)`` -> pandas, with the schema's dtypes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .schema import FIELD_NAMES, FIELDS, SCHEMA_VERSION, arrow_schema


#: The files a run folder holds (``simulate`` writes them; nothing else of the folder's is the run's).
RUN_FILES = ("events.parquet", "events.jsonl", "summary.json")


class RunLogError(ValueError):
    """A path that is not a readable run log (a ``ValueError``, as every bad input to milvus-edu's API)."""


#: A run token's shape (``milvus_edu.sim.token``: ``me1-`` and URL-safe base64), to tell one from a missing path.
_TOKEN = re.compile(r"me\d+-[A-Za-z0-9_-]{16,}")


def _resolve(path: str | os.PathLike) -> Path:
    if isinstance(path, str) and not path.strip():  # Path("") is the current folder, which the user did not name
        raise RunLogError("the run path is empty; pass a run folder or an events.parquet/events.jsonl file")
    p = Path(path)
    if p.is_dir():
        for name in ("events.parquet", "events.jsonl"):
            if (p / name).is_file():
                return p / name
        raise RunLogError(f"{p} has no events.parquet or events.jsonl; pass a run folder written by `milvus-edu simulate`")
    if not p.exists():
        if _TOKEN.fullmatch(str(path)):  # copied from `simulate`'s output: a token names a run, it does not hold one
            raise RunLogError(f"{str(path)[:12]}... is a run token, not a run folder: `milvus-edu replay TOKEN --out "
                              "DIR` makes its folder (in Python, pass milvus_edu.replay(token) instead)")
        raise RunLogError(f"{p} does not exist; pass a run folder or an events.parquet/events.jsonl file")
    return p


def schema_version_of(path: str | os.PathLike) -> int | None:
    """The run-log schema version a file was written with: from a Parquet file's metadata, or for
    JSON Lines from the ``summary.json`` beside it; ``None`` when neither says."""
    p = Path(path)
    if p.suffix == ".parquet":
        try:
            meta = pq.read_schema(p).metadata or {}
        except Exception:  # not Parquet at all: the reader reports that
            return None
        raw = meta.get(b"milvus_edu.schema_version")
        return int(raw) if raw and raw.isdigit() else None
    summary = p.with_name("summary.json")
    try:
        version = json.loads(summary.read_text(encoding="utf-8")).get("schema_version")
    except (OSError, ValueError, AttributeError):
        return None
    return version if isinstance(version, int) else None


def check_schema_version(path: str | os.PathLike) -> None:
    """Raise :class:`RunLogError` when ``path`` was written by a newer run-log schema than this one reads.

    Older versions are read as they are: a column a version lacks reads as null.
    """
    version = schema_version_of(path)
    if version is not None and version > SCHEMA_VERSION:
        raise RunLogError(f"{path} was written with run-log schema version {version}; this milvus-edu reads up to "
                          f"version {SCHEMA_VERSION}: upgrade milvus-edu to read it")


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


_REQUIRED = [f.name for f in FIELDS if not f.nullable]


def _check_required(p: Path, table: pa.Table) -> None:
    if table.num_rows == 0:
        raise RunLogError(f"{p} holds no milvus-edu events")
    for name in _REQUIRED:
        nulls = table.column(name).null_count
        if nulls:
            raise RunLogError(f"{p} is not a milvus-edu run log: {nulls} row(s) lack the required column {name!r}")


def _jsonl_table(p: Path, rows: list[dict], linenos: list[int]) -> pa.Table:
    try:
        return pa.Table.from_pylist(rows, schema=arrow_schema())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        pass
    for row, lineno in zip(rows, linenos):  # find the first line that does not fit, to name it
        try:
            pa.Table.from_pylist([row], schema=arrow_schema())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise RunLogError(f"{p}:{lineno} does not fit the run-log schema ({exc})") from None
    raise RunLogError(f"{p} does not fit the run-log schema")


def load_run(path: str | os.PathLike) -> pd.DataFrame:
    """Load one run log (a run folder, ``events.parquet`` or ``events.jsonl``) into pandas.

    Columns follow :data:`milvus_edu.events.FIELDS`; integers are nullable ``Int64``, strings are
    pandas ``string``. Rows are in ``seq`` order. A log of an older schema version loads with the
    columns it lacks as nulls; one of a newer version raises :class:`RunLogError` naming it. A file that is empty, not a run log, or has a line
    that does not fit the schema raises :class:`RunLogError` naming the file (and line); anything but a path, such
    as a run result, raises ``TypeError`` saying where its run log is.
    """
    if not isinstance(path, (str, os.PathLike)):  # else pathlib's "expected str, bytes or os.PathLike object"
        if isinstance(path, pd.DataFrame):
            hint = "; a DataFrame is a run log already"
        elif hasattr(path, "summary") and hasattr(path, "events"):
            hint = "; a run result holds its run log already: run.events"
        else:
            hint = ""
        raise TypeError(f"load_run reads a run folder or an events.parquet/events.jsonl file, "
                        f"got {type(path).__name__}{hint}")
    p = _resolve(path)
    check_schema_version(p)
    if p.suffix == ".parquet":
        try:
            table = pq.read_table(p, schema=arrow_schema())
        except Exception as exc:  # pyarrow raises several types for a foreign or broken file
            raise RunLogError(f"{p} is not a milvus-edu run log ({exc})") from exc
    elif p.suffix == ".jsonl":
        rows, linenos = [], []
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise RunLogError(f"{p} is not text; pass a run folder or an events.jsonl written by milvus-edu") from None
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RunLogError(f"{p}:{lineno} is not JSON ({exc.msg})") from exc
            if not isinstance(row, dict):
                raise RunLogError(f"{p}:{lineno} is not a JSON object")
            rows.append(row)
            linenos.append(lineno)
        table = _jsonl_table(p, rows, linenos)
    else:
        raise RunLogError(f"{p} is neither .parquet nor .jsonl; pass a run folder or an events file")
    _check_required(p, table)
    frame = table_to_frame(table)
    return frame.sort_values("seq", kind="stable").reset_index(drop=True)
