"""One way to build a simulated cluster: its shape is data (:class:`ClusterSpec`), :func:`build` wires it.

A scenario says what runs — rootcoords with their clocks, TSO clients, proxies, pchannels, collections and their
shards, DataCoord, DataNodes, a QueryNode, and the faults set on them — as a frozen :class:`ClusterSpec`;
``build(sim, spec)`` creates every node, registers it with the simulation and returns a :class:`Cluster` that holds
each node by role. ``Cluster.start()`` starts the nodes in one fixed order (rootcoords, TSO clients, the timetick
sync, proxies, consumers, then either the DDL that creates the spec's collections or the DataNodes with no
channel); a scenario then starts its workload and schedules its faults (``sim.at(t, cluster.node(...).kill)``).

Nodes draw their randomness from streams named after them (``Simulation.rng(name)``), so the order in which the
builder creates them changes no run; the order in which ``start`` and the scenario start SimPy processes does, and
that order is the one every lesson used before the builder existed.

**Adding a component**: give it a node class in ``milvus_edu/cluster/`` (a ``name``, ``start``, ``kill`` and
``restart``), a field (or a small frozen spec dataclass) in :class:`ClusterSpec` that says how many and with which
parameters, a line in :meth:`Cluster.__init__` that creates and ``sim.add``\\ s it, and, if it runs on its own, a
line in :meth:`Cluster.start`. Validate the new field in ``ClusterSpec.__post_init__`` with a one-line message.

**Adding a scenario**: in ``milvus_edu/mechanisms/<lesson>/scenarios.py`` write a function ``(sim, **options)`` that
builds a ``ClusterSpec`` from its options, calls ``build(sim, spec).start()``, starts its workload (client steps,
Poisson streams) and schedules its faults, and list it in the lesson's ``SCENARIOS`` with a
:class:`~milvus_edu.registry.Scenario`. A lesson never creates a node itself (``tests/test_plugin_contract.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..client.workload import parse_steps
from ..config import S
from ..datanode.syncmgr.pack import PK_FIELD_ID, TIMESTAMP_FIELD_ID
from ..datanode.syncmgr.storage_serializer import read_delta_log, read_insert_binlog
from ..mq import Broker, get_channel_name, get_virtual_channel
from ..mq.msg import CreateCollectionMsg, DropCollectionMsg
from ..mq.names import chan_name_prefix
from ..proto import MsgType
from ..sim.kernel import NodeClock, RPCError, Simulation
from ..storage.binlog import decompress_bin_logs
from .catalog import Catalog
from .client import SimClient, run_program
from .control_plane import RunStore, SegmentCollection
from .data import DataCoordNode, DataNodeNode, IdAllocator, ObjectStoreLatency
from .dml import Collection, ConsumerNode, ProxyNode, RootCoordTimeTick
from .querynode import QueryNodeNode, ReadProxy
from .rootcoord import RootCoordNode, TSOClient

# ---------------------------------------------------------------------------------------------- the shape as data

#: The most proxies a lesson's cluster takes: 1,000 already cost some 300 MB for half a simulated second, and a
#: mistyped count (proxies=100000000) would otherwise end in a MemoryError rather than a one-line refusal.
MAX_PROXIES = 1000


def check_proxy_count(proxies: int, cluster: str) -> None:
    """``ValueError`` (one line, naming ``cluster``) unless ``proxies`` is from 1 to :data:`MAX_PROXIES`."""
    if proxies < 1:
        raise ValueError(f"{cluster} needs at least one proxy, got {proxies}; use proxies=1 or more")
    if proxies > MAX_PROXIES:
        raise ValueError(f"{cluster} has at most {MAX_PROXIES:,} proxies in this model, got {proxies:,}; "
                         "use fewer proxies")


@dataclass(frozen=True)
class RootCoordSpec:
    """One rootcoord instance: its wall clock's offset and drift, and how long its activation takes."""

    offset_ms: float = 0.0
    drift_ppm: float = 0.0
    activate_ms: float = 0.0


@dataclass(frozen=True)
class TSOClientSpec:
    """A client asking the active rootcoord for ``count`` timestamps every ``interval_ms`` (jitter: a fifth of it);
    with ``deadline_ms`` each call gives up after that long."""

    count: int
    interval_ms: float
    deadline_ms: float | None = None


@dataclass(frozen=True)
class ProxySpec:
    """One proxy: the mean time of a DML task, its link to rootcoord, its wall clock (for non-Strong reads).

    ``rootcoord_extra_ms``: extra one-way delay to rootcoord (a slow link); ``alloc_hiccup``: ``(probability,
    extra_ms)`` of an AllocTimestamp answer held up; ``record_pks``: put each message's keys in the run log.
    """

    task_ms: float = 4.0
    rootcoord_extra_ms: float = 0.0
    alloc_hiccup: tuple[float, float] = (0.0, 0.0)
    clock_offset_ms: float = 0.0
    record_pks: bool = False


@dataclass(frozen=True)
class CollectionSpec:
    """A collection that exists before any client runs: ``shards`` vchannels, shard *j* on pchannel
    ``(first_pchannel + j) mod pchannels``.

    ``partition_id``: its one partition (default ``id * 10 + 1``). ``idle``: nobody writes to it; with a DataNode
    it is created after the others, in one batch, without run-log lines and without a partition (a lesson may
    have hundreds, to load the checkpoint updater).
    """

    id: int
    shards: int
    first_pchannel: int = 0
    partition_id: int | None = None
    idle: bool = False


@dataclass(frozen=True)
class DataNodeSpec:
    """One DataNode: its name and server id, the object store's latency per write (and as much jitter; ``None``:
    the default 5 ms), ``dataNode.segment.syncPeriod`` and the machine's memory when set (else Milvus's and
    8 GiB), the step at which it crashes (``None``: never), and ``standby``: registered with no channel until it
    takes over a dead node's."""

    name: str = "datanode-1"
    server_id: int = 20
    store_latency_ms: float | None = None
    sync_period_s: float | None = None
    memory_mb: float | None = None
    crash_at_step: int | None = None
    standby: bool = False


@dataclass(frozen=True)
class ClusterSpec:
    """What a simulated cluster is made of. Every count may be zero; what a component needs must be there too
    (proxies need pchannels, a DataNode needs DataCoord).

    * ``rootcoords``: rootcoord instances (``rootcoord-1`` is active first); ``tso_clients``;
    * ``pchannels``: the message queue's physical channels (0: none, and no timetick sync);
    * ``proxies``; ``consumers``: one pchannel consumer per pchannel (a dispatcher splitting packs by vchannel);
    * ``collections``: collections that exist before clients run; ``create_collections_at_ms``: when set, they are
      created by DDL at that time (CreateCollection in their pchannels, DataCoord's ``WatchChannels``) and the
      first DataNode starts watching them then; when ``None`` they exist from the start;
    * ``datacoord``, ``rpc_failure_rate`` (of DataCoord's SaveBinlogPaths and UpdateChannelCheckpoint) and
      ``datacoord_outage_ms`` (``(from, until)``: its etcd is down); ``datanodes``;
    * ``querynodes`` (0 or 1): a QueryNode serving every shard; with it the proxies get their read path and the
      cluster a :class:`~milvus_edu.cluster.catalog.Catalog`, so clients create, drop, write and read collections
      by name; ``meta_cache``: model the proxies' meta caches and DDL on rootcoord's scheduler (see the catalog).
    """

    rootcoords: tuple[RootCoordSpec, ...] = (RootCoordSpec(),)
    tso_clients: tuple[TSOClientSpec, ...] = ()
    pchannels: int = 0
    proxies: tuple[ProxySpec, ...] = ()
    consumers: bool = False
    collections: tuple[CollectionSpec, ...] = ()
    create_collections_at_ms: float | None = None
    datacoord: bool = False
    rpc_failure_rate: float = 0.0
    datacoord_outage_ms: tuple[float, float] | None = None
    datanodes: tuple[DataNodeSpec, ...] = ()
    querynodes: int = 0
    meta_cache: bool = False

    def __post_init__(self):
        if (self.proxies or self.consumers or self.datanodes or self.querynodes) and not self.pchannels:
            raise ValueError("proxies, consumers, DataNodes and QueryNodes need pchannels; set pchannels=2 for example")
        if self.pchannels and not self.rootcoords:
            raise ValueError("pchannels need a rootcoord for their time ticks; keep rootcoords=(RootCoordSpec(),)")
        if self.datanodes and not self.datacoord:
            raise ValueError("DataNodes need DataCoord; set datacoord=True")
        if self.datacoord and self.collections and not self.datanodes:
            # DataCoord learns a collection from the DDL that a DataNode watches (create_collections_at_ms); without
            # one, the first insert's AssignSegmentID would fail with "collection not found" deep in the run
            raise ValueError("DataCoord knows the spec's collections only through a DataNode; add "
                             "datanodes=(DataNodeSpec(),) and create_collections_at_ms, or set datacoord=False")
        if not 0 <= self.rpc_failure_rate < 1:
            raise ValueError(f"rpc_failure_rate must be in [0, 1), got {self.rpc_failure_rate}; use 0.3 for example")
        if self.querynodes not in (0, 1):
            raise ValueError(f"a cluster has at most one QueryNode, got querynodes={self.querynodes}")
        if self.querynodes and not (self.datacoord and self.datanodes and self.proxies):
            raise ValueError("a QueryNode needs DataCoord, a DataNode and proxies (reads go through a proxy)")
        if self.create_collections_at_ms is not None and not (self.datacoord and self.datanodes):
            raise ValueError("collections created by DDL (create_collections_at_ms) are watched by DataCoord and the "
                             "first DataNode; set datacoord=True and datanodes=(DataNodeSpec(),)")
        if self.collections and self.datanodes and self.create_collections_at_ms is None:
            raise ValueError("with a DataNode the spec's collections are created by DDL; set create_collections_at_ms")
        for c in self.collections:
            if c.shards < 1 or c.shards > self.pchannels:
                raise ValueError(f"collection {c.id} has {c.shards} shards; use 1 to {self.pchannels} (one per pchannel)")


# ---------------------------------------------------------------------------------------------- the built cluster


class Cluster:
    """Every node of a built cluster, by role, and what scenarios do with them.

    Attributes (``None`` or empty when the spec has none): ``rootcoords`` and ``rootcoord`` (the first),
    ``tso_clients``, ``broker``, ``pchannels``, ``timetick`` (rootcoord's timetick sync), ``proxies``
    (:class:`~milvus_edu.cluster.dml.ProxyNode`), ``read_proxies`` (their read paths, with a QueryNode),
    ``consumers``, ``collections`` (the spec's, in order), ``ids``, ``datacoord``, ``store`` (the run's object
    store), ``datanodes`` and ``datanode`` (the first), ``standby`` (a standby DataNode), ``querynode``,
    ``catalog`` (collections by name, with a QueryNode) and ``clients`` (SDK clients by name).
    """

    def __init__(self, sim: Simulation, spec: ClusterSpec):
        self.sim = sim
        self.spec = spec
        self.rootcoords = []
        for i, rc in enumerate(spec.rootcoords, start=1):
            node = RootCoordNode(sim, f"rootcoord-{i}", i, NodeClock(sim.env, rc.offset_ms, rc.drift_ppm),
                                 activate_ms=rc.activate_ms)
            sim.add(node)
            self.rootcoords.append(node)
        self.rootcoord = self.rootcoords[0] if self.rootcoords else None
        self.tso_clients = []
        for i, c in enumerate(spec.tso_clients):
            client = TSOClient(sim, f"client-{i}", count=c.count, interval_ms=c.interval_ms,
                               jitter_ms=c.interval_ms / 5, deadline_ms=c.deadline_ms)
            sim.add(client)
            self.tso_clients.append(client)
        self.broker = Broker() if spec.pchannels else None
        prefix = chan_name_prefix(sim.config.timetick)
        self.pchannels = [get_channel_name(prefix, i) for i in range(spec.pchannels)]
        for ch in self.pchannels:
            self.broker.create_channel(ch)
        self.timetick = RootCoordTimeTick(sim, self.rootcoord, self.broker, self.pchannels) if spec.pchannels else None
        self.ids = self.datacoord = self.store = None
        if spec.datacoord:
            self.ids = IdAllocator()
            self.datacoord = DataCoordNode(sim, self.ids, self.rootcoord, spec.rpc_failure_rate)
            self.datacoord.outage = spec.datacoord_outage_ms
            sim.add(self.datacoord)
            self.store = RunStore(sim)
        self.collections = [self._collection(c) for c in spec.collections]
        if spec.create_collections_at_ms is not None:
            for coll in self.collections:  # rootcoord knows them once their DDL ran (_create_collections)
                coll.created = False
        self.proxies = []
        for i, p in enumerate(spec.proxies, start=1):
            node = ProxyNode(sim, f"proxy-{i}", 10 + i, self.rootcoord, self.broker, task_ms=p.task_ms,
                             rootcoord_extra_ms=p.rootcoord_extra_ms)
            node.alloc_hiccup = p.alloc_hiccup
            node.record_pks = p.record_pks
            sim.add(node)
            self.proxies.append(node)
        self.consumers = []
        if spec.consumers:
            for i, ch in enumerate(self.pchannels):
                vchannels = [v for c in self.collections for v in c.vchannels if v.startswith(ch + "_")]
                consumer = ConsumerNode(sim, f"consumer-{i}", self.broker, ch, vchannels)
                sim.add(consumer)
                self.consumers.append(consumer)
        self.datanodes = [self._datanode(d) for d in spec.datanodes]
        self.datanode = next((n for n, d in zip(self.datanodes, spec.datanodes) if not d.standby), None)
        self.standby = next((n for n, d in zip(self.datanodes, spec.datanodes) if d.standby), None)
        self.querynode = self.catalog = None
        self.read_proxies = []
        if spec.querynodes:
            self.querynode = QueryNodeNode(sim, "querynode-1", 30, self.broker)
            sim.add(self.querynode)
            self.read_proxies = [ReadProxy(sim, node, self.querynode, p.clock_offset_ms)
                                 for node, p in zip(self.proxies, spec.proxies)]
            self.catalog = Catalog(self, spec.meta_cache)
        self.clients: dict[str, SimClient] = {}
        sim.on_close(self._drop_components)

    def _drop_components(self) -> None:
        """When the run is closed: drop what every component built here holds, then the components (a component
        handed its parent's bound method, as the timetick sync its scheduler, makes a reference cycle that would
        keep the broker's logs for the cyclic collector). The spec is the caller's and stays as it is."""
        for name, value in list(vars(self).items()):
            if name in ("sim", "spec"):
                continue
            parts = value.values() if isinstance(value, dict) else value if isinstance(value, list) else (value,)
            for part in parts:
                if hasattr(part, "__dict__"):
                    vars(part).clear()
        vars(self).clear()

    def _collection(self, c: CollectionSpec) -> Collection:
        n = len(self.pchannels)
        vchannels = [get_virtual_channel(self.pchannels[(c.first_pchannel + j) % n], c.id, j) for j in range(c.shards)]
        if self.datacoord is None:
            return Collection(c.id, vchannels, c.partition_id)
        return SegmentCollection(c.id, vchannels, self.datacoord,
                                 c.partition_id if c.partition_id is not None else c.id * 10 + 1)

    def _datanode(self, d: DataNodeSpec) -> DataNodeNode:
        latency = (ObjectStoreLatency() if d.store_latency_ms is None
                   else ObjectStoreLatency(latency_ms=d.store_latency_ms, jitter_ms=d.store_latency_ms))
        params = None
        if d.sync_period_s is not None:
            params = replace(self.sim.config.datanode, sync_period_ns=round(d.sync_period_s * S))
        memory = {} if d.memory_mb is None else {"memory_bytes": round(d.memory_mb * (1 << 20))}
        node = DataNodeNode(self.sim, d.name, d.server_id, self.broker, self.datacoord, self.store, self.ids,
                            self.rootcoord, latency, params=params, **memory)
        node.crash_at_step = d.crash_at_step
        self.sim.add(node)
        return node

    # ---- running

    def start(self) -> None:
        """Start every node in the builder's one order (see the module docstring)."""
        for rc in self.rootcoords:
            rc.start()
        for c in self.tso_clients:
            c.start()
        if self.timetick is not None:
            self.timetick.start()
        for p in self.proxies:
            p.start()
        for c in self.consumers:
            c.start()
        if self.spec.create_collections_at_ms is not None:
            self.sim.env.process(self._create_collections(self.spec.create_collections_at_ms))
        elif self.datanode is not None:
            self.datanode.start([])

    def node(self, name: str):
        """The node called ``name`` (``rootcoord-1``, ``proxy-2``, ``datanode-1``, ...)."""
        try:
            return self.sim.nodes[name]
        except KeyError:
            raise ValueError(f"no node named {name!r}; the cluster has {', '.join(self.sim.nodes)}") from None

    def kill(self, name: str, *args) -> None:
        """Crash the node called ``name`` (``args`` go to its ``kill``, e.g. a DataNode's reason)."""
        self.node(name).kill(*args)

    def restart(self, name: str, *args) -> None:
        """Restart the node called ``name`` (``args`` go to its ``restart``, e.g. a proxy's new server id)."""
        self.node(name).restart(*args)

    # ---- DDL of the spec's collections, and a bare drop

    def _ddl_ts(self, client: str):
        """A DDL timestamp: ``AllocTimestamp`` from ``client`` to rootcoord."""
        rc = self.rootcoord
        ts, _ = yield from self.sim.call(client, rc.name, lambda: rc.handle_alloc_timestamp(1, client))
        return ts

    def _create_collections(self, at_ms: float):
        """``CreateCollection`` of the spec's collections at ``at_ms``: per collection a DDL timestamp, the
        CreateCollection message in its pchannels (their positions are its start positions) and DataCoord's
        ``WatchChannels``; then the first DataNode starts watching them. The idle ones follow, in one batch."""
        env, rec = self.sim.env, self.sim.recorder
        yield env.timeout(at_ms)
        active = [c for c, s in zip(self.collections, self.spec.collections) if not s.idle]
        for coll in active:
            ts = yield from self._ddl_ts("client-0")
            starts = []
            for ch in [coll.pchannel_of[v] for v in coll.vchannels]:
                msg_id = self.broker.produce(ch, CreateCollectionMsg(timestamp=ts, collection_id=coll.id))
                rec.emit("mq.produce", self.rootcoord.name, ts=ts, channel=ch, msg_id=msg_id,
                         msg_type=MsgType.CREATE_COLLECTION, begin_ts=ts, end_ts=ts, count=0)
                starts.append((ch, msg_id))
            stored = self.datacoord.server.watch_channels(coll.id, coll.vchannels, starts, ts,
                                                          partitions=(coll.partition_id,))
            for pos in stored:
                rec.emit("datacoord.channel_cp", self.datacoord.name, peer="WatchChannels", vchannel=pos.channel_name,
                         ts=pos.timestamp, msg_id=pos.msg_id, detail={"saved": True})
            coll.created = True  # changeCollectionStateStep, after watchChannelsStep: the collection resolves
        self.datanode.start([(c.id, v) for c in active for v in c.vchannels])
        watched: list[tuple[int, str]] = []
        for coll, s in zip(self.collections, self.spec.collections):
            if not s.idle:
                continue
            ts = yield from self._ddl_ts("client-0")
            (vchannel,) = coll.vchannels
            pchannel = coll.pchannel_of[vchannel]
            msg_id = self.broker.produce(pchannel, CreateCollectionMsg(timestamp=ts, collection_id=coll.id))
            self.datacoord.server.watch_channels(coll.id, [vchannel], [(pchannel, msg_id)], ts)
            coll.created = True
            watched.append((coll.id, vchannel))
        if watched:
            self.datanode.watch_channels(watched)

    def drop_collection_messages(self, client: str, collection_id: int):
        """A bare ``DropCollection``: a DDL timestamp, then the DropCollection message in every pchannel (no meta
        cache, no release; :meth:`Catalog.drop_collection` models the whole DDL task)."""
        rec = self.sim.recorder
        ts = yield from self._ddl_ts(client)
        for ch in self.pchannels:
            msg_id = self.broker.produce(ch, DropCollectionMsg(timestamp=ts, collection_id=collection_id))
            rec.emit("mq.produce", self.rootcoord.name, ts=ts, channel=ch, msg_id=msg_id,
                     msg_type=MsgType.DROP_COLLECTION, begin_ts=ts, end_ts=ts, count=0)

    # ---- flush and binlogs

    def flush_and_wait(self, client: str, collection_id: int, detail: dict | None = None):
        """``MilvusClient.flush``: Flush, then GetFlushState at once and every 500 ms after each answer until flushed
        (pymilvus's ``_wait_for_flushed``: it asks first, then sleeps 0.5 s while the answer is "not yet").

        Emits ``client.flush`` when flushTs is known and again when flushed (``detail`` adds to both); returns
        DataCoord's Flush answer, or ``None`` when the Flush RPC failed.
        """
        env, rec, dc = self.sim.env, self.sim.recorder, self.datacoord
        extra = detail or {}
        try:
            res = yield from self.sim.call(client, dc.name, lambda: dc.handle_flush(collection_id, client))
        except RPCError as exc:
            rec.emit("client.flush", client, error=str(exc))
            return None
        rec.emit("client.flush", client, ts=res.flush_ts, count=len(res.segment_ids),
                 detail={"segments": list(res.segment_ids), "flushed": False, **extra})
        while True:
            try:
                done = yield from self.sim.call(client, dc.name, lambda: dc.handle_get_flush_state(
                    res.segment_ids, collection_id, res.flush_ts))
            except RPCError:
                done = False  # a failed call is retried after the same sleep
            if done:
                rec.emit("client.flush", client, ts=res.flush_ts, count=len(res.segment_ids),
                         detail={"segments": list(res.segment_ids), "flushed": True, **extra})
                return res
            yield env.timeout(500.0)

    def read_segment(self, segment) -> tuple[list, list, list]:
        """A segment's binlogs read back from the object store, as a QueryNode loading it would:
        ``(primary keys, their timestamps, deleted keys)`` in binlog order."""
        info = decompress_bin_logs(segment, self.store.root_path)
        columns: dict[int, list] = {PK_FIELD_ID: [], TIMESTAMP_FIELD_ID: []}
        for field_binlog in info.binlogs:
            if field_binlog.field_id in columns:
                for b in field_binlog.binlogs:
                    binlog = read_insert_binlog(self.store.read(b.log_path), name=b.log_path)
                    columns[field_binlog.field_id].extend(next(iter(binlog.columns.values())))
        deleted: list = []
        for field_binlog in info.deltalogs:
            for b in field_binlog.binlogs:
                deleted.extend(read_delta_log(self.store.read(b.log_path), name=b.log_path).columns["pk"])
        return columns[PK_FIELD_ID], columns[TIMESTAMP_FIELD_ID], deleted

    # ---- SDK clients (with a QueryNode)

    def client(self, name: str) -> SimClient:
        """The SDK client called ``name`` (created on first use, on the next proxy in turn)."""
        if self.catalog is None:
            raise ValueError("SDK clients need a QueryNode in the cluster; set querynodes=1 in the ClusterSpec")
        if name not in self.clients:
            proxy = self.read_proxies[len(self.clients) % len(self.read_proxies)]
            self.clients[name] = SimClient(self.catalog, name, proxy)
        return self.clients[name]

    def run_steps(self, steps) -> None:
        """Schedule a workload of client steps (:func:`~milvus_edu.client.workload.parse_steps`): one process per
        client, running its steps in order, each at its time or as soon as its previous call returned."""
        by_client: dict[str, list] = {}
        for step in parse_steps(steps):
            by_client.setdefault(step.client, []).append(step)
        for name, mine in by_client.items():
            self.sim.env.process(run_program(self.client(name), mine))


def build(sim: Simulation, spec: ClusterSpec) -> Cluster:
    """Create every node ``spec`` names, register it with ``sim``, and return the :class:`Cluster` (not started)."""
    return Cluster(sim, spec)


__all__ = ["ClusterSpec", "RootCoordSpec", "TSOClientSpec", "ProxySpec", "CollectionSpec", "DataNodeSpec",
           "Cluster", "build"]
