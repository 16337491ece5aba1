"""Coordinator sessions and the active/standby lock (sessionutil), on both KV engines."""

from __future__ import annotations

import json

import pytest

from milvus_edu.config import S, TSOParams
from milvus_edu.events import MemorySink, Recorder
from milvus_edu.sessionutil import Session, active_key, current_active
from milvus_edu.storage.kv import LeaseNotFoundError, MemoryKV

T0 = 1_700_000_000_123_456_789
TTL = 60 * S
ACTIVE_KEY = "by-dev/meta/session/rootcoord"


def two_sessions(kv, recorder=None):
    extra = {} if recorder is None else {"recorder": recorder}
    s1 = Session(kv, "rootcoord", 1, "rootcoord-1", **extra)
    s2 = Session(kv, "rootcoord", 2, "rootcoord-2", **extra)
    s1.register()
    s2.register()
    return s1, s2


def test_active_key_layout():
    assert active_key("by-dev/meta", "rootcoord") == ACTIVE_KEY
    s = Session(MemoryKV(), "rootcoord", 7, "rc")
    assert s.active_key == ACTIVE_KEY
    assert s.session_key == "by-dev/meta/session/rootcoord-7"
    assert TSOParams().session_ttl_ns == TTL


def test_register_puts_session_key_under_a_ttl_lease(kv, clock):
    s1, _ = two_sessions(kv)
    assert json.loads(kv.load(s1.session_key)) == {"Node": "rootcoord-1", "ServerID": 1, "ServerName": "rootcoord"}
    assert kv.lease_expiry_ns(s1.lease_id) == T0 + TTL


def test_first_try_activate_wins_second_is_standby(kv):
    s1, s2 = two_sessions(kv)
    assert s1.try_activate() is True
    assert s2.try_activate() is False
    assert s1.is_active and not s2.is_active
    assert current_active(kv, ACTIVE_KEY) == "rootcoord-1"
    # trying again changes nothing
    assert s2.try_activate() is False
    assert s1.try_activate() is False  # the key exists (it is our own): the put-if-absent fails
    assert current_active(kv, ACTIVE_KEY) == "rootcoord-1"


def test_standby_wins_after_active_lease_expires(kv, clock):
    s1, s2 = two_sessions(kv)
    assert s1.try_activate()
    assert not s2.try_activate()
    clock.advance(TTL // 2)
    s2.keep_alive_once()  # only the standby keeps its lease alive: the active has crashed
    clock.advance(TTL // 2 - 1)
    assert current_active(kv, ACTIVE_KEY) == "rootcoord-1"  # 1 ns before the TTL runs out
    assert not s2.try_activate()
    clock.advance(1)
    assert current_active(kv, ACTIVE_KEY) is None
    assert not kv.has(s1.session_key)
    assert s2.try_activate()
    assert current_active(kv, ACTIVE_KEY) == "rootcoord-2"
    with pytest.raises(LeaseNotFoundError):
        s1.keep_alive_once()  # the crashed node's lease is gone for good


def test_standby_watch_sees_active_key_deleted_on_expiry(kv, clock):
    s1, s2 = two_sessions(kv)
    s1.try_activate()
    events = []
    kv.watch(s2.active_key, lambda ev, key: events.append((ev, key)) if key == s2.active_key else None)
    clock.advance(TTL // 2)
    s2.keep_alive_once()
    assert events == []
    clock.advance(TTL // 2)
    s2.keep_alive_once()  # touching the KV runs the expiry sweep
    assert events == [("delete", ACTIVE_KEY)]


def test_keep_alive_prevents_expiry(kv, clock):
    s1, s2 = two_sessions(kv)
    assert s1.try_activate()
    for _ in range(10):  # 10 minutes of keep-alives every TTL/3
        clock.advance(TTL // 3)
        s1.keep_alive_once()
        s2.keep_alive_once()
    assert current_active(kv, ACTIVE_KEY) == "rootcoord-1"
    assert not s2.try_activate()
    assert kv.lease_expiry_ns(s1.lease_id) == clock.t + TTL


def test_revoke_hands_over_immediately(kv, clock):
    s1, s2 = two_sessions(kv)
    s1.try_activate()
    s2.try_activate()
    s1.revoke()  # graceful stop: no TTL wait
    assert not s1.is_active
    assert current_active(kv, ACTIVE_KEY) is None
    assert not kv.has(s1.session_key)
    assert s2.try_activate()
    assert current_active(kv, ACTIVE_KEY) == "rootcoord-2"
    assert clock.t == T0


def test_current_active_none_when_absent_or_garbled():
    kv = MemoryKV()
    assert current_active(kv, ACTIVE_KEY) is None
    kv.save(ACTIVE_KEY, b"not json")
    assert current_active(kv, ACTIVE_KEY) is None
    kv.save(ACTIVE_KEY, json.dumps({"Node": "rc-9"}).encode())
    assert current_active(kv, ACTIVE_KEY) == "rc-9"


def test_failover_chain_back_and_forth(kv, clock):
    s1, s2 = two_sessions(kv)
    assert s1.try_activate()
    s1.revoke()
    assert s2.try_activate()
    s1.register()  # the old active restarts and comes back as standby
    assert not s1.try_activate()
    s2.revoke()
    assert s1.try_activate()
    assert current_active(kv, ACTIVE_KEY) == "rootcoord-1"


def test_session_events_conform_to_schema(kv):
    sink = MemorySink()
    s1, s2 = two_sessions(kv, Recorder("t", sinks=[sink]))
    s1.try_activate()
    s2.try_activate()
    assert [(r["kind"], r["node"], r["active"]) for r in sink.rows] == [
        ("session.register", "rootcoord-1", None),
        ("session.register", "rootcoord-2", None),
        ("session.active", "rootcoord-1", "rootcoord-1"),
        ("session.standby", "rootcoord-2", "rootcoord-1"),
    ]
