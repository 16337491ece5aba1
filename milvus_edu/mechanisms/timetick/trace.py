"""How TimeTick's events show in a trace viewer (:mod:`milvus_edu.export.perfetto`): a proxy's DML task as a slice
on its pchannel from enqueue to finish, and each pchannel's time tick as a counter on the rootcoord that writes it.

Its messages (flows): a proxy's report (``proxy.report``, ``UpdateChannelTimeTick``) to rootcoord, received as
``rootcoord.timetick_update``; a TimeTick written to a pchannel (``mq.produce``), received by each node that consumes
the pack it closes (``("time tick", pchannel, tick_ts)``); the timestamp a proxy's ticker got from the TSO
(``("ts", proxy, ts)``, sent by ``rootcoord.alloc_timestamp``)."""

from __future__ import annotations

from ...export.perfetto import Begin, Counter, End, Flow, ts_ms


def _enqueue(row):
    key = ("dml", row["node"], row.get("channel"), row.get("ts"))
    return [Begin(key, row["node"], row.get("channel", "main"), "DML task", {"ts": row.get("ts"), "rows": row.get("count")}),
            Flow(("ts", row["node"], row.get("ts")), "recv")]


def _finish(row):
    return [End(("dml", row["node"], row.get("channel"), row.get("ts")))]


def _produce(row):
    if row.get("msg_type") != "TimeTick" or ts_ms(row.get("tick_ts")) is None:
        return None
    return [Counter(row["node"], f"time tick {row['channel']} (ms)", ts_ms(row["tick_ts"])),
            Flow(("time tick", row["channel"], row["tick_ts"]), "send")]


def _tick(row):
    return [Flow(("ts", row["node"], row.get("ts")), "recv")]


def _report(row):
    return [Flow(("report", row["node"], row.get("ts")), "send")]


def _update(row):
    return [Flow(("report", row.get("peer"), row.get("ts")), "recv")]


TRACE = {"proxy.enqueue": _enqueue, "proxy.finish": _finish, "mq.produce": _produce, "proxy.tick": _tick,
         "proxy.report": _report, "rootcoord.timetick_update": _update}
