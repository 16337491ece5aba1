"""The query mechanism's part of a run's summary, its CLI report lines and its key events."""

from __future__ import annotations

from ...check.violation import ROW, Read, batch_columns, detail_of
from ...narrate import detail_dict

# What the fast path (QuerySummary.write_batch) reads by columns: the QueryNode's events; reads answered to
# clients come as row dicts, for write.
_WAIT, _READ, _PACK, _LOAD = range(4)
_READS = {
    "client.read": Read(ROW),
    "querynode.wait": Read(_WAIT, ("level",)),
    "querynode.read": Read(_READ, ("level", "detail")),
    "querynode.pack": Read(_PACK, ("seq",)),
    "querynode.load": Read(_LOAD, ("seq",)),
}


class QuerySummary:
    """Counts reads per level, waits, errors, packs and loads while a run is recorded."""

    kinds = frozenset(_READS)

    def __init__(self):
        self.reads: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.waits: dict[str, int] = {}
        self.wait_ms: dict[str, float] = {}
        self.packs = 0
        self.loaded = 0
        self.reads_list: list[dict] = []

    def write(self, row: dict) -> None:
        """Account for one row."""
        kind = row["kind"]
        if kind == "client.read":
            d = detail_dict(row["detail"])
            level = row["level"] or "?"
            if row["error"] is not None:
                self.errors["?"] = self.errors.get("?", 0) + 1
            else:
                self.reads[level] = self.reads.get(level, 0) + 1
            self.reads_list.append({"request": row["request"], "client": row["node"], "level": row["level"],
                                    "label": d.get("label", ""), "op": d.get("op"), "pks": d.get("pks"),
                                    "error": row["error"], "t_ms": row["t_ms"]})
        elif kind == "querynode.wait":
            self.waits[row["level"]] = self.waits.get(row["level"], 0) + 1
        elif kind == "querynode.read":
            d = detail_dict(row["detail"])
            self.wait_ms[row["level"]] = max(self.wait_ms.get(row["level"], 0.0), float(d.get("waited_ms") or 0.0))
        elif kind == "querynode.pack":
            self.packs += 1
        elif kind == "querynode.load":
            self.loaded += 1

    def write_batch(self, batch) -> None:
        """The recorder's fast path: what :meth:`write` does with each row of ``batch`` (a ``RowBatch``) of
        :attr:`kinds`, in ``seq`` order, reading the QueryNode's events straight from the batch's tuples.

        It mirrors :meth:`write` branch by branch; ``tests/test_checker_fast.py`` proves both give the same
        section on real runs.
        """
        waits, wait_ms = self.waits, self.wait_ms
        for _, code, columns in batch_columns(batch, _READS):
            if code == _WAIT:
                waits[columns] = waits.get(columns, 0) + 1
            elif code == _READ:
                level, detail = columns
                wait_ms[level] = max(wait_ms.get(level, 0.0), float(detail_of(detail).get("waited_ms") or 0.0))
            elif code == _PACK:
                self.packs += 1
            elif code == _LOAD:
                self.loaded += 1
            else:  # ROW
                self.write(columns)

    def close(self) -> None:
        """Nothing to release."""

    def sections(self, counts: dict) -> dict:
        """The ``query`` section of ``summary.json``."""
        return {"query": {
            "reads_by_level": dict(sorted(self.reads.items())),
            "failed_reads": sum(self.errors.values()),
            "shard_waits_by_level": dict(sorted(self.waits.items())),
            "longest_wait_ms_by_level": {k: round(v, 3) for k, v in sorted(self.wait_ms.items())},
            "packs_applied": self.packs,
            "sealed_segments_loaded": self.loaded,
            "reads": self.reads_list[:200],
        }}


def report(summary: dict) -> list[str]:
    """The query lines in the CLI's report of a run."""
    q = summary.get("query")
    if not q:
        return []
    by_level = ", ".join(f"{n} {level}" for level, n in q["reads_by_level"].items()) or "none"
    waits = ", ".join(f"{level} {n} (longest {q['longest_wait_ms_by_level'].get(level, 0):,.1f} ms)"
                      for level, n in q["shard_waits_by_level"].items()) or "none"
    lines = [f"reads answered: {by_level}; {q['failed_reads']} failed",
             f"shard reads that waited for tsafe: {waits}; {q['packs_applied']:,} packs applied by the QueryNode "
             f"(one per shard for every time tick it read, empty ones included), "
             f"{q['sealed_segments_loaded']} sealed segment(s) loaded from binlogs"]
    return lines


class KeyEvents:
    """Which query events ``milvus-edu timeline`` prints by default: collections (created, described, dropped, the
    DDL tasks), reads and their answers, waits, loads, releases, the SDK's retries and the proxies' meta-cache
    misses and invalidations."""

    SHOW = frozenset({"client.create_collection", "client.read", "querynode.wait", "querynode.load", "client.insert",
                      "client.delete", "client.flush", "client.drop_collection", "client.describe_collection",
                      "client.retry", "rootcoord.ddl", "querynode.release"})

    def __init__(self):
        self.hidden = 0

    def show(self, row: dict) -> bool:
        """Whether ``row`` is a key event."""
        if row["kind"] in self.SHOW or (row["kind"] == "querynode.read" and row.get("error") is not None):
            return True
        if row["kind"] == "proxy.meta_cache" and detail_dict(row.get("detail")).get("result") != "hit":
            return True  # misses, invalidations and schema mismatches; a hit is the quiet normal case
        if row["kind"].startswith("querynode.") or row["kind"] in ("proxy.read", "client.read_start", "proxy.meta_cache"):
            self.hidden += 1
        return False

    def notes(self) -> list[str]:
        """A line saying what was left out."""
        if not self.hidden:
            return []
        return [f"({self.hidden:,} QueryNode pipeline, tsafe and proxy events not shown; --all shows them)"]
