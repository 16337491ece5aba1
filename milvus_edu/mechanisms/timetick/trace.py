"""How TimeTick's events show in a trace viewer (:mod:`milvus_edu.export.perfetto`): a proxy's DML task as a slice
on its pchannel from enqueue to finish, and each pchannel's time tick as a counter on the rootcoord that writes it."""

from __future__ import annotations

from ...export.perfetto import Begin, Counter, End, ts_ms


def _enqueue(row):
    key = ("dml", row["node"], row.get("channel"), row.get("ts"))
    return [Begin(key, row["node"], row.get("channel", "main"), "DML task", {"ts": row.get("ts"), "rows": row.get("count")})]


def _finish(row):
    return [End(("dml", row["node"], row.get("channel"), row.get("ts")))]


def _produce(row):
    if row.get("msg_type") != "TimeTick" or ts_ms(row.get("tick_ts")) is None:
        return None
    return [Counter(row["node"], f"time tick {row['channel']} (ms)", ts_ms(row["tick_ts"]))]


TRACE = {"proxy.enqueue": _enqueue, "proxy.finish": _finish, "mq.produce": _produce}
