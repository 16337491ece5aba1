"""Simulated processes of the data path: DataCoord, DataNodes, the object store, the id allocator.

The Go goroutines become SimPy processes that call the pure components:

* DataCoord's RPC handlers (``SaveBinlogPaths``, ``UpdateChannelCheckpoint``, ``Flush``,
  ``GetFlushState``, ``GetDataVChanPositions``, ``ReportDataNodeTtMsgs``) and its ``flushCh`` loop
  (``postFlush``) -> :class:`DataCoordNode` over :class:`milvus_edu.datacoord.Server`;
* a DataNode's channel watch (``NewDataSyncService``: recovery info, metacache, flowgraph, buffer
  registration, dispatcher target at the seek position), its flowgraph per vchannel (one pack at a time),
  the sync manager's workers (one SimPy process per running :class:`SyncTask`), the checkpoint updater's
  loop (10 s ticker or a flush notification), the time-tick sender (every 500 ms), the memory check
  (every 3 s) and the ``FlushChannels`` / ``FlushSegments`` RPCs -> :class:`DataNodeNode`;
* rootcoord's ``AllocID`` -> :class:`IdAllocator` (one counter for segments, L0 segments and log ids).

Effects of the components (:mod:`milvus_edu.effects`) are performed by the nodes' interpreter
(:class:`~milvus_edu.cluster.node.Node`, with the performers below) with latency and faults; a crashed
DataNode simply stops driving them, so whatever the component did before the last completed effect stands
and nothing after it happened. Every effect of a sync task or of the checkpoint updater, every channel
watch and every pack its flowgraph takes is one *step boundary*: ``crash_at_step`` kills the node at the
n-th one (the exhaustive crash test walks them all).

Simplification: DataCoord never fails over and keeps its meta in the run's KV (etcd); channel
assignment is fixed by the scenario (a restarted DataNode watches its own channels again).
Simplification: a sync error that Go would ``panic`` on (retries exhausted) kills the DataNode; it is
restarted only when the scenario says so.
Simplification: after a DropCollection's drop syncs the DataNode does not call ``DropVirtualChannel``, so
DataCoord neither marks the channel checkpoint dropped nor releases the channel; the flowgraph stays in drop mode.
Simplification: the object store's latency is one draw per ``MultiWrite``; a failed write fails the
whole batch (Go retries the batch as a whole too).
Simplification: a sync's ``prefetchIDs`` is an ``AllocID`` RPC to rootcoord for just the ids it needs, from one
counter for the cluster; Go's DataNode ``IDAllocator`` fetches 200,000 ids per RPC (``idCountPerRPC``) and
serves a sync from that block, so its log ids come in per-node blocks and a sync rarely waits for rootcoord.
Simplification: a channel watch reads its segments' pk stats logs (``initMetaCache``) in no simulated time
and never fails to (Go's ``MultiRead`` waits for the object store and fails the watch on an error).
Simplification: the checkpoint updater's RPC deadline (``updateChannelCheckpointRPCTimeout``, 20 s) is not
enforced: an update sent to a paused DataCoord waits for it to resume (Go's fails after 20 s; its tasks stay
and go out with the next tick).
"""

from __future__ import annotations

from functools import partial


from ..config import MS, DataNodeParams
from ..datacoord import Catalog, Server
from ..datanode.checkpoint_updater import ChannelCheckpointUpdater
from ..datanode.metacache import MetaCache
from ..datanode.pipeline import DataSyncService, init_meta_cache
from ..datanode.syncmgr.meta_writer import BrokerMetaWriter
from ..datanode.syncmgr.storage_serializer import StorageSerializer, load_stats
from ..datanode.syncmgr.sync_manager import SyncManager
from ..datanode.syncmgr.task import SyncTask
from ..effects import (AllocIDs, AllocTimestamp, Call, FlushChannels, Parallel, SaveBinlogPaths, Sleep,
                       UpdateChannelCheckpoints, WriteObjects)
from ..datanode.writebuffer import BufferManager, WriteBuffer
from ..merr import MilvusError
from ..mq import Broker
from ..mq.names import to_physical_channel
from ..proto import MsgType, SegmentLevel
from ..sessionutil import retry_do_sleeps
from ..sim.kernel import NodeClock, RPCError, Simulation
from ..storage.binlog import get_log_id_from_binlog_path
from .consumer import STOP, PackConsumer
from .node import Node
from ..sim.ticker import Ticker, next_grid_tick

DATACOORD = "datacoord-1"
#: The ``retry.Do`` options ``TimeTickSender.sendReport`` uses: ``NewTimeTickSender(..., retry.Attempts(20),
#: retry.Sleep(100 ms))`` in ``DataNode.Start`` (internal/datanode/data_node.go); the cap stays retry.Do's 3 s.
REPORT_TIME_TICK_ATTEMPTS = 20
REPORT_TIME_TICK_SLEEP_NS = 100 * MS
#: The sync policies whose choices get a ``datanode.sync_policy`` event: the stale buffer's (``syncPeriod``, 600 s
#: of message time) and the memory check's, which no run with Milvus's defaults and a short workload reaches.
RARE_SYNC_POLICIES = ("buffer stale", "oldest buffers")
DATACOORD_SERVER_ID = 2


class IdAllocator:
    """rootcoord's ``AllocID``: consecutive ids from one counter (segments, L0 segments, log ids)."""

    def __init__(self, start: int = 10_000):
        self.next_id = start

    def alloc(self, count: int) -> int:
        """The first of ``count`` fresh ids."""
        first = self.next_id
        self.next_id += count
        return first


class ObjectStoreLatency:
    """How the object store answers: a fixed latency plus exponential jitter, and a failure rate."""

    def __init__(self, latency_ms: float = 5.0, jitter_ms: float = 5.0, failure_rate: float = 0.0):
        self.latency_ms = latency_ms
        self.jitter_ms = jitter_ms
        self.failure_rate = failure_rate


def _remote_error(exc: RPCError) -> Exception:
    """The Milvus error a remote handler raised (it travels back inside the RPC status), else the RPC error."""
    cause = exc.__cause__
    return cause if isinstance(cause, MilvusError) else exc


class DataCoordNode(Node):
    """DataCoord: the :class:`~milvus_edu.datacoord.Server` behind simulated RPCs.

    ``rpc_failure_rate``: the share of ``SaveBinlogPaths`` and ``UpdateChannelCheckpoint`` calls answered
    with an error (an etcd hiccup), drawn from DataCoord's own random stream.
    """

    PERFORMERS = {**Node.PERFORMERS, AllocTimestamp: "_perform_alloc_timestamp",
                  FlushChannels: "_perform_flush_channels"}

    def __init__(self, sim: Simulation, ids: IdAllocator, rootcoord, rpc_failure_rate: float = 0.0):
        super().__init__(sim, DATACOORD)
        self.ids = ids
        self.rootcoord = rootcoord
        self.clock = NodeClock(sim.env)
        self.rng = sim.rng(self.name)
        self.rpc_failure_rate = rpc_failure_rate
        self.server = Server(Catalog(sim.kv), lambda: ids.alloc(1), now_ns=self.clock.now_ns,
                             server_id=DATACOORD_SERVER_ID)
        self.datanodes: dict[int, "DataNodeNode"] = {}
        #: ``(start_ms, end_ms)``: DataCoord's etcd is unavailable, every meta write fails meanwhile.
        self.outage: tuple[float, float] | None = None
        #: Called with flushTs as soon as ``Flush`` has it (a scenario may time a write against it).
        self.on_flush_ts = None

    def _maybe_fail(self, what: str) -> None:
        outage = self.outage
        if outage is not None and outage[0] <= self.sim.env.now < outage[1]:
            raise RuntimeError(f"{what} failed: etcdserver: request timed out")
        if self.rpc_failure_rate and self.rng.random() < self.rpc_failure_rate:
            raise RuntimeError(f"{what} failed: etcdserver: request timed out")

    # ------------------------------------------------------------------------------ RPC handlers

    def handle_save_binlog_paths(self, req, node_name: str):
        """``SaveBinlogPaths``; a flushed L1 report is followed by ``postFlush`` (the ``flushCh`` loop)."""
        rec = self.sim.recorder
        try:
            self._maybe_fail("SaveBinlogPaths")
            info = self.server.save_binlog_paths(req, req.source_id)
        except Exception as exc:
            rec.emit("datacoord.save_binlog_paths", self.name, peer=node_name, segment=req.segment_id,
                     vchannel=req.channel, error=str(exc))
            raise
        cp = req.check_points[0].position if req.check_points else None
        rows = sum(b.entries_num for fb in req.field2_binlog_paths[:1] for b in fb.binlogs)
        deletes = sum(b.entries_num for fb in req.deltalogs for b in fb.binlogs)
        rec.emit("datacoord.save_binlog_paths", self.name, peer=node_name, segment=req.segment_id,
                 vchannel=req.channel, ts=cp.timestamp if cp is not None else None,
                 msg_id=cp.msg_id if cp is not None else None, count=info.num_of_rows if info else None,
                 detail={"rows": rows, "deletes": deletes, "flushed": req.flushed, "dropped": req.dropped,
                         "level": req.seg_level, "state": info.state if info else "Dropped (ignored)",
                         "log_ids": sorted(b.log_id or get_log_id_from_binlog_path(b.log_path)
                                           for fb in req.field2_binlog_paths + req.deltalogs for b in fb.binlogs)})
        if info is not None and req.flushed and req.seg_level != SegmentLevel.L0:
            self.process(self._post_flush(req.segment_id))
        return info

    def _post_flush(self, segment_id: int):
        yield self.sim.env.timeout(0)
        try:
            info = self.server.post_flush(segment_id)
        except MilvusError as exc:
            self.sim.recorder.emit("datacoord.segment_state", self.name, segment=segment_id, error=str(exc))
            return
        self.sim.recorder.emit("datacoord.segment_state", self.name, segment=segment_id, vchannel=info.insert_channel,
                               count=info.num_of_rows, detail={"state": info.state, "why": "postFlush"})

    def handle_update_channel_checkpoint(self, node_id: int, node_name: str, positions):
        """``UpdateChannelCheckpoint`` (batch form): each position either stored or silently ignored."""
        rec = self.sim.recorder
        try:
            self._maybe_fail("UpdateChannelCheckpoint")
            saved = self.server.update_channel_checkpoint(node_id, positions=positions)
        except Exception as exc:
            rec.emit("datacoord.channel_cp", self.name, peer=node_name, count=len(positions), error=str(exc))
            raise
        stored = {p.channel_name for p in saved}
        for p in positions:
            rec.emit("datacoord.channel_cp", self.name, peer=node_name, vchannel=p.channel_name, ts=p.timestamp,
                     msg_id=p.msg_id, detail={"saved": p.channel_name in stored})

    def handle_report_tt(self, node_id: int, node_name: str, ticks: list[tuple[str, int]]):
        """``ReportDataNodeTtMsgs``: flushable sealed segments go back to the node as ``FlushSegments``."""
        for channel, ts in ticks:
            infos = self.server.handle_data_node_tt_msg(channel, ts, node_id)
            if infos:
                ids = [i.id for i in infos]
                self.sim.recorder.emit("datacoord.flush_segments", self.name, peer=node_name, vchannel=channel,
                                       ts=ts, count=len(ids), detail={"segments": ids})
                self.process(self._send_flush_segments(node_id, channel, ids))

    def _send_flush_segments(self, node_id: int, channel: str, segment_ids: list[int]):
        node = self.datanodes.get(node_id)
        if node is None:
            return
        try:
            yield Call(node.name, partial(node.handle_flush_segments, channel, segment_ids))
        except RPCError:
            return  # the next time tick after segmentFlushInterval asks again

    def flush(self, collection_id: int, client: str):
        """``Flush``: the server's flush (flushTs from rootcoord, seal, ``FlushChannels`` per DataNode), as effects
        this node performs; then its ``datacoord.flush`` event."""
        res = yield from self.server.flush(collection_id)
        self.sim.recorder.emit("datacoord.flush", self.name, peer=client, ts=res.flush_ts, count=len(res.segment_ids),
                               detail={"sealed": list(res.segment_ids), "flushed": list(res.flush_segment_ids)})
        return res

    def _perform_alloc_timestamp(self, effect: AllocTimestamp):
        """``allocator.AllocTimestamp``: an ``AllocTimestamp(1)`` RPC to rootcoord."""
        rc = self.rootcoord
        try:
            ts, _ = yield from self.sim.call(self.name, rc.name, partial(rc.handle_alloc_timestamp, 1, self.name))
        except RPCError as exc:
            raise _remote_error(exc)  # noqa: B904 - the remote error itself, as the Go caller sees it
        if self.on_flush_ts is not None:
            self.on_flush_ts(ts)
        return ts

    def _perform_flush_channels(self, effect: FlushChannels):
        """The ``FlushChannels`` RPC to the DataNode ``effect.node_id``."""
        node = self.datanodes[effect.node_id]
        try:
            return (yield from self.sim.call(self.name, node.name,
                                             partial(node.handle_flush_channels, effect.flush_ts, effect.channels)))
        except RPCError as exc:
            raise _remote_error(exc)  # noqa: B904 - the remote error itself, as the Go caller sees it

    def handle_flush(self, collection_id: int, client: str):
        """The ``Flush`` RPC handler: the steps of :meth:`flush`, which wait for rootcoord and the DataNodes."""
        return self.flush(collection_id, client)

    def handle_get_flush_state(self, segment_ids, collection_id: int, flush_ts: int):
        """``GetFlushState``."""
        return self.server.get_flush_state(segment_ids, collection_id, flush_ts)

    def take_over(self, dead: "DataNodeNode", heir: "DataNodeNode") -> None:
        """``ChannelManager.DeleteNode`` then the assignment of its channels to ``heir``.

        Called once ``dead``'s session has expired (DataCoord watches the DataNodes' session keys): its
        channels are released and ``heir`` watches them, recovering from DataCoord's seek positions.
        """
        released = self.server.channel_manager.remove_node(dead.server_id)
        self.sim.recorder.emit("datacoord.reassign", self.name, peer=heir.name, count=len(released),
                               detail={"from": dead.name, "channels": released})
        heir.start([(cid, v) for cid, v in dead.channels if v in released])

    def handle_recovery(self, channel: str):
        """``GetDataVChanPositions`` + ``GetSegmentInfo`` of its flushed and unflushed segments, asked as the
        DataNode's broker asks (``dataCoordBroker.GetSegmentInfo``: ``IncludeUnHealthy`` true)."""
        vinfo = self.server.get_data_vchan_positions(channel)
        flushed = self.server.get_segment_info(vinfo.flushed_segment_ids, include_unhealthy=True).infos
        unflushed = self.server.get_segment_info(vinfo.unflushed_segment_ids, include_unhealthy=True).infos
        return vinfo, tuple(flushed), tuple(unflushed)


class DataNodeNode(PackConsumer, Node):
    """One DataNode: watched vchannels, their flowgraphs, write buffers, syncs and checkpoints.

    ``crash_at_step``: kill the node just before its n-th step boundary (1-based; see the module
    docstring); ``None`` never. ``incarnation`` counts restarts; every process of an older incarnation
    stops at its next step.
    """

    wake_on_start = True  # a restarted DataNode seeks behind the pchannel's end: read what is there at once

    SWITCHES = ("reset_flush_ts_inclusive", "checkpoint_ignores_syncing_segments", "skip_recovery_filter",
                "drop_failed_checkpoint_tasks")
    COMPONENT = "the DataNode"
    PERFORMERS = {**Node.PERFORMERS, AllocIDs: "_perform_alloc_ids", WriteObjects: "_perform_write_objects",
                  SaveBinlogPaths: "_perform_save_binlog_paths",
                  UpdateChannelCheckpoints: "_perform_update_channel_checkpoints"}
    #: The effects that are step boundaries (a sync task's and the checkpoint updater's), with the name a crash
    #: there gives in the run log; the retry's back-off keeps the name of the effect it was before the one
    #: ``Sleep`` of :mod:`milvus_edu.effects`.
    STEP_BOUNDARIES = {AllocIDs: "AllocIDs", WriteObjects: "WriteObjects", SaveBinlogPaths: "SaveBinlogPaths",
                       Sleep: "RetrySleep", Parallel: "UpdateChannelCheckpoint"}

    def __init__(self, sim: Simulation, name: str, server_id: int, broker: Broker, datacoord: DataCoordNode,
                 store, ids: IdAllocator, rootcoord, store_latency: ObjectStoreLatency | None = None,
                 memory_bytes: int = 8 << 30, params: DataNodeParams | None = None):
        super().__init__(sim, name)
        self.server_id = server_id
        self.broker = broker
        self.datacoord = datacoord
        self.store = store
        self.ids = ids
        self.rootcoord = rootcoord
        self.store_latency = store_latency or ObjectStoreLatency()
        self.memory_bytes = memory_bytes
        #: The DataNode's own parameters when a scenario option sets them, else the run's ``datanode`` group.
        self.params_override = params
        self.clock = NodeClock(sim.env)
        self.rng = sim.rng(name)
        self.steps = 0
        self.crash_at_step: int | None = None
        self.channels: list[tuple[int, str]] = []  # (collection id, vchannel) this node watches
        datacoord.datanodes[server_id] = self
        datacoord.server.channel_manager.add_node(server_id)
        self._fresh_state()

    def _fresh_state(self) -> None:
        switches = self.sim.config.switches
        params = self.params_override or self.sim.config.datanode
        self.params = params
        self.manager = BufferManager(params, reset_flush_ts_inclusive=switches.reset_flush_ts_inclusive)
        self.updater = ChannelCheckpointUpdater(params,
                                                drop_failed_checkpoint_tasks=switches.drop_failed_checkpoint_tasks)
        self.sync_manager = SyncManager(params.max_parallel_sync_mgr_tasks)
        self.services: dict[str, DataSyncService] = {}
        self.metacaches: dict[str, MetaCache] = {}
        self.reset_consumer()
        self.latest_ts: dict[str, int] = {}
        self.sent_ts: dict[str, int] = {}
        self.notify = self.sim.env.event()

    def switches_changed(self) -> None:
        """Hand the run's current switches to the components that copied one when they were built: the buffer
        manager, the checkpoint updater, each flowgraph's ddNode and each channel's write buffer."""
        switches = self.sim.config.switches
        self.manager.reset_flush_ts_inclusive = switches.reset_flush_ts_inclusive
        self.updater.drop_failed_checkpoint_tasks = switches.drop_failed_checkpoint_tasks
        for service in self.services.values():
            service.dd_node.skip_recovery_filter = switches.skip_recovery_filter
        for vchannel in self.manager.channels:
            self.manager.get_buffer(vchannel).checkpoint_ignores_syncing_segments = \
                switches.checkpoint_ignores_syncing_segments

    # ------------------------------------------------------------------------------ lifecycle

    def _crashed_at_step(self, what: str) -> bool:
        """Count a step boundary; crash here if asked (``crash_at_step``). True means: the node just died."""
        self.steps += 1
        if self.crash_at_step is not None and self.steps == self.crash_at_step:
            self.kill(f"crash at step {self.steps} ({what})")
            return True
        return False

    def perform(self, effect):
        """Every effect of a sync task or of the checkpoint updater is a step boundary: counted, and a crash
        there (``crash_at_step``) stops the work before the effect is performed."""
        what = self.STEP_BOUNDARIES.get(type(effect))
        if what is not None and self._crashed_at_step(what):
            return iter(())  # nothing performed: the node is gone, and its work closes at once
        return super().perform(effect)

    def start(self, channels: list[tuple[int, str]]) -> None:
        """Watch ``channels`` and start the node's loops."""
        self.channels = list(channels)
        for collection_id, vchannel in self.channels:
            self.datacoord.server.channel_manager.watch(vchannel, self.server_id, collection_id)
        self.process(self._watch_all())
        self.process(self._updater_loop())
        self.process(self._tt_sender_loop())
        self.process(self._memory_loop())

    def watch_channels(self, channels: list[tuple[int, str]]) -> None:
        """Watch more channels once started (the vchannels of a collection created later)."""
        new = [c for c in channels if c not in self.channels]
        self.channels += new
        for collection_id, vchannel in new:
            self.datacoord.server.channel_manager.watch(vchannel, self.server_id, collection_id)
        self.process(self._watch_each(new))

    def stop(self) -> None:
        """``DataNode.Stop``: ``ClearFlowgraphs`` closes every flowgraph gracefully, so each ttNode gets the close
        message and, unless its channel was dropped, hands the checkpoint to the updater once more ("flowgraph is
        closing, force update channel CP"); the node's other parts close right after, the checkpoint updater among
        them, which sends nothing more: those tasks are left unsent, as are buffers still in memory.

        Simplification: the stop takes no simulated time, so a sync in flight is lost (Go's sync manager
        ``Close`` lets running tasks finish first).
        """
        if not self.alive:
            return
        rec = self.sim.recorder
        for vchannel in sorted(self.services):
            sub = self.services[vchannel].operate(None).submission
            if sub is not None and sub.position is not None:
                rec.emit("datanode.checkpoint", self.name, vchannel=vchannel, ts=sub.position.timestamp,
                         msg_id=sub.position.msg_id, tick_ts=self.latest_ts.get(vchannel),
                         detail={"flush": False, "periodic": False, "closing": True})
        unsent = {t.channel: t.position.timestamp for t in self.updater.tasks}
        self._end_life()
        rec.emit("datanode.stop", self.name, count=len(unsent), detail={"unsent": unsent})

    def restart(self) -> None:
        """A new process on the same node id: fresh memory, the same channels watched again (recovery)."""
        self._new_life()
        self._fresh_state()
        self.sim.recorder.emit("fault.restart", self.name,
                               detail={"server_id": self.server_id, "incarnation": self.incarnation})
        self.start(self.channels)

    # ------------------------------------------------------------------------------ watch and consume

    def _watch_all(self):
        yield from self._watch_each(self.channels)

    def _watch_each(self, channels: list[tuple[int, str]]):
        for collection_id, vchannel in channels:
            yield from self._watch(collection_id, vchannel)

    def _watch(self, collection_id: int, vchannel: str):
        """``NewDataSyncService``: recovery info, metacache, flowgraph, then the buffer registration."""
        dc = self.datacoord
        try:
            vinfo, flushed, unflushed = yield Call(dc.name, partial(dc.handle_recovery, vchannel))
        except RPCError as exc:
            self.kill(f"watch {vchannel} failed: {exc}")
            return
        if self._crashed_at_step("watch"):
            return
        metacache = init_meta_cache(collection_id, vchannel, self.params,
                                    partial(load_stats, self.store.read, root_path=self.store.root_path),
                                    flushed=flushed, unflushed=unflushed)
        service = DataSyncService(
            collection_id, vchannel, _Notifying(self, vchannel), self.updater, self.params, self.clock.now_ms,
            flushed=flushed, unflushed=unflushed, dropped_segment_ids=vinfo.dropped_segment_ids,
            skip_recovery_filter=self.sim.config.switches.skip_recovery_filter,
        )
        wb = WriteBuffer(vchannel, metacache, self.params, self.sim.rng(f"{self.name}/wb/{vchannel}"),
                         alloc_segment_id=lambda: self.ids.alloc(1),
                         checkpoint_ignores_syncing_segments=self.sim.config.switches.checkpoint_ignores_syncing_segments)
        self.manager.register(vchannel, wb)
        self.metacaches[vchannel] = metacache
        self.services[vchannel] = service
        seek = vinfo.seek_position
        pchannel = to_physical_channel(vchannel)
        self.sim.recorder.emit(
            "datanode.watch", self.name, vchannel=vchannel, channel=pchannel,
            ts=seek.timestamp if seek is not None else None, msg_id=seek.msg_id if seek is not None else None,
            detail={"flushed": [s.id for s in flushed], "unflushed": [s.id for s in unflushed],
                    "dropped": list(vinfo.dropped_segment_ids)})
        self.subscribe(pchannel, vchannel, seek)

    def on_pack(self, vchannel: str, pack):
        """The dispatcher hands a pack to the vchannel's flowgraph (unless the DataNode crashes at this step)."""
        if self._crashed_at_step("pack"):
            return STOP
        self._operate(vchannel, pack)

    def _operate(self, vchannel: str, pack) -> None:
        rec = self.sim.recorder
        service = self.services[vchannel]
        wb = self.manager.get_buffer(vchannel)
        was_dropped = service.tt_node.drop_mode
        result = service.operate(pack)
        if wb is not None:
            self._record_policy_choices(vchannel, wb, pack.end_ts)
        for m in result.filtered:
            rec.emit("datanode.filter", self.name, vchannel=vchannel, segment=m.segment_id, ts=m.end_ts(),
                     msg_id=m.position.msg_id if m.position is not None else None, count=m.num_rows())
        # the filtered messages are the pack's own objects: known by identity, not by ==, which compares every field
        # (rows and all) of each message with each filtered one (a third of a recovery run's time, all in replays)
        filtered = {id(m) for m in result.filtered}
        inserts = [m for m in pack.msgs if m.msg_type == MsgType.INSERT and id(m) not in filtered
                   and m.shard_name == vchannel]
        deletes = [m for m in pack.msgs if m.msg_type == MsgType.DELETE and m.shard_name == vchannel]
        end = pack.end_positions[0] if pack.end_positions else None
        if inserts or deletes:
            per_segment: dict[int, int] = {}
            for m in inserts:
                per_segment[m.segment_id] = per_segment.get(m.segment_id, 0) + m.num_rows()
            rec.emit("datanode.buffer", self.name, vchannel=vchannel, begin_ts=pack.begin_ts, end_ts=pack.end_ts,
                     msg_id=end.msg_id if end is not None else None, count=sum(per_segment.values()),
                     detail={"segments": {str(k): v for k, v in sorted(per_segment.items())},
                             "deletes": sum(m.num_rows() for m in deletes)})
        if result.written:  # the writeNode's ``timetickSender.Update`` with the end position's timestamp
            self.latest_ts[vchannel] = end.timestamp
        sub = result.submission
        if sub is not None and sub.position is not None:
            rec.emit("datanode.checkpoint", self.name, vchannel=vchannel, ts=sub.position.timestamp,
                     msg_id=sub.position.msg_id, tick_ts=pack.end_ts,
                     detail={"flush": sub.flush, "periodic": sub.periodic})
            if sub.flush:
                self._notify_updater()
        if service.tt_node.drop_mode and not was_dropped:
            drops = [p.segment_id for p in result.sync_packs if p.is_drop]
            rec.emit("datanode.drop", self.name, vchannel=vchannel, ts=pack.end_ts, count=len(drops),
                     detail={"segments": drops})
        for sync_pack in result.sync_packs:
            self._submit_sync(vchannel, sync_pack)

    def _record_policy_choices(self, vchannel: str, wb: WriteBuffer, ts: int | None, memory: dict | None = None) -> None:
        """Emit ``datanode.sync_policy`` for the choices of the policies a default run never reaches (the stale
        buffer's and the memory check's); the others show as the syncs they cut."""
        for reason, segments in wb.take_policy_choices():
            if reason in RARE_SYNC_POLICIES:
                self.sim.recorder.emit("datanode.sync_policy", self.name, vchannel=vchannel, ts=ts,
                                       count=len(segments), detail={"reason": reason, "segments": list(segments),
                                                                    **(memory or {})})

    # ------------------------------------------------------------------------------ syncs

    def _submit_sync(self, vchannel: str, pack) -> None:
        metacache = self.metacaches[vchannel]
        task = SyncTask(pack, metacache=metacache, serializer=StorageSerializer(metacache),
                        meta_writer=BrokerMetaWriter(self.server_id), chunk_manager_root=self.store.root_path)
        task.vchannel = vchannel
        self.sim.recorder.emit(
            "datanode.sync", self.name, vchannel=vchannel, segment=pack.segment_id, count=pack.batch_rows,
            begin_ts=pack.ts_from, end_ts=pack.ts_to,
            ts=pack.checkpoint.timestamp if pack.checkpoint is not None else None,
            msg_id=pack.checkpoint.msg_id if pack.checkpoint is not None else None,
            detail={"flush": pack.is_flush, "drop": pack.is_drop, "level": pack.level,
                    "deletes": pack.delete_data.row_count if pack.delete_data is not None else 0,
                    "start_ts": pack.start_position.timestamp if pack.start_position is not None else None})
        if self.sync_manager.submit(task):
            self.process(self._run_sync(task))

    def _run_sync(self, task: SyncTask):
        """One sync manager worker: the task's effects (performed by this node), then the write buffer's callback."""
        rec = self.sim.recorder
        error = None
        try:
            yield from task.run()
        except Exception as exc:  # noqa: BLE001 - a failed sync: Go's error handler panics
            error = exc
        wb = self.manager.get_buffer(task.vchannel)
        if wb is not None:
            wb.sync_done(task.pack, error)
        rec.emit("datanode.sync_done", self.name, vchannel=task.vchannel, segment=task.segment_id,
                 count=task.pack.batch_rows, error=str(error) if error is not None else None,
                 detail={"flush": task.pack.is_flush, "phase": task.phase})
        for nxt in self.sync_manager.finish(task):
            self.process(self._run_sync(nxt))
        if error is not None:
            self.kill(f"panic: sync of segment {task.segment_id} failed: {error}")

    def _perform_alloc_ids(self, effect: AllocIDs):
        """rootcoord's ``AllocID``: an RPC answered from the cluster's id counter."""
        return (yield from self.sim.call(self.name, self.rootcoord.name, partial(self.ids.alloc, effect.count)))

    def _perform_write_objects(self, effect: WriteObjects):
        """``MultiWrite``: the object store answers after its latency, or fails; a write whose writer died
        meanwhile never lands (nothing more of that life runs)."""
        life = self._life
        lat = self.store_latency
        yield self.sim.env.timeout(lat.latency_ms + (self.rng.expovariate(1.0 / lat.jitter_ms) if lat.jitter_ms else 0.0))
        if self._life != life:
            return None
        if lat.failure_rate and self.rng.random() < lat.failure_rate:
            raise OSError("object store: 503 Slow Down")
        self.store.multi_write(dict(effect.objects))
        return None

    def _perform_save_binlog_paths(self, effect: SaveBinlogPaths):
        """The ``SaveBinlogPaths`` RPC to DataCoord; DataCoord's Milvus error comes back as itself."""
        dc = self.datacoord
        try:
            return (yield from self.sim.call(self.name, dc.name,
                                             partial(dc.handle_save_binlog_paths, effect.request, self.name)))
        except RPCError as exc:
            raise _remote_error(exc) from None

    # ------------------------------------------------------------------------------ checkpoints

    def _notify_updater(self) -> None:
        if not self.notify.triggered:
            self.notify.succeed()

    def _updater_loop(self):
        """``ChannelCheckpointUpdater.Start``: the 10 s tick sends every task, a notification the flush tasks.

        The ticker is Go's ``time.Ticker``: it ticks on a fixed grid and holds at most one tick the loop has
        not taken, dropping the others. So after an update that outlasted the period (an RPC waiting on a
        paused DataCoord) one tick is taken at once and the next comes at the grid's next point, not one
        round per missed tick.
        """
        env = self.sim.env
        period = self.params.channel_checkpoint_update_tick_ns / MS
        next_tick = env.now + period
        while True:
            tick = env.timeout(max(0.0, next_tick - env.now))
            fired = yield tick | self.notify
            if self.notify in fired:
                self.notify = env.event()
                yield from self.updater.update_checkpoints(self.updater.take_flush_tasks())
            else:
                next_tick = next_grid_tick(next_tick, period, env.now)
                yield from self.updater.execute()

    def _perform_update_channel_checkpoints(self, effect: UpdateChannelCheckpoints):
        """One ``UpdateChannelCheckpoint`` RPC of a wave (a process of its own, so it lands even if the node dies
        meanwhile); its outcome is recorded either way."""
        dc = self.datacoord
        detail = {"positions": {p.channel_name: p.timestamp for p in effect.positions},
                  "tick_ms": self.params.channel_checkpoint_update_tick_ns / MS,
                  "timeout_ms": effect.timeout_ns / MS, "sent_ms": self.sim.env.now}
        try:
            yield from self.sim.call(self.name, dc.name,
                                     partial(dc.handle_update_channel_checkpoint, self.server_id, self.name,
                                             list(effect.positions)))
        except RPCError as exc:
            self.sim.recorder.emit("datanode.cp_rpc", self.name, count=len(effect.positions), error=str(exc),
                                   detail=detail)
            raise
        self.sim.recorder.emit("datanode.cp_rpc", self.name, count=len(effect.positions), detail=detail)

    # ------------------------------------------------------------------------------ RPCs to this node

    def handle_flush_channels(self, flush_ts: int, channels):
        """``FlushChannels``: every channel's write buffer gets ``flushTs`` (the first error aborts)."""
        for ch in channels:
            self.manager.flush_channel(ch, flush_ts)
            self.sim.recorder.emit("datanode.flush_ts", self.name, vchannel=ch, ts=flush_ts, detail={"set": True})

    def handle_flush_segments(self, channel: str, segment_ids: list[int]):
        """``FlushSegments``: seal the segments DataCoord found flushable (the sealed policy flushes them)."""
        self.manager.seal_segments(channel, segment_ids)
        self.sim.recorder.emit("datanode.seal", self.name, vchannel=channel, count=len(segment_ids),
                               detail={"segments": list(segment_ids)})

    # ------------------------------------------------------------------------------ background loops

    def _tt_sender_loop(self):
        """``TimeTickSender.work``: every ``dataNode.timetick.interval`` (500 ms), ``sendReport``: every channel
        whose writeNode buffered a pack since the last report that got through goes to DataCoord with the end
        timestamp of its latest pack, under ``retry.Do`` with the options ``DataNode.Start`` gives the sender (20
        attempts, 100 ms first back-off doubling to 3 s, a back-off after the last failure too: about 48 s in
        all). A report that still fails is only logged; its channels go again with the next one.

        The reports keep to the ticker's grid from the sender's start, as Go's ``time.Ticker`` does: a report
        slowed by its round trip or its retries does not move the next one, and a tick missed meanwhile is taken
        at once (one held, the rest dropped).
        Simplification: with no channel to report the RPC is not sent (Go sends an empty
        ``ReportDataNodeTtMsgs``, which DataCoord answers without doing anything).
        """
        env = self.sim.env
        ticker = Ticker(env, self.params.timetick_interval_ns / MS)
        dc = self.datacoord
        while True:
            yield ticker.next()
            ticks = [(ch, ts) for ch, ts in sorted(self.latest_ts.items()) if self.sent_ts.get(ch) != ts]
            if not ticks:
                continue
            for sleep_ns in retry_do_sleeps(REPORT_TIME_TICK_ATTEMPTS, REPORT_TIME_TICK_SLEEP_NS):
                try:
                    yield Call(dc.name, partial(dc.handle_report_tt, self.server_id, self.name, ticks))
                except RPCError:
                    yield env.timeout(sleep_ns / MS)
                    continue
                for ch, ts in ticks:
                    self.sent_ts[ch] = ts
                break

    def _memory_loop(self):
        """The buffer manager's memory check every ``dataNode.memory.checkInterval``."""
        env = self.sim.env
        period = self.params.memory_check_interval_ns / MS
        while True:
            yield env.timeout(period)
            if not self.params.force_sync_enable:
                continue
            buffers = {ch: self.manager.get_buffer(ch) for ch in self.manager.channels}
            held = sum(wb.memory_size() for wb in buffers.values())
            packs = self.manager.memory_check(self.memory_bytes)
            memory = {"buffered_bytes": held,
                      "watermark_bytes": int(self.memory_bytes * self.params.force_sync_watermark)}
            for ch, wb in buffers.items():
                self._record_policy_choices(ch, wb, self.latest_ts.get(ch), memory)
            for pack in packs:
                self._submit_sync(pack.channel_name, pack)


class _Notifying:
    """The buffer manager as the flowgraph sees it, telling the run log when a flush completes.

    Everything is the manager's; only ``notify_checkpoint_updated`` (the ttNode's callback after the
    checkpoint RPC) also records whether it reset the channel's ``flushTs``.
    """

    def __init__(self, node: DataNodeNode, vchannel: str):
        self._node = node
        self._vchannel = vchannel

    def __getattr__(self, name):
        return getattr(self._node.manager, name)

    def notify_checkpoint_updated(self, channel: str, ts: int) -> bool:
        wb = self._node.manager.get_buffer(channel)
        flush_ts = wb.get_flush_timestamp() if wb is not None else 0
        reset = self._node.manager.notify_checkpoint_updated(channel, ts)
        if reset:
            self._node.sim.recorder.emit("datanode.flush_ts", self._node.name, vchannel=channel, ts=flush_ts,
                                         tick_ts=ts, detail={"set": False, "checkpoint": ts})
        return reset
