"""What every simulated cluster with a DataNode shares: rootcoord with its time ticks into the pchannels, DataCoord
with its id allocator, the run's object store, and the collection whose rows go to DataCoord's segments.

Each lesson that needs a DataNode builds its cluster on :class:`ControlPlane` and adds its proxies, DataNodes and
whatever else it shows (``milvus_edu/mechanisms/<lesson>/scenarios.py``, ``cluster.py``).
"""

from __future__ import annotations

from ..datanode.syncmgr.pack import PK_FIELD_ID, TIMESTAMP_FIELD_ID
from ..datanode.syncmgr.storage_serializer import read_delta_log, read_insert_binlog
from ..mq import Broker, get_channel_name
from ..mq.names import chan_name_prefix
from ..sim.kernel import NodeClock, RPCError, Simulation
from ..storage.binlog import decompress_bin_logs
from ..storage.objectstore import RUN_OBJECTS_DIR, RUN_OBJECTS_MARKER, ChunkManager
from .data import DataCoordNode, IdAllocator
from .dml import Collection, RootCoordTimeTick
from .rootcoord import RootCoordNode

#: Pchannels of a cluster with a DataNode (``rootCoord.dmlChannelNum`` is 16 in Milvus; two keep a lesson readable).
PCHANNELS = 2
ROW_BYTES = 3072  # a 768-dimensional float32 vector per row


class SegmentCollection(Collection):
    """The collection as the proxies see it: rows go to the segment DataCoord assigns (``AssignSegmentID``)."""

    def __init__(self, collection_id: int, vchannels: list[str], datacoord: DataCoordNode, partition_id: int):
        super().__init__(collection_id, vchannels, partition_id)
        self.datacoord = datacoord
        self.payload_bytes_per_row = ROW_BYTES

    def segment_of(self, vchannel: str) -> int:
        """``AssignSegmentID`` for one request: the growing segment of (partition, vchannel)."""
        return self.datacoord.server.assign_segment_id(self.id, self.partition_id, vchannel, 1)


class RunStore:
    """The run's object store, opened at the first write: ``<run folder>/objects/a-bucket``, or in memory.

    The run folder is known only once the run starts (``Simulation.out_dir``), after the scenario is
    built, so the bucket is opened lazily.
    """

    def __init__(self, sim: Simulation):
        self.sim = sim
        self._cm: ChunkManager | None = None

    @property
    def chunk_manager(self) -> ChunkManager:
        """The bucket (opened on first use)."""
        if self._cm is None:
            out = self.sim.out_dir
            if out is None:
                self._cm = ChunkManager.from_uri("mock://")
            else:
                objects = out / RUN_OBJECTS_DIR
                objects.mkdir(exist_ok=True)
                (objects / RUN_OBJECTS_MARKER).write_text("binlogs written by a milvus-edu run; --force replaces this "
                                                      "folder\n", encoding="utf-8")
                self._cm = ChunkManager.local(objects)
        return self._cm

    @property
    def root_path(self) -> str:
        """``minio.rootPath``: ``files``."""
        return "files"

    def multi_write(self, objects) -> None:
        """``MultiWrite`` into the bucket."""
        self.chunk_manager.multi_write(objects)

    def read(self, key: str) -> bytes:
        """``Read`` from the bucket."""
        return self.chunk_manager.read(key)


class ControlPlane:
    """What every cluster with a DataNode shares: rootcoord (TSO and time ticks into the pchannels), DataCoord with
    its id allocator, the run's object store; a client's flush and reading a segment's binlogs back.

    Subclasses add proxies, DataNodes and whatever else their lesson needs.
    """

    def __init__(self, sim: Simulation, rpc_failure_rate: float = 0.0):
        self.sim = sim
        self.rootcoord = RootCoordNode(sim, "rootcoord-1", 1, NodeClock(sim.env))
        sim.add(self.rootcoord)
        self.broker = Broker()
        prefix = chan_name_prefix(sim.config.timetick)
        self.pchannels = [get_channel_name(prefix, i) for i in range(PCHANNELS)]
        for ch in self.pchannels:
            self.broker.create_channel(ch)
        self.timetick = RootCoordTimeTick(sim, self.rootcoord, self.broker, self.pchannels)
        self.ids = IdAllocator()
        self.datacoord = DataCoordNode(sim, self.ids, self.rootcoord, rpc_failure_rate)
        sim.add(self.datacoord)
        self.store = RunStore(sim)

    def flush_and_wait(self, client: str, collection_id: int, detail: dict | None = None):
        """``MilvusClient.flush``: Flush, then GetFlushState every 500 ms until flushed (as pymilvus waits).

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
            yield env.timeout(500.0)
            try:
                done = yield from self.sim.call(client, dc.name, lambda: dc.handle_get_flush_state(
                    res.segment_ids, collection_id, res.flush_ts))
            except RPCError:
                continue
            if done:
                rec.emit("client.flush", client, ts=res.flush_ts, count=len(res.segment_ids),
                         detail={"segments": list(res.segment_ids), "flushed": True, **extra})
                return res

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
