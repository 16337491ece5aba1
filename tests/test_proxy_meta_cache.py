"""The proxy's meta cache and the SDK's schema retry (pure components).

Ports ``TestMetaCache_Parallel`` (``internal/proxy/meta_cache_test.go``: a describe older than the cache version is
returned but not cached, a newer one is) and the rules of ``InvalidateCollectionMetaCache`` for a drop and of
``retryIfSchemaError`` (``client/milvusclient/common.go``); hypothesis checks that the retry stops.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from milvus_edu.client import CollectionCache, SchemaErrorRetry
from milvus_edu.client.collection_cache import MAX_UINT64, RETRY_ATTEMPTS
from milvus_edu.merr import (CollectionNotFoundError, CollectionSchemaMismatchError,
                             wrap_err_collection_not_found_with_db, wrap_err_collection_schema_mismatch)
from milvus_edu.proxy import CollectionInfo, MetaCache, check_schema_timestamp


def info(name="collection1", cid=111, update_ts=50, request_time=0) -> CollectionInfo:
    return CollectionInfo(name, cid, ("v0", "v1"), update_ts, request_time)


def test_a_describe_older_than_the_cache_version_is_not_cached_and_a_newer_one_is():
    """meta_cache_test.go TestMetaCache_Parallel."""
    cache = MetaCache()
    version = 100
    assert cache.remove_collections_by_id(111, version + 2, False) == []
    assert cache.update(info(request_time=version)) is False
    assert cache.get_collection("collection1") is None
    assert cache.update(info(request_time=version + 6)) is True
    assert cache.get_collection("collection1") == info(request_time=version + 6)


def test_get_collection_info_misses_when_the_cached_id_is_not_the_one_asked_for():
    cache = MetaCache()
    cache.update(info(request_time=10))
    assert cache.get_collection_info("collection1") == info(request_time=10)
    assert cache.get_collection_info("collection1", 111) == info(request_time=10)
    assert cache.get_collection_info("collection1", 112) is None
    assert cache.get_collection("", 111).name == "collection1"


def test_a_drop_removes_the_name_and_its_version_so_an_older_describe_is_cached_again():
    cache = MetaCache()
    cache.update(info(request_time=10))
    assert cache.invalidate_drop_collection("collection1", 111, ts=20) == ["collection1"]
    assert cache.cached_names() == []
    # removeVersion=true for a drop: the id's version is gone, so any later describe of the id is cached again
    assert cache.update(info(request_time=15)) is True
    assert cache.invalidate_drop_collection("collection1", 111, ts=30) == ["collection1"]
    assert cache.invalidate_drop_collection("collection1", 111, ts=31) == []  # idempotent


def test_remove_by_id_keeps_an_entry_newer_than_the_version():
    cache = MetaCache()
    cache.update(info(request_time=40))
    assert cache.remove_collections_by_id(111, 30, False) == []  # the cache (40) is newer than the request (30)
    assert cache.remove_collections_by_id(111, 0, False) == ["collection1"]  # version 0: always


def test_the_schema_check_takes_zero_or_the_collections_update_timestamp():
    check_schema_timestamp("C0", 0, info(update_ts=50))
    check_schema_timestamp("C0", 50, info(update_ts=50))
    with pytest.raises(CollectionSchemaMismatchError, match=r"^collection schema mismatch\[collection=C0\]$"):
        check_schema_timestamp("C0", 49, info(update_ts=50))


def test_milvus_error_texts_and_codes():
    err = wrap_err_collection_not_found_with_db("default", "C0")
    assert str(err) == "collection not found[database=default][collection=C0]" and err.code == 100
    assert wrap_err_collection_schema_mismatch("C0").code == 109


def test_the_sdk_cache_keeps_evicts_and_misses():
    cache = CollectionCache()
    assert cache.get("C0") is None
    cache.insert("C0", info())
    assert cache.get("C0") == info()
    assert cache.evict("C0") is True and cache.evict("C0") is False and cache.get("C0") is None


def test_a_schema_mismatch_with_a_new_timestamp_evicts_and_retries_with_doubling_sleeps():
    retry = SchemaErrorRetry()
    mismatch = wrap_err_collection_schema_mismatch("C0")
    first = retry.after(50, mismatch)
    assert (first.retry, first.evict, first.sleep_ms) == (True, True, 200.0)
    second = retry.after(60, mismatch)
    assert (second.retry, second.evict, second.sleep_ms) == (True, True, 400.0)
    same = retry.after(60, mismatch)  # the same schema timestamp twice: describing again would not help
    assert (same.retry, same.evict) == (False, False)


@pytest.mark.parametrize("error", [wrap_err_collection_not_found_with_db("default", "C0"), RuntimeError("boom")])
def test_any_other_error_is_returned_at_once(error):
    decision = SchemaErrorRetry().after(50, error)
    assert (decision.retry, decision.evict, decision.sleep_ms) == (False, False, 0.0)
    assert isinstance(wrap_err_collection_not_found_with_db("d", "c"), CollectionNotFoundError)


@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=30))
def test_the_retry_ends_within_its_attempts_and_sleeps_at_most_three_seconds(stamps):
    retry = SchemaErrorRetry()
    mismatch = wrap_err_collection_schema_mismatch("C0")
    last = MAX_UINT64
    for n, ts in enumerate(stamps, 1):
        decision = retry.after(ts, mismatch)
        assert decision.sleep_ms <= 3000.0
        assert decision.evict == (ts != last)
        if not decision.retry:
            assert ts == last or n == RETRY_ATTEMPTS
            break
        last = ts
    assert retry.tried <= RETRY_ATTEMPTS


def test_retry_needs_an_attempt():
    with pytest.raises(ValueError, match="attempts must be at least 1"):
        SchemaErrorRetry(attempts=0)
