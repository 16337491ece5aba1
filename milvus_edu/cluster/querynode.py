"""Simulated processes of the read path: a QueryNode serving every shard, and the proxy's read path.

The Go goroutines become SimPy processes that call the pure components:

* a QueryNode's ``WatchDmChannels`` (a :class:`~milvus_edu.querynode.ShardDelegator` and a
  :class:`~milvus_edu.querynode.Pipeline` per vchannel, a dispatcher per pchannel from the collection's start
  position), its pipeline loop (one pack at a time through filterNode -> insertNode -> deleteNode, tsafe published
  at the end) and the delegator's ``Search`` / ``Query`` RPC (``waitTSafe`` on a SimPy event that fires whenever
  tsafe moves, then the MVCC read at the tsafe returned) -> :class:`QueryNodeNode`;
* the proxy's ``searchTask`` / ``queryTask`` (begin timestamp from the TSO only for Strong, else from the proxy's
  own clock; the guarantee from the level; one request per shard, in parallel) -> :class:`ReadProxy`;
* QueryCoord's handoff of flushed segments (load the sealed segment from its binlogs, exclude its stream inserts up
  to its checkpoint, release the growing copy) -> :meth:`QueryNodeNode.load_sealed`;
* ``ReleaseCollection`` after a drop (each delegator closed: its waiting reads fail, new ones find no channel) ->
  :meth:`QueryNodeNode.release`;
* with the meta cache on (:class:`~milvus_edu.proxy.MetaCache`), the proxy's ``GetCollectionInfo`` (a hit, or a
  ``DescribeCollection`` to rootcoord), ``insertTask.PreExecute``'s schema check and
  ``InvalidateCollectionMetaCache`` -> :meth:`ReadProxy.collection_info`, :meth:`ReadProxy.dml`,
  :meth:`ReadProxy.handle_invalidate`.

Bug switches: ``skip_wait_tsafe`` (the delegator reads at once at its current tsafe, below the guarantee),
``update_tsafe_before_delete`` (the pipeline publishes tsafe before applying a pack's deletes; a read woken in
between reads at the new tsafe before the deletes land).

Simplification: one QueryNode, one replica, the delegator serves its own segments (no workers, no segment
distribution); a read costs no simulated time on the QueryNode beyond the wait; a pack is applied 0.2 ms after
the deleteNode is reached when the switch opens its window (else at once).
Simplification: QueryCoord's target observer is modelled as a load right after the client's flush completes, not
its periodic ``UpdateNextTarget``; the loaded segment is excluded up to its own DmlPosition once (Go re-adds the
target checkpoint on every ``SyncDistribution``), and ``WatchDmChannels``'s exclusions are not needed (only new
collections are watched).
Simplification: the proxy consults its meta cache once per DML request, before the enqueue (Go: in ``setChannels``
and again in ``PreExecute``), and makes the schema check there.
Simplification: a query's ``limit`` is applied by the proxy after each shard's merge (one row per primary key,
:meth:`~milvus_edu.querynode.ShardDelegator.read`); Go also passes it to each segment's ``find_first`` and to the
merge, where a sealed segment's copies of one key use it up.
"""

from __future__ import annotations

from types import GeneratorType

import simpy

from ..effects import started
from ..merr import MilvusError, wrap_err_channel_not_found
from ..mq import Broker
from ..mq.names import to_physical_channel
from ..proto import MsgType
from ..proxy.guarantee_ts import ReadRequest, can_skip_alloc_timestamp, read_timestamps
from ..proxy.meta_cache import CollectionInfo, MetaCache, check_schema_timestamp
from ..querynode import DeadlineExceeded, Pipeline, Row, ShardDelegator, TSafeChanged
from ..sim.kernel import NodeClock, RPCError, Simulation
from .consumer import PackConsumer
from .node import Node

SWITCH_WINDOW_MS = 0.2  # with update_tsafe_before_delete: how long deletes lag the published tsafe


class QueryNodeNode(PackConsumer, Node):
    """One QueryNode: a delegator and a pipeline per watched vchannel, reads served by RPC."""

    PERFORMERS = {**Node.PERFORMERS, TSafeChanged: "_perform_tsafe_changed"}
    # session_uses_zero_ts is the SDK's (cluster/client.py), for the reads this node serves
    SWITCHES = ("update_tsafe_before_delete", "skip_wait_tsafe", "delete_ignores_timestamps", "session_uses_zero_ts")
    COMPONENT = "the QueryNode (and the SDK's reads it serves)"

    def __init__(self, sim: Simulation, name: str, server_id: int, broker: Broker):
        super().__init__(sim, name)
        self.server_id = server_id
        self.broker = broker
        self.clock = NodeClock(sim.env)
        self.delegators: dict[str, ShardDelegator] = {}
        self.pipelines: dict[str, Pipeline] = {}
        self.reset_consumer()
        self.tsafe_moved: dict[str, simpy.Event] = {}

    # ------------------------------------------------------------------------------ watch and consume

    def watch(self, collection_id: int, vchannel: str, start, start_ts: int) -> None:
        """``WatchDmChannels``: a delegator whose tsafe starts at ``start_ts`` and a pipeline fed from ``start``
        (the collection's start position on the pchannel)."""
        sw = self.sim.config.switches
        params = self.sim.config.query
        delegator = ShardDelegator(vchannel, start_ts=start_ts, max_timestamp_lag_ns=params.max_timestamp_lag_ns,
                                   downgrade_tsafe=params.downgrade_tsafe,
                                   delete_ignores_timestamps=sw.delete_ignores_timestamps,
                                   clean_exclude_interval_ns=params.clean_exclude_segment_interval_ns,
                                   now_ns=self.clock.now_ns, node_id=self.server_id)
        self.delegators[vchannel] = delegator
        self.pipelines[vchannel] = Pipeline(collection_id, vchannel, delegator,
                                            update_tsafe_before_delete=sw.update_tsafe_before_delete)
        self.tsafe_moved[vchannel] = self.sim.env.event()
        pchannel = to_physical_channel(vchannel)
        self.sim.recorder.emit("querynode.watch", self.name, ts=start_ts, channel=pchannel, vchannel=vchannel,
                               detail={"collection_id": collection_id, "start_msg_id": start.msg_id})
        self.subscribe(pchannel, vchannel, start)
        self.kick(pchannel)

    def switches_changed(self) -> None:
        """Hand the run's current switches to what copied one when a vchannel was watched: each delegator (and its
        segments' delete records) and each pipeline's deleteNode."""
        switches = self.sim.config.switches
        for delegator in self.delegators.values():
            delegator.set_delete_ignores_timestamps(switches.delete_ignores_timestamps)
        for pipeline in self.pipelines.values():
            pipeline.delete_node.update_tsafe_before_delete = switches.update_tsafe_before_delete

    def on_pack(self, vchannel: str, pack):
        """A vchannel's pack goes through its pipeline, if the vchannel is still watched (not released)."""
        return self._operate(vchannel, pack) if vchannel in self.pipelines else None

    def _operate(self, vchannel: str, pack):
        pipeline = self.pipelines[vchannel]
        published = False  # in the switch's window (the switch itself may be flipped during it)
        for _window in pipeline.operate_steps(pack):
            self._publish(vchannel)  # the switch: tsafe is out before the deletes are in
            published = True
            yield self.sim.env.timeout(SWITCH_WINDOW_MS)
        res = pipeline.last_result
        dropped = [{"segment": m.segment_id, "ts": m.end_ts(), "reason": why} for m, why in res.dropped]
        self.sim.recorder.emit(
            "querynode.pack", self.name, vchannel=vchannel, begin_ts=res.time_range.timestamp_min,
            end_ts=res.time_range.timestamp_max, tick_ts=res.tsafe, count=sum(res.inserted.values()),
            detail={"segments": {str(k): v for k, v in sorted(res.inserted.items())}, "deletes": res.deletes,
                    "hidden": res.hidden, "dropped": dropped, "cleaned": list(res.cleaned)})
        if res.tsafe > res.tsafe_before and not published:
            self._publish(vchannel)

    def _publish(self, vchannel: str) -> None:
        """Record the new tsafe and wake the reads waiting on it (``tsCond.Broadcast``)."""
        self.sim.recorder.emit("querynode.tsafe", self.name, ts=self.delegators[vchannel].get_tsafe(), vchannel=vchannel)
        self._broadcast(vchannel)

    def _broadcast(self, vchannel: str) -> None:
        """``tsCond.Broadcast``: wake every read waiting on ``vchannel``'s tsafe (it moved, or the delegator closed)."""
        moved = self.tsafe_moved[vchannel]
        self.tsafe_moved[vchannel] = self.sim.env.event()
        moved.succeed()

    # ------------------------------------------------------------------------------ sealed segments

    def load_sealed(self, vchannel: str, segment_id: int, rows: list[Row], exclude_ts: int) -> None:
        """QueryCoord's handoff of a flushed segment: ``AddExcludedSegments`` up to its checkpoint, ``LoadSegments``
        (with the buffered deletes), then ``SyncTargetVersion`` releasing the growing copy."""
        d = self.delegators[vchannel]
        d.add_excluded_segments({segment_id: exclude_ts})
        hidden = d.load_sealed(segment_id, rows)
        released = d.sync_target_version([segment_id])
        self.sim.recorder.emit("querynode.load", self.name, ts=exclude_ts, count=len(rows), vchannel=vchannel,
                               segment=segment_id, detail={"hidden_by_deletes": hidden, "released_growing": released})

    def release(self, collection_id: int, vchannels) -> None:
        """``ReleaseCollection`` -> ``UnsubDmChannel`` for each of the collection's vchannels: the delegator closes
        (``Close`` broadcasts, so a read waiting on tsafe wakes and fails) and is removed with its pipeline and
        dispatcher target; a read arriving later finds no channel."""
        for vchannel in vchannels:
            d = self.delegators.pop(vchannel, None)
            if d is None:
                continue
            d.close()
            self.pipelines.pop(vchannel, None)
            self.dispatchers[to_physical_channel(vchannel)].remove(vchannel)
            self.sim.recorder.emit("querynode.release", self.name, ts=d.get_tsafe(), vchannel=vchannel,
                                   detail={"collection_id": collection_id})
            self._broadcast(vchannel)

    # ------------------------------------------------------------------------------ reads

    def handle_read(self, vchannel: str, request: int, level: str, guarantee_ts: int, mvcc_ts: int,
                    deadline_ms: float | None, rows_filter):
        """The delegator's ``Search`` / ``Query``: ``waitTSafe`` then the MVCC read at the tsafe it returned.

        Returns ``(read_ts, rows)``; raises the lifetime check's error (a closed delegator: service not ready) or
        the wait's (lag too large, deadline, delegator closed during the wait).
        """
        env, rec = self.sim.env, self.sim.recorder
        d = self.delegators.get(vchannel)
        if d is None:  # released (its collection was dropped): QueryNode.SearchChannel / QueryChannel
            raise wrap_err_channel_not_found(vchannel)
        arrival = d.get_tsafe()
        start = env.now
        common = dict(vchannel=vchannel, request=request, level=level, guarantee_ts=guarantee_ts, tick_ts=arrival)
        try:
            d.lifetime_add()
            if self.sim.config.switches.skip_wait_tsafe:
                tsafe = arrival
            else:
                waiting = started(d.wait_tsafe(guarantee_ts, deadline_ms))  # tsafe at once, or the steps of a wait
                if type(waiting) is GeneratorType:
                    rec.emit("querynode.wait", self.name, **common)
                    waiting = yield from waiting
                tsafe = waiting
        except Exception as exc:
            rec.emit("querynode.read", self.name, error=str(exc), detail={"waited_ms": env.now - start}, **common)
            raise
        read_ts = mvcc_ts or tsafe
        rows = d.read(read_ts, rows_filter)
        rec.emit("querynode.read", self.name, ts=read_ts, count=len(rows),
                 detail={"pks": [r.pk for r in rows], "waited_ms": round(env.now - start, 6)}, **common)
        return read_ts, rows

    def _perform_tsafe_changed(self, effect: TSafeChanged):
        """``tsCond.Wait`` in ``waitTSafe``'s loop: until the vchannel's tsafe moves (``update_tsafe`` or ``close``
        succeed ``tsafe_moved``), or :class:`DeadlineExceeded` once the request's deadline passed first."""
        env = self.sim.env
        moved = self.tsafe_moved[effect.vchannel]
        if effect.deadline is None:
            yield moved
            return
        left = effect.deadline - env.now
        if left > 0:
            yield moved | env.timeout(left)
        if env.now >= effect.deadline and not moved.triggered:
            raise DeadlineExceeded()


class ReadProxy:
    """The proxy's read path (``searchTask`` / ``queryTask``) on one proxy, with that proxy's wall clock.

    ``clock_offset_ms``: how far this proxy's clock is off true time (negative: behind). Only non-Strong reads use
    it (``CanSkipAllocTimestamp``), so a skewed clock shifts their guarantee (Milvus issue #16841).
    """

    def __init__(self, sim: Simulation, proxy, querynode: QueryNodeNode, clock_offset_ms: float = 0.0):
        self.sim = sim
        self.proxy = proxy
        self.querynode = querynode
        self.clock = NodeClock(sim.env, offset_ms=clock_offset_ms)
        self.graceful_time_ms = sim.config.query.graceful_time_ms
        #: ``globalMetaCache`` when the cluster models it (None: requests carry their collection, as before).
        self.meta_cache: MetaCache | None = None
        #: rootcoord's node name and its ``DescribeCollection`` handler ``(name, peer) -> generator``, with the cache.
        self.rootcoord_name = ""
        self.describe = None
        #: collection id -> the collection's DML view (its vchannels), what ``chMgr`` knows by id.
        self.collections_by_id: dict = {}

    @property
    def name(self) -> str:
        """The proxy's node name."""
        return self.proxy.name

    def read(self, client: str, request: int, collection, req: ReadRequest, deadline_ms: float | None,
             op: str, rows_filter, expr: dict | None = None):
        """One search or query: begin timestamp, guarantee, one delegator read per shard in parallel.

        Returns ``(timestamps, read_ts per vchannel, rows)``; raises :class:`RPCError` when a shard fails.
        """
        env, rec = self.sim.env, self.sim.recorder
        if not self.proxy.alive:
            raise RPCError(f"connection refused by {self.proxy.name}")
        tso_ts = None
        if not can_skip_alloc_timestamp(req, collection.consistency_level):
            tso_ts = yield from self.proxy.alloc_one()
        now_ms = self.clock.now_ms()
        stamps = read_timestamps(req, collection.consistency_level, now_ms, tso_ts, self.graceful_time_ms)
        level = stamps.level.name.capitalize()
        rec.emit("proxy.read", self.proxy.name, ts=stamps.begin_ts, clock_ms=now_ms, peer=client, request=request,
                 level=level, guarantee_ts=stamps.guarantee_ts,
                 detail={"from_tso": stamps.from_tso, "op": op, "collection": collection.name,
                         "use_default": req.use_default_consistency, "graceful_time_ms": self.graceful_time_ms,
                         **(expr or {})})
        qn = self.querynode
        calls = [env.process(self._shard(qn, v, request, level, stamps, deadline_ms, rows_filter))
                 for v in collection.vchannels]
        yield env.all_of(calls)
        results = {}
        for v, call in zip(collection.vchannels, calls):
            ok, value = call.value
            if not ok:
                try:
                    raise value
                finally:  # the traceback holds this frame: drop what holds the exception, or the two make a cycle
                    del value, call, calls
            results[v] = value
        read_ts = {v: r[0] for v, r in results.items()}
        rows = sorted((row for _, rs in results.values() for row in rs), key=lambda r: (str(r.pk), r.ts))
        return stamps, read_ts, rows

    def _shard(self, qn: QueryNodeNode, vchannel: str, request: int, level: str, stamps, deadline_ms, rows_filter):
        """One shard's request to its delegator: ``(True, (read_ts, rows))`` or ``(False, RPCError)``."""
        try:
            value = yield from self.sim.call(self.proxy.name, qn.name, lambda: qn.handle_read(
                vchannel, request, level, stamps.guarantee_ts, stamps.mvcc_ts, deadline_ms, rows_filter))
        except RPCError as exc:
            return False, exc
        return True, value

    # ------------------------------------------------------------------------------ the meta cache

    def collection_info(self, name: str, peer: str, collection_id: int = 0):
        """``GetCollectionInfo``: the cached info, or (a miss) a ``DescribeCollection`` to rootcoord whose answer is
        cached unless an invalidation newer than it came in between. Raises rootcoord's error (collection not
        found) as a :class:`~milvus_edu.merr.MilvusError`, or :class:`RPCError` when rootcoord cannot be reached."""
        rec = self.sim.recorder
        info = self.meta_cache.get_collection_info(name, collection_id)
        if info is not None:
            rec.emit("proxy.meta_cache", self.name, ts=info.update_timestamp, peer=peer,
                     detail={"result": "hit", "collection": name, "collection_id": info.collection_id})
            return info
        try:
            info = yield from self.sim.call(self.name, self.rootcoord_name, lambda: self.describe(name, self.name))
        except RPCError as exc:
            rec.emit("proxy.meta_cache", self.name, peer=peer, error=str(remote_error(exc, detach=False)),
                     detail={"result": "miss", "collection": name})
            raise remote_error(exc) from None
        cached = self.meta_cache.update(info)
        rec.emit("proxy.meta_cache", self.name, ts=info.update_timestamp, peer=peer,
                 detail={"result": "miss", "collection": name, "collection_id": info.collection_id, "cached": cached,
                         "request_time": info.request_time})
        return info

    def dml(self, client: str, name: str, schema_ts: int, msg_type: str, pks: list, fields=None):
        """An insert (``insertTask``) or delete (``deleteTask``) naming its collection: the meta cache gives its id
        and channels, an insert's schema timestamp must match the collection's (``PreExecute``), then the DML path.

        Returns ``(ts, collection)``; ``ts`` is None when the request failed on the way (the proxy died). Raises the
        meta cache's errors and ``collection schema mismatch``. ``fields``: an insert's rows' dynamic fields."""
        info: CollectionInfo = yield from self.collection_info(name, client)
        if msg_type == MsgType.INSERT:
            try:
                check_schema_timestamp(name, schema_ts, info)
            except MilvusError as exc:
                self.sim.recorder.emit("proxy.meta_cache", self.name, ts=info.update_timestamp, peer=client,
                                       error=str(exc), detail={"result": "schema_mismatch", "collection": name,
                                                               "collection_id": info.collection_id,
                                                               "schema_ts": schema_ts})
                raise
        coll = self.collections_by_id[info.collection_id]
        proxy = self.proxy
        ts = yield from (proxy.insert(coll, pks, fields=fields) if msg_type == MsgType.INSERT
                         else proxy.delete(coll, pks))
        return ts, coll

    def handle_invalidate(self, name: str, collection_id: int, ts: int, peer: str, task: str = "DropCollection"):
        """The ``InvalidateCollectionMetaCache`` RPC handler for a ``DropCollection``-type message (runs on this
        proxy), sent by rootcoord's ``task`` (a drop, or a create's ``expireCacheStep``)."""
        removed = self.meta_cache.invalidate_drop_collection(name, collection_id, ts)
        detail = {"result": "invalidate", "collection": name, "collection_id": collection_id, "removed": removed}
        if task != "DropCollection":
            detail["task"] = task
        self.sim.recorder.emit("proxy.meta_cache", self.name, ts=ts, peer=peer, detail=detail)


def remote_error(exc: RPCError, detach: bool = True) -> BaseException:
    """The Milvus error an RPC failed with (its handler's exception), else the RPC error itself.

    ``detach`` unlinks the RPC error from it first: re-raised inside the ``except`` that caught the RPC error, it
    takes that error as its context, and the pair would otherwise hold each other (a cycle only the collector
    frees). Raise it at once and bind it to no name, so no frame in its traceback holds it either."""
    cause = exc.__cause__
    if not isinstance(cause, MilvusError):
        return exc
    if detach:
        exc.__cause__ = None
    return cause
