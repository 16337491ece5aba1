"""Loading a sweep folder into Spark, with every file that does not belong set aside and reported.

A file is set aside (listed in :attr:`Sweep.set_aside` and reported by file, never moved, deleted or
overwritten) when it is not what the sweep wrote: an ``events.parquet`` that is truncated or not
Parquet at all, a Parquet file of another schema, a run whose ``summary.json`` carries another run-log
schema version, an unreadable completion marker, or any file or folder in ``runs/`` that is not one of
the grid's runs. Its run is left out of :attr:`Sweep.runs`, :attr:`Sweep.verdicts` and
:attr:`Sweep.events`; moving it away and sweeping the same grid again runs it afresh.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from ..events.io import RUN_FILES
from ..narrate import plural
from .grid import GRID_KEYS, dimensions, run_specs

#: The completion marker a sweep writes last in each run's folder (its record: status, events, verdicts).
MARKER = "run.json"
DEFAULT_MASTER = "local[2]"
#: What a sweep's run folder holds: the run's files and the sweep's marker.
SWEEP_RUN_FILES = {*RUN_FILES, MARKER}
RUN_FOLDERS = {"objects"}  # the object store some scenarios' runs keep beside their log
#: The kinds of trouble a set-aside file has, as :func:`report_set_aside` names them.
KINDS = {"truncated": "truncated or not Parquet", "foreign": "foreign", "version": "of another schema version",
         "rows": "with a row count not its run's", "marker": "with an unreadable marker or summary",
         "stray": "not of this sweep's grid"}


class SweepFolderError(ValueError):
    """A folder that holds no sweep, or a sweep whose tables are missing or unreadable; one line."""


@dataclass
class SetAside:
    """One file (or folder) of a sweep folder that was set aside: where, which run, what kind of trouble
    (one of :data:`KINDS`), why in words, and how many rows it holds when that is known."""

    path: Path
    run_id: str | None
    kind: str
    reason: str
    rows: int | None = None


@dataclass
class Sweep:
    """A swept folder as Spark DataFrames.

    * ``runs``: one row per run (``run_id, scenario, seed, switches, opt_*, param_*, status, error,
      events, sim_s, wall_s``); ``verdicts``: one row per run and check (``run_id, mechanism, check,
      verdict, violations, expected, explanation``); ``events``: the runs' logs with the run-log schema.
    * ``dimensions``: the runs-table columns that vary in the grid.
    * ``set_aside``: the files left out (see the module's note); ``unfinished``: run ids without a
      completion marker (sweep the grid again to run them).
    """

    out: Path
    grid: dict
    runs: object
    verdicts: object
    events: object
    dimensions: list[str]
    spark: object
    set_aside: list[SetAside] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"Sweep(out={str(self.out)!r}, runs={len(run_specs(self.grid)) - len(self.unfinished)}, "
                f"dimensions={self.dimensions}, set_aside={len(self.set_aside)})")


def _check_events(path: Path, run_id: str, expected_rows) -> SetAside | None:
    from ..events.schema import FIELD_NAMES

    try:
        meta = pq.ParquetFile(path).metadata
    except Exception:  # pyarrow raises several types for a cut or foreign file
        return SetAside(path, run_id, "truncated", "truncated or not a Parquet file")
    names = meta.schema.to_arrow_schema().names
    if names != list(FIELD_NAMES):
        return SetAside(path, run_id, "foreign", f"a Parquet file of another schema ({len(names)} columns, not the run log's)",
                        meta.num_rows)
    if expected_rows is not None and meta.num_rows != expected_rows:
        return SetAside(path, run_id, "rows", f"holds {meta.num_rows:,} rows, its run wrote {expected_rows:,}", meta.num_rows)
    return None


def inspect_runs(out: Path, grid: dict) -> tuple[list[str], list[str], list[SetAside], list[str]]:
    """Check the run folders of a sweep: (good run ids, failed run ids, files set aside, unfinished run ids)."""
    from ..events.schema import SCHEMA_VERSION

    runs_dir = out / "runs"
    specs = run_specs(grid)
    wanted = {s["run_id"] for s in specs}
    aside: list[SetAside] = []
    for entry in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        if entry.name not in wanted:
            aside.append(SetAside(entry, None, "stray", "not a run of this sweep's grid"))
    good, failed, unfinished = [], [], []
    for spec in specs:
        run_id = spec["run_id"]
        folder = runs_dir / run_id
        marker = folder / MARKER
        if not marker.is_file():
            unfinished.append(run_id)
            continue
        try:
            record = json.loads(marker.read_text(encoding="utf-8"))
            status = record["status"]
        except (OSError, ValueError, KeyError, TypeError):
            aside.append(SetAside(marker, run_id, "marker", "an unreadable completion marker"))
            continue
        if status != "ok":
            failed.append(run_id)  # its error is in the runs table; it has no log to check
            continue
        for extra in sorted(folder.iterdir()):
            if extra.name not in SWEEP_RUN_FILES and not (extra.is_dir() and extra.name in RUN_FOLDERS):
                aside.append(SetAside(extra, run_id, "stray", "not a file a sweep writes"))
        try:
            version = json.loads((folder / "summary.json").read_text(encoding="utf-8")).get("schema_version")
        except (OSError, ValueError, AttributeError):
            aside.append(SetAside(folder / "summary.json", run_id, "marker", "a missing or unreadable summary.json"))
            continue
        if version != SCHEMA_VERSION:
            aside.append(SetAside(folder, run_id, "version", f"a run of run-log schema version {version}, not {SCHEMA_VERSION}"))
            continue
        problem = _check_events(folder / "events.parquet", run_id, record.get("events"))
        if problem is not None:
            aside.append(problem)
            continue
        good.append(run_id)
    return good, failed, aside, unfinished


def report_set_aside(out: Path, aside: list[SetAside]) -> list[str]:
    """The lines reporting the files set aside: a count per reason, then each file with its reason."""
    if not aside:
        return []
    counts = Counter(a.kind for a in aside)
    head = ", ".join(f"{counts[k]} {words}" for k, words in KINDS.items() if counts[k])
    lines = [f"set aside {plural(len(aside), 'file')} of {out} (nothing moved or deleted): {head}"]
    for a in aside:
        rows = f", {a.rows:,} rows" if a.rows is not None else ""
        lines.append(f"  {a.path}: {a.reason}{rows}")
    return lines


def load_sweep(out, spark=None):
    """Load the sweep folder ``out`` (written by :func:`milvus_edu.sweep.run_sweep`) as a :class:`Sweep`.

    Files that do not belong are set aside and reported on stdout by file (see the module's note);
    :class:`SweepFolderError` when ``out`` holds no sweep or its tables are missing (sweep the grid again
    to finish it). ``spark``: a running session, else one is started as :func:`run_sweep` does.
    """
    from ..analysis.loader import load_events, spark_schema

    out = Path(out).absolute()
    try:
        grid = json.loads((out / "grid.json").read_text(encoding="utf-8"))
    except OSError:
        raise SweepFolderError(f"{out} holds no sweep (no readable grid.json); give the --out of a sweep") from None
    except ValueError:
        raise SweepFolderError(f"{out}/grid.json is not valid JSON; it was not written by a sweep") from None
    if not isinstance(grid, dict) or not set(GRID_KEYS) <= set(grid):  # a sweep writes every key, normalised
        raise SweepFolderError(f"{out}/grid.json is not a sweep's grid; give the --out of a sweep")
    good, failed, aside, unfinished = inspect_runs(out, grid)
    for line in report_set_aside(out, aside):
        print(line)
    if spark is None:
        spark = start_spark(None)
    from pyspark.sql import functions as F

    tables = {}
    for name in ("runs", "verdicts"):
        path = out / "tables" / f"{name}.parquet"
        try:
            pq.ParquetFile(path)
        except Exception:
            raise SweepFolderError(f"{path} is missing or unreadable; sweep the same grid into {out} again to "
                                   "write the tables") from None
        tables[name] = spark.read.parquet(str(path)).filter(F.col("run_id").isin(good + failed))
    logs = [str(out / "runs" / r / "events.parquet") for r in good]
    events = (load_events(spark, logs).events if logs
              else spark.createDataFrame([], spark_schema()))
    return Sweep(out, grid, tables["runs"], tables["verdicts"], events, dimensions(grid), spark, aside, unfinished)


def start_spark(master: str | None):
    """The sweep's Spark session: ``master``, else ``$MILVUS_EDU_SPARK_MASTER`` (:data:`ENV_MASTER`), else
    :data:`DEFAULT_MASTER`; its executors run this Python (which has the package's dependencies), as those of
    every :func:`~milvus_edu.analysis.spark_session` do."""
    from ..analysis.session import ENV_MASTER, spark_session

    return spark_session(master=master or os.environ.get(ENV_MASTER) or DEFAULT_MASTER, app_name="milvus-edu sweep")
