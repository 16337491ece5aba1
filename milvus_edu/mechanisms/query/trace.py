"""How reads show in a trace viewer (:mod:`milvus_edu.export.perfetto`): a read as a slice on its client from send to
answer, its wait on a delegator as a slice on the vchannel, and each delegator's tsafe as a counter.

Its messages (flows), joined by the read's request number: the client's read to its proxy (``read``), the proxy's
search or query to the delegators (``search``: received by the wait, or by the shard read that did not wait), each
shard's result back to the client (``result``). Also received: the TSO timestamp a Strong read's proxy allocated
(``("ts", proxy, ts)``) and the pchannel's TimeTick that closes each pack a delegator consumes
(``("time tick", pchannel, tick_ts)``)."""

from __future__ import annotations

import json

from ...export.perfetto import Begin, Counter, End, Flow, ts_ms
from ...mq.names import to_physical_channel


def _detail(row) -> dict:
    return json.loads(row["detail"]) if row.get("detail") else {}


def _read_start(row):
    op = _detail(row).get("op", "read")
    return [Begin(("read", row["request"]), row["node"], "reads", f"{op} {row['request']}",
                  {"level": row.get("level"), "guarantee_ts": row.get("guarantee_ts")}),
            Flow(("read", row["request"]), "send")]


def _read(row):
    return [End(("read", row["request"]), {k: row[k] for k in ("ts", "count", "error") if k in row}),
            Flow(("result", row["request"]), "recv")]


def _proxy_read(row):
    flows = [Flow(("read", row.get("request")), "recv"), Flow(("search", row.get("request")), "send")]
    if _detail(row).get("from_tso"):
        flows.append(Flow(("ts", row["node"], row.get("ts")), "recv"))
    return flows


def _wait(row):
    return [Begin(("wait", row["request"], row["vchannel"]), row["node"], row["vchannel"],
                  f"wait tsafe (read {row['request']})", {"guarantee_ts": row.get("guarantee_ts"),
                                                          "tsafe_on_arrival": row.get("tick_ts")}),
            Flow(("search", row["request"]), "recv")]


def _shard_read(row):
    flows = [Flow(("result", row["request"]), "send")]
    if not _detail(row).get("waited_ms"):  # a shard read that waited received the search at its wait
        flows.insert(0, Flow(("search", row["request"]), "recv"))
    return [End(("wait", row["request"], row["vchannel"]), {k: row[k] for k in ("ts", "error") if k in row}), *flows]


def _pack(row):
    if not row.get("vchannel") or not row.get("end_ts"):
        return None
    return [Flow(("time tick", to_physical_channel(row["vchannel"]), row["end_ts"]), "recv")]


def _tsafe(row):
    value = ts_ms(row.get("ts"))
    return None if value is None else [Counter(row["node"], f"tsafe {row['vchannel']} (ms)", value)]


TRACE = {"client.read_start": _read_start, "client.read": _read, "proxy.read": _proxy_read, "querynode.wait": _wait,
         "querynode.read": _shard_read, "querynode.tsafe": _tsafe, "querynode.pack": _pack}
