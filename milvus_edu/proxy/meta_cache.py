"""The proxy's collection meta cache: collection name -> id, channels and schema version, filled from rootcoord.

Models ``internal/proxy/meta_cache.go`` (Milvus 2.5): ``MetaCache.getCollection``, the cache part of ``update``
(``collectionCacheVersion`` against the describe's ``RequestTime``), ``GetCollectionID``, ``GetCollectionInfo``,
``RemoveCollection``, ``RemoveCollectionsByID``; the ``DropCollection`` branch of ``Proxy.InvalidateCollectionMetaCache``
(``impl.go``); and the schema check of ``insertTask.PreExecute`` (``task_insert.go``).

A proxy does not ask rootcoord for a collection on every request: the first request naming it misses, the proxy
sends ``DescribeCollection`` and keeps the answer; later requests hit. Rootcoord's ``DropCollection`` first step
(``expireCacheStep``) calls ``InvalidateCollectionMetaCache`` on every proxy, which removes the name and, for a drop
(``removeVersion=true``), the id's cache version too: the version does not protect the cache here, and a
``DescribeCollection`` answered before the drop would be cached again. What keeps a stale id out is rootcoord's
side: a describe waits for a running drop of its name (the name's lock in rootcoord's scheduler), and a re-create
expires the name on every proxy before it exists again. A collection dropped and created again under the same name gets a
new id and a new ``UpdateTimestamp``; an SDK still holding the old one sends it as the insert's schema timestamp,
and the proxy answers ``collection schema mismatch``: the SDK's cue to describe again and retry
(:mod:`milvus_edu.client.collection_cache`).

The cache is a pure component: the simulator sends the ``DescribeCollection`` RPC on a miss and hands the answer
to :meth:`MetaCache.update`.

Simplification: one database (``default``); no partitions, aliases, shard leaders, credentials or privileges; the
``singleflight`` that merges concurrent misses is not modelled (two concurrent misses send two describes).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..merr import wrap_err_collection_schema_mismatch

DEFAULT_DB = "default"


@dataclass(frozen=True)
class CollectionInfo:
    """``collectionInfo`` (the fields the DML and read paths use) as ``DescribeCollection`` returns them.

    ``update_timestamp``: the collection's schema version (``UpdateTimestamp``; a new collection's is its create
    timestamp); ``request_time``: the describe task's timestamp on rootcoord (``RequestTime``).
    """

    name: str
    collection_id: int
    vchannels: tuple[str, ...]
    update_timestamp: int
    request_time: int = 0


class MetaCache:
    """``MetaCache``'s collection part: ``{database: {name: CollectionInfo}}`` and ``collectionCacheVersion``."""

    def __init__(self) -> None:
        self._infos: dict[str, dict[str, CollectionInfo]] = {}
        self._versions: dict[int, int] = {}

    def get_collection(self, name: str, collection_id: int = 0, database: str = DEFAULT_DB) -> CollectionInfo | None:
        """``getCollection``: the cached info by name (or by id when ``name`` is empty), or None on a miss."""
        db = self._infos.get(database, {})
        if name:
            return db.get(name)
        return next((i for i in db.values() if i.collection_id == collection_id), None)

    def get_collection_info(self, name: str, collection_id: int = 0, database: str = DEFAULT_DB) -> CollectionInfo | None:
        """The hit test of ``GetCollectionInfo``: the cached info, or None when missing or (given an id) when the
        cached id differs (then the cache is not trusted and the caller describes again)."""
        info = self.get_collection(name, database=database)
        if info is None or (collection_id and info.collection_id != collection_id):
            return None
        return info

    def update(self, info: CollectionInfo, database: str = DEFAULT_DB) -> bool:
        """The cache part of ``update``: store ``info`` unless its ``request_time`` is below the id's cache version
        (a describe older than the last invalidation); either way the caller uses ``info``. Returns whether it was
        cached."""
        version = self._versions.get(info.collection_id, 0)
        if info.request_time < version and info.request_time != 0:
            return False
        self._infos.setdefault(database, {})[info.name] = info
        self._versions[info.collection_id] = info.request_time
        return True

    def remove_collection(self, name: str, database: str = DEFAULT_DB) -> bool:
        """``RemoveCollection``: forget ``name``; returns whether it was cached."""
        return self._infos.get(database, {}).pop(name, None) is not None

    def remove_collections_by_id(self, collection_id: int, version: int, remove_version: bool) -> list[str]:
        """``RemoveCollectionsByID``: forget every name cached for the id when its version is not newer than
        ``version`` (0: always); then drop the id's version (``remove_version``) or set it to ``version``.
        Returns the names removed, sorted."""
        current = self._versions.get(collection_id, 0)
        removed = []
        for db in self._infos.values():
            for name in sorted(db):
                if db[name].collection_id == collection_id and (version == 0 or current <= version):
                    del db[name]
                    removed.append(name)
        if remove_version:
            self._versions.pop(collection_id, None)
        elif version != 0:
            self._versions[collection_id] = version
        return sorted(removed)

    def invalidate_drop_collection(self, name: str, collection_id: int, ts: int,
                                   database: str = DEFAULT_DB) -> list[str]:
        """``InvalidateCollectionMetaCache`` for ``MsgType_DropCollection``: ``RemoveCollectionsByID(id, ts,
        removeVersion=true)`` then ``RemoveCollection(name)``. Returns the names that were cached, sorted."""
        removed = set(self.remove_collections_by_id(collection_id, ts, True)) if collection_id else set()
        if name and self.remove_collection(name, database):
            removed.add(name)
        return sorted(removed)

    def cached_names(self, database: str = DEFAULT_DB) -> list[str]:
        """The collection names cached, sorted (for views and tests)."""
        return sorted(self._infos.get(database, {}))


def check_schema_timestamp(name: str, schema_timestamp: int, info: CollectionInfo) -> None:
    """``insertTask.PreExecute``'s schema check: a non-zero schema timestamp from the SDK must equal the
    collection's ``UpdateTimestamp``, else ``collection schema mismatch[collection=<name>]``."""
    if schema_timestamp != 0 and schema_timestamp != info.update_timestamp:
        raise wrap_err_collection_schema_mismatch(name)
