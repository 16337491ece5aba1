"""What every simulated cluster with a DataNode shares: the run's object store, and the collection whose rows go
to DataCoord's segments. :mod:`~milvus_edu.cluster.builder` wires them with rootcoord, DataCoord and the DataNodes.
"""

from __future__ import annotations

from ..sim.kernel import Simulation
from ..storage.objectstore import RUN_OBJECTS_DIR, RUN_OBJECTS_MARKER, ChunkManager
from .data import DataCoordNode
from .dml import Collection

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
