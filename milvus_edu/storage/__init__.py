"""Storage engines: the metadata KV (etcd's role). Object storage arrives with the DataNode."""

from .kv import BaseKV, FaultyKV, KeyNotFoundError, KVError, LeaseNotFoundError, MemoryKV, SQLiteKV

__all__ = ["BaseKV", "MemoryKV", "SQLiteKV", "FaultyKV", "KVError", "KeyNotFoundError", "LeaseNotFoundError"]
