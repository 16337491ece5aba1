"""Reading run logs into Spark with the run-log schema of :mod:`milvus_edu.events.schema`.

``spark_schema()`` is derived from :data:`~milvus_edu.events.schema.FIELDS` (never written twice).
``load_events(spark, paths)`` reads any mix of run folders, ``events.parquet`` / ``events.jsonl``
files, folders of run folders and globs, and returns :class:`LoadedEvents`:

* ``.events`` -- the good rows, with exactly :func:`spark_schema` (names, types, nullability);
* ``.malformed`` -- the rows set aside, as ``source`` (file URI), ``line`` (the raw JSON line; for
  a Parquet row, the row as JSON) and ``reason``;
* ``.malformed_count`` -- how many rows were set aside (computed on first use: one pass over the
  input).

A row is malformed when its line is not a JSON object of the schema's types (Spark's PERMISSIVE
mode puts it in the corrupt-record column) or when a required column (``nullable=False`` in the
schema) is missing. Blank lines are skipped, as :func:`milvus_edu.events.load_run` does.
"""

from __future__ import annotations

import glob as _glob
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..events.io import RunLogError, check_schema_version
from ..events.schema import FIELDS

CORRUPT_COLUMN = "_corrupt_record"
MALFORMED_COLUMNS = ("source", "line", "reason")
RUN_LOG_NAMES = ("events.parquet", "events.jsonl")
_GLOB_CHARS = set("*?[")
_SPARK_TYPES = {"string": "StringType", "int64": "LongType", "float64": "DoubleType"}
# A value of the column's type, only ever used for a column Spark already knows is not null (see
# _with_schema_nullability); it never replaces a real value.
_NEVER_USED = {"string": "", "int64": 0, "float64": 0.0}


class EventPathError(ValueError):
    """A path given to :func:`load_events` that is not (or holds no) run log."""


def spark_schema():
    """The Spark ``StructType`` of a run log, derived from :data:`milvus_edu.events.schema.FIELDS`.

    string -> StringType, int64 -> LongType, float64 -> DoubleType; nullability as in the schema.
    """
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, getattr(T, _SPARK_TYPES[f.type])(), f.nullable) for f in FIELDS])


def _run_files_in(folder: Path) -> list[Path]:
    """The run-log files under ``folder``: per folder its events.parquet, else its events.jsonl,
    else (a plain data set folder) its ``*.parquet`` files."""
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        names = set(files)
        if "events.parquet" in names:
            found.append(Path(root) / "events.parquet")
        elif "events.jsonl" in names:
            found.append(Path(root) / "events.jsonl")
        else:
            found += [Path(root) / n for n in sorted(names) if n.endswith(".parquet") and not n.startswith((".", "_"))]
    return found


def resolve_event_paths(paths) -> list[Path]:
    """Expand ``paths`` (one path or a list; run folders, files, folders of runs, globs) to run-log
    files, in order, without duplicates. A run folder with both files contributes its Parquet only."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Path] = []
    for raw in paths:
        text = os.fspath(raw)
        if _GLOB_CHARS & set(text):
            matches = sorted(_glob.glob(text, recursive=True))
            if not matches:
                raise EventPathError(f"{text} matches no file or folder")
            candidates = [Path(m) for m in matches]
        else:
            candidates = [Path(text)]
        for p in candidates:
            if p.is_dir():
                files = _run_files_in(p)
                if not files:
                    raise EventPathError(f"{p} holds no events.parquet, events.jsonl or *.parquet; "
                                         "pass a run folder written by `milvus-edu simulate`")
            elif p.is_file():
                if p.suffix not in (".parquet", ".jsonl"):
                    raise EventPathError(f"{p} is neither .parquet nor .jsonl")
                files = [p]
            else:
                raise EventPathError(f"{p} does not exist; pass a run folder or an events.parquet/events.jsonl file")
            out += files
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    if not unique:
        raise EventPathError("no paths given")
    return unique


@dataclass
class LoadedEvents:
    """What :func:`load_events` read: good rows, rows set aside, and the files they came from."""

    events: object  # pyspark.sql.DataFrame with spark_schema()
    malformed: object  # pyspark.sql.DataFrame: source, line, reason
    files: list[Path] = field(default_factory=list)

    @cached_property
    def malformed_count(self) -> int:
        """How many rows were set aside (runs a Spark job the first time)."""
        return self.malformed.count()

    def __iter__(self):  # allows ``events, malformed = load_events(...)``
        return iter((self.events, self.malformed))


def _required_missing(F):
    """A column: comma-separated names of required columns that are null, or null when none is."""
    required = [f.name for f in FIELDS if not f.nullable]
    return F.concat_ws(",", *[F.when(F.col(n).isNull(), F.lit(n)) for n in required])


def _with_schema_nullability(F, df):
    """``df``'s schema columns in schema order, with the schema's nullability.

    Spark marks every column read from a file nullable and a filter does not change that, so each
    required column goes through ``coalesce(col, <value>)``; the rows reaching here have already
    been checked to be non-null there, so the value is never used.
    """
    cols = []
    for f in FIELDS:
        c = F.col(f.name)
        if not f.nullable:
            c = F.coalesce(c, F.lit(_NEVER_USED[f.type]))
        cols.append(c.alias(f.name))
    return df.select(*cols)


def _split(F, parsed, line_col):
    """(good rows, malformed rows) of a parsed frame with the schema columns, CORRUPT_COLUMN, source."""
    missing = _required_missing(F)
    bad = F.col(CORRUPT_COLUMN).isNotNull() | (missing != F.lit(""))
    good = _with_schema_nullability(F, parsed.filter(~bad))
    reason = (F.when(F.col(CORRUPT_COLUMN).isNotNull(), F.lit("not a JSON object of the run-log schema"))
              .otherwise(F.concat(F.lit("missing required column(s): "), missing)))
    malformed = parsed.filter(bad).select(F.col("source"), line_col.alias("line"), reason.alias("reason"))
    return good, malformed


def load_events(spark, paths) -> LoadedEvents:
    """Read run logs into Spark with the explicit run-log schema.

    ``paths``: a run folder, an ``events.parquet`` or ``events.jsonl`` file, a folder of run
    folders, a glob, or a list mixing them. Parquet is read with :func:`spark_schema`; JSON Lines
    with the same schema in PERMISSIVE mode and a corrupt-record column, so a malformed line is
    set aside in ``.malformed`` (with its source file) and counted, never a crash and never
    silently dropped. Logs of an older schema version load with the columns they lack as nulls; a
    file of a newer version raises :class:`EventPathError` naming the version.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    files = resolve_event_paths(paths)
    for p in files:
        try:
            check_schema_version(p)
        except RunLogError as exc:
            raise EventPathError(str(exc)) from None
    schema = spark_schema()
    parquet = [str(p) for p in files if p.suffix == ".parquet"]
    jsonl = [str(p) for p in files if p.suffix == ".jsonl"]
    goods, bads = [], []
    if parquet:
        df = spark.read.schema(schema).parquet(*parquet)
        df = df.select(*[F.col(f.name) for f in FIELDS], F.lit(None).cast("string").alias(CORRUPT_COLUMN),
                       F.col("_metadata.file_path").alias("source"))
        good, bad = _split(F, df, F.to_json(F.struct(*[F.col(f.name) for f in FIELDS])))
        goods.append(good)
        bads.append(bad)
    if jsonl:
        with_corrupt = T.StructType(schema.fields + [T.StructField(CORRUPT_COLUMN, T.StringType(), True)])
        text = (spark.read.text(jsonl)
                .select(F.col("value"), F.col("_metadata.file_path").alias("source"))
                .filter(F.trim(F.col("value")) != F.lit("")))
        parsed = text.select(
            F.from_json(F.col("value"), with_corrupt,
                        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}).alias("j"),
            F.col("value"), F.col("source"))
        parsed = parsed.select(*[F.col(f"j.{f.name}").alias(f.name) for f in FIELDS],
                               F.col(f"j.{CORRUPT_COLUMN}").alias(CORRUPT_COLUMN), F.col("value"), F.col("source"))
        good, bad = _split(F, parsed, F.col("value"))
        goods.append(good)
        bads.append(bad)
    events, malformed = goods[0], bads[0]
    for g in goods[1:]:
        events = events.unionByName(g)
    for b in bads[1:]:
        malformed = malformed.unionByName(b)
    return LoadedEvents(events, malformed, files)
