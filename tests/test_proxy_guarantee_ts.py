"""The proxy's read path and the SDK's session timestamps: which ts a read starts at and which it waits for.

Ports Go's ``Test_ParseGuaranteeTs``, ``Test_ParseGuaranteeTsFromConsistency`` (internal/proxy/util_test.go) and
``TestQueryTask_CanSkipAllocTimestamp`` / ``TestSearchTask_CanSkipAllocTimestamp`` (``task_query_test.go`` /
``task_search_test.go``, the same cases for both tasks),
plus the pymilvus rules of reference §5.2 and hypothesis properties.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from milvus_edu.client import BOUNDED_TS, EVENTUALLY_TS, CollectionTsCache, construct_guarantee_ts
from milvus_edu.proto import ConsistencyLevel as CL
from milvus_edu.proxy.guarantee_ts import (GRACEFUL_TIME_MS, ReadRequest, can_skip_alloc_timestamp,
                                           parse_guarantee_ts, parse_guarantee_ts_from_consistency, read_timestamps)
from milvus_edu.tsoutil import add_physical_duration_on_ts, compose_ts, parse_hybrid_ts

NOW_MS = 1_767_225_600_000
T_MAX = compose_ts(NOW_MS, 7)
T_NOW = compose_ts(NOW_MS - 3, 2)
BOUNDED = add_physical_duration_on_ts(T_MAX, -GRACEFUL_TIME_MS * 1_000_000)


def test_parse_guarantee_ts_legacy_values():
    """Port of Test_ParseGuaranteeTs: 0 is Strong, 2 is Bounded, anything else is kept."""
    assert parse_guarantee_ts(0, T_MAX) == T_MAX
    assert parse_guarantee_ts(2, T_MAX) == BOUNDED
    assert parse_guarantee_ts(T_NOW, T_MAX) == T_NOW


def test_parse_guarantee_ts_from_consistency_per_level():
    """Port of Test_ParseGuaranteeTsFromConsistency."""
    assert parse_guarantee_ts_from_consistency(0, T_MAX, CL.STRONG) == T_MAX
    assert parse_guarantee_ts_from_consistency(0, T_MAX, CL.BOUNDED) == BOUNDED
    assert parse_guarantee_ts_from_consistency(T_NOW, T_MAX, CL.SESSION) == T_NOW
    assert parse_guarantee_ts_from_consistency(T_NOW, T_MAX, CL.CUSTOMIZED) == T_NOW
    assert parse_guarantee_ts_from_consistency(0, T_MAX, CL.EVENTUALLY) == 1


def test_bounded_moves_only_the_physical_part():
    physical, logical = parse_hybrid_ts(BOUNDED)
    assert (physical, logical) == (NOW_MS - 5000, 7)


@pytest.mark.parametrize("level, skip", [(CL.EVENTUALLY, True), (CL.BOUNDED, True), (CL.SESSION, True),
                                         (CL.STRONG, False)])
def test_can_skip_alloc_timestamp_with_the_collections_default(level, skip):
    """Port of TestQueryTask_CanSkipAllocTimestamp "default consistency level"."""
    assert can_skip_alloc_timestamp(ReadRequest(use_default_consistency=True), level) is skip


@pytest.mark.parametrize("level, skip", [(CL.EVENTUALLY, True), (CL.BOUNDED, True), (CL.STRONG, False)])
def test_can_skip_alloc_timestamp_with_the_requests_level(level, skip):
    """Port of "request consistency level": the collection's default (Eventually) does not matter."""
    assert can_skip_alloc_timestamp(ReadRequest(consistency_level=level), CL.EVENTUALLY) is skip


def test_can_skip_alloc_timestamp_legacy_guarantee():
    """Port of "legacy_guarantee_ts": Strong with a supplied guarantee > 0 may skip the TSO."""
    assert not can_skip_alloc_timestamp(ReadRequest(consistency_level=CL.STRONG), CL.STRONG)
    assert can_skip_alloc_timestamp(ReadRequest(consistency_level=CL.STRONG, guarantee_timestamp=2), CL.STRONG)


def test_a_strong_read_takes_the_tso_and_waits_for_it():
    got = read_timestamps(ReadRequest(consistency_level=CL.STRONG), CL.BOUNDED, NOW_MS, tso_ts=T_MAX)
    assert (got.begin_ts, got.from_tso, got.guarantee_ts, got.level) == (T_MAX, True, T_MAX, CL.STRONG)
    with pytest.raises(ValueError, match="pass tso_ts"):
        read_timestamps(ReadRequest(consistency_level=CL.STRONG), CL.STRONG, NOW_MS)


def test_a_bounded_read_uses_the_proxys_own_clock():
    """Milvus issue #16841: the begin ts, hence the guarantee, follow the proxy's clock, not the TSO."""
    late = read_timestamps(ReadRequest(use_default_consistency=True), CL.BOUNDED, NOW_MS - 20_000, tso_ts=T_MAX)
    assert not late.from_tso and late.begin_ts == compose_ts(NOW_MS - 20_000, 0)
    assert parse_hybrid_ts(late.guarantee_ts) == (NOW_MS - 25_000, 0)


def test_session_and_legacy_values_travel_as_the_sdk_sent_them():
    session = read_timestamps(ReadRequest(consistency_level=CL.SESSION, guarantee_timestamp=T_NOW), CL.STRONG, NOW_MS)
    assert session.guarantee_ts == T_NOW and not session.from_tso
    legacy = read_timestamps(ReadRequest(consistency_level=CL.STRONG, guarantee_timestamp=BOUNDED_TS), CL.STRONG,
                             NOW_MS)
    assert parse_hybrid_ts(legacy.guarantee_ts) == (NOW_MS - 5000, 0)  # the proxy clock, minus gracefulTime
    it = read_timestamps(ReadRequest(consistency_level=CL.BOUNDED, guarantee_timestamp=T_NOW, is_iterator=True),
                         CL.STRONG, NOW_MS)
    assert it.guarantee_ts == it.mvcc_ts == T_NOW


def test_consistency_level_parsing_is_forgiving_but_clear():
    assert CL.parse("Bounded") is CL.BOUNDED and CL.parse(" strong ") is CL.STRONG and CL.parse(3) is CL.EVENTUALLY
    with pytest.raises(ValueError, match="unknown consistency level 'Fresh'; use one of Strong, Session"):
        CL.parse("Fresh")
    with pytest.raises(ValueError):
        CL.parse(True)


# --- the SDK -------------------------------------------------------------------------------------

def test_the_cache_keeps_the_largest_write_per_collection():
    cache = CollectionTsCache()
    assert cache.get("", "", "c0") == 0
    cache.set("", "", "c0", 50)
    cache.set("", "default", "c0", 40)  # older: ignored; "" and "default" are the same db
    assert cache.get("", "default", "c0") == 50 and cache.get("", "", "c1") == 0


def test_construct_guarantee_ts_per_level():
    assert construct_guarantee_ts(None, 50) == (None, 50)
    assert construct_guarantee_ts(None, 0) == (None, EVENTUALLY_TS)
    assert construct_guarantee_ts("Strong", 50) == (CL.STRONG, 0)
    assert construct_guarantee_ts("Session", 50) == (CL.SESSION, 50)
    assert construct_guarantee_ts("Session", 0) == (CL.SESSION, 1)
    assert construct_guarantee_ts("Bounded", 50) == (CL.BOUNDED, BOUNDED_TS)
    assert construct_guarantee_ts("Eventually", 50) == (CL.EVENTUALLY, 1)
    assert construct_guarantee_ts("Customized", 50, given_ts=77) == (CL.CUSTOMIZED, 77)
    assert construct_guarantee_ts("Session", 50, session_uses_zero_ts=True) == (CL.SESSION, 0)


@given(st.lists(st.integers(3, 2**62), min_size=1, max_size=20), st.integers(10**12, 2 * 10**12))
def test_a_session_read_waits_for_every_write_the_client_saw(writes, now_ms):
    cache = CollectionTsCache()
    for ts in writes:
        cache.set("e", "", "c", ts)
    level, sent = construct_guarantee_ts("Session", cache.get("e", "", "c"))
    got = read_timestamps(ReadRequest(consistency_level=level, guarantee_timestamp=sent), CL.BOUNDED, now_ms)
    assert got.guarantee_ts == max(writes) >= max(writes)


@given(st.integers(10**12, 2 * 10**12), st.integers(0, 2**18 - 1), st.sampled_from([CL.STRONG, CL.BOUNDED]))
def test_strong_and_bounded_never_wait_past_the_begin_ts(physical, logical, level):
    t_max = compose_ts(physical, logical)
    g = parse_guarantee_ts_from_consistency(0, t_max, level)
    assert g <= t_max
    if level == CL.BOUNDED:
        assert parse_hybrid_ts(g) == (physical - GRACEFUL_TIME_MS, logical)
