"""The DataNode's write buffers, one per vchannel, and the memory check that force-syncs them.

Models ``internal/flushcommon/writebuffer/manager.go`` (``bufferManager``) of Milvus 2.5. The flowgraph
(writeNode, ttNode), the ``FlushChannels`` RPC and the channel lifecycle reach a channel's
:class:`~milvus_edu.datanode.writebuffer.write_buffer.WriteBuffer` through it.

The flush handshake lives here: ``FlushChannels`` sets ``flushTs`` (:meth:`BufferManager.flush_channel`);
the ttNode's :meth:`~BufferManager.get_checkpoint` says ``need_update`` once the checkpoint reaches it,
which submits a flush checkpoint; the checkpoint updater's callback calls
:meth:`~BufferManager.notify_checkpoint_updated`, which clears ``flushTs`` only when the stored
checkpoint is strictly after it (quirk 7).

Simplification: the memory check loop (``check``, every ``dataNode.memory.checkInterval``) is the
simulator's; :meth:`BufferManager.memory_check` is one pass of ``memoryCheck``, with the machine's memory
passed in (Go: ``hardware.GetMemoryCount``).
Simplification: ``register`` takes a ready write buffer (Go builds it from the metacache and options).
Simplification: channels are visited in registration order where Go ranges over a concurrent map.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...config import DataNodeParams
from ...merr import wrap_err_channel_not_found, wrap_err_channel_reduplicate
from ...mq.msg import DeleteMsg, InsertMsg
from ...proto import MsgPosition
from ..syncmgr.pack import SyncPack
from .sync_policy import NON_FLUSH_TS, get_oldest_buffer_policy
from .write_buffer import WriteBuffer


class BufferManager:
    """``bufferManager``: vchannel -> write buffer.

    Bug switch ``reset_flush_ts_inclusive``: :meth:`notify_checkpoint_updated` clears ``flushTs`` when the
    stored checkpoint is *at or after* it (``>=``, the test ``need_update`` uses) instead of strictly
    after it, so a checkpoint exactly equal to ``flushTs`` closes the flush. The design documents' argument
    for the strict rule is that such a checkpoint may still predate syncs the flush started; that holds only
    for their older ``GetCheckpoint``, which ignores syncing segments (switch
    ``checkpoint_ignores_syncing_segments``). Here every buffer's start position is strictly before its rows
    and syncing segments hold the checkpoint, so a checkpoint equal to ``flushTs`` comes only once every row
    up to it is synced: the switch loses nothing and changes no answer (quirk P23). What it changes: the
    ttNode stops re-submitting the flush checkpoint on every pack (the endless ``need_update`` of quirk 7),
    and the first checkpoint past ``flushTs`` waits for the periodic update instead of going out at once.
    """

    def __init__(self, params: DataNodeParams, *, reset_flush_ts_inclusive: bool = False):
        self.params = params
        self.reset_flush_ts_inclusive = reset_flush_ts_inclusive
        self._buffers: dict[str, WriteBuffer] = {}

    @property
    def channels(self) -> list[str]:
        """The registered vchannels, in registration order."""
        return list(self._buffers)

    def get_buffer(self, channel: str) -> WriteBuffer | None:
        """The channel's write buffer, or ``None`` (for views and for routing sync callbacks)."""
        return self._buffers.get(channel)

    def _get(self, channel: str) -> WriteBuffer:
        buf = self._buffers.get(channel)
        if buf is None:
            raise wrap_err_channel_not_found(channel)
        return buf

    def register(self, channel: str, wb: WriteBuffer) -> None:
        """``Register``: a channel registered twice keeps its first buffer; the new one is closed
        without drop and ``ChannelReduplicate`` is raised."""
        if channel in self._buffers:
            wb.close(drop=False)
            raise wrap_err_channel_reduplicate(channel)
        self._buffers[channel] = wb

    def create_new_growing_segment(self, channel: str, partition_id: int, segment_id: int) -> None:
        """``CreateNewGrowingSegment``: a Growing segment without start position (``ChannelNotFound`` if
        the channel is not registered)."""
        self._get(channel).create_new_growing_segment(partition_id, segment_id, None)

    def seal_segments(self, channel: str, segment_ids: Iterable[int]) -> None:
        """``SealSegments`` (``ChannelNotFound``; ``SegmentNotFound`` from the buffer)."""
        self._get(channel).seal_segments(segment_ids)

    def flush_channel(self, channel: str, flush_ts: int) -> None:
        """``FlushChannel``: the channel's ``flushTs`` (``ChannelNotFound`` before the channel is
        registered, which is after its flowgraph is built)."""
        self._get(channel).set_flush_timestamp(flush_ts)

    def buffer_data(
        self,
        channel: str,
        insert_msgs: Sequence[InsertMsg],
        delete_msgs: Sequence[DeleteMsg],
        start_pos: MsgPosition,
        end_pos: MsgPosition,
    ) -> list[SyncPack]:
        """``BufferData``: the packs to sync now (``ChannelNotFound`` if not registered)."""
        return self._get(channel).buffer_data(insert_msgs, delete_msgs, start_pos, end_pos)

    def get_checkpoint(self, channel: str) -> tuple[MsgPosition | None, bool]:
        """``GetCheckpoint``: (checkpoint, ``need_update``) where ``need_update`` means a flush is
        pending and the checkpoint has reached it (``flushTs != 0 and cp.ts >= flushTs``)."""
        buf = self._get(channel)
        cp = buf.get_checkpoint()
        flush_ts = buf.get_flush_timestamp()
        cp_ts = cp.timestamp if cp is not None else 0
        return cp, flush_ts != NON_FLUSH_TS and cp_ts >= flush_ts

    def notify_checkpoint_updated(self, channel: str, ts: int) -> bool:
        """``NotifyCheckpointUpdated``: DataCoord stored a checkpoint at ``ts``; clear ``flushTs`` if
        ``ts > flushTs`` (strictly). Returns whether it was cleared; unknown channels are ignored."""
        buf = self._buffers.get(channel)
        if buf is None:
            return False
        flush_ts = buf.get_flush_timestamp()
        passed = ts >= flush_ts if self.reset_flush_ts_inclusive else ts > flush_ts
        if flush_ts != NON_FLUSH_TS and passed:
            buf.set_flush_timestamp(NON_FLUSH_TS)
            return True
        return False

    def drop_partitions(self, channel: str, partition_ids: Iterable[int]) -> None:
        """``DropPartitions`` (unknown channels are ignored, Go only warns)."""
        buf = self._buffers.get(channel)
        if buf is not None:
            buf.drop_partitions(partition_ids)

    def remove_channel(self, channel: str) -> None:
        """``RemoveChannel``: forget the channel and abandon its buffers (``Close(false)``); the node no
        longer owns it. Unknown channels are ignored."""
        buf = self._buffers.pop(channel, None)
        if buf is not None:
            buf.close(drop=False)

    def drop_channel(self, channel: str) -> list[SyncPack]:
        """``DropChannel``: forget the channel and return the drop packs of ``Close(true)`` (the caller
        syncs them, then ``DropVirtualChannel``). Unknown channels are ignored."""
        buf = self._buffers.pop(channel, None)
        if buf is None:
            return []
        return buf.close(drop=True)

    def memory_check(self, total_memory_bytes: int) -> list[SyncPack]:
        """``memoryCheck``, one pass: while the buffers together hold at least ``forceSyncWatermark`` of
        the machine's memory, evict the ``forceSyncSegmentNum`` oldest buffers of the largest channel.

        Returns every pack evicted. Go re-checks in a tight loop until memory falls under the watermark;
        a round that frees nothing (no checkpoint yet, or only buffers of segments the metacache lost)
        would spin there forever, so the model returns instead and the next tick tries again.
        """
        if total_memory_bytes <= 0:
            raise ValueError(f"total_memory_bytes must be positive (the machine's memory), got {total_memory_bytes}")
        if not self.params.force_sync_enable:
            return []
        watermark = float(total_memory_bytes) * self.params.force_sync_watermark
        packs: list[SyncPack] = []
        while True:
            total = 0
            candidate: WriteBuffer | None = None
            candidate_size = 0
            for buf in self._buffers.values():
                size = buf.memory_size()
                total += size
                if size > candidate_size:
                    candidate, candidate_size = buf, size
            if float(total) < watermark or candidate is None:
                return packs
            evicted = candidate.evict_buffer(get_oldest_buffer_policy(self.params.force_sync_segment_num))
            packs.extend(evicted)
            if candidate.memory_size() >= candidate_size:
                return packs
