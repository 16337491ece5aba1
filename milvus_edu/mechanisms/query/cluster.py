"""A simulated Milvus cluster driven by clients: the query mechanism's scenarios and the notebook API build on it.

:class:`QueryCluster` wires rootcoord (TSO, timetick sync), proxies, the pchannels, DataCoord and a DataNode (so a
flush writes real Parquet binlogs), and a QueryNode. Clients talk to it the way pymilvus's ``MilvusClient`` talks to
Milvus: ``create_collection`` (created and loaded), ``insert``, ``delete``, ``flush``, ``search`` and ``query`` with a
``consistency_level``. A workload is plain data — a list of steps (:func:`parse_steps`) — and each client runs its
steps in order, each at its time or as soon as its previous call returned, like a program.

With ``meta_cache=True`` (the ``ddl-recreate-under-load`` scenario) the cluster also models the DDL/DML seam of the
seed: each proxy keeps a :class:`~milvus_edu.proxy.MetaCache`, requests name their collection and the proxy resolves
it (``DescribeCollection`` on a miss); ``create_collection`` and ``drop_collection`` run on rootcoord's DDL scheduler
(their timestamps hold the DDL time tick back until they finish); a drop invalidates every proxy's cache first
(``expireCacheStep``), then releases the collection on the QueryNode and broadcasts ``DropCollection`` into its
pchannels under the DDL ts lock; and each client's inserts go through the SDK's collection cache and
``retryIfSchemaError`` (:mod:`milvus_edu.client.collection_cache`). Without it, requests carry their collection
object and nothing of this runs, so the other scenarios' run logs stay as they were.

Simplification: a DDL request goes from the client straight to rootcoord (Go: through the proxy's DDL queue); a
drop's garbage collection broadcasts at once, with no time between taking and releasing the DDL ts lock; the
drop's index, data and channel clean-up steps are not modelled; the old collection's data stays on the DataNode.
Simplification: search is a primary-key / filter query over rows (no vectors, distances are 0); a filter is the
subset of Milvus's expression language :mod:`milvus_edu.querynode.expr` parses (comparisons, ranges, ``in``,
``like``, ``and`` / ``or`` / ``not``) on the primary key ``id`` and on the keys of a row's dynamic field (a row's
keys besides ``id`` and ``vector``, kept as the quick-setup collection's ``$meta`` keeps them); the primary key's
type (Int64 or VarChar) is the one the workload's inserted keys have; every collection has
two shards (one per pchannel) and one partition; the QueryNode loads a collection as soon as it is created (what
``MilvusClient.create_collection`` does with a dimension).
"""

from __future__ import annotations

import json
from contextlib import contextmanager

from ...client import CollectionCache, CollectionTsCache, SchemaErrorRetry, construct_guarantee_ts
from ...client.collection_cache import MAX_UINT64
from ...client.workload import Step, parse_steps, pks_of, rows_of
from ...cluster.control_plane import PCHANNELS, ControlPlane, SegmentCollection
from ...cluster.data import DataCoordNode, DataNodeNode, ObjectStoreLatency
from ...cluster.dml import ProxyNode
from ...cluster.querynode import QueryNodeNode, ReadProxy, remote_error
from ...datanode.syncmgr.pack import META_FIELD_ID
from ...datanode.syncmgr.storage_serializer import read_insert_binlog
from ...merr import MilvusError, wrap_err_collection_not_found_with_db
from ...mq import get_virtual_channel
from ...mq.msg import CreateCollectionMsg, DropCollectionMsg
from ...proto import ConsistencyLevel, MsgPosition, MsgType, SegmentLevel, SegmentState
from ...proxy.guarantee_ts import ReadRequest
from ...proxy.meta_cache import CollectionInfo, MetaCache
from ...querynode import Row
from ...querynode.expr import PK_FIELD, parse_filter, pk_type_of, read_predicate
from ...rootcoord import DdlTask
from ...sim.kernel import RPCError, Simulation
from ...storage.binlog import decompress_bin_logs
from ...tso import TSOError

FIRST_COLLECTION_ID = 100
LEVEL_NAMES = tuple(level.name.capitalize() for level in ConsistencyLevel)


# ---------------------------------------------------------------------------------------------- results


class ReadResult(list):
    """What a search or query returned (a list of hits, as pymilvus gives) plus its timestamps.

    ``level``, ``guarantee_ts``, ``read_ts`` (per shard), ``waited_ms``, ``request`` and ``error``.
    """

    def __init__(self, hits=(), **info):
        super().__init__(hits)
        self.level = info.get("level")
        self.guarantee_ts = info.get("guarantee_ts")
        self.read_ts = info.get("read_ts", {})
        self.request = info.get("request")
        self.waited_ms = info.get("waited_ms")
        self.error = info.get("error")

    @property
    def ids(self) -> list:
        """The primary keys returned, in order."""
        return [h["id"] for h in self]

    def __repr__(self) -> str:
        if self.error:
            return f"ReadResult(error={self.error!r})"
        return f"ReadResult(ids={self.ids}, level={self.level}, guarantee_ts={self.guarantee_ts}, read_ts={self.read_ts})"


# ---------------------------------------------------------------------------------------------- the cluster


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


class SimClient:
    """One client program (a ``MilvusClient``): its proxy, its session-timestamp cache, its calls."""

    def __init__(self, cluster: "QueryCluster", name: str, proxy: ReadProxy):
        self.cluster = cluster
        self.name = name
        self.proxy = proxy
        self.ts_cache = CollectionTsCache()
        self.collection_cache = CollectionCache()

    # ---- writes

    def do(self, step: Step):
        """Run one call (a SimPy generator); returns what ``MilvusClient`` returns, plus timestamps."""
        handler = getattr(self, f"_{step.op}")
        return (yield from handler(step))

    def _create_collection(self, step: Step):
        level = ConsistencyLevel.parse(step.args.get("consistency_level", "Bounded"))
        return (yield from self.cluster.create_collection(self.name, step.collection, level))

    def _drop_collection(self, step: Step):
        return (yield from self.cluster.drop_collection(self.name, step.collection))

    def _collection(self, name: str) -> QueryCollection:
        try:
            return self.cluster.collections[name]
        except KeyError:
            raise ValueError(f"collection not found[collection={name}]") from None

    def _insert(self, step: Step):
        pks, fields = rows_of(step.args)
        return (yield from self._write(step, MsgType.INSERT, pks, fields))

    def _delete(self, step: Step):
        if "ids" in step.args:
            pks = pks_of(step.args)
        else:  # delete by expression: Milvus queries at the delete's ts first; here, the rows clients inserted
            pred = parse_filter(step.args.get("filter", ""))
            last = self.cluster.inserted_fields.get(step.collection, {})
            pks = sorted({pk for pk in self.cluster.acked_keys(step.collection) if pred(pk, last.get(pk))}, key=str)
        return (yield from self._write(step, MsgType.DELETE, pks))

    def _write(self, step: Step, msg_type: str, pks: list, fields: list | None = None):
        if self.cluster.meta_cache:
            return (yield from self._write_by_name(step, msg_type, pks, fields))
        rec = self.cluster.sim.recorder
        kind = "client.insert" if msg_type == MsgType.INSERT else "client.delete"
        coll = self._collection(step.collection)
        if not pks:
            return {"insert_count" if msg_type == MsgType.INSERT else "delete_count": 0, "ids": [], "timestamp": 0}
        proxy = self.proxy.proxy
        ts = None
        if proxy.alive:
            ts = yield from (proxy.insert(coll, pks, fields=fields) if msg_type == MsgType.INSERT
                             else proxy.delete(coll, pks))
        if ts is None:
            rec.emit(kind, self.name, peer=proxy.name, count=len(pks), error="request failed",
                     detail={"collection": coll.name})
            return {"error": "request failed"}
        self.ts_cache.set(proxy.name, "default", coll.name, ts)
        if msg_type == MsgType.INSERT:
            self.cluster.acked_insert(coll, pks, fields)
        rec.emit(kind, self.name, peer=proxy.name, ts=ts, count=len(pks),
                 detail={"pks": list(pks), "collection": coll.name, "label": step.label})
        key = "insert_count" if msg_type == MsgType.INSERT else "delete_count"
        return {key: len(pks), "ids": list(pks), "timestamp": ts}

    def _write_by_name(self, step: Step, msg_type: str, pks: list, fields: list | None = None):
        """Go SDK ``Insert`` (``retryIfSchemaError`` around ``getCollection`` and the proxy's insert, the cached
        ``UpdateTimestamp`` sent as the schema timestamp) or ``Delete`` (one attempt, no schema timestamp)."""
        sim = self.cluster.sim
        rec, env = sim.recorder, sim.env
        insert = msg_type == MsgType.INSERT
        kind, key = ("client.insert", "insert_count") if insert else ("client.delete", "delete_count")
        name = step.collection
        if not pks:
            return {key: 0, "ids": [], "timestamp": 0}
        retry = SchemaErrorRetry()
        while True:
            schema_ts = MAX_UINT64
            try:
                if insert:
                    schema_ts = (yield from self._describe(name)).update_timestamp
                ts, coll = yield from self.proxy.dml(self.name, name, schema_ts if insert else 0, msg_type, pks,
                                                     fields)
                break
            except (MilvusError, RPCError) as exc:
                decision = retry.after(schema_ts, exc) if insert else None
                if decision is not None and decision.evict:
                    self.collection_cache.evict(name)
                if decision is not None and decision.retry:
                    rec.emit("client.retry", self.name, ts=schema_ts, peer=self.proxy.name, count=retry.tried,
                             error=str(exc), detail={"collection": name, "sleep_ms": decision.sleep_ms,
                                                     "evicted": decision.evict, "label": step.label})
                    yield env.timeout(decision.sleep_ms)
                    continue
                if decision is not None and decision.sleep_ms:
                    yield env.timeout(decision.sleep_ms)
                rec.emit(kind, self.name, peer=self.proxy.name, count=len(pks), error=str(exc),
                         detail={"collection": name, "attempts": retry.tried if insert else 1, "label": step.label})
                return {"error": str(exc)}
        if ts is None:
            rec.emit(kind, self.name, peer=self.proxy.name, count=len(pks), error="request failed",
                     detail={"collection": name})
            return {"error": "request failed"}
        self.ts_cache.set(self.proxy.name, "default", name, ts)
        if insert:
            self.cluster.acked_insert(coll, pks, fields)
        rec.emit(kind, self.name, peer=self.proxy.name, ts=ts, count=len(pks),
                 detail={"pks": list(pks), "collection": name, "collection_id": coll.id, "attempts": retry.tried + 1,
                         "label": step.label})
        return {key: len(pks), "ids": list(pks), "timestamp": ts}

    def _describe(self, name: str):
        """The SDK's ``getCollection``: its cached description, or a ``DescribeCollection`` (kept on success)."""
        cached = self.collection_cache.get(name)
        if cached is not None:
            return cached
        rc = self.cluster.rootcoord
        try:
            info = yield from self.cluster.sim.call(self.proxy.name, rc.name,
                                                    lambda: self.cluster.handle_describe_collection(name, self.name))
        except RPCError as exc:
            raise remote_error(exc) from None
        self.collection_cache.insert(name, info)
        self.cluster.sim.recorder.emit("client.describe_collection", self.name, ts=info.update_timestamp,
                                       peer=self.proxy.name,
                                       detail={"collection": name, "collection_id": info.collection_id})
        return info

    def _flush(self, step: Step):
        return (yield from self.cluster.flush(self.name, self._collection(step.collection)))

    # ---- reads

    def _search(self, step: Step):
        return (yield from self._read(step, "search"))

    def _query(self, step: Step):
        return (yield from self._read(step, "query"))

    def _read(self, step: Step, op: str):
        cluster = self.cluster
        env, rec = cluster.sim.env, cluster.sim.recorder
        name = step.collection
        coll = None if cluster.meta_cache else self._collection(name)  # with the meta cache, the proxy resolves it
        args = step.args
        given = args.get("consistency_level")
        level = None if given is None else ConsistencyLevel.parse(given)
        cached = self.ts_cache.get(self.proxy.name, "default", name)
        sent_level, sent_ts = construct_guarantee_ts(
            level, cached, args.get("guarantee_timestamp"),
            session_uses_zero_ts=cluster.sim.config.switches.session_uses_zero_ts)
        req = ReadRequest(consistency_level=sent_level if sent_level is not None else ConsistencyLevel.STRONG,
                          guarantee_timestamp=sent_ts, use_default_consistency=sent_level is None)
        cluster.requests += 1
        request = cluster.requests
        level_name = None if sent_level is None else sent_level.name.capitalize()
        rec.emit("client.read_start", self.name, peer=self.proxy.name, request=request, level=level_name,
                 guarantee_ts=sent_ts, detail={"op": op, "collection": name, "label": step.label})
        ids = pks_of({"ids": args["ids"]}) if "ids" in args else None
        timeout = args.get("timeout")
        deadline = None if timeout is None else env.now + float(timeout) * 1000.0
        start = env.now
        try:
            if coll is None:
                info = yield from self.proxy.collection_info(name, self.name)
                coll = cluster.collections_by_id[info.collection_id]
            # the proxy's plan: the filter checked against the collection's primary key type (CreateRetrievePlan)
            pred = read_predicate(args.get("filter", ""), ids, pk_type=coll.pk_type)
            stamps, read_ts, rows = yield from self.proxy.read(self.name, request, coll, req, deadline, op, pred,
                                                               {"filter": args.get("filter", ""), "ids": ids})
        except (RPCError, ValueError, MilvusError) as exc:
            error = str(exc.__cause__ or exc) if isinstance(exc, RPCError) else str(exc)
            rec.emit("client.read", self.name, peer=self.proxy.name, request=request, error=error,
                     detail={"op": op, "collection": name, "label": step.label})
            return ReadResult(request=request, error=error)
        limit = args.get("limit", 10 if op == "search" else None)
        if limit is not None:
            rows = rows[:int(limit)]
        level = stamps.level.name.capitalize()
        wanted = _output_fields(args.get("output_fields"))
        if op == "search":
            hits = [{"id": r.pk, "distance": 0.0, "entity": _picked(r, wanted)} for r in rows]
        else:
            hits = [{PK_FIELD: r.pk, **_picked(r, wanted)} for r in rows]
        smallest = min(read_ts.values())
        rec.emit("client.read", self.name, ts=smallest, count=len(rows), peer=self.proxy.name, request=request,
                 level=level, guarantee_ts=stamps.guarantee_ts,
                 detail={"op": op, "collection": name, "pks": [r.pk for r in rows], "label": step.label,
                         "started_ms": start})
        return ReadResult(hits, level=level, guarantee_ts=stamps.guarantee_ts, read_ts=read_ts, request=request,
                          waited_ms=env.now - start)


def _output_fields(given) -> tuple | None:
    """``output_fields`` as names (``*`` for every dynamic key), or None for none."""
    if not given:
        return None
    names = [given] if isinstance(given, str) else list(given)
    return tuple(str(n) for n in names)


def _picked(row: Row, wanted: tuple | None) -> dict:
    """The dynamic keys of ``row`` that ``output_fields`` asks for (a key the row lacks is left out, as Milvus
    leaves out a dynamic key a row does not have)."""
    if wanted is None or not row.fields:
        return {}
    if "*" in wanted:
        return dict(row.fields)
    return {k: row.fields[k] for k in wanted if k in row.fields}


class QueryCluster(ControlPlane):
    """What a query scenario or the notebook API drives: every node, the collections by name, the clients.

    ``proxies``: how many proxies (client *k* talks to proxy ``k mod proxies``); ``proxy_clock_offsets_ms``: each
    proxy's wall-clock error, for its non-Strong reads (negative: behind); ``proxy_task_ms``: mean execution time of
    a DML task on a proxy; ``meta_cache``: model the proxies' meta caches, DDL on rootcoord's scheduler, drops and
    the SDK's schema retry (see the module docstring).
    """

    def __init__(self, sim: Simulation, proxies: int = 2, proxy_clock_offsets_ms=(), proxy_task_ms: float = 4.0,
                 meta_cache: bool = False):
        if proxies < 1:
            raise ValueError(f"a cluster needs at least one proxy, got {proxies}; use proxies=1 or more")
        super().__init__(sim)
        self.datanode = DataNodeNode(sim, "datanode-1", 20, self.broker, self.datacoord, self.store, self.ids,
                                     self.rootcoord, ObjectStoreLatency())
        sim.add(self.datanode)
        self.querynode = QueryNodeNode(sim, "querynode-1", 30, self.broker)
        sim.add(self.querynode)
        offsets = list(proxy_clock_offsets_ms) + [0.0] * proxies
        self.proxies: list[ReadProxy] = []
        for i in range(1, proxies + 1):
            node = ProxyNode(sim, f"proxy-{i}", 10 + i, self.rootcoord, self.broker, task_ms=proxy_task_ms)
            node.record_pks = True
            sim.add(node)
            self.proxies.append(ReadProxy(sim, node, self.querynode, offsets[i - 1]))
        self.collections: dict[str, QueryCollection] = {}
        #: every collection ever created, by id (a dropped one stays: proxies and reads may still name its id)
        self.collections_by_id: dict[int, QueryCollection] = {}
        self.meta_cache = meta_cache
        #: collection name -> the event a running create or drop of it fires when done: the write lock
        #: ``executeTaskWithLock`` holds on the name (``rootCoord.useLockScheduler``), which a describe waits for
        self._name_locks: dict[str, object] = {}
        if meta_cache:
            for p in self.proxies:
                p.meta_cache = MetaCache()
                p.rootcoord_name = self.rootcoord.name
                p.describe = self.handle_describe_collection
                p.collections_by_id = self.collections_by_id
        self.clients: dict[str, SimClient] = {}
        self.inserted: dict[str, list] = {}
        #: collection name -> key -> the dynamic field its last acknowledged insert carried (for delete by filter)
        self.inserted_fields: dict[str, dict] = {}
        self.requests = 0
        self._next_collection_id = FIRST_COLLECTION_ID

    def start(self) -> None:
        """Start rootcoord, the timetick sync, the proxies and the DataNode's loops."""
        self.rootcoord.start()
        self.timetick.start()
        for p in self.proxies:
            p.proxy.start()
        self.datanode.start([])

    def client(self, name: str) -> SimClient:
        """The client called ``name`` (created on first use, on the next proxy in turn)."""
        if name not in self.clients:
            proxy = self.proxies[len(self.clients) % len(self.proxies)]
            self.clients[name] = SimClient(self, name, proxy)
        return self.clients[name]

    def run_steps(self, steps) -> None:
        """Schedule a workload: one process per client running its steps in order."""
        by_client: dict[str, list[Step]] = {}
        for step in parse_steps(steps):
            by_client.setdefault(step.client, []).append(step)
        for name, mine in by_client.items():
            self.sim.env.process(self._program(self.client(name), mine))

    def _program(self, client: SimClient, steps: list[Step]):
        env = self.sim.env
        for step in steps:
            if step.at * 1000.0 > env.now:
                yield env.timeout(step.at * 1000.0 - env.now)
            try:
                yield from client.do(step)
            except ValueError as exc:  # e.g. a collection that does not exist: Milvus's error, as the client sees it
                self.sim.recorder.emit("client.error", client.name, peer=client.proxy.name, error=str(exc))

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
        """Keys this cluster's clients inserted into the collection called ``name`` (for delete by filter)."""
        return list(self.inserted.get(name, []))

    # ---- DDL

    def create_collection(self, client: str, name: str, level: ConsistencyLevel):
        """``CreateCollection`` + ``LoadCollection``: a DDL timestamp, the CreateCollection message in every
        pchannel (the collection's start positions), DataCoord's ``WatchChannels``, the DataNode and the
        QueryNode watch its vchannels."""
        rec, rc = self.sim.recorder, self.rootcoord
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
        rec, rc = self.sim.recorder, self.rootcoord
        cid = self._next_collection_id
        self._next_collection_id += 1
        vchannels = [get_virtual_channel(self.pchannels[i], cid, i) for i in range(PCHANNELS)]
        coll = QueryCollection(name, cid, vchannels, self.datacoord, level)
        coll.update_timestamp = ts
        self.collections[name] = coll
        self.collections_by_id[cid] = coll
        starts = []
        for ch in self.pchannels:
            msg_id = self.broker.produce(ch, CreateCollectionMsg(timestamp=ts, collection_id=cid))
            rec.emit("mq.produce", rc.name, ts=ts, channel=ch, msg_id=msg_id, msg_type=MsgType.CREATE_COLLECTION,
                     begin_ts=ts, end_ts=ts, count=0)
            starts.append((ch, msg_id))
        self.datacoord.server.watch_channels(cid, vchannels, starts, ts, partitions=(coll.partition_id,))
        self.datanode.watch_channels([(cid, v) for v in vchannels])
        for v, (ch, msg_id) in zip(vchannels, starts):
            self.querynode.watch(cid, v, MsgPosition(channel_name=ch, msg_id=msg_id, timestamp=ts), ts)
        return coll

    # ---- DDL on rootcoord's scheduler (meta_cache)

    def _ddl_start(self, task_name: str, name: str, peer: str) -> DdlTask:
        """``scheduler.AddTask`` of a DDL task with a locker key: its ts from ``setTs``, pushed onto the heap that
        holds ``minDdlTs`` (and so the DDL time tick) back until the task finishes."""
        task = DdlTask(task_name)
        self.timetick.scheduler.add_task_with_lock(task)  # a TSOError becomes the RPC's error
        self.sim.recorder.emit("rootcoord.ddl", self.rootcoord.name, ts=task.ts, peer=peer,
                               detail={"task": task_name, "collection": name, "state": "started",
                                       "min_ddl_ts": self.timetick.scheduler.get_min_ddl_ts()})
        return task

    def _ddl_done(self, task: DdlTask, name: str, peer: str, error: str | None = None, **detail) -> None:
        """``NotifyDone``: the task leaves the heap and ``minDdlTs`` moves past it."""
        self.timetick.scheduler.execute(task, error)
        self.sim.recorder.emit("rootcoord.ddl", self.rootcoord.name, ts=task.ts, peer=peer, error=error,
                               detail={"task": task.name, "collection": name, "state": "done",
                                       "min_ddl_ts": self.timetick.scheduler.get_min_ddl_ts(), **detail})

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
                              for p in self.proxies])
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
        scheduler = self.timetick.scheduler
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
        rec, rc = self.sim.recorder, self.rootcoord
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
            raise ValueError("drop_collection needs the cluster's meta cache (QueryCluster(meta_cache=True))")
        task = self._ddl_start("DropCollection", name, peer)
        yield from self._name_free(name)
        coll = self.collections.get(name)
        if coll is None:  # "drop non-existent collection": idempotent
            self._ddl_done(task, name, peer, collection_id=None)
            return {"timestamp": task.ts, "collection_id": None}
        with self._name_lock(name):
            calls = [env.process(self._expire_cache(p, name, coll.id, task.ts)) for p in self.proxies]
            yield env.all_of(calls)
            del self.collections[name]
        self._ddl_done(task, name, peer, collection_id=coll.id,
                       invalidated=[p.name for p, c in zip(self.proxies, calls) if c.value])
        env.process(self._drop_async(coll))
        return {"timestamp": task.ts, "collection_id": coll.id}

    def _expire_cache(self, proxy: ReadProxy, name: str, collection_id: int, ts: int, task: str = "DropCollection"):
        """One proxy's ``InvalidateCollectionMetaCache`` RPC for ``task``; True when it answered (a dead proxy is
        skipped)."""
        rc = self.rootcoord
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
        rc, qn = self.rootcoord, self.querynode
        try:
            yield from self.sim.call(rc.name, qn.name, lambda: _at_once(lambda: qn.release(coll.id, coll.vchannels)))
        except RPCError:
            pass
        lock = self.timetick.ddl_lock
        lock.lock()
        lock.add_ref_cnt(1)
        try:
            ts = self.timetick.scheduler.generate_tso(1)
            for ch in coll.pchannels:
                msg_id = self.broker.produce(ch, DropCollectionMsg(timestamp=ts, collection_id=coll.id))
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
        res = yield from self.flush_and_wait(client, coll.id, {"collection": coll.name})
        if res is None:
            return {"error": "Flush failed"}
        self._handoff(coll)
        return {"flush_ts": res.flush_ts, "segments": list(res.segment_ids)}

    def _handoff(self, coll: QueryCollection) -> None:
        server = self.datacoord.server
        for segment in sorted(server.meta.segments.values(), key=lambda s: s.id):
            if (segment.collection_id != coll.id or segment.state != SegmentState.FLUSHED
                    or segment.level == SegmentLevel.L0 or segment.id in coll.loaded):
                continue
            pks, tss, _ = self.read_segment(segment)
            metas = self._read_meta(segment)
            if metas is None:
                rows = [Row(pk, ts) for pk, ts in zip(pks, tss)]
            else:
                rows = [Row(pk, ts, fields=f or None) for pk, ts, f in zip(pks, tss, metas)]
            checkpoint = segment.dml_position.timestamp if segment.dml_position is not None else 0
            coll.loaded.add(segment.id)
            self.querynode.load_sealed(segment.insert_channel, segment.id, rows, checkpoint)

    def _read_meta(self, segment) -> list | None:
        """The segment's dynamic-field binlog (``$meta``, one JSON document per row, in binlog order), or None
        when its rows carried none."""
        info = decompress_bin_logs(segment, self.store.root_path)
        docs: list | None = None
        for field_binlog in info.binlogs:
            if field_binlog.field_id == META_FIELD_ID:
                docs = docs or []
                for b in field_binlog.binlogs:
                    binlog = read_insert_binlog(self.store.read(b.log_path), name=b.log_path)
                    docs.extend(json.loads(d) for d in next(iter(binlog.columns.values())))
        return docs


def _at_once(fn):
    """An RPC handler that does ``fn()`` and takes no simulated time."""
    yield from ()
    return fn()
