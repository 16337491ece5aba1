"""The few Milvus protobuf messages that cross component boundaries, as plain dataclasses.

Mirrors ``pkg/proto/commonpb`` (``MsgBase``, ``MsgType``), ``pkg/proto/msgpb`` (``MsgPosition``) and
``pkg/proto/internalpb`` (``ChannelTimeTickMsg``). Only the fields the modelled mechanisms read are
kept. Simplification: message ids are integers (a position in an append-only pchannel log) rather than
the opaque byte strings of Pulsar/Kafka/RocksMQ.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
