"""Fixtures shared by the tests: a hand-moved clock, both KV engines on it, one Spark session, one run
of each lab notebook (as shipped and with the reference answers at once) and one build of the book from
those executed labs; and the grouping of the tests for pytest-xdist."""

import copy
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

from milvus_edu.analysis.session import ENV_CLASS_ARCHIVE
from milvus_edu.clock import ManualClock
from milvus_edu.storage.kv import MemoryKV, SQLiteKV

if TYPE_CHECKING:  # imported where a lab runs: nbformat's schema checker adds ~130,000 objects to a process's heap
    import nbformat


# The suite starts about a dozen short-lived JVMs (each worker's Spark session, the labs' sessions, a sweep's own
# process, a standalone master and worker and their executor). For them the C1 compiler alone is enough: Spark's
# tests here used 40% less CPU with it (195 -> 117 CPU s for test_sweep_spark, test_analysis and
# test_analysis_many on 2 cores), in a suite that is CPU-bound. Set before any JVM starts and inherited by every
# process the tests start (notebook kernels included). Users' JVMs keep the default tiered JIT, which long analyses
# want; a JAVA_TOOL_OPTIONS of the caller's own is left as it is. C1 alone shrinks the JIT's code cache to 48 MB,
# which a worker's session filled after a few hundred Spark jobs in one fresh-clone run ("CodeCache is full.
# Compiler has been disabled"), and its SparkContext then shut down mid-suite: the cache gets tiered mode's 240 MB.
#
# The serial garbage collector too: G1's concurrent threads cost more than they save for heaps of a few hundred MB on 2
# cores; test_analysis_many and test_analysis_flush took 63 CPU s with it against 71 with G1 (2026-11-26, idle).
SUITE_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"
os.environ.setdefault("JAVA_TOOL_OPTIONS", SUITE_JAVA_OPTIONS)

# The suite's Spark jobs read a few thousand rows each, where compiling each query's Java code and re-planning it as
# it runs cost more than they save: every Spark session the tests start (theirs, the labs', a sweep's) turns whole-stage
# code generation, expression code generation and adaptive execution off (milvus_edu.analysis.session reads
# MILVUS_EDU_SPARK_CONF). tests/test_analysis_many.py and test_analysis_flush.py took 40-51 s against 55-65 s with
# Spark's defaults (2026-11-26, busy machine). The answers do not depend on it; users keep Spark's defaults.
os.environ.setdefault("MILVUS_EDU_SPARK_CONF", "spark.sql.adaptive.enabled=false;spark.sql.codegen.wholeStage=false;"
                      "spark.sql.codegen.factoryMode=NO_CODEGEN")


ROOT = Path(__file__).resolve().parents[1]


def _class_archive_path() -> Path:
    """Where this checkout keeps its class-data-sharing archive of Spark's classes (milvus_edu.analysis.class_archive),
    one per Spark and Java: a JVM ignores an archive made with other jars or another Java, so a new one is made."""
    import importlib.metadata

    try:
        spark_version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        spark_version = "none"
    java = shutil.which("java")
    java_id = f"{os.path.realpath(java)}:{os.stat(java).st_mtime_ns}" if java else "none"
    key = hashlib.sha256(f"{spark_version}|{java_id}".encode()).hexdigest()[:12]
    return ROOT / ".pytest_cache" / "milvus-edu" / f"spark-classes-{spark_version}-{key}.jsa"


# Every Spark session the tests start (theirs, the labs', a sweep's) maps the classes of this checkout's archive when
# it is there: a session and its first analysis take about a third less CPU (lab 3 and lab 4 together took 72 CPU s
# instead of 94). A full run with workers makes it in the background when missing (pytest_configure; ~50 CPU s, once
# per checkout) and each worker's `spark` fixture waits for it; a JVM started before it is ready starts as usual.
CLASS_ARCHIVE = _class_archive_path()
os.environ.setdefault(ENV_CLASS_ARCHIVE, str(CLASS_ARCHIVE))
CLASS_ARCHIVE_WAIT_S = 180


#: A run of fewer tests than this prints no machine speed: a file run while working need not pay the second it costs
#: (the quick subset has about 2,400, the whole suite about 2,700).
MACHINE_SPEED_AFTER_TESTS = 1000


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """After a large run (the quick subset, the whole suite), one line on how fast the machine was: bare SimPy's
    timeout rate as benchmarks/suite_time.py measures it (bench_sim.bare_simpy_rate), once the workers are done. The
    suite is CPU-bound, so its time follows that rate: the README's test times were taken at about 1.1 million
    timeouts a second, and on 2026-11-27 the same tree took 10 minutes at about 1.0 and 17 at about 0.6. Only the
    controller prints it, not each xdist worker."""
    outcomes = terminalreporter.stats
    ran = sum(len(outcomes.get(key, ())) for key in ("passed", "failed", "error"))
    if hasattr(config, "workerinput") or ran < MACHINE_SPEED_AFTER_TESTS:
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_sim import bare_simpy_rate

    rate = bare_simpy_rate()
    terminalreporter.write_line(
        f"machine speed: bare SimPy at {rate / 1e6:.2f} million timeouts/s just now; the README's test times were "
        "taken at about 1.1 (the suite is CPU-bound: on a machine half as fast it takes about twice as long)")


#: Set to a file path, each test's CPU seconds are appended to it as a JSON line (``benchmarks/test_cpu.py`` sums them
#: up): the worker's own CPU from the test's setup to its teardown, and its children's that it reaped meanwhile (a CLI
#: process, a notebook kernel or a JVM counts on the test that ends it; a session fixture on the first test using it).
ENV_TEST_CPU = "MILVUS_EDU_TEST_CPU"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``MILVUS_EDU_TEST_CPU`` set, the CPU seconds each test cost (see ``ENV_TEST_CPU``); otherwise nothing."""
    path = os.environ.get(ENV_TEST_CPU)
    if not path:
        yield
        return
    import json
    import resource

    def children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    cpu, kids, start = time.process_time(), children(), time.perf_counter()
    yield
    line = {"test": item.nodeid, "cpu_s": round(time.process_time() - cpu, 3),
            "children_cpu_s": round(children() - kids, 3), "wall_s": round(time.perf_counter() - start, 3),
            "slow": item.get_closest_marker("slow") is not None, "group": _group(item),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}
    with open(path, "a", encoding="utf-8") as out:  # one short append per line: the workers' lines do not interleave
        out.write(json.dumps(line) + "\n")


def _scratch_folder(config) -> None:
    """The run's scratch files go to a folder of its own, ``<pytest's base temp>/tmp``, instead of the machine's
    /tmp: TMPDIR for every process the tests start (the xdist workers, notebook kernels, CLI processes, the labs'
    ``tempfile.mkdtemp`` run folders, Spark's log) and, for the suite's own JVM options, ``java.io.tmpdir`` and
    SPARK_LOCAL_DIRS for Spark's scratch folders. pytest keeps the base folders of the last three runs and removes
    older ones, so the suite no longer leaves ~110 MB in /tmp per run (the labs' run folders, ~10 spark-* folders, a
    log per Spark session). Only the process that starts the run sets it (xdist's workers inherit it). A caller's own
    TMPDIR still holds it all: pytest's base folder is made in it; a caller's own JAVA_TOOL_OPTIONS is left as it is."""
    if hasattr(config, "workerinput"):
        return
    scratch = config._tmp_path_factory.getbasetemp() / "tmp"  # pytest's own base folder of this run
    scratch.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = None  # this process computed its temp folder already: compute it again, from TMPDIR
    os.environ.setdefault("SPARK_LOCAL_DIRS", str(scratch))
    if os.environ["JAVA_TOOL_OPTIONS"] == SUITE_JAVA_OPTIONS:
        os.environ["JAVA_TOOL_OPTIONS"] += f" -Djava.io.tmpdir={scratch}"


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin has set up the run's base folder
def pytest_configure(config):
    """The run's scratch folder (:func:`_scratch_folder`). In a run with xdist workers, the controller starts making
    the Spark class archive if it is missing (not in a worker, and not in a run without workers: a quick run of one
    file should not leave a JVM running behind it)."""
    _scratch_folder(config)
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if os.environ[ENV_CLASS_ARCHIVE] != str(CLASS_ARCHIVE) or CLASS_ARCHIVE.is_file():  # the caller's own, or made
        return
    from milvus_edu.analysis.class_archive import making_marker

    CLASS_ARCHIVE.parent.mkdir(parents=True, exist_ok=True)
    with open(CLASS_ARCHIVE.with_suffix(".log"), "w") as log:
        child = subprocess.Popen([sys.executable, "-m", "milvus_edu.analysis.class_archive", str(CLASS_ARCHIVE)],
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    making_marker(CLASS_ARCHIVE).write_text(str(child.pid))  # the workers wait from now (the child writes it too)


def _await_class_archive() -> None:
    """Wait (at most CLASS_ARCHIVE_WAIT_S) while the Spark class archive is being made, so that a session started now
    maps it; a waiting worker costs nothing on a machine whose cores the other workers and the labs keep busy."""
    from milvus_edu.analysis.class_archive import making_marker

    marker = making_marker(CLASS_ARCHIVE)
    deadline = time.monotonic() + CLASS_ARCHIVE_WAIT_S
    while not CLASS_ARCHIVE.is_file() and _making(marker) and time.monotonic() < deadline:
        time.sleep(0.5)


def _making(marker: Path) -> bool:
    """Whether the process named in ``marker`` still runs (a child that died without removing its marker, or left
    a zombie its parent has not reaped, does not); without /proc, never waits."""
    try:
        pid = int(marker.read_text())
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return False
    return state != "Z"


@pytest.fixture(scope="session")
def class_archive() -> Path:
    """This checkout's Spark class archive: the one the run is making or made, or made now (a run without workers)."""
    from milvus_edu.analysis.class_archive import make_class_archive

    _await_class_archive()
    return CLASS_ARCHIVE if CLASS_ARCHIVE.is_file() else make_class_archive(CLASS_ARCHIVE)


@pytest.fixture(autouse=True)
def _close_widgets_made_by_the_test():
    """Close the widgets a test made (a stepper's, an explorer's) once it is done. ipywidgets keeps every widget
    until it is closed, and with it what the widget's callbacks refer to: a test worker would otherwise keep
    every stepper's run and figures, and each full collection would walk them again (test_viz alone left
    ~420,000 objects). Widgets made before the test (a module fixture's) stay open for the tests that share them.
    ipywidgets has no public list of live widgets; ``_instances`` is the one ``Widget.close_all`` closes."""
    registry = sys.modules.get("ipywidgets.widgets.widget")
    before = set(registry._instances) if registry is not None else set()
    yield
    registry = sys.modules.get("ipywidgets.widgets.widget")
    if registry is not None:
        for key, widget in list(registry._instances.items()):
            if key not in before:
                widget.close()


@pytest.fixture
def clock():
    """A ManualClock at T0; the test moves it."""
    return ManualClock()


@pytest.fixture(params=["memory", "sqlite"])
def kv(request, tmp_path, clock):
    """The same test on the in-memory KV and on the SQLite KV, both on ``clock``."""
    store = MemoryKV(clock) if request.param == "memory" else SQLiteKV(tmp_path / "kv.db", clock)
    yield store
    store.close()


@pytest.fixture(scope="session")
def spark():
    """One local[2] Spark session for every test module that needs one (a JVM start is seconds)."""
    from milvus_edu.analysis import spark_session

    _await_class_archive()
    session = spark_session(master="local[2]")  # fails loudly: `bash tests/run.sh` installs Java and pyspark
    yield session
    session.stop()


# Tests never assert wall-clock times: hypothesis's deadline (200 ms an example) and its too-slow health
# check are both timings, and the suite runs on workers that share a loaded machine's cores.
settings.register_profile("milvus-edu", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("milvus-edu")

BOOK_BUILD_TIMEOUT_S = 1800
CELL_TIMEOUT_S = 600  # as the book's execute.timeout
LAB_KERNELS = 2  # labs executed at once by executed_labs
#: The xdist group of the tests that share the executed labs and the book built from them: one worker
#: runs them all, so each lab runs once per session, while the other workers run everything else.
LABS_GROUP = "labs"
#: The xdist group of the tests that use the shared Spark session: one worker runs them all on one JVM, which starts
#: (and warms its compiler) once instead of once per worker; their ~55 tests are a chain shorter than the labs'.
SPARK_GROUP = "spark"
ANSWERED = "-answered"  # suffix of the id of an exercise cell's copy with the reference answer


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark every Spark and browser test ``slow`` too (each starts a JVM or a browser, or runs on a
    module's Spark jobs), so ``-m "not slow"`` is the quick subset; then group the tests for
    pytest-xdist (``--dist loadgroup``, as ``tests/run.sh`` runs them) and put the labs' group first.

    * The tests that use the executed labs or the book built from them form one group, so one worker
      runs each lab once while the other workers run the rest; first, because it is the longest.
    * The tests that use the ``spark`` session form one group, so one worker starts one JVM for them all.
    * The tests of a module with module-scoped fixtures (simulated runs, a JupyterLab server) form a
      group per module, so those fixtures are set up once, on one worker.
    * Every other test is scheduled on its own, on whichever worker is free.
    * After the labs' group, the groups and tests with a slow test come before the quick ones.
    """
    labs = []
    for item in items:
        if item.get_closest_marker("spark") or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)
        info = getattr(item, "_fixtureinfo", None)  # pytest's record of the fixtures a test uses
        scopes = {d.scope for defs in (info.name2fixturedefs.values() if info else ()) for d in defs}
        if {"executed_labs", "built_book"} & set(item.fixturenames):
            item.add_marker(pytest.mark.xdist_group(LABS_GROUP))
            labs.append(item)
        elif "spark" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group(SPARK_GROUP))
        elif "module" in scopes:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    first = {id(item) for item in labs}
    rest = [item for item in items if id(item) not in first]
    # Longest first, roughly (the workers take the groups in this order, as pyproject.toml turns xdist's own reorder
    # off): a group with a slow test, and each slow test on its own, before the quick ones, so the many quick
    # tests even out the workers' ends instead of one worker starting a long group when the others are done.
    slow_groups = {_group(item) for item in rest if item.get_closest_marker("slow")}
    items[:] = labs + sorted(rest, key=lambda item: _group(item) not in slow_groups)


def _group(item) -> str:
    """The xdist scope an item is scheduled in: its group's name, or (a test scheduled on its own) its node id."""
    marker = item.get_closest_marker("xdist_group")
    return marker.args[0] if marker and marker.args else item.nodeid


@dataclass
class ExecutedLab:
    """One lab notebook's run: ``shipped`` is the executed notebook as shipped (a file, what the book
    shows) and ``answered`` the same run seen with the reference answers put in (every exercise cell
    replaced by its answered copy, run just before it)."""

    shipped: Path
    answered: "nbformat.NotebookNode"


def _interleave_answers(nb: "nbformat.NotebookNode", solutions: dict[str, str]) -> "nbformat.NotebookNode":
    """A copy of ``nb`` where each exercise cell is preceded by a copy of it with its reference answers
    put in (an exercise without one gets no copy), so one top-to-bottom run judges the answers and
    leaves the kernel as the shipped cells do."""
    from lab_solutions import inject, shipped_answers

    out = copy.deepcopy(nb)
    cells = []
    for cell in out.cells:
        names = [n for n in shipped_answers(SimpleNamespace(cells=[cell])) if n in solutions]
        if names:
            answered = copy.deepcopy(cell)
            inject(SimpleNamespace(cells=[answered]), {n: solutions[n] for n in names})
            answered.id = cell.id + ANSWERED
            cells.append(answered)
        cells.append(cell)
    out.cells = cells
    return out


def _split(run: "nbformat.NotebookNode") -> tuple["nbformat.NotebookNode", "nbformat.NotebookNode"]:
    """The run of :func:`_interleave_answers`'s notebook seen as shipped, and seen answered."""
    answered_ids = {c.id for c in run.cells if c.id.endswith(ANSWERED)}
    replaced_ids = {i.removesuffix(ANSWERED) for i in answered_ids}
    shipped = copy.deepcopy(run)
    shipped.cells = [c for c in run.cells if c.id not in answered_ids]
    answered = copy.deepcopy(run)
    answered.cells = [c for c in run.cells if c.id not in replaced_ids]
    return shipped, answered


def _may_start_spark(cell) -> bool:
    """Whether a lab's code cell may start a Spark session: it names Spark (its analyses, its session)."""
    return cell.cell_type == "code" and "spark" in cell.source.lower()


def _uses_spark(nb: "nbformat.NotebookNode") -> bool:
    """Whether a lab has a cell that may start a Spark session."""
    return any(_may_start_spark(cell) for cell in nb.cells)


def _await_class_archive_before_spark(cell, cell_index: int) -> None:
    """nbclient's ``on_cell_execute`` hook of :func:`executed_labs`: before a cell that may start Spark, wait while the
    run makes the class archive (:func:`_await_class_archive`; at once when it is made, or not being made)."""
    if _may_start_spark(cell):
        _await_class_archive()


@pytest.fixture(scope="session")
def executed_labs(tmp_path_factory) -> dict[str, ExecutedLab]:
    """Each lab notebook of notebooks/ run once per session, top to bottom in a fresh kernel in a
    scratch folder (as the book runs its chapters: files a lab writes never land in notebooks/), with
    each exercise cell run twice in a row: first with the reference answer of tests/lab_solutions.py
    put in, then as shipped. No other cell reads an answer (``test_notebooks`` holds the labs to it),
    so the run is both the lab as shipped and the lab with the answers, for one execution. Errors are
    kept as outputs (the tests report them), so one failing cell does not hide the other labs."""
    import nbformat
    from lab_solutions import SOLUTIONS, read_notebook
    from nbclient import NotebookClient

    out = tmp_path_factory.mktemp("executed-labs")

    def execute(lab: tuple[Path, "nbformat.NotebookNode"]) -> tuple[str, ExecutedLab]:
        path, nb = lab
        run = _interleave_answers(nb, SOLUTIONS.get(path.name, {}))
        workdir = out / "work" / path.stem
        workdir.mkdir(parents=True)
        # coalesce_streams: a kernel flushes stdout on a timer, so one print may come as two stream outputs
        # A cell that may start Spark waits for the class archive the run is making (on_cell_execute: just before
        # the cell runs), so that its session maps Spark's classes: ~6 CPU s less a session
        NotebookClient(run, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=True,
                       coalesce_streams=True, resources={"metadata": {"path": str(workdir)}},
                       on_cell_execute=_await_class_archive_before_spark).execute()
        shipped, answered = _split(run)
        nbformat.write(shipped, out / path.name)
        return path.name, ExecutedLab(out / path.name, answered)

    # Two kernels at a time: the labs are the suite's longest chain (this worker runs them, then builds the book
    # from them), and the other worker is idle before they end. Each lab has its own kernel and scratch folder.
    # The labs without Spark go first, so that the labs with Spark reach their first Spark cell later, when the class
    # archive is more likely made (labs 1 and 2, first in line before, started their sessions without it).
    labs = [(path, read_notebook(path)) for path in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    labs.sort(key=lambda lab: _uses_spark(lab[1]))  # stable: by name within each kind
    with ThreadPoolExecutor(max_workers=LAB_KERNELS) as pool:
        return dict(pool.map(execute, labs))


@pytest.fixture(scope="session")
def built_book(tmp_path_factory, executed_labs):
    """``jupyter-book build`` of a copy of book/ (book/ is not touched), once per session, from the
    labs already executed by ``executed_labs``: the copy's lab chapters (symlinks to notebooks/ in
    book/) are those executed notebooks, and its config turns execution off, so no lab runs twice.

    Gives the return code, the log, the HTML folder and the executed notebooks by lab file name:
    ``executed["01_tso.ipynb"]`` is lab 1 as shipped, run top to bottom, as the book shows it.
    """
    src = tmp_path_factory.mktemp("book-src") / "book"
    shutil.copytree(ROOT / "book", src, symlinks=True)
    executed = {}
    for chapter in sorted((ROOT / "book").glob("*.ipynb")):
        if chapter.is_symlink():
            lab = executed_labs[chapter.resolve().name].shipped
            (src / chapter.name).unlink()
            shutil.copyfile(lab, src / chapter.name)
            executed[chapter.resolve().name] = lab
    config = src / "_config.yml"
    text, n = re.subn(r"^(\s*execute_notebooks:\s*)force\b", r"\1off", config.read_text(encoding="utf-8"),
                      flags=re.M)
    assert n == 1, "book/_config.yml must say `execute_notebooks: force` once"
    config.write_text(text, encoding="utf-8")
    out = tmp_path_factory.mktemp("book")
    cmd = [
        sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
        "build", str(src), "--path-output", str(out), "--warningiserror", "--keep-going", "--all",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=BOOK_BUILD_TIMEOUT_S)
    return {"rc": proc.returncode, "log": proc.stdout + proc.stderr, "html": out / "_build" / "html",
            "executed": executed}
