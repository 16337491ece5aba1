"""The flush mechanism's scenarios: inserts and deletes flowing into DataNode write buffers, syncs to Parquet
binlogs, channel checkpoints, flushes, crashes and recovery.

Every scenario runs the TimeTick cluster's rootcoord (TSO, timetick sync) and ``proxies`` proxies over 2
pchannels, one collection (100, partition 1001) with 2 shards (one vchannel per pchannel), DataCoord and
one DataNode that watches both vchannels. Each insert carries 1-8 rows of 3,072 bytes (a 768-dim float
vector): at the default 200 inserts/s a segment's 16 MiB insert buffer fills in about 12 s, so
full-buffer syncs happen with Milvus's own defaults. The client writes for ``workload_s`` seconds, then
flushes, waits until ``GetFlushState`` says flushed, and the run ends with an audit that reads every
segment's binlogs back from the object store (``<run folder>/objects/a-bucket``, or in memory when the
run writes no folder).
"""

from __future__ import annotations

from ...cluster.builder import Cluster, ClusterSpec, CollectionSpec, DataNodeSpec, ProxySpec, build, check_proxy_count
from ...mq.fast import KeysHashedAhead
from ...proto import SegmentState
from ...registry import Scenario
from ...sim.kernel import Simulation
from ...sim.scenarios import After, At

#: ``rootCoord.dmlChannelNum`` is 16 in Milvus; two keep the lesson readable.
PCHANNELS = 2
COLLECTION_ID = 100
PARTITION_ID = 1001
COLLECTION_CREATE_MS = 150.0
WORKLOAD_START_MS = 300.0
IDLE_COLLECTION_FIRST_ID = 200


def cluster_spec(proxies: int = 1, rpc_failure_rate: float = 0.0, store_latency_ms: float = 5.0, crash_step: int = 0,
                 takeover: bool = False, sync_period_s: float | None = None, memory_mb: float | None = None,
                 idle_collections: int = 0, datacoord_outage_ms: tuple[float, float] | None = None) -> ClusterSpec:
    """A flush cluster: rootcoord, ``proxies`` proxies, 2 pchannels, collection 100 (partition 1001, a shard on each
    pchannel) created at 150 ms, DataCoord and datanode-1 (with ``takeover``, datanode-2 standing by); then
    ``idle_collections`` one-shard collections nobody writes to, on alternating pchannels (ids from 200, three
    digits: no id is a substring of another's vchannel name, which groupingMsgs routes DDL by)."""
    datanodes = (DataNodeSpec("datanode-1", 20, store_latency_ms, sync_period_s, memory_mb, crash_step or None),)
    if takeover:
        datanodes += (DataNodeSpec("datanode-2", 21, store_latency_ms, standby=True),)
    collections = (CollectionSpec(COLLECTION_ID, PCHANNELS, partition_id=PARTITION_ID),) + tuple(
        CollectionSpec(IDLE_COLLECTION_FIRST_ID + i, 1, first_pchannel=i % PCHANNELS, idle=True)
        for i in range(idle_collections))
    return ClusterSpec(pchannels=PCHANNELS, proxies=(ProxySpec(),) * proxies, collections=collections,
                       create_collections_at_ms=COLLECTION_CREATE_MS, datacoord=True,
                       rpc_failure_rate=rpc_failure_rate, datacoord_outage_ms=datacoord_outage_ms, datanodes=datanodes)


def _check(proxies: int, inserts_per_s: float, deletes_per_s: float, workload_s: float, store_latency_ms: float,
           crash_at_s: float, crash_step: int, restart_after_s: float, sync_period_s: float | None,
           memory_mb: float | None) -> None:
    """One line per bad option, saying how to fix it (the cluster spec checks ``rpc_failure_rate``)."""
    check_proxy_count(proxies, "a flush cluster")
    for name, value in (("inserts_per_s", inserts_per_s), ("deletes_per_s", deletes_per_s),
                        ("crash_at_s", crash_at_s), ("crash_step", crash_step),
                        ("restart_after_s", restart_after_s)):
        if value < 0:
            raise ValueError(f"{name} must not be negative, got {value}; use {name}=0 or more")
    if workload_s <= 0:
        raise ValueError(f"workload_s must be positive, got {workload_s}; use workload_s=30 for example")
    if store_latency_ms < 0:
        raise ValueError(f"store_latency_ms must not be negative, got {store_latency_ms}")
    # DataNode reads it as whole nanoseconds in a Go int64: from 1 ns to some 292 years
    if sync_period_s is not None and not 1e-9 <= sync_period_s < 2**63 / 1e9:
        raise ValueError(f"sync_period_s must be positive, from 1e-9 (1 ns) to 9.2e9 (some 292 years), got "
                         f"{sync_period_s:g}; use sync_period_s=5 for example")
    if memory_mb is not None and memory_mb <= 0:
        raise ValueError(f"memory_mb must be positive, got {memory_mb}; use memory_mb=4 for example")


class FlushWorkload:
    """The flush lesson's client and faults on a built flush cluster: inserts and deletes for ``workload_s``
    seconds, flushes at ``flush_at_s``, a DataNode crash (at ``crash_at_s``, or at the spec's crash step) with its
    restart ``restart_after_s`` later or the standby's takeover once its session expired, then a final flush and
    the audit that reads every segment's binlogs back. A subclass changes the end (:meth:`final`)."""

    def __init__(self, cluster: Cluster, inserts_per_s: float = 200.0, deletes_per_s: float = 5.0,
                 workload_s: float = 30.0, crash_at_s: float = 0.0, restart_after_s: float = 4.0, flush_at_s=()):
        self.cluster = cluster
        self.sim = cluster.sim
        self.collection = cluster.collections[0]
        self.inserts_per_s = inserts_per_s
        self.deletes_per_s = deletes_per_s
        self.workload_ms = workload_s * 1000.0
        self.crash_at_s = crash_at_s
        self.restart_after_s = restart_after_s
        self.flush_at_s = list(flush_at_s)
        #: Acknowledged keys the delete client has not picked yet, in the order they were acknowledged (a
        #: delete picks one at random and takes it out, so no pass over every key is needed per delete).
        self.live: list[int] = []
        # bound once: every acknowledged insert logs one (the recorder's fast path, same rows as emit)
        self._emit_insert = self.sim.recorder.emitter("client.insert", "peer", "ts", "count", "detail")

    def start(self) -> None:
        """Schedule the faults, the clients, the flushes and the end."""
        env, cluster = self.sim.env, self.cluster
        datanode = cluster.datanode
        if self.crash_at_s:
            self.sim.at(self.crash_at_s * 1000.0, lambda: cluster.kill(datanode.name, "crash"))
        if self.crash_at_s or datanode.crash_at_step:
            env.process(self._restarter())
        for p in cluster.proxies:
            env.process(self._inserts(p))
        if self.deletes_per_s:
            env.process(self._deletes(cluster.proxies[0]))
        for t in self.flush_at_s:
            self.sim.at(t * 1000.0, lambda: env.process(self._flush("client-0")))
        env.process(self.final())

    def _inserts(self, proxy):
        env = self.sim.env
        rng = self.sim.rng(f"clients/{proxy.name}")
        rate = self.inserts_per_s / len(self.cluster.proxies) / 1000.0
        if rate <= 0:
            return
        yield env.timeout(WORKLOAD_START_MS)
        next_pk = 0
        ahead = KeysHashedAhead()
        while env.now < self.workload_ms:
            yield env.timeout(rng.expovariate(rate))
            if env.now >= self.workload_ms or not proxy.alive:
                continue
            rows = rng.randint(1, 8)
            pks = ahead.keys(proxy.server_id * 10**9, next_pk, rows)
            next_pk += rows
            self.sim.spawn(self.insert(proxy, pks))  # nothing waits for a request's end

    def insert(self, proxy, pks: list[int], task_ms: float | None = None):
        """One client insert through ``proxy`` (a SimPy generator), logged as ``client.insert``."""
        ts = yield from proxy.insert(self.collection, pks, task_ms=task_ms)
        rec = self.sim.recorder
        if ts is None:
            rec.emit("client.insert", "client-0", peer=proxy.name, count=len(pks), error="insert failed")
            return
        self.live.extend(pks)
        self._emit_insert("client-0", proxy.name, ts, len(pks), {"pks": pks})

    def _deletes(self, proxy):
        env = self.sim.env
        rng = self.sim.rng("clients/deletes")
        rate = self.deletes_per_s / 1000.0
        yield env.timeout(WORKLOAD_START_MS + 1000.0)
        while env.now < self.workload_ms:
            yield env.timeout(rng.expovariate(rate))
            live = self.live
            if env.now >= self.workload_ms or not live or not proxy.alive:
                continue
            pk = live.pop(rng.randrange(len(live)))
            self.sim.spawn(self._delete(proxy, [pk]))

    def _delete(self, proxy, pks: list[int]):
        ts = yield from proxy.delete(self.collection, pks)
        rec = self.sim.recorder
        if ts is None:
            rec.emit("client.delete", "client-0", peer=proxy.name, count=len(pks), error="delete failed")
            return
        rec.emit("client.delete", "client-0", peer=proxy.name, ts=ts, count=len(pks), detail={"pks": pks})

    def _flush(self, client: str):
        """The client's flush of the collection; whether it completed."""
        return (yield from self.cluster.flush_and_wait(client, COLLECTION_ID)) is not None

    def _restarter(self):
        env, cluster = self.sim.env, self.cluster
        node = cluster.datanode
        while True:
            yield env.timeout(100.0)
            if not node.alive:
                break
        node.crash_at_step = None
        if cluster.standby is None:
            yield env.timeout(self.restart_after_s * 1000.0)
            node.restart()
            return
        yield env.timeout(self.sim.config.tso.session_ttl_ns / 1e6)
        cluster.datacoord.take_over(node, cluster.standby)

    def final(self):
        """After the workload: flush, wait until flushed, then audit the binlogs."""
        env = self.sim.env
        yield env.timeout(self.workload_ms + 500.0)
        flushed = yield from self._flush("client-0")
        if flushed:
            self._audit()

    def _audit(self) -> None:
        """Read every segment's binlogs back from the object store (as a QueryNode loading it would)."""
        rec, cluster = self.sim.recorder, self.cluster
        server = cluster.datacoord.server
        for segment in sorted(server.meta.segments.values(), key=lambda s: s.id):
            if segment.state == SegmentState.DROPPED:
                continue
            pks, _, deleted = cluster.read_segment(segment)
            rec.emit("storage.audit", "audit", segment=segment.id, vchannel=segment.insert_channel, count=len(pks),
                     detail={"state": segment.state, "level": segment.level, "rows_in_meta": segment.num_of_rows,
                             "pks": sorted(pks), "deleted": sorted(deleted)})
        for node in (cluster.datanode, cluster.standby):
            if node is not None:
                rec.emit("datanode.steps", node.name, count=node.steps)


#: Every flush scenario takes every knob, so a learner can add a fault to any of them (``--option crash_at_s=20``):
#: the workload, then the faults (a DataCoord RPC failure rate, the object store's latency per write, a DataNode
#: crash at a simulated time or at its N-th step boundary, and how long it stays down, or ``takeover``: it stays
#: down and a second DataNode takes its channels once its session expired).
OPTIONS = {"proxies": 1, "inserts_per_s": 200.0, "deletes_per_s": 5.0, "workload_s": 30.0,
           "rpc_failure_rate": 0.0, "store_latency_ms": 5.0, "crash_at_s": At(0.0), "crash_step": 0,
           "restart_after_s": After(4.0, since="crash_at_s"), "takeover": False}


def _run(sim: Simulation, flush_at_s=(), proxies: int = 1, inserts_per_s: float = 200.0,
         deletes_per_s: float = 5.0, workload_s: float = 30.0, rpc_failure_rate: float = 0.0,
         store_latency_ms: float = 5.0, crash_at_s: float = 0.0, crash_step: int = 0, restart_after_s: float = 4.0,
         takeover: bool = False, sync_period_s: float | None = None, memory_mb: float | None = None,
         workload=FlushWorkload, **extra) -> FlushWorkload:
    """Check the options, build and start the cluster, and make the workload on it (``extra`` goes to the cluster
    spec and the workload class as their parameters say); the caller starts the workload."""
    _check(proxies, inserts_per_s, deletes_per_s, workload_s, store_latency_ms, crash_at_s, crash_step,
           restart_after_s, sync_period_s, memory_mb)
    spec_extra = {k: extra.pop(k) for k in ("idle_collections", "datacoord_outage_ms") if k in extra}
    cluster = build(sim, cluster_spec(proxies, rpc_failure_rate, store_latency_ms, crash_step, takeover,
                                      sync_period_s, memory_mb, **spec_extra))
    cluster.start()
    return workload(cluster, inserts_per_s, deletes_per_s, workload_s, crash_at_s, restart_after_s,
                             flush_at_s, **extra)


def _basics(sim: Simulation, **options) -> None:
    _run(sim, **options).start()


def _manual(sim: Simulation, **options) -> None:
    _run(sim, flush_at_s=(12.0,), **options).start()


def _rpc_failures(sim: Simulation, **options) -> None:
    _run(sim, **options).start()


def _crash(sim: Simulation, **options) -> None:
    _run(sim, flush_at_s=(10.0,), **options).start()


def _during_sync(sim: Simulation, **options) -> None:
    _run(sim, flush_at_s=(10.0,), **options).start()


def _etcd_outage(sim: Simulation, **options) -> None:
    # covers the checkpoint updater's first tick at 10 s
    _run(sim, datacoord_outage_ms=(9_500.0, 10_500.0), **options).start()


def _flush_ts_boundary(sim: Simulation, **options) -> None:
    # 10.05 s is between the proxies' and rootcoord's 100 ms tick grids, so their allocations stay clear of it
    workload = _run(sim, flush_at_s=(10.05,), **options)
    cluster = workload.cluster
    proxy = cluster.proxies[0]
    fired = []

    def right_after_flush_ts(flush_ts: int) -> None:
        # An insert whose timestamp is allocated right after flushTs and whose task runs 400 ms: while it is
        # pending, its proxy reports ts - 1 = flushTs for the pchannel, so a time tick lands exactly on flushTs.
        if fired:
            return
        fired.append(flush_ts)
        sim.env.process(workload.insert(proxy, [7 * 10**9 + k for k in range(4)], task_ms=400.0))

    cluster.datacoord.on_flush_ts = right_after_flush_ts
    workload.start()


#: The DataNode's machine memory in ``flush-stuck-memory-sync``: at forceSyncWatermark 0.5 the memory check
#: force-syncs as soon as the buffers hold 1 MiB (about what ``--param datanode.force_sync_watermark=0.0001``
#: does on the default 8 GiB machine).
SMALL_MEMORY_MB = 2.0


def _stuck_memory_sync(sim: Simulation, **options) -> None:
    _run(sim, memory_mb=SMALL_MEMORY_MB, **options).start()


SCENARIOS = (
    Scenario(
        "flush-basics", "One DataNode buffers 200 inserts/s on 2 vchannels; full buffers sync to Parquet binlogs; "
        "a final flush seals everything.", 40.0, _basics,
        "Inserts flow through each vchannel's flowgraph into the write buffer. A segment's 16 MiB insert buffer fills "
        "in about 12 s and is synced: binlogs are written, then DataCoord records them with the channel position they "
        "cover. The channel checkpoint the DataNode reports never passes the start of data still in memory. At the "
        "end the client flushes: sealed segments sync once more and become Flushed, and the audit reads every binlog "
        "back.", ("flush", "timetick", "tso"), options=OPTIONS,
    ),
    Scenario(
        "flush-manual", "A client flush at 12 s while inserts go on: flushTs, the flush-ts sync, sealing, and "
        "GetFlushState.", 40.0, _manual,
        "Flush takes flushTs from the TSO, seals the growing segments and hands flushTs to the DataNode. Buffers "
        "older than flushTs sync at once; on the DataNode's next time tick DataCoord asks it to flush the sealed "
        "segments; GetFlushState says flushed when they are Flushed and every channel checkpoint reached flushTs. "
        "New inserts go to new segments meanwhile.", ("flush", "timetick", "tso"), options=OPTIONS,
    ),
    Scenario(
        "checkpoint-rpc-failures", "DataCoord fails 30% of SaveBinlogPaths and UpdateChannelCheckpoint calls: "
        "syncs retry, checkpoint updates wait for the next tick.", 40.0, _rpc_failures,
        "A failed SaveBinlogPaths is retried with back-off by the sync task (the binlogs are already written); a "
        "failed checkpoint update simply stays in the updater and goes out again on its next 10 s tick. Nothing is "
        "lost and the checkpoint never passes unflushed data.", ("flush", "timetick", "tso"),
        options={**OPTIONS, "rpc_failure_rate": 0.3},
    ),
    Scenario(
        "datanode-crash-recovery", "The DataNode crashes at 26 s and restarts 2 s later: it seeks to the channel "
        "checkpoint and filters what is already flushed.", 45.0, _crash,
        "A flush at 10 s stores the channel checkpoint; full buffers sync again around 22 s, but the next periodic "
        "checkpoint is a minute of message time away. Then everything in the DataNode's memory is lost: buffers, syncs "
        "in flight, checkpoint tasks. The restarted node "
        "asks DataCoord where to resume (the channel checkpoint), rebuilds its segment cache, replays the channel "
        "from there and drops every insert already in a binlog (at or before its segment's DmlPosition), so the "
        "final binlogs hold every acknowledged row exactly once. Try it with --switch skip_recovery_filter.",
        ("flush", "timetick", "tso"),
        options={**OPTIONS, "crash_at_s": At(26.0), "restart_after_s": After(2.0, since="crash_at_s")},
    ),
    Scenario(
        "datanode-takeover", "The DataNode crashes at 26 s for good; when its session expires DataCoord hands its "
        "channels to a second DataNode, which recovers from the channel checkpoints.", 110.0, _crash,
        "Recovery does not need the same node. datanode-2 stands by with no channel. After datanode-1 dies, DataCoord "
        "still believes it owns both vchannels until its session key expires (common.session.ttl, 60 s): "
        "meanwhile nothing consumes them, and the client's final flush, whose FlushChannels call goes to the dead "
        "node, is answered only after the handover. "
        "Then DataCoord releases the channels and datanode-2 watches them exactly as a restarted node would: seek to "
        "the checkpoint, rebuild the segment cache, filter what is already in binlogs.",
        ("flush", "timetick", "tso"), options={**OPTIONS, "crash_at_s": At(26.0), "takeover": True},
    ),
    Scenario(
        "checkpoint-during-sync", "A slow object store (3 s per write) and a crash right after a flush: run it "
        "with the checkpoint_ignores_syncing_segments switch.", 70.0, _during_sync,
        "A flush at 10 s cuts syncs that take seconds to write. While they are in flight the channel checkpoint "
        "must stay at their start. With the switch it jumps to the consumed position, DataCoord stores it, the "
        "DataNode crashes at 11 s, and the restarted node seeks past rows that never reached a binlog.",
        ("flush", "timetick", "tso"),
        options={**OPTIONS, "store_latency_ms": 3000.0, "crash_at_s": At(11.0),
                 "restart_after_s": After(2.0, since="crash_at_s")},
    ),
    Scenario(
        "checkpoint-rpc-lost", "DataCoord's etcd is down from 9.5 s to 10.5 s, across the checkpoint updater's first "
        "tick: run it with the drop_failed_checkpoint_tasks switch.", 40.0, _etcd_outage,
        "The updater keeps a channel's task until DataCoord stored it, so the update that fails at the 10 s tick goes "
        "out again at 20 s. With the switch the failed task is deleted, and the channel's checkpoint in DataCoord "
        "stays behind until the ttNode submits again (here: at the final flush).",
        ("flush", "timetick", "tso"), options=OPTIONS,
    ),
    Scenario(
        "flush-ts-boundary", "An insert allocated right after the flush's timestamp makes a time tick land exactly on "
        "flushTs: run it with the reset_flush_ts_inclusive switch.", 40.0, _flush_ts_boundary,
        "While that insert's task runs, its proxy reports ts - 1, which is flushTs, so rootcoord's tick and the next "
        "pack's start are exactly flushTs, and so is the channel checkpoint while that pack's rows are buffered. "
        "Milvus keeps the flush open until a stored checkpoint is strictly past flushTs; with the switch it closes "
        "on the equal one. Nothing a client sees changes (quirk P23): every row up to flushTs is already in a binlog, "
        "and only the checkpoint RPCs the ttNode re-sends while the checkpoint sits on flushTs differ. "
        "flush-ts-slow-store shows where the design documents' reason for the strict rule comes from.",
        ("flush", "timetick", "tso"), options={**OPTIONS, "inserts_per_s": 20.0},
    ),
    Scenario(
        "flush-ts-slow-store", "flush-ts-boundary with a slow object store (1 s per write): run it with both "
        "reset_flush_ts_inclusive and checkpoint_ignores_syncing_segments to see the design documents' story.",
        40.0, _flush_ts_boundary,
        "The design documents explain the strict > with a checkpoint that equals flushTs while the flush's syncs are "
        "still running. In Milvus 2.5 that cannot happen: a segment being synced holds the checkpoint at its start "
        "until DataCoord stored the sync. With the documents' older GetCheckpoint (checkpoint_ignores_syncing_segments) "
        "it can: the checkpoint jumps to flushTs as soon as the syncs start, and with >= (reset_flush_ts_inclusive) "
        "the DataNode declares the first flush done there, while the syncs still take seconds. The strict > alone "
        "does not save the older code: the final flush is declared done on a checkpoint one step past flushTs, "
        "its syncs still in flight.", ("flush", "timetick", "tso"),
        options={**OPTIONS, "inserts_per_s": 20.0, "store_latency_ms": 1000.0},
    ),
    Scenario(
        "flush-stuck-memory-sync", "A DataNode with 2 MiB of memory force-syncs its oldest buffer every 3 s; deletes "
        "then pile up in a buffer nothing can sync, the channel checkpoint sticks and the final flush never "
        "completes.", 80.0, _stuck_memory_sync,
        "The memory check (dataNode.memory.checkInterval, 3 s) syncs the oldest buffer of the largest channel while "
        "the buffers hold at least forceSyncWatermark of the machine's memory. When it syncs a partition's L0 "
        "segment (its deletes), the segment leaves the DataNode's segment cache, but the write buffer still routes "
        "the partition's next deletes to it (only BufferData forgets a synced L0 segment). Those deletes sit in a "
        "buffer whose segment no policy can find: it is never synced, and the channel checkpoint stays at its start. "
        "The final flush waits for a checkpoint at flushTs that never comes (quirk P24); flush-completes reports it.",
        ("flush", "timetick", "tso"), options=OPTIONS,
        gap="Milvus 2.5's EvictBuffer never forgets an L0 segment it synced (quirk P24): later deletes sit in a "
            "buffer nothing syncs, the channel checkpoint sticks and a flush never completes",
    ),
)


# ---------------------------------------------------------------------------------------------------------------
# Scenarios that reach what a run with Milvus's defaults never does: the stale-buffer and memory sync policies,
# the checkpoint updater's batches and waves over many vchannels, and the flowgraph's drop path.

class DropCollectionWorkload(FlushWorkload):
    """The flush workload, but the client stops writing and drops the collection at ``drop_at_s`` (rootcoord writes
    DropCollection into every pchannel; 0: never), and the DataNode stops gracefully at ``stop_at_s`` (0: never).
    No final flush (nothing is left to flush) and so no audit."""

    def __init__(self, cluster: Cluster, *args, drop_at_s: float = 20.0, stop_at_s: float = 0.0):
        super().__init__(cluster, *args)
        self.drop_at_ms = drop_at_s * 1000.0
        if self.drop_at_ms:
            self.workload_ms = min(self.workload_ms, self.drop_at_ms)
        self.stop_at_ms = stop_at_s * 1000.0

    def start(self) -> None:
        """As every flush workload, plus the DataNode's graceful stop at ``stop_at_s``."""
        super().start()
        if self.stop_at_ms:
            self.sim.at(self.stop_at_ms, self.cluster.datanode.stop)

    def final(self):
        """``DropCollection`` at ``drop_at_s`` (none when it is 0)."""
        if self.drop_at_ms:
            yield self.sim.env.timeout(self.drop_at_ms)
            yield from self.cluster.drop_collection_messages("client-0", COLLECTION_ID)


def _many_vchannels(sim: Simulation, vchannels: int = 300, **options) -> None:
    """The DataNode also watches idle collections of one shard each, ``vchannels`` in all: every vchannel has a
    checkpoint for the updater, written or not."""
    if vchannels < PCHANNELS:
        raise ValueError(f"vchannels must be at least {PCHANNELS} (the written collection's shards), got "
                         f"{vchannels}; use vchannels=300 for example")
    if vchannels - PCHANNELS > 999 - IDLE_COLLECTION_FIRST_ID:
        raise ValueError(f"vchannels must be at most {999 - IDLE_COLLECTION_FIRST_ID + PCHANNELS}, got {vchannels}")
    _run(sim, idle_collections=vchannels - PCHANNELS, **options).start()


def _drop_collection(sim: Simulation, drop_at_s: float = 20.0, stop_at_s: float = 0.0, **options) -> None:
    if drop_at_s < 0:
        raise ValueError(f"drop_at_s must not be negative, got {drop_at_s}; use drop_at_s=20, or 0 for no drop")
    if stop_at_s < 0:
        raise ValueError(f"stop_at_s must not be negative, got {stop_at_s}; use stop_at_s=25, or 0 for no stop")
    _run(sim, workload=DropCollectionWorkload, drop_at_s=drop_at_s, stop_at_s=stop_at_s, **options).start()


SCENARIOS = SCENARIOS + (
    Scenario(
        "flush-sync-policies", "20 inserts/s never fill a buffer: with syncPeriod at 5 s (Milvus: 600 s) stale "
        "buffers sync; try --option memory_mb=2 for the memory check, which with deletes can stick the flush "
        "(quirk P24).", 40.0, _basics,
        "At 20 inserts/s a segment's 16 MiB buffer would take minutes to fill, so the full-buffer policy never "
        "fires. The stale-buffer policy syncs a buffer whose oldest row is more than dataNode.segment.syncPeriod "
        "older than the pack just consumed (plus a jitter below 10 %, drawn per buffer and pack): with "
        "sync_period_s=5 every buffer goes out about every 5 s of message time. The memory check runs every 3 s: when "
        "the buffers hold at least forceSyncWatermark (0.5) of the node's memory, it syncs the oldest buffer of the "
        "largest channel until they hold less: with the model's 8 GiB node that is 4 GiB, and memory_mb=2 makes it "
        "1 MiB (add sync_period_s=600 to see the memory check alone). With --option memory_mb=2 the memory check "
        "may pick the L0 segment that holds the partition's deletes, as it does at seed 1: the next deletes then go "
        "to a buffer no sync can take, and the final flush cannot complete (quirk P24, as in "
        "flush-stuck-memory-sync; `milvus-edu why RUN --flush 1` traces it). At other seeds it may pick only insert "
        "segments; add --option deletes_per_s=0 to see the memory check with inserts alone.",
        ("flush", "timetick", "tso"),
        options={**OPTIONS, "inserts_per_s": 20.0, "sync_period_s": 5.0, "memory_mb": 8192.0},
    ),
    Scenario(
        "checkpoint-many-vchannels", "One DataNode watches 300 vchannels (298 idle one-shard collections beside "
        "the written one): the checkpoint updater sends them in RPCs of 128, RPCs in parallel waves.", 25.0, _many_vchannels,
        "A ttNode submits its channel's checkpoint on its first pack, so at the updater's 10 s tick there are 300 "
        "tasks: dataNode.channel.maxChannelCheckpointsPerPRC (128; Milvus spells the key so) cuts them into 3 "
        "UpdateChannelCheckpoint RPCs, "
        "sent together because updateChannelCheckpointMaxParallel (10) allows 10 at once. With --param "
        "datanode.update_channel_checkpoint_max_parallel=2 they go in two waves, the second after the first "
        "answered.", ("flush", "timetick", "tso"),
        options={**OPTIONS, "vchannels": 300, "inserts_per_s": 50.0, "deletes_per_s": 0.0, "workload_s": 15.0},
    ),
    Scenario(
        "flush-drop-collection", "The client drops the collection at 20 s: the DataNode syncs its buffers as drops "
        "and never submits the channels' checkpoints again.", 70.0, _drop_collection,
        "DropCollection reaches each vchannel's flowgraph like any message. The ddNode enters drop mode (nothing "
        "passes it afterwards), the writeNode closes the write buffer with drop (every buffer is synced with the "
        "dropped flag, DataCoord marks those segments Dropped) and the ttNode enters drop mode too: the channel's "
        "checkpoint is never submitted again. Each ttNode submitted its first checkpoint on its first pack, so "
        "its periodic update (every 60 s of message time) is due at about 60 s: with --option drop_at_s=0 (the "
        "collection is kept) it goes out, here it does not. With --option stop_at_s=25 the DataNode stops gracefully at 25 s: "
        "each flowgraph gets a close message, on which the ttNode submits the checkpoint once more unless its "
        "channel was dropped, and the checkpoint updater closes right after without sending it. Simplification: the "
        "DataNode does not call DropVirtualChannel, so DataCoord keeps the channels assigned.",
        ("flush", "timetick", "tso"), options={**OPTIONS, "drop_at_s": At(20.0), "stop_at_s": At(0.0)},
    ),
)
