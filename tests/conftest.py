"""Fixtures shared by the tests: a hand-moved clock, both KV engines on it, one Spark session, and one
build of the book (its executed chapters are the labs as shipped)."""

import subprocess
import sys
from pathlib import Path

import pytest

from milvus_edu.clock import ManualClock
from milvus_edu.storage.kv import MemoryKV, SQLiteKV


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

    session = spark_session(master="local[2]")  # fails loudly: `bash tests/run.sh` installs Java and pyspark
    yield session
    session.stop()


ROOT = Path(__file__).resolve().parents[1]
BOOK_BUILD_TIMEOUT_S = 1800


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """``jupyter-book build`` of book/ into a temporary folder (book/ is not touched), once per session.

    Gives the return code, the log, the HTML folder and the executed notebooks: the lab chapters are
    symlinks to notebooks/, so ``executed["01_tso.ipynb"]`` is lab 1 as shipped, run top to bottom by the build.
    """
    out = tmp_path_factory.mktemp("book")
    book = ROOT / "book"
    cmd = [
        sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
        "build", str(book), "--path-output", str(out), "--warningiserror", "--keep-going", "--all",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=BOOK_BUILD_TIMEOUT_S)
    executed = {}
    for chapter in sorted(book.glob("*.ipynb")):
        if chapter.is_symlink():
            executed[chapter.resolve().name] = out / "_build" / "jupyter_execute" / chapter.name
    return {"rc": proc.returncode, "log": proc.stdout + proc.stderr, "html": out / "_build" / "html",
            "executed": executed}
