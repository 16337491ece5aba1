"""The query mechanism's part of a run's summary, its CLI report lines and its key events."""

from __future__ import annotations

from ...events.dispatch import Dispatch, on
from ...narrate import detail_dict, plural

class QuerySummary(Dispatch):
    """Counts reads per level, waits, errors, packs and loads while a run is recorded."""

    def __init__(self):
        self.reads: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.waits: dict[str, int] = {}
        self.wait_ms: dict[str, float] = {}
        self.packs = 0
        self.loaded = 0
        self.reads_list: list[dict] = []

    # Each kind changes counts of its own only, so each is folded a batch at a time (see ``on``).

    @on("client.read", columns=("node", "request", "level", "error", "t_ms", "detail"), fold=True, objects=("detail",))
    def _reads_answered(self, seqs, clients, requests, levels, errors, t_mss, details) -> None:
        for client, request, level, error, t_ms, d in zip(clients, requests, levels, errors, t_mss, details):
            if error is not None:
                self.errors["?"] = self.errors.get("?", 0) + 1
            else:
                self.reads[level or "?"] = self.reads.get(level or "?", 0) + 1
            self.reads_list.append({"request": request, "client": client, "level": level,
                                    "label": d.get("label", ""), "op": d.get("op"), "pks": d.get("pks"),
                                    "error": error, "t_ms": t_ms})

    @on("querynode.wait", columns=("level",), fold=True)
    def _waits(self, seqs, levels) -> None:
        for level in levels:
            self.waits[level] = self.waits.get(level, 0) + 1

    @on("querynode.read", columns=("level", "detail"), fold=True, objects=("detail",))
    def _shard_reads(self, seqs, levels, details) -> None:
        for level, detail in zip(levels, details):
            waited = float(detail.get("waited_ms") or 0.0)
            self.wait_ms[level] = max(self.wait_ms.get(level, 0.0), waited)

    @on("querynode.pack", columns=(), fold=True)
    def _packs(self, seqs) -> None:
        self.packs += len(seqs)

    @on("querynode.load", columns=(), fold=True)
    def _loads(self, seqs) -> None:
        self.loaded += len(seqs)

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
             f"shard reads that waited for tsafe: {waits}; {plural(q['packs_applied'], 'pack')} applied by the "
             "QueryNode "
             f"(one per shard for every time tick it read, empty ones included), "
             f"{plural(q['sealed_segments_loaded'], 'sealed segment')} loaded from binlogs"]
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
