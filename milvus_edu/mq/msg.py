"""The messages that travel on DML channels (``TsMsg``) and the packs a stream hands out (``MsgPack``).

Models ``pkg/mq/msgstream/msg.go`` and ``msgstream.go`` (Milvus 2.5): ``InsertMsg``, ``DeleteMsg``,
``TimeTickMsg``, ``CreateCollectionMsg``, ``DropCollectionMsg``, ``CreatePartitionMsg``,
``DropPartitionMsg``, ``MsgPack`` and ``isDMLMsg``.

Begin/end timestamps are the ones a consumer sees after ``Unmarshal``: for Insert and Delete the min
and max of the row timestamps, for every other message ``Base.Timestamp``.

``msg_id`` is ``Base.MsgID``, the id the proxy gives the request (the de-duplication key of
``MqTtMsgStream``). It is not the message's id in the MQ log: that one is ``position.msg_id``, set by
the broker when the message is produced and kept with the message from then on.

Simplification: ``MsgBase`` (``milvus_edu.proto``) has no ``MsgID`` field, so each message carries
``msg_id`` itself and :attr:`TsMsg.base` rebuilds the ``MsgBase`` on demand.
Simplification: ``size()`` estimates ``proto.Size`` (fixed header + strings + 8 bytes per number +
``payload_bytes`` for the field data an Insert does not store).
Simplification: no ``HashValues``, trace context, replicate info or message types the model does not use.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

from ..proto import MsgBase, MsgPosition, MsgType

#: Bytes assumed for the header every message carries (``MsgBase``: type, id, timestamp, source id).
_HEADER_BYTES = 32
_NUMBER_BYTES = 8
_INTS = frozenset({int})


@dataclass(frozen=True, kw_only=True)
class TsMsg(ABC):
    """``TsMsg``: what every message offers (``ID``, ``Type``, ``BeginTs``, ``EndTs``, ``Position``, ``Size``)."""

    msg_type: ClassVar[str] = ""

    msg_id: int = 0
    source_id: int = 0
    position: MsgPosition | None = None

    def type(self) -> str:
        """``Type()``: the ``MsgType`` name."""
        return self.msg_type

    def id(self) -> int:
        """``ID()``: ``Base.MsgID``."""
        return self.msg_id

    @abstractmethod
    def begin_ts(self) -> int:
        """``BeginTs()``."""

    @abstractmethod
    def end_ts(self) -> int:
        """``EndTs()``."""

    def size(self) -> int:
        """``Size()``: an estimate of the serialized size in bytes."""
        return _HEADER_BYTES

    @property
    def base(self) -> MsgBase:
        """``Base``: the message header (timestamp = ``EndTs``; equal to every row's ts in Milvus)."""
        return MsgBase(self.msg_type, self.end_ts(), self.source_id)


def _freeze_rows(msg: TsMsg, kind: str) -> None:
    """Store pks/timestamps as tuples (a list would make the frozen message mutable) and check them."""
    object.__setattr__(msg, "pks", tuple(msg.pks))
    object.__setattr__(msg, "timestamps", tuple(msg.timestamps))
    _check_rows(kind, msg.pks, msg.timestamps)


def _check_rows(kind: str, pks: tuple, timestamps: tuple) -> None:
    if not timestamps:
        raise ValueError(f"an {kind} needs at least one row; pass pks and timestamps of equal, non-zero length")
    if len(pks) != len(timestamps):
        raise ValueError(
            f"the num_rows({len(pks)}) of pks is not equal to the num_rows({len(timestamps)}) of timestamps; "
            "give every row one timestamp"
        )


def _pk_bytes(pks: tuple) -> int:
    """Bytes of the primary keys: 8 per Int64 key, the UTF-8 length of a VarChar one."""
    if _INTS.issuperset(map(type, pks)):  # an Int64 primary key field: no string to measure
        return _NUMBER_BYTES * len(pks)
    return sum(len(pk.encode("utf-8")) if isinstance(pk, str) else _NUMBER_BYTES for pk in pks)


@dataclass(frozen=True, kw_only=True)
class InsertMsg(TsMsg):
    """``InsertMsg``: rows of one segment of one vchannel (``ShardName``).

    ``payload_bytes`` is the size of the field data (vectors, scalars) the rows carry; the model keeps
    primary keys and timestamps, uses it for :meth:`size` alone, and keeps ``fields``, each row's dynamic field
    (a dict of its keys besides ``id`` and ``vector``), or None when the rows carry none.
    """

    msg_type: ClassVar[str] = MsgType.INSERT

    shard_name: str
    collection_id: int
    partition_id: int
    segment_id: int
    pks: tuple[int | str, ...]
    timestamps: tuple[int, ...]
    payload_bytes: int = 0
    fields: tuple | None = None

    def __post_init__(self) -> None:
        _freeze_rows(self, "Insert")

    def begin_ts(self) -> int:
        """``BeginTs()``: the smallest row timestamp."""
        return min(self.timestamps)

    def end_ts(self) -> int:
        """``EndTs()``: the largest row timestamp."""
        return max(self.timestamps)

    def num_rows(self) -> int:
        """``NumRows``."""
        return len(self.timestamps)

    def size(self) -> int:
        """``Size()``: header, shard name, pks, row ids and timestamps, plus the field data."""
        rows = len(self.timestamps)
        return (
            _HEADER_BYTES + len(self.shard_name) + 3 * _NUMBER_BYTES + _pk_bytes(self.pks)
            + 2 * _NUMBER_BYTES * rows + self.payload_bytes
        )


@dataclass(frozen=True, kw_only=True)
class DeleteMsg(TsMsg):
    """``DeleteMsg``: primary keys to delete on one vchannel, each with its delete timestamp."""

    msg_type: ClassVar[str] = MsgType.DELETE

    shard_name: str
    collection_id: int
    partition_id: int
    pks: tuple[int | str, ...]
    timestamps: tuple[int, ...]

    def __post_init__(self) -> None:
        _freeze_rows(self, "Delete")

    def begin_ts(self) -> int:
        """``BeginTs()``: the smallest row timestamp."""
        return min(self.timestamps)

    def end_ts(self) -> int:
        """``EndTs()``: the largest row timestamp."""
        return max(self.timestamps)

    def num_rows(self) -> int:
        """``NumRows``."""
        return len(self.timestamps)

    def size(self) -> int:
        """``Size()``: header, shard name, pks and timestamps."""
        return (
            _HEADER_BYTES + len(self.shard_name) + 2 * _NUMBER_BYTES + _pk_bytes(self.pks)
            + _NUMBER_BYTES * len(self.timestamps)
        )


@dataclass(frozen=True, kw_only=True)
class _TimestampedMsg(TsMsg):
    """A message whose Begin/End ts are both ``Base.Timestamp`` (what their ``Unmarshal`` sets)."""

    timestamp: int

    def begin_ts(self) -> int:
        """``BeginTs()`` = ``Base.Timestamp``."""
        return self.timestamp

    def end_ts(self) -> int:
        """``EndTs()`` = ``Base.Timestamp``."""
        return self.timestamp


@dataclass(frozen=True, kw_only=True)
class TimeTickMsg(_TimestampedMsg):
    """``TimeTickMsg``: rootcoord's promise that no later message on this channel has ``ts <= timestamp``."""

    msg_type: ClassVar[str] = MsgType.TIME_TICK


@dataclass(frozen=True, kw_only=True)
class CreateCollectionMsg(_TimestampedMsg):
    """``CreateCollectionMsg``: broadcast to the collection's pchannels when it is created."""

    msg_type: ClassVar[str] = MsgType.CREATE_COLLECTION

    collection_id: int

    def size(self) -> int:
        """``Size()``: header and collection id."""
        return _HEADER_BYTES + _NUMBER_BYTES


@dataclass(frozen=True, kw_only=True)
class DropCollectionMsg(_TimestampedMsg):
    """``DropCollectionMsg``: ends the collection's vchannels (and a stream's buffering round)."""

    msg_type: ClassVar[str] = MsgType.DROP_COLLECTION

    collection_id: int

    def size(self) -> int:
        """``Size()``: header and collection id."""
        return _HEADER_BYTES + _NUMBER_BYTES


@dataclass(frozen=True, kw_only=True)
class CreatePartitionMsg(_TimestampedMsg):
    """``CreatePartitionMsg``."""

    msg_type: ClassVar[str] = MsgType.CREATE_PARTITION

    collection_id: int
    partition_id: int

    def size(self) -> int:
        """``Size()``: header, collection and partition ids."""
        return _HEADER_BYTES + 2 * _NUMBER_BYTES


@dataclass(frozen=True, kw_only=True)
class DropPartitionMsg(_TimestampedMsg):
    """``DropPartitionMsg``."""

    msg_type: ClassVar[str] = MsgType.DROP_PARTITION

    collection_id: int
    partition_id: int

    def size(self) -> int:
        """``Size()``: header, collection and partition ids."""
        return _HEADER_BYTES + 2 * _NUMBER_BYTES


def is_dml_msg(msg: TsMsg) -> bool:
    """``isDMLMsg``: Insert or Delete (the only messages ``MqTtMsgStream`` de-duplicates)."""
    return msg.msg_type in (MsgType.INSERT, MsgType.DELETE)


@dataclass(frozen=True)
class MsgPack:
    """``MsgPack``: the messages of ``(begin_ts, end_ts]`` and where each channel stood before/after.

    ``start_positions``/``end_positions`` hold one position per consumed channel, in the order the
    channels were subscribed (Go builds them from a map, so its order is random).
    """

    begin_ts: int
    end_ts: int
    msgs: tuple[TsMsg, ...] = field(default_factory=tuple)
    start_positions: tuple[MsgPosition, ...] = field(default_factory=tuple)
    end_positions: tuple[MsgPosition, ...] = field(default_factory=tuple)
