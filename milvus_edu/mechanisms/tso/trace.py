"""How the TSO's events show in a trace viewer (:mod:`milvus_edu.export.perfetto`): a client's AllocTimestamp as a
slice from request to answer, the oracle's physical time and saved window end as counters on its rootcoord.

Its messages (flows): a client's request to rootcoord (``("tso request", client)``) and the timestamp rootcoord
answers with (``("ts", requester, ts)``, received by a client's ``client.recv`` here and by the proxy events of
other lessons that use it)."""

from __future__ import annotations

from ...events.schema import SIM_EPOCH_MS
from ...export.perfetto import MAIN, Begin, Counter, End, Flow, default_instant


def _oracle(row):
    items = [Counter(row["node"], "TSO physical (ms)", row["physical_ms"] - SIM_EPOCH_MS)]
    if "window_end_ms" in row:
        items.append(Counter(row["node"], "TSO saved window end (ms)", row["window_end_ms"] - SIM_EPOCH_MS))
    return items if row["kind"] == "tso.update" else items + [default_instant(row)]


def _request(row):
    return [Begin(("tso.request", row["node"]), row["node"], MAIN, "AllocTimestamp",
                  {"count": row.get("count"), "peer": row.get("peer")}),
            Flow(("tso request", row["node"]), "send")]


def _answer(row):
    return [End(("tso.request", row["node"]), {k: row[k] for k in ("ts", "error") if k in row}),
            Flow(("ts", row["node"], row.get("ts")), "recv")]


def _alloc(row):
    return [Flow(("tso request", row.get("peer")), "recv"), Flow(("ts", row.get("peer"), row.get("ts")), "send")]


TRACE = {"tso.init": _oracle, "tso.update": _oracle, "tso.reset": _oracle,
         "client.request": _request, "client.recv": _answer, "client.error": _answer,
         "rootcoord.alloc_timestamp": _alloc}
