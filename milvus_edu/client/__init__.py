"""The SDK's side of consistency (pymilvus ``pymilvus/client``): the session timestamp cache and the guarantee
timestamp a search or query sends; and the Go SDK's collection cache with its retry on a schema error."""

from .collection_cache import CollectionCache, RetryDecision, SchemaErrorRetry
from .ts_utils import BOUNDED_TS, EVENTUALLY_TS, CollectionTsCache, construct_guarantee_ts

__all__ = ["BOUNDED_TS", "EVENTUALLY_TS", "CollectionCache", "CollectionTsCache", "RetryDecision", "SchemaErrorRetry",
           "construct_guarantee_ts"]
