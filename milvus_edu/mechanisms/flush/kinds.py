"""The flush mechanism's event kinds: DataNode flowgraph, write buffer, syncs and checkpoints; DataCoord's
segment meta and channel checkpoints; the clients' acknowledged writes; the final audit of the binlogs."""

from __future__ import annotations

from ...events.schema import kind

KINDS = (
    kind("datanode.watch", "A DataNode started consuming `vchannel` (on pchannel `channel`) from DataCoord's seek "
         "position (`ts`, `msg_id`; null: from the start); `detail` lists the flushed, unflushed and dropped segments "
         "it recovered.", "ts channel vchannel msg_id detail", "NewDataSyncService / GetDataVChanPositions"),
    kind("datanode.filter", "The ddNode dropped an insert of `segment` at `ts` (`count` rows): its rows are already in "
         "binlogs (at or before the segment's DmlPosition), or it belongs to a dropped segment or another vchannel.",
         "ts vchannel segment msg_id count", "ddNode.tryToFilterSegmentInsertMessages"),
    kind("datanode.buffer", "The writeNode buffered a pack (`begin_ts`, `end_ts`]: `count` inserted rows "
         "(`detail.segments`: rows per segment) and `detail.deletes` deleted keys; `msg_id` is the pack's end position.",
         "vchannel begin_ts end_ts msg_id count detail", "writeNode.Operate / writeBufferBase.BufferData"),
    kind("datanode.checkpoint", "The ttNode handed the channel checkpoint (`ts`, `msg_id`) to the checkpoint updater: "
         "periodically (`detail.periodic`, every updateChannelCheckpointInterval of message time), because a flush "
         "waits on it (`detail.flush`), or because its flowgraph is closing (`detail.closing`, on a graceful stop); "
         "`tick_ts` is the pack that triggered it (when closing: the last pack).",
         "ts vchannel msg_id tick_ts detail", "ttNode.Operate / updateChannelCP"),
    kind("datanode.sync", "The write buffer cut a sync of `segment`: `count` inserted rows with timestamps "
         "`begin_ts`..`end_ts`, deletes in `detail`, and the checkpoint it will report (`ts`, `msg_id`); "
         "`detail.flush` marks the segment's last sync.",
         "ts vchannel segment msg_id count begin_ts end_ts detail", "writeBufferBase.syncSegments / getSyncTask"),
    kind("datanode.sync_policy", "A sync policy that Milvus's defaults and a short run never reach chose `count` "
         "segments of `vchannel` (`detail.segments`): `detail.reason` \"buffer stale\" when their oldest row is more "
         "than dataNode.segment.syncPeriod (plus a jitter under 10 %) older than the pack at `ts`, or \"oldest "
         "buffers\" when the memory check, finding the buffers at `detail.buffered_bytes` as it began, at least "
         "`detail.watermark_bytes` (forceSyncWatermark of the node's memory), evicted the oldest buffer of the "
         "largest channel (one event per eviction, until they hold less). The datanode.sync events that follow cut them.",
         "ts vchannel count detail", "writeBufferBase.getSegmentsToSync / bufferManager.memoryCheck"),
    kind("datanode.drop", "`vchannel`'s flowgraph consumed its collection's DropCollection in the pack ending at `ts`: "
         "the ddNode lets nothing through from now on, the write buffer cut its `count` buffers as drop syncs "
         "(`detail.segments`), and the ttNode is in drop mode: it never hands this channel's checkpoint to the "
         "updater again.", "ts vchannel count detail", "ddNode.Operate / writeNode.Operate / ttNode.Operate"),
    kind("datanode.stop", "The DataNode stopped gracefully (DataNode.Stop): every flowgraph got its close message, "
         "then the checkpoint updater closed with `count` tasks never sent (`detail.unsent`: vchannel -> checkpoint "
         "ts); buffers still in memory are left for the channel's next owner to replay.", "count detail",
         "DataNode.Stop / ClearFlowgraphs / ChannelCheckpointUpdater.Close"),
    kind("datanode.sync_done", "A sync of `segment` finished (`error` when it failed: the DataNode panics).",
         "vchannel segment count error detail", "SyncTask.Run and its callback"),
    kind("datanode.cp_rpc", "One UpdateChannelCheckpoint RPC of the checkpoint updater: `detail.positions` maps each "
         "vchannel to the checkpoint ts sent; `error` when it failed (the task stays for the next tick).",
         "count error detail", "ChannelCheckpointUpdater.updateCheckpoints"),
    kind("datanode.flush_ts", "A channel's flushTs: set by FlushChannels (`detail.set` true, `ts` = flushTs), or "
         "cleared because DataCoord stored a checkpoint past it (`detail.set` false, `tick_ts` = that checkpoint).",
         "ts vchannel tick_ts detail", "bufferManager.FlushChannel / NotifyCheckpointUpdated"),
    kind("datanode.seal", "FlushSegments from DataCoord sealed `count` segments (`detail.segments`): the sealed "
         "policy flushes them at the next pack.", "vchannel count detail", "DataNode.FlushSegments / SealSegments"),
    kind("datacoord.save_binlog_paths", "DataCoord recorded a sync of `segment` from `peer`: the segment's DmlPosition "
         "is now `ts` (`msg_id`), `count` its rows from binlogs; `detail` has the state and log ids; `error` if refused.",
         "ts count peer segment vchannel msg_id error detail", "Server.SaveBinlogPaths"),
    kind("datacoord.channel_cp", "DataCoord received `vchannel`'s checkpoint `ts` from `peer`: `detail.saved` false "
         "when it was not newer than the stored one (silently ignored); `error` if the whole RPC failed.",
         "ts count peer vchannel msg_id error detail", "Server.UpdateChannelCheckpoint / meta.UpdateChannelCheckpoints"),
    kind("datacoord.flush", "DataCoord's Flush for `peer`: flushTs `ts`, `count` segments sealed (`detail`).",
         "ts count peer detail", "Server.Flush"),
    kind("datacoord.flush_segments", "On a DataNode time tick (`ts`), DataCoord asked it to flush `count` sealed "
         "segments of `vchannel` (`detail.segments`).", "ts count peer vchannel detail",
         "Server.handleDataNodeTtMsg / GetFlushableSegments"),
    kind("datacoord.segment_state", "A segment's state changed in DataCoord outside a sync report (`detail.state`; "
         "postFlush makes a Flushing segment Flushed).", "segment vchannel count error detail", "Server.postFlush"),
    kind("datacoord.reassign", "DataCoord saw `detail.from`'s session expire and handed its `count` channels "
         "(`detail.channels`) to `peer`, which watches them from their seek positions.", "count peer detail",
         "ChannelManager.DeleteNode / assign to a live DataNode"),
    kind("client.insert", "The client's insert was acknowledged at `ts` (`count` rows, `detail.pks`), or failed "
         "(`error`).", "ts count peer error detail", "MilvusClient.insert"),
    kind("client.delete", "The client's delete was acknowledged at `ts` (`count` keys, `detail.pks`), or failed.",
         "ts count peer error detail", "MilvusClient.delete"),
    kind("client.flush", "The client's flush: `ts` = flushTs, then `detail.flushed` once GetFlushState said so.",
         "ts count peer error detail", "MilvusClient.flush"),
    kind("storage.audit", "The final audit read `segment`'s binlogs back from the object store: `count` rows, "
         "`detail.pks` and `detail.deleted` as the Parquet files hold them, `detail.state` DataCoord's state.",
         "segment vchannel count detail", "(model) reading binlogs like a QueryNode loading a segment"),
    kind("datanode.steps", "At the audit, one row per DataNode: `count` step boundaries it passed in this incarnation "
         "and before (packs its flowgraph took, effects its syncs and checkpoint updater performed); a crash of "
         "datanode-1 can be placed at any of them (`--option crash_step=N`).", "count", "(model)"),
)
