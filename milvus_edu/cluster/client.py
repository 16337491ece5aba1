"""The simulated SDK client: a ``MilvusClient`` program running client steps against a built cluster.

:class:`SimClient` talks to the cluster the way pymilvus's ``MilvusClient`` talks to Milvus: ``create_collection``
(created and loaded), ``drop_collection``, ``insert``, ``delete``, ``flush``, ``search`` and ``query`` with a
``consistency_level``. A workload is plain data, a list of steps (:func:`~milvus_edu.client.workload.parse_steps`),
and :func:`run_program` runs one client's steps in order. Reads answer a :class:`ReadResult`.

Simplification: search is a primary-key / filter query over rows (no vectors, distances are 0); a filter is the
subset of Milvus's expression language :mod:`milvus_edu.querynode.expr` parses (comparisons, ranges, ``in``,
``like``, ``and`` / ``or`` / ``not``) on the primary key ``id`` and on the keys of a row's dynamic field (a row's
keys besides ``id`` and ``vector``, kept as the quick-setup collection's ``$meta`` keeps them); the primary key's
type (Int64 or VarChar) is the one the workload's inserted keys have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..client import CollectionCache, CollectionTsCache, SchemaErrorRetry, construct_guarantee_ts
from ..client.collection_cache import MAX_UINT64
from ..client.workload import READ_OPS, Step, pks_of, rows_of
from ..merr import MilvusError
from ..proto import ConsistencyLevel, MsgType
from ..proxy.guarantee_ts import ReadRequest
from ..querynode import Row
from ..querynode.expr import PK_FIELD, parse_filter, read_predicate
from ..sim.kernel import RPCError
from .querynode import ReadProxy, remote_error

if TYPE_CHECKING:
    from .catalog import Catalog, QueryCollection

SEARCH, QUERY = READ_OPS  # pymilvus's read operations, spelled once in client/workload.py


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


class SimClient:
    """One client program (a ``MilvusClient``): its proxy, its session-timestamp cache, its calls.

    Its calls go through its proxy's read path and the cluster's :class:`~milvus_edu.cluster.catalog.Catalog`
    (collections by name, DDL, flush and handoff).
    """

    def __init__(self, catalog: Catalog, name: str, proxy: ReadProxy):
        self.catalog = catalog
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
        return (yield from self.catalog.create_collection(self.name, step.collection, level))

    def _drop_collection(self, step: Step):
        return (yield from self.catalog.drop_collection(self.name, step.collection))

    def _collection(self, name: str) -> QueryCollection:
        try:
            return self.catalog.collections[name]
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
            last = self.catalog.inserted_fields.get(step.collection, {})
            pks = sorted({pk for pk in self.catalog.acked_keys(step.collection) if pred(pk, last.get(pk))}, key=str)
        return (yield from self._write(step, MsgType.DELETE, pks))

    def _write(self, step: Step, msg_type: str, pks: list, fields: list | None = None):
        if self.catalog.meta_cache:
            return (yield from self._write_by_name(step, msg_type, pks, fields))
        rec = self.catalog.sim.recorder
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
            self.catalog.acked_insert(coll, pks, fields)
        rec.emit(kind, self.name, peer=proxy.name, ts=ts, count=len(pks),
                 detail={"pks": list(pks), "collection": coll.name, "label": step.label})
        key = "insert_count" if msg_type == MsgType.INSERT else "delete_count"
        return {key: len(pks), "ids": list(pks), "timestamp": ts}

    def _write_by_name(self, step: Step, msg_type: str, pks: list, fields: list | None = None):
        """Go SDK ``Insert`` (``retryIfSchemaError`` around ``getCollection`` and the proxy's insert, the cached
        ``UpdateTimestamp`` sent as the schema timestamp) or ``Delete`` (one attempt, no schema timestamp)."""
        sim = self.catalog.sim
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
            self.catalog.acked_insert(coll, pks, fields)
        rec.emit(kind, self.name, peer=self.proxy.name, ts=ts, count=len(pks),
                 detail={"pks": list(pks), "collection": name, "collection_id": coll.id, "attempts": retry.tried + 1,
                         "label": step.label})
        return {key: len(pks), "ids": list(pks), "timestamp": ts}

    def _describe(self, name: str):
        """The SDK's ``getCollection``: its cached description, or a ``DescribeCollection`` (kept on success)."""
        cached = self.collection_cache.get(name)
        if cached is not None:
            return cached
        rc = self.catalog.cluster.rootcoord
        try:
            info = yield from self.catalog.sim.call(self.proxy.name, rc.name,
                                                    lambda: self.catalog.handle_describe_collection(name, self.name))
        except RPCError as exc:
            raise remote_error(exc) from None
        self.collection_cache.insert(name, info)
        self.catalog.sim.recorder.emit("client.describe_collection", self.name, ts=info.update_timestamp,
                                       peer=self.proxy.name,
                                       detail={"collection": name, "collection_id": info.collection_id})
        return info

    def _flush(self, step: Step):
        return (yield from self.catalog.flush(self.name, self._collection(step.collection)))

    # ---- reads

    def _search(self, step: Step):
        return (yield from self._read(step, SEARCH))

    def _query(self, step: Step):
        return (yield from self._read(step, QUERY))

    def _read(self, step: Step, op: str):
        catalog = self.catalog
        env, rec = catalog.sim.env, catalog.sim.recorder
        name = step.collection
        coll = None if catalog.meta_cache else self._collection(name)  # with the meta cache, the proxy resolves it
        args = step.args
        given = args.get("consistency_level")
        level = None if given is None else ConsistencyLevel.parse(given)
        cached = self.ts_cache.get(self.proxy.name, "default", name)
        sent_level, sent_ts = construct_guarantee_ts(
            level, cached, args.get("guarantee_timestamp"),
            session_uses_zero_ts=catalog.sim.config.switches.session_uses_zero_ts)
        req = ReadRequest(consistency_level=sent_level if sent_level is not None else ConsistencyLevel.STRONG,
                          guarantee_timestamp=sent_ts, use_default_consistency=sent_level is None)
        catalog.requests += 1
        request = catalog.requests
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
                coll = catalog.collections_by_id[info.collection_id]
            # the proxy's plan: the filter checked against the collection's primary key type (CreateRetrievePlan)
            pred = read_predicate(args.get("filter", ""), ids, pk_type=coll.pk_type)
            stamps, read_ts, rows = yield from self.proxy.read(self.name, request, coll, req, deadline, op, pred,
                                                               {"filter": args.get("filter", ""), "ids": ids})
        except (RPCError, ValueError, MilvusError) as exc:
            error = str(exc.__cause__ or exc) if isinstance(exc, RPCError) else str(exc)
            rec.emit("client.read", self.name, peer=self.proxy.name, request=request, error=error,
                     detail={"op": op, "collection": name, "label": step.label})
            return ReadResult(request=request, error=error)
        limit = args.get("limit", 10 if op == SEARCH else None)
        if limit is not None:
            rows = rows[:int(limit)]
        level = stamps.level.name.capitalize()
        wanted = _output_fields(args.get("output_fields"))
        if op == SEARCH:
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


def run_program(client: SimClient, steps: list[Step]):
    """One client's program (a SimPy generator): its steps in order, each at its time or as soon as its previous
    call returned; a ``ValueError`` (a collection that does not exist) is logged as the client sees it."""
    env = client.catalog.sim.env
    for step in steps:
        if step.at * 1000.0 > env.now:
            yield env.timeout(step.at * 1000.0 - env.now)
        try:
            yield from client.do(step)
        except ValueError as exc:  # e.g. a collection that does not exist: Milvus's error, as the client sees it
            client.catalog.sim.recorder.emit("client.error", client.name, peer=client.proxy.name, error=str(exc))
