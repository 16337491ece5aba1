"""The metadata KV (etcd's role): both engines behave alike; SQLiteKV is durable and careful with files."""

from __future__ import annotations

import sqlite3

import pytest

from milvus_edu.config import MS, S
from milvus_edu.rootcoord import Core
from milvus_edu.storage.kv import (
    FaultyKV,
    KeyNotFoundError,
    KVError,
    LeaseNotFoundError,
    MemoryKV,
    RootedKV,
    SQLiteKV,
    bytes_to_uint64_big_endian,
    uint64_to_bytes_big_endian,
)
from milvus_edu.tsoutil import compose_ts, physical_time
from milvus_edu.clock import ManualClock

T0 = 1_700_000_000_123_456_789
TSO_KEY = "by-dev/kv/gid/timestamp"


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"unexpected sleep of {seconds} s")


# ---- basic operations ----------------------------------------------------------------------------

def test_save_load_has_remove(kv):
    assert not kv.has("a")
    kv.save("a", b"1")
    assert kv.has("a")
    assert kv.load("a") == b"1"
    kv.save("a", b"22")  # overwrite
    assert kv.load("a") == b"22"
    kv.remove("a")
    assert not kv.has("a")
    kv.remove("a")  # absent key: not an error, as in etcd


def test_load_missing_key_raises_key_not_found(kv):
    with pytest.raises(KeyNotFoundError, match="missing"):
        kv.load("missing")
    assert issubclass(KeyNotFoundError, KVError)


def test_values_are_bytes_including_empty_and_binary(kv):
    kv.save("bin", bytes(range(256)))
    kv.save("empty", b"")
    assert kv.load("bin") == bytes(range(256))
    assert kv.load("empty") == b""
    assert kv.has("empty")


def test_load_with_prefix_returns_sorted_pairs_under_prefix_only(kv):
    for k in ["p/b", "p/a", "q/a", "p", "pa/x"]:
        kv.save(k, k.encode())
    assert kv.load_with_prefix("p/") == [("p/a", b"p/a"), ("p/b", b"p/b")]
    assert [k for k, _ in kv.load_with_prefix("p")] == ["p", "p/a", "p/b", "pa/x"]
    assert kv.load_with_prefix("zzz") == []
    assert [k for k, _ in kv.load_with_prefix("")] == ["p", "p/a", "p/b", "pa/x", "q/a"]


def test_load_with_prefix_treats_sql_wildcards_literally(kv):
    kv.save("a%b", b"1")
    kv.save("axb", b"2")
    kv.save("a_c", b"3")
    assert kv.load_with_prefix("a%") == [("a%b", b"1")]
    assert kv.load_with_prefix("a_") == [("a_c", b"3")]


def test_put_if_absent_only_first_wins(kv):
    assert kv.put_if_absent("lock", b"one") is True
    assert kv.put_if_absent("lock", b"two") is False
    assert kv.load("lock") == b"one"
    kv.remove("lock")
    assert kv.put_if_absent("lock", b"three") is True
    assert kv.load("lock") == b"three"


def test_uint64_big_endian_helpers():
    assert uint64_to_bytes_big_endian(1) == b"\x00" * 7 + b"\x01"
    assert bytes_to_uint64_big_endian(uint64_to_bytes_big_endian(T0)) == T0
    assert bytes_to_uint64_big_endian(b"\xff" * 8) == 2**64 - 1
    with pytest.raises(ValueError):
        bytes_to_uint64_big_endian(b"\x00" * 7)
    with pytest.raises(OverflowError):
        uint64_to_bytes_big_endian(2**64)


def test_rooted_kv_prefixes_keys(kv):
    rooted = RootedKV(kv, "by-dev/kv/gid/")
    rooted.save("timestamp", b"x")
    assert kv.load(TSO_KEY) == b"x"
    assert rooted.load("timestamp") == b"x"
    assert rooted.has("timestamp") and not rooted.has("idTimestamp")
    rooted.remove("timestamp")
    assert not kv.has(TSO_KEY)


# ---- leases ---------------------------------------------------------------------------------------

def test_lease_keeps_key_until_ttl_then_expiry_removes_it(kv, clock):
    lease = kv.grant(10 * S)
    kv.save("s", b"v", lease=lease)
    kv.save("plain", b"p")
    assert kv.lease_expiry_ns(lease) == T0 + 10 * S
    clock.advance(10 * S - 1)
    assert kv.has("s")
    clock.advance(1)  # expiry instant reached
    assert not kv.has("s")
    assert kv.has("plain")
    assert kv.lease_expiry_ns(lease) is None
    with pytest.raises(KeyNotFoundError):
        kv.load("s")


def test_keep_alive_pushes_expiry_to_now_plus_ttl(kv, clock):
    lease = kv.grant(10 * S)
    kv.save("s", b"v", lease=lease)
    clock.advance(8 * S)
    kv.keep_alive(lease, 10 * S)
    assert kv.lease_expiry_ns(lease) == T0 + 18 * S
    clock.advance(9 * S)  # 17 s after grant: would have expired without keep-alive
    assert kv.has("s")
    clock.advance(S)
    assert not kv.has("s")


def test_keep_alive_after_expiry_fails(kv, clock):
    lease = kv.grant(S)
    clock.advance(2 * S)
    with pytest.raises(LeaseNotFoundError):
        kv.keep_alive(lease, S)


def test_save_with_dead_lease_fails_and_writes_nothing(kv, clock):
    lease = kv.grant(S)
    clock.advance(S)
    with pytest.raises(LeaseNotFoundError):
        kv.save("k", b"v", lease=lease)
    with pytest.raises(LeaseNotFoundError):
        kv.put_if_absent("k", b"v", lease=lease)
    with pytest.raises(LeaseNotFoundError):
        kv.save("k", b"v", lease=12345)
    assert not kv.has("k")


def test_revoke_removes_lease_keys_immediately(kv):
    lease = kv.grant(60 * S)
    other = kv.grant(60 * S)
    kv.save("a", b"1", lease=lease)
    kv.save("b", b"2", lease=lease)
    kv.save("c", b"3", lease=other)
    assert kv.revoke(lease) == ["a", "b"]
    assert not kv.has("a") and not kv.has("b") and kv.has("c")
    assert kv.lease_expiry_ns(lease) is None
    with pytest.raises(LeaseNotFoundError):
        kv.keep_alive(lease, S)


def test_save_without_lease_detaches_key_from_lease(kv):
    lease = kv.grant(S)
    kv.save("k", b"leased", lease=lease)
    kv.save("k", b"plain")
    kv.revoke(lease)
    assert kv.load("k") == b"plain"


def test_lease_ids_are_unique_and_grant_requires_positive_ttl(kv):
    ids = [kv.grant(S) for _ in range(3)]
    kv.revoke(ids[-1])
    ids.append(kv.grant(S))
    assert len(set(ids)) == 4
    with pytest.raises(ValueError):
        kv.grant(0)


def test_expire_leases_returns_vanished_keys(kv, clock):
    short, long_ = kv.grant(S), kv.grant(5 * S)
    kv.save("x", b"", lease=short)
    kv.save("y", b"", lease=long_)
    clock.advance(S)
    assert kv.expire_leases() == ["x"]
    assert kv.expire_leases() == []
    assert kv.has("y")


# ---- watch ----------------------------------------------------------------------------------------

def test_watch_reports_put_and_delete_under_prefix(kv):
    events = []
    cancel = kv.watch("session/", lambda ev, key: events.append((ev, key)))
    kv.save("session/a", b"1")
    kv.save("other", b"1")
    assert kv.put_if_absent("session/b", b"1")
    assert not kv.put_if_absent("session/b", b"2")  # no put happened: no event
    kv.remove("session/a")
    kv.remove("session/a")  # already gone: no event
    cancel()
    kv.save("session/c", b"1")
    assert events == [("put", "session/a"), ("put", "session/b"), ("delete", "session/a")]


def test_watch_reports_lease_expiry_and_revoke_as_delete(kv, clock):
    events = []
    kv.watch("", lambda ev, key: events.append((ev, key)))
    a, b = kv.grant(S), kv.grant(60 * S)
    kv.save("a", b"", lease=a)
    kv.save("b", b"", lease=b)
    clock.advance(S)
    assert not kv.has("a")
    kv.revoke(b)
    assert events == [("put", "a"), ("put", "b"), ("delete", "a"), ("delete", "b")]


def test_watch_expiry_delete_reported_once_even_when_the_operation_then_fails(kv, clock):
    # A failing operation must not roll back the lease sweep it triggered (SQLiteKV once did, and
    # the same expiry was reported again on the next read).
    events = []
    kv.watch("", lambda ev, key: events.append((ev, key)))
    lease = kv.grant(S)
    kv.save("a", b"", lease=lease)
    clock.advance(2 * S)
    with pytest.raises(LeaseNotFoundError):
        kv.keep_alive(lease, S)
    assert not kv.has("a")
    assert kv.lease_expiry_ns(lease) is None
    assert events == [("put", "a"), ("delete", "a")]


def test_watch_callback_sees_committed_state_and_may_write(kv, clock):
    # a standby's watch reacts to the deletion by claiming the key itself
    lease = kv.grant(S)
    kv.put_if_absent("active", b"old", lease=lease)
    seen = []

    def on_event(ev, key):
        if ev == "delete":
            seen.append(kv.has("active"))
            kv.put_if_absent("active", b"new")

    kv.watch("active", on_event)
    clock.advance(S)
    with pytest.raises(LeaseNotFoundError):
        kv.save("x", b"", lease=lease)
    assert kv.load("active") == b"new"
    assert kv.has("active")
    assert seen == [False]  # the expiry was reported once and its effect was kept


# ---- SQLiteKV durability and file safety -----------------------------------------------------------

def test_sqlite_data_and_leases_survive_close_and_reopen(tmp_path, clock):
    path = tmp_path / "meta.db"
    kv = SQLiteKV(path, clock)
    kv.save("k", b"v")
    lease = kv.grant(10 * S)
    kv.save("s", b"x", lease=lease)
    kv.close()
    kv2 = SQLiteKV(path, clock)
    assert kv2.load("k") == b"v"
    assert kv2.load("s") == b"x"
    assert kv2.lease_expiry_ns(lease) == T0 + 10 * S
    assert kv2.grant(S) != lease  # lease ids are not reused after a restart
    clock.advance(10 * S)
    assert not kv2.has("s")
    kv2.close()


def test_sqlite_tso_window_survives_process_restart(tmp_path):
    path = tmp_path / "meta.db"
    clock = ManualClock()
    kv = SQLiteKV(path, clock)
    core = Core(kv, clock)
    core.init_tso_allocator()
    handed = []
    for _ in range(20):
        clock.advance(50 * MS)
        assert core.ts_loop_tick()
        first, count = _alloc(core, 7)
        handed.append(first + count - 1)
    window = core.tso_allocator.get_last_saved_time()
    kv.close()

    # the "new process" starts with its clock 10 s behind
    clock2 = ManualClock(clock.t - 10 * S)
    kv2 = SQLiteKV(path, clock2)
    assert kv2.load(TSO_KEY) == window.to_bytes(8, "big")
    core2 = Core(kv2, clock2)
    core2.init_tso_allocator()
    first, _ = _alloc(core2, 1)
    assert first > max(handed)
    assert physical_time(first) == (window + MS) // MS
    kv2.close()


def _alloc(core, count):
    from milvus_edu.tso import drive_with_sleep

    return drive_with_sleep(core.alloc_timestamp_steps(count), no_sleep)


def test_sqlite_refuses_foreign_sqlite_file_and_leaves_it_unchanged(tmp_path):
    path = tmp_path / "app.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO users VALUES (1, 'ada')")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(KVError, match="another program"):
        SQLiteKV(path)
    assert path.read_bytes() == before
    db = sqlite3.connect(path)
    assert {r[0] for r in db.execute("SELECT name FROM sqlite_master")} == {"users"}
    db.close()


@pytest.mark.parametrize("content", [b"x", b"hello, this is not a database\n" * 10, b"\x00" * 4096])
def test_sqlite_refuses_non_sqlite_file_and_leaves_it_unchanged(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(KVError, match="not a SQLite database"):
        SQLiteKV(path)
    assert path.read_bytes() == content


def test_sqlite_accepts_new_and_empty_files(tmp_path):
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path in (tmp_path / "new.db", empty):
        kv = SQLiteKV(path)
        kv.save("k", b"v")
        kv.close()
        assert path.read_bytes().startswith(b"SQLite format 3\x00")
        kv = SQLiteKV(path)
        assert kv.load("k") == b"v"
        kv.close()


def test_sqlite_failed_operation_rolls_back(tmp_path, clock):
    kv = SQLiteKV(tmp_path / "kv.db", clock)
    kv.save("k", b"old")
    with pytest.raises(RuntimeError):
        with kv._txn():
            kv._put("k", b"new", None)
            raise RuntimeError("crash mid-transaction")
    assert kv.load("k") == b"old"
    kv.close()


# ---- FaultyKV ---------------------------------------------------------------------------------------

def test_faulty_kv_fails_chosen_operations_without_touching_inner(kv):
    asked = []

    def should_fail(op, key):
        asked.append((op, key))
        return op == "save" and key.startswith("bad")

    faulty = FaultyKV(kv, should_fail)
    faulty.save("good", b"1")
    with pytest.raises(KVError, match="etcd unavailable: save bad/1"):
        faulty.save("bad/1", b"1")
    assert not kv.has("bad/1")
    assert faulty.load("good") == b"1"
    assert faulty.has("good")
    assert ("save", "bad/1") in asked and ("load", "good") in asked


def test_faulty_kv_can_fail_every_listed_operation(kv):
    faulty = FaultyKV(kv, lambda op, key: True)
    for call in (
        lambda: faulty.load("k"),
        lambda: faulty.has("k"),
        lambda: faulty.save("k", b""),
        lambda: faulty.remove("k"),
        lambda: faulty.load_with_prefix("k"),
        lambda: faulty.put_if_absent("k", b""),
        lambda: faulty.grant(S),
        lambda: faulty.keep_alive(1, S),
        lambda: faulty.revoke(1),
    ):
        with pytest.raises(KVError):
            call()
    assert kv.load_with_prefix("") == []


def test_faulty_kv_passes_other_attributes_through(kv):
    faulty = FaultyKV(kv, lambda op, key: True)
    events = []
    faulty.watch("", lambda ev, key: events.append(key))  # not a failing op
    kv.save("k", b"")
    assert events == ["k"]


def test_faulty_kv_under_rooted_kv_sees_full_key(kv):
    asked = []
    faulty = FaultyKV(kv, lambda op, key: asked.append((op, key)) or False)
    RootedKV(faulty, "by-dev/kv/gid").save("timestamp", b"12345678")
    assert asked == [("save", TSO_KEY)]
    assert kv.load(TSO_KEY) == b"12345678"


def test_tso_core_over_sqlite_and_memory_agree(tmp_path):
    mem_clock, sql_clock = ManualClock(), ManualClock()
    mem = Core(MemoryKV(mem_clock), mem_clock)
    sql_kv = SQLiteKV(tmp_path / "a.db", sql_clock)
    sql = Core(sql_kv, sql_clock)
    out = []
    for core, c in ((mem, mem_clock), (sql, sql_clock)):
        core.init_tso_allocator()
        seq = []
        for step in range(80):
            c.advance(50 * MS)
            core.ts_loop_tick()
            seq.append(_alloc(core, step + 1))
        seq.append(core.tso_allocator.get_last_saved_time())
        out.append(seq)
    assert out[0] == out[1]
    assert out[0][-1] > T0 + 3 * S  # the window was re-saved at least once
    assert out[0][0] == (compose_ts(T0 // MS + 50, 1), 1)
    sql_kv.close()
