"""How the flush lesson's events show in a trace viewer (:mod:`milvus_edu.export.perfetto`): a segment's sync as a
slice on its vchannel from cut to done, a client's flush from its call to GetFlushState's yes, and each vchannel's
checkpoint as DataCoord stored it as a counter.

Its messages (flows): the pchannel's TimeTick that closes each pack a DataNode buffers (``("time tick", pchannel,
tick_ts)``). A checkpoint update is not one: ``datanode.cp_rpc`` is logged when the answer comes, after DataCoord's
``datacoord.channel_cp``."""

from __future__ import annotations

import json

from ...export.perfetto import MAIN, Begin, Counter, End, Flow, default_instant, ts_ms
from ...mq.names import to_physical_channel


def _detail(row) -> dict:
    return json.loads(row["detail"]) if row.get("detail") else {}


def _sync(row):
    return [Begin(("sync", row["node"], row.get("segment")), row["node"], row.get("vchannel", MAIN),
                  f"sync segment {row.get('segment')}", {"rows": row.get("count"), "checkpoint_ts": row.get("ts")})]


def _sync_done(row):
    return [End(("sync", row["node"], row.get("segment")), {"error": row["error"]} if "error" in row else {})]


def _flush(row):
    key = ("flush", row["node"], row.get("ts"))
    if _detail(row).get("flushed"):
        return [End(key)]
    if "error" in row:
        return None
    return [Begin(key, row["node"], MAIN, "flush", {"flush_ts": row.get("ts")})]


def _channel_cp(row):
    if "error" in row or not _detail(row).get("saved") or ts_ms(row.get("ts")) is None:
        return None
    return [Counter(row["node"], f"checkpoint {row['vchannel']} (ms)", ts_ms(row["ts"])), default_instant(row)]


def _buffer(row):
    if not row.get("vchannel") or not row.get("end_ts"):
        return None
    return [Flow(("time tick", to_physical_channel(row["vchannel"]), row["end_ts"]), "recv")]


TRACE = {"datanode.sync": _sync, "datanode.sync_done": _sync_done, "client.flush": _flush,
         "datacoord.channel_cp": _channel_cp, "datanode.buffer": _buffer}
