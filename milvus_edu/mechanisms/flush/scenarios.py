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

from dataclasses import replace

from ...cluster.control_plane import PCHANNELS, ControlPlane, SegmentCollection
from ...cluster.data import DataNodeNode, ObjectStoreLatency
from ...cluster.dml import ProxyNode
from ...config import S
from ...mq import get_virtual_channel
from ...mq.msg import CreateCollectionMsg, DropCollectionMsg
from ...proto import MsgType, SegmentState
from ...registry import Scenario
from ...sim.kernel import Simulation

COLLECTION_ID = 100
PARTITION_ID = 1001
COLLECTION_CREATE_MS = 150.0
WORKLOAD_START_MS = 300.0


class FlushCluster(ControlPlane):
    """What a flush scenario built: rootcoord, timetick sync, proxies, DataCoord, a DataNode, the store."""

    def __init__(self, sim: Simulation, proxies: int = 1, inserts_per_s: float = 200.0, deletes_per_s: float = 5.0,
                 workload_s: float = 30.0, rpc_failure_rate: float = 0.0, store_latency_ms: float = 5.0,
                 crash_at_s: float = 0.0, crash_step: int = 0, restart_after_s: float = 4.0, takeover: bool = False,
                 sync_period_s: float | None = None, memory_mb: float | None = None):
        if proxies < 1:
            raise ValueError(f"a flush cluster needs at least one proxy, got {proxies}; use proxies=1 or more")
        for name, value in (("inserts_per_s", inserts_per_s), ("deletes_per_s", deletes_per_s),
                            ("crash_at_s", crash_at_s), ("crash_step", crash_step),
                            ("restart_after_s", restart_after_s)):
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value}; use {name}=0 or more")
        if workload_s <= 0:
            raise ValueError(f"workload_s must be positive, got {workload_s}; use workload_s=30 for example")
        if not 0 <= rpc_failure_rate < 1:
            raise ValueError(f"rpc_failure_rate must be in [0, 1), got {rpc_failure_rate}; use 0.3 for example")
        if store_latency_ms < 0:
            raise ValueError(f"store_latency_ms must not be negative, got {store_latency_ms}")
        if sync_period_s is not None and sync_period_s <= 0:
            raise ValueError(f"sync_period_s must be positive, got {sync_period_s}; use sync_period_s=5 for example")
        if memory_mb is not None and memory_mb <= 0:
            raise ValueError(f"memory_mb must be positive, got {memory_mb}; use memory_mb=4 for example")
        super().__init__(sim, rpc_failure_rate)
        self.inserts_per_s = inserts_per_s
        self.deletes_per_s = deletes_per_s
        self.workload_ms = workload_s * 1000.0
        vchannels = [get_virtual_channel(self.pchannels[i], COLLECTION_ID, i) for i in range(PCHANNELS)]
        self.collection = SegmentCollection(COLLECTION_ID, vchannels, self.datacoord, PARTITION_ID)
        self.proxies = [ProxyNode(sim, f"proxy-{i}", 10 + i, self.rootcoord, self.broker)
                        for i in range(1, proxies + 1)]
        for p in self.proxies:
            sim.add(p)
        latency = ObjectStoreLatency(latency_ms=store_latency_ms, jitter_ms=store_latency_ms)
        # dataNode.segment.syncPeriod and the machine's memory, when the scenario sets them (else Milvus's and 8 GiB)
        params = None
        if sync_period_s is not None:
            params = replace(sim.config.datanode, sync_period_ns=round(sync_period_s * S))
        memory = {} if memory_mb is None else {"memory_bytes": round(memory_mb * (1 << 20))}
        self.datanode = DataNodeNode(sim, "datanode-1", 20, self.broker, self.datacoord, self.store, self.ids,
                                     self.rootcoord, latency, params=params, **memory)
        sim.add(self.datanode)
        #: With ``takeover``, a second DataNode stands by (registered, no channel) and takes the crashed node's
        #: channels once DataCoord sees its session expire; the crashed node does not come back.
        self.standby: DataNodeNode | None = None
        if takeover:
            self.standby = DataNodeNode(sim, "datanode-2", 21, self.broker, self.datacoord, self.store, self.ids,
                                        self.rootcoord, latency)
            sim.add(self.standby)
        self.crash_at_s = crash_at_s
        self.crash_step = crash_step
        self.restart_after_s = restart_after_s
        #: Acknowledged keys the delete client has not picked yet, in the order they were acknowledged (a
        #: delete picks one at random and takes it out, so no pass over every key is needed per delete).
        self.live: list[int] = []
        self.flush_at_s: list[float] = []

    def start(self) -> None:
        """Start every node, the clients, the faults, the final flush and the audit."""
        env = self.sim.env
        self.rootcoord.start()
        self.timetick.start()
        for p in self.proxies:
            p.start()
        env.process(self._create_collection())
        if self.crash_step:
            self.datanode.crash_at_step = self.crash_step
        if self.crash_at_s:
            self.sim.at(self.crash_at_s * 1000.0, lambda: self.datanode.kill("crash"))
        if self.crash_at_s or self.crash_step:
            env.process(self._restarter())
        for p in self.proxies:
            env.process(self._inserts(p))
        if self.deletes_per_s:
            env.process(self._deletes(self.proxies[0]))
        for t in self.flush_at_s:
            self.sim.at(t * 1000.0, lambda: env.process(self._flush("client-0")))
        env.process(self._final())

    def _create_collection(self):
        """``CreateCollection``: a DDL timestamp, the CreateCollection message in every pchannel (its positions
        are the collection's start positions), ``WatchChannels`` on DataCoord, then the DataNode watches."""
        env, rec, rc = self.sim.env, self.sim.recorder, self.rootcoord
        yield env.timeout(COLLECTION_CREATE_MS)
        ts, _ = yield from self.sim.call("client-0", rc.name, lambda: rc.handle_alloc_timestamp(1, "client-0"))
        starts = []
        for ch in self.pchannels:
            msg_id = self.broker.produce(ch, CreateCollectionMsg(timestamp=ts, collection_id=COLLECTION_ID))
            rec.emit("mq.produce", rc.name, ts=ts, channel=ch, msg_id=msg_id, msg_type=MsgType.CREATE_COLLECTION,
                     begin_ts=ts, end_ts=ts, count=0)
            starts.append((ch, msg_id))
        stored = self.datacoord.server.watch_channels(COLLECTION_ID, self.collection.vchannels, starts, ts,
                                                      partitions=(PARTITION_ID,))
        for pos in stored:
            rec.emit("datacoord.channel_cp", self.datacoord.name, peer="WatchChannels", vchannel=pos.channel_name,
                     ts=pos.timestamp, msg_id=pos.msg_id, detail={"saved": True})
        self.datanode.start([(COLLECTION_ID, v) for v in self.collection.vchannels])

    # ------------------------------------------------------------------------------ clients

    def _inserts(self, proxy: ProxyNode):
        env = self.sim.env
        rng = self.sim.rng(f"clients/{proxy.name}")
        rate = self.inserts_per_s / len(self.proxies) / 1000.0
        if rate <= 0:
            return
        yield env.timeout(WORKLOAD_START_MS)
        next_pk = 0
        while env.now < self.workload_ms:
            yield env.timeout(rng.expovariate(rate))
            if env.now >= self.workload_ms or not proxy.alive:
                continue
            rows = rng.randint(1, 8)
            pks = [proxy.server_id * 10**9 + next_pk + k for k in range(rows)]
            next_pk += rows
            self.sim.spawn(self._insert(proxy, pks))  # nothing waits for a request's end

    def _insert(self, proxy: ProxyNode, pks: list[int], task_ms: float | None = None):
        ts = yield from proxy.insert(self.collection, pks, task_ms=task_ms)
        rec = self.sim.recorder
        if ts is None:
            rec.emit("client.insert", "client-0", peer=proxy.name, count=len(pks), error="insert failed")
            return
        self.live.extend(pks)
        rec.emit("client.insert", "client-0", peer=proxy.name, ts=ts, count=len(pks), detail={"pks": pks})

    def _deletes(self, proxy: ProxyNode):
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

    def _delete(self, proxy: ProxyNode, pks: list[int]):
        ts = yield from proxy.delete(self.collection, pks)
        rec = self.sim.recorder
        if ts is None:
            rec.emit("client.delete", "client-0", peer=proxy.name, count=len(pks), error="delete failed")
            return
        rec.emit("client.delete", "client-0", peer=proxy.name, ts=ts, count=len(pks), detail={"pks": pks})

    def _flush(self, client: str):
        """The client's flush of the collection; whether it completed."""
        return (yield from self.flush_and_wait(client, COLLECTION_ID)) is not None

    def _restarter(self):
        env = self.sim.env
        node = self.datanode
        while True:
            yield env.timeout(100.0)
            if not node.alive:
                break
        node.crash_at_step = None
        if self.standby is None:
            yield env.timeout(self.restart_after_s * 1000.0)
            node.restart()
            return
        yield env.timeout(self.sim.config.tso.session_ttl_ns / 1e6)
        self.datacoord.take_over(node, self.standby)

    def _final(self):
        """After the workload: flush, wait until flushed, then audit the binlogs."""
        env = self.sim.env
        yield env.timeout(self.workload_ms + 500.0)
        flushed = yield from self._flush("client-0")
        if flushed:
            self._audit()

    def _audit(self) -> None:
        """Read every segment's binlogs back from the object store (as a QueryNode loading it would)."""
        rec = self.sim.recorder
        server = self.datacoord.server
        for segment in sorted(server.meta.segments.values(), key=lambda s: s.id):
            if segment.state == SegmentState.DROPPED:
                continue
            pks, _, deleted = self.read_segment(segment)
            rec.emit("storage.audit", "audit", segment=segment.id, vchannel=segment.insert_channel, count=len(pks),
                     detail={"state": segment.state, "level": segment.level, "rows_in_meta": segment.num_of_rows,
                             "pks": sorted(pks), "deleted": sorted(deleted)})
        for node in (self.datanode, self.standby):
            if node is not None:
                rec.emit("datanode.steps", node.name, count=node.steps)


#: Every flush scenario takes every knob, so a learner can add a fault to any of them (``--option crash_at_s=20``):
#: the workload, then the faults (a DataCoord RPC failure rate, the object store's latency per write, a DataNode
#: crash at a simulated time or at its N-th step boundary, and how long it stays down, or ``takeover``: it stays
#: down and a second DataNode takes its channels once its session expired).
OPTIONS = {"proxies": 1, "inserts_per_s": 200.0, "deletes_per_s": 5.0, "workload_s": 30.0,
           "rpc_failure_rate": 0.0, "store_latency_ms": 5.0, "crash_at_s": 0.0, "crash_step": 0,
           "restart_after_s": 4.0, "takeover": False}


def _cluster(sim: Simulation, flush_at_s=(), **options) -> FlushCluster:
    cluster = FlushCluster(sim, **options)
    cluster.flush_at_s = list(flush_at_s)
    return cluster


def _basics(sim: Simulation, **options) -> None:
    _cluster(sim, **options).start()


def _manual(sim: Simulation, **options) -> None:
    _cluster(sim, flush_at_s=(12.0,), **options).start()


def _rpc_failures(sim: Simulation, **options) -> None:
    _cluster(sim, **options).start()


def _crash(sim: Simulation, **options) -> None:
    _cluster(sim, flush_at_s=(10.0,), **options).start()


def _during_sync(sim: Simulation, **options) -> None:
    _cluster(sim, flush_at_s=(10.0,), **options).start()


def _etcd_outage(sim: Simulation, **options) -> None:
    cluster = _cluster(sim, **options)
    cluster.datacoord.outage = (9_500.0, 10_500.0)  # covers the checkpoint updater's first tick at 10 s
    cluster.start()


def _flush_ts_boundary(sim: Simulation, **options) -> None:
    # 10.05 s is between the proxies' and rootcoord's 100 ms tick grids, so their allocations stay clear of it
    cluster = _cluster(sim, flush_at_s=(10.05,), **options)
    proxy = cluster.proxies[0]
    fired = []

    def right_after_flush_ts(flush_ts: int) -> None:
        # An insert whose timestamp is allocated right after flushTs and whose task runs 400 ms: while it is
        # pending, its proxy reports ts - 1 = flushTs for the pchannel, so a time tick lands exactly on flushTs.
        if fired:
            return
        fired.append(flush_ts)
        sim.env.process(cluster._insert(proxy, [7 * 10**9 + k for k in range(4)], task_ms=400.0))

    cluster.datacoord.on_flush_ts = right_after_flush_ts
    cluster.start()


#: The DataNode's machine memory in ``flush-stuck-memory-sync``: at forceSyncWatermark 0.5 the memory check
#: force-syncs as soon as the buffers hold 1 MiB (about what ``--param datanode.force_sync_watermark=0.0001``
#: does on the default 8 GiB machine).
SMALL_MEMORY_MB = 2.0


def _stuck_memory_sync(sim: Simulation, **options) -> None:
    _cluster(sim, memory_mb=SMALL_MEMORY_MB, **options).start()


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
        ("flush", "timetick", "tso"), options={**OPTIONS, "crash_at_s": 26.0, "restart_after_s": 2.0},
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
        ("flush", "timetick", "tso"), options={**OPTIONS, "crash_at_s": 26.0, "takeover": True},
    ),
    Scenario(
        "checkpoint-during-sync", "A slow object store (3 s per write) and a crash right after a flush: run it "
        "with the checkpoint_ignores_syncing_segments switch.", 70.0, _during_sync,
        "A flush at 10 s cuts syncs that take seconds to write. While they are in flight the channel checkpoint "
        "must stay at their start. With the switch it jumps to the consumed position, DataCoord stores it, the "
        "DataNode crashes at 11 s, and the restarted node seeks past rows that never reached a binlog.",
        ("flush", "timetick", "tso"),
        options={**OPTIONS, "store_latency_ms": 3000.0, "crash_at_s": 11.0, "restart_after_s": 2.0},
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

IDLE_COLLECTION_FIRST_ID = 200


class ManyVchannelsCluster(FlushCluster):
    """A flush cluster whose DataNode also watches idle collections of one shard each (alternating pchannels),
    ``vchannels`` in all: every vchannel has a checkpoint for the updater, written or not."""

    def __init__(self, sim: Simulation, vchannels: int = 300, **options):
        if vchannels < PCHANNELS:
            raise ValueError(f"vchannels must be at least {PCHANNELS} (the written collection's shards), got "
                             f"{vchannels}; use vchannels=300 for example")
        if vchannels - PCHANNELS > 999 - IDLE_COLLECTION_FIRST_ID:
            raise ValueError(f"vchannels must be at most {999 - IDLE_COLLECTION_FIRST_ID + PCHANNELS}, got {vchannels}")
        super().__init__(sim, **options)
        # three-digit ids from 200: no id is a substring of another's vchannel name (groupingMsgs routes DDL so)
        self.idle = [(IDLE_COLLECTION_FIRST_ID + i, self.pchannels[i % PCHANNELS])
                     for i in range(vchannels - PCHANNELS)]

    def _create_collection(self):
        """Collection 100 as in every flush scenario, then the idle ones, which the DataNode watches too."""
        yield from super()._create_collection()
        watched: list[tuple[int, str]] = []
        rc = self.rootcoord
        for collection_id, pchannel in self.idle:
            ts, _ = yield from self.sim.call("client-0", rc.name, lambda: rc.handle_alloc_timestamp(1, "client-0"))
            msg_id = self.broker.produce(pchannel, CreateCollectionMsg(timestamp=ts, collection_id=collection_id))
            vchannel = get_virtual_channel(pchannel, collection_id, 0)
            self.datacoord.server.watch_channels(collection_id, [vchannel], [(pchannel, msg_id)], ts)
            watched.append((collection_id, vchannel))
        self.datanode.watch_channels(watched)


class DropCollectionCluster(FlushCluster):
    """A flush cluster whose client stops writing and drops the collection at ``drop_at_s``: rootcoord writes
    DropCollection into every pchannel. No final flush (nothing is left to flush) and so no audit."""

    def __init__(self, sim: Simulation, drop_at_s: float = 20.0, stop_at_s: float = 0.0, **options):
        if not drop_at_s > 0:
            raise ValueError(f"drop_at_s must be positive, got {drop_at_s}; use drop_at_s=20 for example")
        if stop_at_s < 0:
            raise ValueError(f"stop_at_s must not be negative, got {stop_at_s}; use stop_at_s=25, or 0 for no stop")
        super().__init__(sim, **options)
        self.drop_at_ms = drop_at_s * 1000.0
        self.workload_ms = min(self.workload_ms, self.drop_at_ms)
        self.stop_at_ms = stop_at_s * 1000.0

    def start(self) -> None:
        """As every flush cluster, plus the DataNode's graceful stop at ``stop_at_s`` (0: none)."""
        super().start()
        if self.stop_at_ms:
            self.sim.at(self.stop_at_ms, self.datanode.stop)

    def _final(self):
        """``DropCollection``: a DDL timestamp, then the DropCollection message in every pchannel."""
        env, rec, rc = self.sim.env, self.sim.recorder, self.rootcoord
        yield env.timeout(self.drop_at_ms)
        ts, _ = yield from self.sim.call("client-0", rc.name, lambda: rc.handle_alloc_timestamp(1, "client-0"))
        for ch in self.pchannels:
            msg_id = self.broker.produce(ch, DropCollectionMsg(timestamp=ts, collection_id=COLLECTION_ID))
            rec.emit("mq.produce", rc.name, ts=ts, channel=ch, msg_id=msg_id, msg_type=MsgType.DROP_COLLECTION,
                     begin_ts=ts, end_ts=ts, count=0)


def _many_vchannels(sim: Simulation, vchannels: int = 300, **options) -> None:
    ManyVchannelsCluster(sim, vchannels, **options).start()


def _drop_collection(sim: Simulation, drop_at_s: float = 20.0, stop_at_s: float = 0.0, **options) -> None:
    DropCollectionCluster(sim, drop_at_s, stop_at_s, **options).start()


SCENARIOS = SCENARIOS + (
    Scenario(
        "flush-sync-policies", "20 inserts/s never fill a buffer: with syncPeriod at 5 s (Milvus: 600 s) stale "
        "buffers sync; try --option memory_mb=2 for the memory check.", 40.0, _basics,
        "At 20 inserts/s a segment's 16 MiB buffer would take minutes to fill, so the full-buffer policy never "
        "fires. The stale-buffer policy syncs a buffer whose oldest row is more than dataNode.segment.syncPeriod "
        "older than the pack just consumed (plus a jitter below 10 %, drawn per buffer and pack): with "
        "sync_period_s=5 every buffer goes out about every 5 s of message time. The memory check runs every 3 s: when "
        "the buffers hold at least forceSyncWatermark (0.5) of the node's memory, it syncs the oldest buffer of the "
        "largest channel until they hold less: with the model's 8 GiB node that is 4 GiB, and memory_mb=2 makes it "
        "1 MiB (add sync_period_s=600 to see the memory check alone).", ("flush", "timetick", "tso"),
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
        "its periodic update (every 60 s of message time) is due at about 60 s: with --option drop_at_s=100 (after "
        "the run) it goes out, here it does not. With --option stop_at_s=25 the DataNode stops gracefully at 25 s: "
        "each flowgraph gets a close message, on which the ttNode submits the checkpoint once more unless its "
        "channel was dropped, and the checkpoint updater closes right after without sending it. Simplification: the "
        "DataNode does not call DropVirtualChannel, so DataCoord keeps the channels assigned.",
        ("flush", "timetick", "tso"), options={**OPTIONS, "drop_at_s": 20.0, "stop_at_s": 0.0},
    ),
)
