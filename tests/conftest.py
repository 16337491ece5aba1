"""Fixtures shared by the tests: a hand-moved clock, both KV engines on it, and one Spark session."""

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
