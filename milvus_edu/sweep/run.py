"""Running a sweep as one Spark job: the tasks simulate inside the executors and write the run folders.

The driver lists the grid's runs, leaves out those already complete, and hands the rest to Spark as
an RDD of run specs; each task of ``mapPartitions`` runs its runs one after another with
:func:`milvus_edu.simulate` (Parquet only, no rows kept in memory) and returns one record per run. A run
folder is complete when its marker ``run.json`` exists: it is written last, under a temporary name then
renamed, so a task killed half-way leaves a folder the next sweep runs again. The tables are built from
the markers, so a resumed sweep's tables are those of an uninterrupted one.

The package reaches the executors the standard way: the driver zips ``milvus_edu/`` and ships it with
``SparkContext.addPyFile``; the executors' Python needs the package's dependencies (simpy, pyarrow,
pandas) installed, and ``PYSPARK_PYTHON`` names that Python when it is not the driver's.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import zipfile
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .grid import GridError, column_name, normalise_grid, run_specs
from ..sim.run import require_folder_name
from .load import MARKER, load_sweep, start_spark

RUN_SCHEMA_BASE = (("run_id", pa.string()), ("scenario", pa.string()), ("seed", pa.int64()),
                   ("switches", pa.string()))
RUN_SCHEMA_TAIL = (("status", pa.string()), ("error", pa.string()), ("events", pa.int64()),
                   ("sim_s", pa.float64()), ("wall_s", pa.float64()))
VERDICT_SCHEMA = pa.schema([("run_id", pa.string()), ("mechanism", pa.string()), ("check", pa.string()),
                            ("verdict", pa.string()), ("violations", pa.int64()), ("expected", pa.bool_()),
                            ("explanation", pa.string())])


_TMP_INFIX = ".tmp-"


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` under a temporary name first, so ``path`` is whole or absent."""
    tmp = path.with_name(f".{path.name}{_TMP_INFIX}{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _is_interrupted_write(path: Path) -> bool:
    """Whether ``path`` is a temporary file of :func:`write_atomically` (``.<name>.tmp-<pid>``)."""
    name = path.name
    head, sep, pid = name.rpartition(_TMP_INFIX)
    return name.startswith(".") and bool(sep) and len(head) > 1 and pid.isdigit()


def _remove_interrupted_writes(folder: Path) -> None:
    """Delete what a killed sweep left half-written in ``folder``: only :func:`write_atomically`'s own
    temporary files, which a process writes just before renaming them (a sweep killed between the two
    leaves one behind, and the run is run again)."""
    if folder.is_dir():
        for entry in folder.iterdir():
            if entry.is_file() and _is_interrupted_write(entry):
                entry.unlink(missing_ok=True)


def verdicts_of(summary: dict) -> list[dict]:
    """One verdict row per check of a run's ``summary.json`` (without ``run_id``), as the checkers left them.

    ``verdict`` is ``fail`` when the check counted violations, else ``vacuous`` when its checker says
    nothing in the run could have broken it, else ``pass``. ``expected`` is true for the checks of the
    scenario's own mechanism (its first) when the scenario declares a gap in Milvus itself
    (:attr:`milvus_edu.registry.Scenario.gap`): those may fail with the faithful rules.
    """
    from ..registry import get_scenario, scenario_mechanisms

    spec = get_scenario(summary["scenario"])
    checks = summary["checks"]
    first: dict[str, str] = {}
    for v in checks["violations"]:
        first.setdefault(v["invariant"], v["explanation"])
    rows = []
    for mech in scenario_mechanisms(spec):
        if mech.checker is None:
            continue
        vacuous = set(checks.get("vacuous", {}).get(mech.name, []))
        for check in mech.checker().invariants:
            n = int(checks["violation_counts"].get(check, 0))
            rows.append({"mechanism": mech.name, "check": check,
                         "verdict": "fail" if n else ("vacuous" if check in vacuous else "pass"),
                         "violations": n, "expected": bool(spec.gap) and mech.name == spec.mechanisms[0],
                         "explanation": first.get(check) if n else None})
    return rows


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def run_one(spec: dict, runs_dir: str, jsonl: bool = False) -> dict:
    """Simulate one run of a sweep into ``runs_dir/<run_id>/`` and write its marker; returns the marker's record.

    ``jsonl``: write the run's ``events.jsonl`` too (for reading by eye; 18 times the Parquet file's size).

    A run folder that already has its marker is not run again (its record is read back). A run that
    raises is recorded with ``status`` ``"error"`` and the exception in one line.
    """
    from .. import simulate

    folder = Path(runs_dir) / spec["run_id"]
    marker = folder / MARKER
    if marker.is_file():
        return json.loads(marker.read_text(encoding="utf-8"))
    _remove_interrupted_writes(folder)
    started = time.perf_counter()
    try:
        result = simulate(spec["scenario"], seed=spec["seed"], duration_s=spec["duration_s"], out_dir=folder,
                          force=True, switches=spec["switches"], keep_events=False, options=spec["options"],
                          params=spec["params"], sink_process=False, run_id=spec["run_id"], jsonl=jsonl)
        summary = result.summary
        record = {"status": "ok", "error": None, "events": summary["events"], "sim_s": summary["duration_s"],
                  "verdicts": verdicts_of(summary)}
    except Exception as exc:  # one bad run is a row of the table, not the end of the sweep
        folder.mkdir(parents=True, exist_ok=True)
        record = {"status": "error", "error": _one_line(exc), "events": None, "sim_s": None, "verdicts": []}
    record["wall_s"] = time.perf_counter() - started
    write_atomically(marker, (json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))
    return record


def _run_partition(runs_dir: str, jsonl: bool, specs):
    """A Spark task: run each spec of the partition; yields ``(run_id, record)``."""
    for spec in specs:
        yield spec["run_id"], run_one(spec, runs_dir, jsonl)


def _value_type(values: list) -> pa.DataType:
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return pa.float64() if numeric else pa.string()


def _cell(value, kind: pa.DataType):
    if kind == pa.float64():
        return float(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def runs_schema(grid: dict) -> pa.Schema:
    """The runs table's schema for a normal grid: fixed columns, then ``opt_*`` and ``param_*`` per grid entry."""
    middle = [(column_name("opt", n), _value_type(v)) for n, v in grid["options"].items()]
    middle += [(column_name("param", n), _value_type(v)) for n, v in grid["params"].items()]
    return pa.schema(list(RUN_SCHEMA_BASE) + middle + list(RUN_SCHEMA_TAIL))


def build_tables(grid: dict, records: dict[str, dict]) -> tuple[pa.Table, pa.Table]:
    """The runs and verdicts tables of a normal grid from each run's marker record, in the grid's run order."""
    schema = runs_schema(grid)
    runs, verdicts = [], []
    for spec in run_specs(grid):
        rec = records[spec["run_id"]]
        row = {"run_id": spec["run_id"], "scenario": spec["scenario"], "seed": spec["seed"],
               "switches": ",".join(sorted(spec["switches"]))}
        for kind, values in (("opt", spec["options"]), ("param", spec["params"])):
            for name, value in values.items():
                col = column_name(kind, name)
                row[col] = _cell(value, schema.field(col).type)
        row.update({k: rec[k] for k in ("status", "error", "events", "sim_s", "wall_s")})
        runs.append(row)
        verdicts += [{"run_id": spec["run_id"], **v} for v in rec["verdicts"]]
    return pa.Table.from_pylist(runs, schema=schema), pa.Table.from_pylist(verdicts, schema=VERDICT_SCHEMA)


#: Spark application id -> the zip shipped to it, and the temporary folder holding the zip. Spark serves the file
#: from there to the executors for as long as the application runs, so the folder is kept until this process
#: exits, and then removed (before, one folder with a 0.7 MB zip was left in the temporary folder per application).
_ZIPS: dict[str, tuple[str, tempfile.TemporaryDirectory]] = {}


def ship_package(spark) -> str:
    """Zip ``milvus_edu/`` and add it to the job with ``addPyFile`` (once per Spark application); returns the zip,
    which is removed when this process exits."""
    sc = spark.sparkContext
    app = sc.applicationId
    if app in _ZIPS:
        return _ZIPS[app][0]
    package = Path(__file__).resolve().parents[1]
    held = tempfile.TemporaryDirectory(prefix=f"milvus-edu-{app}-", ignore_cleanup_errors=True)
    target = Path(held.name) / "milvus_edu.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, Path("milvus_edu") / path.relative_to(package))
    sc.addPyFile(str(target))
    _ZIPS[app] = (str(target), held)
    return str(target)


class _Progress:
    """Finished runs, failures and runs per minute while the job runs: a driver thread reads the markers
    as the tasks write them, and shows the figures on stderr (a terminal line) or as an ipywidgets bar
    (in a notebook kernel)."""

    def __init__(self, runs_dir: Path, todo: list[str], total: int, show: bool):
        self.runs_dir, self.todo, self.total = runs_dir, todo, total
        self.done_before = total - len(todo)
        self.finished: set[str] = set()
        self.failed = 0
        self.started = time.monotonic()
        self.show = show
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._widget = self._make_widget() if show else None
        self._last_print = 0.0

    @staticmethod
    def _make_widget():
        from ..sim.progress import notebook_display

        display = notebook_display()
        if display is None:
            return None
        import ipywidgets as w

        bar = w.IntProgress(min=0, description="runs")
        label = w.Label()
        box = w.HBox([bar, label])
        display(box)
        return bar, label

    def __enter__(self):
        if self.show:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.show:
            self._thread.join()
            self._poll()
            self._render(final=True)

    def _poll(self) -> None:
        for run_id in self.todo:
            if run_id in self.finished:
                continue
            marker = self.runs_dir / run_id / MARKER
            if marker.is_file():
                self.finished.add(run_id)
                try:
                    if json.loads(marker.read_text(encoding="utf-8"))["status"] != "ok":
                        self.failed += 1
                except (OSError, ValueError, KeyError):
                    self.failed += 1

    def line(self) -> str:
        """The progress in words: finished of total, failures, runs per minute."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        done = self.done_before + len(self.finished)
        rate = len(self.finished) / elapsed * 60.0
        skipped = f" ({self.done_before:,} already done)" if self.done_before else ""
        return f"sweep: {done:,}/{self.total:,} runs{skipped}, {self.failed:,} failed, {rate:,.0f} runs/min"

    def _render(self, final: bool = False) -> None:
        text = self.line()
        if self._widget is not None:
            bar, label = self._widget
            bar.max = self.total
            bar.value = self.done_before + len(self.finished)
            label.value = text.removeprefix("sweep: ")
        elif sys.stderr.isatty():
            os.write(2, f"\r{text}{chr(10) if final else ''}".encode())
        elif final or time.monotonic() - self._last_print >= 10.0:
            self._last_print = time.monotonic()
            os.write(2, f"{text}\n".encode())

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self._poll()
            self._render()


def prepare_sweep_dir(out: Path, grid: dict) -> None:
    """Check ``out`` may hold this grid's sweep and write ``grid.json``; :class:`GridError` otherwise.

    A folder already holding a ``grid.json`` takes only the same grid again (that resumes it); any other
    non-empty folder is refused, and nothing is written then.
    """
    text = json.dumps(grid, indent=2, sort_keys=True) + "\n"
    if set("*?[") & set(str(out)):
        raise GridError(f"{out}: Spark reads *, ? and [ in a path as a pattern; choose an --out without them")
    if out.exists() and not out.is_dir():
        raise GridError(f"{out} exists and is not a folder; choose another --out")
    existing = out / "grid.json"
    if existing.is_file():
        try:
            same = json.loads(existing.read_text(encoding="utf-8")) == json.loads(text)
        except (OSError, ValueError):
            same = False
        if not same:
            raise GridError(f"{out} holds the sweep of another grid (its grid.json); sweep that grid again to "
                            "resume it, or choose another --out")
        return
    if out.is_dir() and any(out.iterdir()):
        raise GridError(f"{out} is not empty and holds no sweep (no grid.json); choose a new or empty --out")
    try:
        (out / "runs").mkdir(parents=True, exist_ok=True)
        write_atomically(existing, text.encode("utf-8"))
    except OSError as exc:
        raise GridError(f"cannot write to {out} ({exc.strerror}); choose a writable --out") from None


def run_sweep(grid, out, *, master: str | None = None, spark=None, progress: bool = True, jsonl: bool = False):
    """Run every run of ``grid`` as one Spark job writing into the folder ``out``; returns the :class:`Sweep`.

    ``grid``: a dict or the path of a JSON/YAML file with ``scenario`` (a name or a list), ``seeds`` (a
    count ``20`` meaning 1..20, a list, or a range ``"1-1000"``), ``switches`` (a list of switch sets;
    default ``[[]]``), ``options`` and ``params`` (name -> list of values) and ``duration_s`` (default:
    each scenario's). The runs are their cartesian product. A bad grid raises :class:`GridError` (one
    line) before anything is written or run.

    ``out`` receives ``grid.json``, ``runs/<run_id>/`` (``events.parquet``, ``summary.json`` and the
    completion marker ``run.json``) and ``tables/runs.parquet`` and ``tables/verdicts.parquet``. Sweeping
    the same grid into the same folder again runs only the runs without a marker, so an interrupted sweep
    resumes; the tables are then those of an uninterrupted sweep. A run that raises is recorded with
    status ``"error"``; the sweep goes on.

    ``spark``: a running session to use; otherwise one is started on ``master``, else
    ``$MILVUS_EDU_SPARK_MASTER``, else ``local[2]`` (``spark://host:7077`` for a standalone cluster,
    whose executors must see ``out`` at the same path: a shared file system). ``progress``: show finished
    runs, failures and runs/minute on stderr, or as a progress bar in a notebook. ``jsonl``: write each
    run's ``events.jsonl`` too (a sweep writes Parquet only by default: the JSON Lines are 18 times larger).
    """

    normal = normalise_grid(grid)
    specs = run_specs(normal)
    require_folder_name(out, "out")
    out = Path(out).absolute()
    prepare_sweep_dir(out, normal)
    runs_dir = out / "runs"
    todo = [s for s in specs if not (runs_dir / s["run_id"] / MARKER).is_file()]
    if spark is None:
        spark = start_spark(master)
    records: dict[str, dict] = {}
    if todo:
        ship_package(spark)
        sc = spark.sparkContext
        slices = min(len(todo), max(1, sc.defaultParallelism) * 8)
        sc.setJobDescription(f"milvus-edu sweep: {len(todo)} runs into {out}")
        with _Progress(runs_dir, [s["run_id"] for s in todo], len(specs), progress):
            done = sc.parallelize(todo, slices).mapPartitions(partial(_run_partition, str(runs_dir), jsonl)).collect()
        records.update(done)
    for spec in specs:
        if spec["run_id"] not in records:
            records[spec["run_id"]] = json.loads((runs_dir / spec["run_id"] / MARKER).read_text(encoding="utf-8"))
    runs, verdicts = build_tables(normal, records)
    tables = out / "tables"
    tables.mkdir(exist_ok=True)
    for name, table in (("runs.parquet", runs), ("verdicts.parquet", verdicts)):
        tmp = tables / f".{name}.tmp-{os.getpid()}"
        pq.write_table(table, tmp)
        os.replace(tmp, tables / name)
    return load_sweep(out, spark=spark)
