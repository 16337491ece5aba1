"""The query mechanism's event kinds: a read from the client through the proxy to each shard delegator, and the
QueryNode's pipeline publishing tsafe.

One read carries one ``request`` id on every event it makes (``client.read_start``, ``proxy.read``, then per shard
``querynode.wait`` and ``querynode.read``, and ``client.read``), so a view or an analysis joins them by id. The
client's writes reuse the flush mechanism's ``client.insert`` / ``client.delete`` (acknowledged at ``ts``)."""

from __future__ import annotations

from ...events.schema import kind

KINDS = (
    kind("client.create_collection", "A client created collection `detail.collection` (id `detail.collection_id`, "
         "default level `level`) at DDL timestamp `ts`; the QueryNode loads it and every shard starts serving.",
         "ts peer level error detail", "MilvusClient.create_collection / CreateCollection + LoadCollection"),
    kind("client.drop_collection", "A client dropped collection `detail.collection` (id `detail.collection_id`; null "
         "when no such collection existed: dropping is idempotent) at DDL timestamp `ts`.",
         "ts peer error detail", "MilvusClient.drop_collection / DropCollection"),
    kind("client.describe_collection", "The SDK described collection `detail.collection` (a miss in its collection "
         "cache) and keeps the answer: id `detail.collection_id`, schema version (`UpdateTimestamp`) `ts`, which its "
         "inserts send as their schema timestamp.", "ts peer detail",
         "client/milvusclient CollectionCache.GetCollection (DescribeCollection)"),
    kind("client.retry", "The SDK retries an insert into `detail.collection`: attempt `count`, made with schema "
         "timestamp `ts`, failed with `error` (collection schema mismatch); it evicted its cached description "
         "(`detail.evicted`) and tries again after `detail.sleep_ms`.", "ts count peer error detail",
         "client/milvusclient Client.retryIfSchemaError + retry.Handle"),
    kind("proxy.meta_cache", "The proxy's meta cache on collection `detail.collection` (only its id "
         "`detail.collection_id` when a program drives the proxy's DML itself): `detail.result` is `hit`, "
         "`miss` (a DescribeCollection to rootcoord: id `detail.collection_id`, schema version `ts`, kept unless "
         "`detail.cached` is false; `error` when rootcoord has no such collection), `invalidate` (rootcoord's drop at "
         "`ts` removed `detail.removed`) or `schema_mismatch` (the insert's `detail.schema_ts` is not the "
         "collection's `ts`).", "ts peer error detail",
         "MetaCache.GetCollectionInfo / update / InvalidateCollectionMetaCache; insertTask.PreExecute"),
    kind("rootcoord.ddl", "Rootcoord's DDL task `detail.task` on `detail.collection` `detail.state` (`started`: its "
         "ts `ts` is on the scheduler's heap and holds the DDL time tick below it; `done`: it left the heap, "
         "`detail.min_ddl_ts` is the DDL minimum after it).", "ts peer error detail",
         "scheduler.AddTask (setTs) / execute (setMinDdlTs); createCollectionTask, dropCollectionTask"),
    kind("querynode.release", "The QueryNode released `vchannel` (its collection `detail.collection_id` was dropped): "
         "the delegator closed at tsafe `ts`; reads waiting on it fail, later ones find no channel.",
         "ts vchannel detail", "ReleaseCollection -> UnsubDmChannel -> shardDelegator.Close"),
    kind("client.read_start", "A client sent read `request` (`detail.op`: search or query) with the `level` it "
         "asked for (null: the collection's default) and the `guarantee_ts` the SDK computed.",
         "peer request level guarantee_ts detail", "MilvusClient.search / query (construct_guarantee_ts)"),
    kind("client.read", "Read `request` answered: `count` rows (`detail.pks`), read at `ts` (the smallest shard "
         "read timestamp), under `level` with `guarantee_ts`; `error` when it failed.",
         "ts count peer request level guarantee_ts error detail", "MilvusClient.search / query"),
    kind("proxy.read", "The proxy settled read `request`: begin timestamp `ts` (from the TSO when `detail.from_tso`, "
         "else its own clock `clock_ms`), the `level` applied and the `guarantee_ts` every shard must reach.",
         "ts clock_ms peer request level guarantee_ts detail",
         "searchTask/queryTask PreExecute: CanSkipAllocTimestamp, parseGuaranteeTsFromConsistency"),
    kind("querynode.watch", "The QueryNode started serving `vchannel` (pchannel `channel`): a delegator with tsafe "
         "`ts` and a pipeline consuming from the collection's start position.",
         "ts channel vchannel detail", "WatchDmChannels / NewShardDelegator"),
    kind("querynode.pack", "The pipeline of `vchannel` took a pack (`begin_ts`, `end_ts`]: `count` rows inserted "
         "(`detail.segments`), `detail.deletes` keys deleted (`detail.hidden` rows hidden), `detail.dropped` inserts "
         "dropped by the filter; `tick_ts` is tsafe after it.",
         "vchannel begin_ts end_ts tick_ts count detail", "filterNode / insertNode / deleteNode Operate"),
    kind("querynode.tsafe", "The deleteNode published tsafe `ts` for `vchannel`: every message up to it is applied.",
         "ts vchannel", "shardDelegator.UpdateTSafe"),
    kind("querynode.wait", "Read `request` reached `vchannel`'s delegator with tsafe `tick_ts` below its "
         "`guarantee_ts`: it waits for tsafe to catch up.",
         "vchannel request level guarantee_ts tick_ts", "shardDelegator.waitTSafe"),
    kind("querynode.read", "Read `request` on `vchannel`: tsafe on arrival `tick_ts`, read at MVCC timestamp `ts` "
         "(the tsafe the wait returned), `count` rows (`detail.pks`, `detail.waited_ms`); `error` when the wait "
         "failed (lag too large, timeout, delegator closed).",
         "ts count vchannel request level guarantee_ts tick_ts error detail",
         "shardDelegator.Search / Query after waitTSafe"),
    kind("querynode.load", "Flushed `segment` of `vchannel` was loaded sealed from its binlogs: `count` rows, "
         "stream inserts of it up to `ts` excluded, its growing copy released (`detail`).",
         "ts count vchannel segment detail", "LoadSegments + SyncTargetVersion + AddExcludedSegments"),
)
