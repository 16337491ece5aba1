"""What a write buffer hands to a sync: the rows of one segment and where the channel stood.

Models ``SyncPack`` of ``internal/flushcommon/syncmgr/serializer.go`` and the ``InsertData`` /
``DeleteData`` of ``internal/storage`` (Milvus 2.5), as the data the write buffer yields
(``getSyncTask``) and the sync task writes.

Simplification: a row is its primary key, its timestamp, an opaque payload size (the field data the
lesson does not need) and its dynamic field (``$meta``: the keys a row was inserted with besides ``id`` and
``vector``), which filters read; Milvus's InsertData holds every field, including RowID (field 0), which the
model's ``InsertMsg`` does not carry. No BM25 statistics, no data source, no error-handler field (the
caller gets the error back instead).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...proto import MsgPosition, SegmentLevel

#: Field ids of the binlogs the model writes: Milvus's system field Timestamp and the user's primary key.
TIMESTAMP_FIELD_ID = 1
PK_FIELD_ID = 100
#: The dynamic field ``$meta`` of a quick-setup collection (``id`` 100, ``vector`` 101, ``$meta`` 102): a row's
#: keys besides its primary key and vector, one JSON document per row.
META_FIELD_ID = 102


@dataclass(frozen=True)
class InsertData:
    """``storage.InsertData`` of one buffered batch: row primary keys and timestamps, in arrival order."""

    pks: tuple = ()
    timestamps: tuple[int, ...] = ()
    payload_bytes: int = 0
    #: each row's dynamic field (a dict), or None when the batch's rows carry none
    fields: tuple | None = None

    @property
    def num_rows(self) -> int:
        """``GetRowNum``."""
        return len(self.pks)


@dataclass(frozen=True)
class DeleteData:
    """``storage.DeleteData``: deleted primary keys, each with its delete timestamp."""

    pks: tuple = ()
    timestamps: tuple[int, ...] = ()

    @property
    def row_count(self) -> int:
        """``RowCount``."""
        return len(self.pks)


@dataclass(frozen=True)
class SyncPack:
    """``SyncPack``: one segment's buffered rows, to be written as binlogs and reported to DataCoord.

    ``checkpoint`` is the write buffer's consumed position when the pack was cut (``wb.checkpoint``),
    which becomes the segment's DmlPosition; ``start_position`` is the earliest position of the rows
    in the pack; ``ts_from``/``ts_to`` the smallest and largest row timestamps; ``batch_rows`` the
    inserted rows in this pack (not the segment's total).
    """

    collection_id: int
    partition_id: int
    segment_id: int
    channel_name: str
    insert_data: tuple[InsertData, ...] = field(default_factory=tuple)
    delete_data: DeleteData | None = None
    ts_from: int = 0
    ts_to: int = 0
    start_position: MsgPosition | None = None
    checkpoint: MsgPosition | None = None
    batch_rows: int = 0
    level: str = SegmentLevel.L1
    is_flush: bool = False
    is_drop: bool = False
