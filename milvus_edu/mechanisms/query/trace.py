"""How reads show in a trace viewer (:mod:`milvus_edu.export.perfetto`): a read as a slice on its client from send to
answer, its wait on a delegator as a slice on the vchannel, and each delegator's tsafe as a counter."""

from __future__ import annotations

import json

from ...export.perfetto import Begin, Counter, End, ts_ms


def _read_start(row):
    op = json.loads(row["detail"]).get("op", "read") if row.get("detail") else "read"
    return [Begin(("read", row["request"]), row["node"], "reads", f"{op} {row['request']}",
                  {"level": row.get("level"), "guarantee_ts": row.get("guarantee_ts")})]


def _read(row):
    return [End(("read", row["request"]), {k: row[k] for k in ("ts", "count", "error") if k in row})]


def _wait(row):
    return [Begin(("wait", row["request"], row["vchannel"]), row["node"], row["vchannel"],
                  f"wait tsafe (read {row['request']})", {"guarantee_ts": row.get("guarantee_ts"),
                                                          "tsafe_on_arrival": row.get("tick_ts")})]


def _shard_read(row):
    return [End(("wait", row["request"], row["vchannel"]), {k: row[k] for k in ("ts", "error") if k in row})]


def _tsafe(row):
    value = ts_ms(row.get("ts"))
    return None if value is None else [Counter(row["node"], f"tsafe {row['vchannel']} (ms)", value)]


TRACE = {"client.read_start": _read_start, "client.read": _read, "querynode.wait": _wait,
         "querynode.read": _shard_read, "querynode.tsafe": _tsafe}
