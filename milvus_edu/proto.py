"""The few Milvus protobuf messages that cross component boundaries, as plain dataclasses.

Mirrors ``commonpb`` (``MsgBase``, ``MsgType``, ``ConsistencyLevel``) and ``msgpb`` (``MsgPosition``) of
``github.com/milvus-io/milvus-proto/go-api/v2`` (v2.5.24 in 2.5's ``go.mod``) and ``pkg/proto/internalpb``
(``ChannelTimeTickMsg``). Only the fields the modelled mechanisms read are kept. Simplification: message ids are
integers (a position in an append-only pchannel log) rather than the opaque byte strings of Pulsar/Kafka/RocksMQ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


#: ``common.AllPartitionsID`` (pkg/common/common.go): the partition a delete that names none carries, and the
#: partition filter that matches every partition.
ALL_PARTITIONS_ID = -1


class MsgType:
    """``commonpb.MsgType`` names used by the model (strings, so run logs stay readable)."""

    INSERT = "Insert"
    DELETE = "Delete"
    TIME_TICK = "TimeTick"
    CREATE_COLLECTION = "CreateCollection"
    DROP_COLLECTION = "DropCollection"
    CREATE_PARTITION = "CreatePartition"
    DROP_PARTITION = "DropPartition"


@dataclass(frozen=True)
class MsgBase:
    """``commonpb.MsgBase``: what every message carries."""

    msg_type: str
    timestamp: int = 0
    source_id: int = 0


@dataclass(frozen=True)
class MsgPosition:
    """``msgpb.MsgPosition``: where a consumer stands in a channel.

    ``msg_id`` is the id of a message in the channel's log (``None`` when unknown, as an empty MsgID
    in Milvus); ``timestamp`` is the time tick the position is stamped with.
    """

    channel_name: str
    msg_id: int | None
    timestamp: int
    msg_group: str = ""


@dataclass(frozen=True)
class ChannelTimeTickMsg:
    """``internalpb.ChannelTimeTickMsg``: a proxy's (or the DDL source's) report to rootcoord.

    ``timestamps[i]`` is the minimum unfinished timestamp on ``channel_names[i]``;
    ``default_timestamp`` applies to every channel not listed.
    """

    base: MsgBase
    channel_names: tuple[str, ...] = field(default_factory=tuple)
    timestamps: tuple[int, ...] = field(default_factory=tuple)
    default_timestamp: int = 0


class SegmentState:
    """``commonpb.SegmentState``: a segment's life, as strings so run logs stay readable."""

    NOT_EXIST = "NotExist"
    GROWING = "Growing"
    SEALED = "Sealed"
    FLUSHED = "Flushed"
    FLUSHING = "Flushing"
    DROPPED = "Dropped"


class SegmentLevel:
    """``datapb.SegmentLevel``: L0 holds only deletes of a partition; L1 is a normal segment."""

    L0 = "L0"
    L1 = "L1"


@dataclass(frozen=True)
class Binlog:
    """``datapb.Binlog``: one file written by a sync (``log_path`` empty once DataCoord stored the id)."""

    entries_num: int
    timestamp_from: int
    timestamp_to: int
    log_path: str = ""
    log_size: int = 0
    log_id: int = 0
    memory_size: int = 0


@dataclass(frozen=True)
class FieldBinlog:
    """``datapb.FieldBinlog``: the binlogs of one field (for delta logs, field id 0 of the pk)."""

    field_id: int
    binlogs: tuple[Binlog, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class SegmentInfo:
    """``datapb.SegmentInfo``: DataCoord's record of a segment (the fields the models read).

    ``start_position`` is where the segment's first row was consumed; ``dml_position`` is the
    checkpoint of its last sync (``SaveBinlogPaths``' ``CheckPoints``): rows at or before its
    timestamp are in the binlogs.
    """

    id: int
    collection_id: int
    partition_id: int
    insert_channel: str
    num_of_rows: int = 0
    state: str = SegmentState.GROWING
    level: str = SegmentLevel.L1
    start_position: MsgPosition | None = None
    dml_position: MsgPosition | None = None
    binlogs: tuple[FieldBinlog, ...] = field(default_factory=tuple)
    statslogs: tuple[FieldBinlog, ...] = field(default_factory=tuple)
    deltalogs: tuple[FieldBinlog, ...] = field(default_factory=tuple)
    dropped_at: int = 0
    is_importing: bool = False


@dataclass(frozen=True)
class CheckPoint:
    """``datapb.CheckPoint``: a segment's consumed position as of a sync, with its row count."""

    segment_id: int
    position: MsgPosition | None
    num_of_rows: int


@dataclass(frozen=True)
class SegmentStartPosition:
    """``datapb.SegmentStartPosition``: where a segment started, reported once by the DataNode."""

    segment_id: int
    start_position: MsgPosition


@dataclass(frozen=True)
class SaveBinlogPathsRequest:
    """``datapb.SaveBinlogPathsRequest``: what a sync reports to DataCoord (``brokerMetaWriter.UpdateSync``)."""

    segment_id: int
    collection_id: int
    partition_id: int
    channel: str
    field2_binlog_paths: tuple[FieldBinlog, ...] = field(default_factory=tuple)
    field2_statslog_paths: tuple[FieldBinlog, ...] = field(default_factory=tuple)
    deltalogs: tuple[FieldBinlog, ...] = field(default_factory=tuple)
    check_points: tuple[CheckPoint, ...] = field(default_factory=tuple)
    start_positions: tuple[SegmentStartPosition, ...] = field(default_factory=tuple)
    flushed: bool = False
    dropped: bool = False
    seg_level: str = SegmentLevel.L1
    source_id: int = 0


class ConsistencyLevel(IntEnum):
    """``commonpb.ConsistencyLevel``: how fresh a search or query must be (the numbers travel on the wire)."""

    STRONG = 0
    SESSION = 1
    BOUNDED = 2
    EVENTUALLY = 3
    CUSTOMIZED = 4

    @classmethod
    def parse(cls, value) -> "ConsistencyLevel":
        """A level from its name (``"Strong"``, ``"bounded"``...) or number; ``ValueError`` naming the valid ones."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                pass
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        names = ", ".join(level.name.capitalize() for level in cls)
        raise ValueError(f"unknown consistency level {value!r}; use one of {names}")
