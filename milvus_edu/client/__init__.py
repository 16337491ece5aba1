"""The SDK's side of consistency (pymilvus ``pymilvus/client``): the session timestamp cache and the guarantee
timestamp a search or query sends."""

from .ts_utils import BOUNDED_TS, EVENTUALLY_TS, CollectionTsCache, construct_guarantee_ts

__all__ = ["BOUNDED_TS", "EVENTUALLY_TS", "CollectionTsCache", "construct_guarantee_ts"]
