"""Fixtures shared by the component tests: a hand-moved clock and both KV engines on it."""

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
