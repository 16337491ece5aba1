"""The cluster's collections by name, and the DDL clients run on them: what a simulated SDK client's
``create_collection``, ``drop_collection``, ``flush`` and writes need beyond the nodes.

A :class:`Catalog` is built with a cluster that has a QueryNode (:mod:`~milvus_edu.cluster.builder`). Creating a
collection takes a DDL timestamp, writes CreateCollection into every pchannel (the collection's start positions),
calls DataCoord's ``WatchChannels``, and the DataNode and the QueryNode watch its vchannels (the QueryNode loads a
collection as soon as it is created, what ``MilvusClient.create_collection`` does with a dimension). Every
collection has one shard per pchannel and one partition. A flush is followed by QueryCoord's handoff: each
newly flushed segment is loaded sealed from its binlogs.

With ``meta_cache=True`` (the ``ddl-recreate-under-load`` scenario) the catalog also models the DDL/DML seam of the
seed: each proxy keeps a :class:`~milvus_edu.proxy.MetaCache`, requests name their collection and the proxy resolves
it (``DescribeCollection`` on a miss); ``create_collection`` and ``drop_collection`` run on rootcoord's DDL scheduler
(their timestamps hold the DDL time tick back until they finish); a drop invalidates every proxy's cache first
(``expireCacheStep``), then releases the collection on the QueryNode and broadcasts ``DropCollection`` into its
pchannels under the DDL ts lock; and each client's inserts go through the SDK's collection cache and
``retryIfSchemaError`` (:mod:`milvus_edu.client.collection_cache`). Without it, requests carry their collection
object and nothing of this runs.

Simplification: a DDL request goes from the client straight to rootcoord (Go: through the proxy's DDL queue); a
drop's garbage collection broadcasts at once, with no time between taking and releasing the DDL ts lock; the
drop's index, data and channel clean-up steps are not modelled; the old collection's data stays on the DataNode.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

from ..datanode.syncmgr.pack import META_FIELD_ID
from ..datanode.syncmgr.storage_serializer import read_insert_binlog
from ..merr import wrap_err_collection_not_found_with_db
from ..mq import get_virtual_channel
from ..mq.msg import CreateCollectionMsg, DropCollectionMsg
from ..proto import ConsistencyLevel, MsgPosition, MsgType, SegmentLevel, SegmentState
from ..proxy.meta_cache import CollectionInfo, MetaCache
from ..querynode import Row
from ..querynode.expr import pk_type_of
from ..rootcoord import DdlTask
from ..sim.kernel import RPCError
from ..storage.binlog import decompress_bin_logs
from ..tso import TSOError
from .control_plane import SegmentCollection
from .data import DataCoordNode
from .querynode import ReadProxy

FIRST_COLLECTION_ID = 100


class QueryCollection(SegmentCollection):
    """A collection as the cluster knows it: name, default consistency level, shards."""

    def __init__(self, name: str, collection_id: int, vchannels: list[str], datacoord: DataCoordNode,
                 consistency_level: ConsistencyLevel):
        super().__init__(collection_id, vchannels, datacoord, collection_id * 10 + 1)
        self.name = name
        self.consistency_level = consistency_level
        self.payload_bytes_per_row = 0
        #: ``Int64`` or ``VarChar``: the type of the first keys inserted (None before any insert)
        self.pk_type: str | None = None
        self.loaded: set[int] = set()
        #: ``UpdateTimestamp``: the schema version an SDK sends with its inserts (a new collection's create ts).
        self.update_timestamp = 0


class Catalog:
    """The collections of a cluster with a QueryNode, by name and by id, and the DDL, flush and handoff its
    clients run; ``meta_cache``: model the proxies' meta caches and DDL on rootcoord's scheduler.

    ``cluster`` is the :class:`~milvus_edu.cluster.builder.Cluster` that owns this catalog (its nodes and its
    ``flush_and_wait`` and ``read_segment``); the builder makes the catalog, so the catalog does not import it.
    """

    def __init__(self, cluster, meta_cache: bool = False):
        self.cluster = cluster
        self.sim = cluster.sim
        self.collections: dict[str, QueryCollection] = {}
        #: every collection ever created, by id (a dropped one stays: proxies and reads may still name its id)
        self.collections_by_id: dict[int, QueryCollection] = {}
        self.meta_cache = meta_cache
        #: collection name -> the event a running create or drop of it fires when done: the write lock
        #: ``executeTaskWithLock`` holds on the name (``rootCoord.useLockScheduler``), which a describe waits for
        self._name_locks: dict[str, object] = {}
        if meta_cache:
            for p in cluster.read_proxies:
                p.meta_cache = MetaCache()
                p.rootcoord_name = cluster.rootcoord.name
                p.describe = self.handle_describe_collection
                p.collections_by_id = self.collections_by_id
        self.inserted: dict[str, list] = {}
        #: collection name -> key -> the dynamic field its last acknowledged insert carried (for delete by filter)
        self.inserted_fields: dict[str, dict] = {}
        #: reads so far (a read's request number)
        self.requests = 0
        self._next_collection_id = FIRST_COLLECTION_ID

    def acked_insert(self, coll: QueryCollection, pks: list, fields: list | None) -> None:
        """Note an acknowledged insert: its keys (and their dynamic fields) for delete by filter, and the
        collection's primary key type from its first keys."""
        self.inserted.setdefault(coll.name, []).extend(pks)
        if coll.pk_type is None:
            coll.pk_type = pk_type_of(pks)
        last = self.inserted_fields.setdefault(coll.name, {})
        for pk, f in zip(pks, fields if fields is not None else [None] * len(pks)):
            last[pk] = f

    def acked_keys(self, name: str) -> list:
        """Keys the clients inserted into the collection called ``name`` (for delete by filter)."""
        return list(self.inserted.get(name, []))

    # ---- DDL

    def create_collection(self, client: str, name: str, level: ConsistencyLevel):
        """``CreateCollection`` + ``LoadCollection``: a DDL timestamp, the CreateCollection message in every
        pchannel (the collection's start positions), DataCoord's ``WatchChannels``, the DataNode and the
        QueryNode watch its vchannels."""
        rec, rc = self.sim.recorder, self.cluster.rootcoord
        if name in self.collections:
            raise ValueError(f"collection already exists[collection={name}]")
        try:
            if self.meta_cache:
                coll = yield from self.sim.call(client, rc.name, lambda: self._handle_create_collection(name, level,
                                                                                                         client))
                ts = coll.update_timestamp
            else:
                ts, _ = yield from self.sim.call(client, rc.name, lambda: rc.handle_alloc_timestamp(1, client))
                coll = self._create(name, level, ts)
        except RPCError as exc:
            rec.emit("client.create_collection", client, peer=rc.name, error=str(exc), detail={"collection": name})
            return {"error": str(exc)}
        rec.emit("client.create_collection", client, ts=ts, peer=rc.name, level=level.name.capitalize(),
                 detail={"collection": name, "collection_id": coll.id, "vchannels": coll.vchannels})
        return {"collection": name, "collection_id": coll.id, "timestamp": ts}

    def _create(self, name: str, level: ConsistencyLevel, ts: int) -> QueryCollection:
        """What creating ``name`` at DDL timestamp ``ts`` sets up: the id and vchannels, the CreateCollection
        message in every pchannel, DataCoord's ``WatchChannels``, the DataNode's and the QueryNode's watches."""
        rec, rc = self.sim.recorder, self.cluster.rootcoord
        cid = self._next_collection_id
        self._next_collection_id += 1
        vchannels = [get_virtual_channel(self.cluster.pchannels[i], cid, i) for i in range(len(self.cluster.pchannels))]
        coll = QueryCollection(name, cid, vchannels, self.cluster.datacoord, level)
        coll.update_timestamp = ts
        self.collections[name] = coll
        self.collections_by_id[cid] = coll
        starts = []
        for ch in self.cluster.pchannels:
            msg_id = self.cluster.broker.produce(ch, CreateCollectionMsg(timestamp=ts, collection_id=cid))
            rec.emit("mq.produce", rc.name, ts=ts, channel=ch, msg_id=msg_id, msg_type=MsgType.CREATE_COLLECTION,
                     begin_ts=ts, end_ts=ts, count=0)
            starts.append((ch, msg_id))
        self.cluster.datacoord.server.watch_channels(cid, vchannels, starts, ts, partitions=(coll.partition_id,))
        self.cluster.datanode.watch_channels([(cid, v) for v in vchannels])
        for v, (ch, msg_id) in zip(vchannels, starts):
            self.cluster.querynode.watch(cid, v, MsgPosition(channel_name=ch, msg_id=msg_id, timestamp=ts), ts)
        return coll

    # ---- DDL on rootcoord's scheduler (meta_cache)

    def _ddl_start(self, task_name: str, name: str, peer: str) -> DdlTask:
        """``scheduler.AddTask`` of a DDL task with a locker key: its ts from ``setTs``, pushed onto the heap that
        holds ``minDdlTs`` (and so the DDL time tick) back until the task finishes."""
        task = DdlTask(task_name)
        self.cluster.timetick.scheduler.add_task_with_lock(task)  # a TSOError becomes the RPC's error
        self.sim.recorder.emit("rootcoord.ddl", self.cluster.rootcoord.name, ts=task.ts, peer=peer,
                               detail={"task": task_name, "collection": name, "state": "started",
                                       "min_ddl_ts": self.cluster.timetick.scheduler.get_min_ddl_ts()})
        return task

    def _ddl_done(self, task: DdlTask, name: str, peer: str, error: str | None = None, **detail) -> None:
        """``NotifyDone``: the task leaves the heap and ``minDdlTs`` moves past it."""
        self.cluster.timetick.scheduler.execute(task, error)
        self.sim.recorder.emit("rootcoord.ddl", self.cluster.rootcoord.name, ts=task.ts, peer=peer, error=error,
                               detail={"task": task.name, "collection": name, "state": "done",
                                       "min_ddl_ts": self.cluster.timetick.scheduler.get_min_ddl_ts(), **detail})

    def _handle_create_collection(self, name: str, level: ConsistencyLevel, peer: str):
        """rootcoord's ``CreateCollection`` (``createCollectionTask`` on the scheduler, holding the name's write
        lock); answers the collection. Its first step, ``expireCacheStep`` (a ``DropCollection``-type
        ``InvalidateCollectionMetaCache`` of the name and the new id on every proxy), clears any stale entry a
        proxy still holds for the name."""
        yield from self._name_free(name)
        if name in self.collections:
            raise ValueError(f"collection already exists[collection={name}]")
        task = self._ddl_start("CreateCollection", name, peer)
        with self._name_lock(name):
            env, cid = self.sim.env, self._next_collection_id
            yield env.all_of([env.process(self._expire_cache(p, name, cid, task.ts, "CreateCollection"))
                              for p in self.cluster.read_proxies])
            coll = self._create(name, level, task.ts)
        self._ddl_done(task, name, peer, collection_id=coll.id)
        return coll

    def _name_free(self, name: str):
        """Wait until no create or drop holds ``name``'s lock (a describe's read lock, or the next writer's turn)."""
        while name in self._name_locks:
            yield self._name_locks[name]

    @contextmanager
    def _name_lock(self, name: str):
        """Hold ``name``'s write lock for a create or a drop (taken right after :meth:`_name_free`, with no yield
        between): a describe, create or drop of the name waits until the task is done."""
        done = self._name_locks[name] = self.sim.env.event()
        try:
            yield
        finally:
            del self._name_locks[name]
            done.succeed()

    def handle_describe_collection(self, name: str, peer: str):
        """rootcoord's ``DescribeCollection`` by name (``describeCollectionTask`` on the scheduler: ``RequestTime`` is
        its ts). Raises ``collection not found[database=default][collection=<name>]`` when no such collection."""
        task = DdlTask("DescribeCollection")
        scheduler = self.cluster.timetick.scheduler
        scheduler.add_task_with_lock(task)
        yield from self._name_free(name)
        coll = self.collections.get(name)
        scheduler.execute(task, None if coll is not None else "collection not found")
        if coll is None:
            raise wrap_err_collection_not_found_with_db("default", name)
        return CollectionInfo(name, coll.id, tuple(coll.vchannels), coll.update_timestamp, request_time=task.ts)

    def drop_collection(self, client: str, name: str):
        """``MilvusClient.drop_collection``: rootcoord's ``dropCollectionTask`` (a no-op when the name is unknown,
        as Milvus makes dropping idempotent). Returns ``{"timestamp", "collection_id"}`` or ``{"error"}``."""
        rec, rc = self.sim.recorder, self.cluster.rootcoord
        try:
            res = yield from self.sim.call(client, rc.name, lambda: self._handle_drop_collection(name, client))
        except RPCError as exc:
            rec.emit("client.drop_collection", client, peer=rc.name, error=str(exc), detail={"collection": name})
            return {"error": str(exc)}
        rec.emit("client.drop_collection", client, ts=res["timestamp"], peer=rc.name,
                 detail={"collection": name, "collection_id": res["collection_id"]})
        return res

    def _handle_drop_collection(self, name: str, peer: str):
        """``dropCollectionTask.Execute`` -> ``executeDropCollectionTaskSteps``: the sync steps (``expireCacheStep``:
        ``InvalidateCollectionMetaCache`` on every proxy, in parallel; ``changeCollectionStateStep``: the name stops
        resolving), the task's end, then the async steps (``releaseCollectionStep``, ``deleteCollectionDataStep``)."""
        env = self.sim.env
        if not self.meta_cache:
            raise ValueError("drop_collection needs the cluster's meta cache (ClusterSpec(meta_cache=True))")
        task = self._ddl_start("DropCollection", name, peer)
        yield from self._name_free(name)
        coll = self.collections.get(name)
        if coll is None:  # "drop non-existent collection": idempotent
            self._ddl_done(task, name, peer, collection_id=None)
            return {"timestamp": task.ts, "collection_id": None}
        with self._name_lock(name):
            calls = [env.process(self._expire_cache(p, name, coll.id, task.ts)) for p in self.cluster.read_proxies]
            yield env.all_of(calls)
            del self.collections[name]
        self._ddl_done(task, name, peer, collection_id=coll.id,
                       invalidated=[p.name for p, c in zip(self.cluster.read_proxies, calls) if c.value])
        env.process(self._drop_async(coll))
        return {"timestamp": task.ts, "collection_id": coll.id}

    def _expire_cache(self, proxy: ReadProxy, name: str, collection_id: int, ts: int, task: str = "DropCollection"):
        """One proxy's ``InvalidateCollectionMetaCache`` RPC for ``task``; True when it answered (a dead proxy is
        skipped)."""
        rc = self.cluster.rootcoord
        try:
            yield from self.sim.call(rc.name, proxy.name, lambda: proxy.handle_invalidate(name, collection_id, ts,
                                                                                          rc.name, task))
        except RPCError:
            return False
        return True

    def _drop_async(self, coll: QueryCollection):
        """The drop's async steps: ``releaseCollectionStep`` (QueryCoord releases it on the QueryNode) and
        ``deleteCollectionDataStep`` (``GcCollectionData``: under the DDL ts lock, with the in-progress count up, a
        fresh ts for the ``DropCollection`` message broadcast into the collection's pchannels, recorded with
        ``UpdateLastTs`` so no DDL time tick passes it)."""
        rc, qn = self.cluster.rootcoord, self.cluster.querynode
        try:
            yield from self.sim.call(rc.name, qn.name, lambda: qn.release(coll.id, coll.vchannels))
        except RPCError:
            pass
        lock = self.cluster.timetick.ddl_lock
        lock.lock()
        lock.add_ref_cnt(1)
        try:
            ts = self.cluster.timetick.scheduler.generate_tso(1)
            for ch in coll.pchannels:
                msg_id = self.cluster.broker.produce(ch, DropCollectionMsg(timestamp=ts, collection_id=coll.id))
                self.sim.recorder.emit("mq.produce", rc.name, ts=ts, channel=ch, msg_id=msg_id,
                                       msg_type=MsgType.DROP_COLLECTION, begin_ts=ts, end_ts=ts, count=0,
                                       detail={"collection_id": coll.id})
            lock.update_last_ts(ts)
        except TSOError:
            pass  # Go's GC step fails and is retried later; the run log shows no broadcast
        finally:
            lock.add_ref_cnt(-1)
            lock.unlock()

    # ---- flush and handoff

    def flush(self, client: str, coll: QueryCollection):
        """``MilvusClient.flush``, then QueryCoord's handoff: every newly flushed segment is loaded sealed from its
        binlogs."""
        res = yield from self.cluster.flush_and_wait(client, coll.id, {"collection": coll.name})
        if res is None:
            return {"error": "Flush failed"}
        self._handoff(coll)
        return {"flush_ts": res.flush_ts, "segments": list(res.segment_ids)}

    def _handoff(self, coll: QueryCollection) -> None:
        server = self.cluster.datacoord.server
        for segment in sorted(server.meta.segments.values(), key=lambda s: s.id):
            if (segment.collection_id != coll.id or segment.state != SegmentState.FLUSHED
                    or segment.level == SegmentLevel.L0 or segment.id in coll.loaded):
                continue
            pks, tss, _ = self.cluster.read_segment(segment)
            metas = self._read_meta(segment)
            if metas is None:
                rows = [Row(pk, ts) for pk, ts in zip(pks, tss)]
            else:
                rows = [Row(pk, ts, fields=f or None) for pk, ts, f in zip(pks, tss, metas)]
            checkpoint = segment.dml_position.timestamp if segment.dml_position is not None else 0
            coll.loaded.add(segment.id)
            self.cluster.querynode.load_sealed(segment.insert_channel, segment.id, rows, checkpoint)

    def _read_meta(self, segment) -> list | None:
        """The segment's dynamic-field binlog (``$meta``, one JSON document per row, in binlog order), or None
        when its rows carried none."""
        info = decompress_bin_logs(segment, self.cluster.store.root_path)
        docs: list | None = None
        for field_binlog in info.binlogs:
            if field_binlog.field_id == META_FIELD_ID:
                docs = docs or []
                for b in field_binlog.binlogs:
                    binlog = read_insert_binlog(self.cluster.store.read(b.log_path), name=b.log_path)
                    docs.extend(json.loads(d) for d in next(iter(binlog.columns.values())))
        return docs
