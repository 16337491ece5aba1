"""The TSO mechanism's part of a run's summary, its CLI report lines, its key events and the demo."""

from __future__ import annotations

import json

from ...events.dispatch import Dispatch, on
from ...narrate import plural, ts_text

class TSOSummary(Dispatch):
    """Collects the TSO's headline numbers while a run is recorded (constant memory).

    :meth:`sections` gives the ``tso`` and ``failover`` parts of ``summary.json``.
    """

    def __init__(self):
        self.allocations = 0
        self.handed_out = 0
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.client_answers = 0
        self.kill: tuple[str, float] | None = None
        self.kill_kind: str | None = None  # "kill" or "pause": the report says "died" only of a node that died
        self.new_active: tuple[str, float] | None = None
        self.last_recv_before_kill: float | None = None
        self.first_recv_after_kill: float | None = None
        self._renewed: dict[str, float] = {}  # node -> last time etcd answered its keep-alive
        self.renewed_before_kill: float | None = None
        self.first_client_error: dict | None = None

    @on("rootcoord.alloc_timestamp", columns=("error", "count", "ts"), fold=True)
    def _allocated(self, seqs, errors, counts, tss) -> None:
        """The allocations change only what they count, so they are folded a batch at a time (see ``on``)."""
        for error, count, ts in zip(errors, counts, tss):
            if error is None:
                self.allocations += 1
                self.handed_out += count
                if self.first_ts is None:
                    self.first_ts = ts
                self.last_ts = ts + count - 1

    @on("client.recv", columns=("t_ms",))
    def _answered(self, seq: int, t_ms: float) -> None:
        self.client_answers += 1
        if self.kill is None:
            self.last_recv_before_kill = t_ms
        elif self.first_recv_after_kill is None and t_ms > self.kill[1]:
            self.first_recv_after_kill = t_ms

    @on("client.error", columns=("node", "t_ms", "error"))
    def _client_error(self, seq: int, node: str, t_ms: float, error: str) -> None:
        # kept so the report can say what went wrong: a workload's own mistake (an insert without ids) shows only here
        if self.first_client_error is None:
            self.first_client_error = {"event": seq + 1, "t_ms": t_ms, "node": node, "error": error}

    @on("fault.kill", columns=("node", "t_ms"))
    def _killed(self, seq: int, node: str, t_ms: float) -> None:
        self._fault(node, t_ms, "kill")

    @on("fault.pause", columns=("node", "t_ms"))
    def _paused(self, seq: int, node: str, t_ms: float) -> None:
        self._fault(node, t_ms, "pause")

    def _fault(self, node: str, t_ms: float, kind: str) -> None:
        if self.kill is None:
            self.kill = (node, t_ms)
            self.kill_kind = kind
            self.renewed_before_kill = self._renewed.get(node)

    @on("session.keepalive", columns=("node", "t_ms"))
    def _keepalive(self, seq: int, node: str, t_ms: float) -> None:
        self._renewed[node] = t_ms

    @on("session.active", columns=("node", "t_ms"))
    def _active(self, seq: int, node: str, t_ms: float) -> None:
        if self.kill is not None and self.new_active is None:
            self.new_active = (node, t_ms)

    def failover(self) -> dict | None:
        """Who died or froze (``fault``: ``kill`` or ``pause``) when, who took over when, and ``client_gap_ms``: how
        long no client got an answer, from the last answer any client got before the fault to the first any client
        got after it (each client's own wait, ``failover_gaps``, is at least as long)."""
        if self.kill is None:
            return None
        gap = None
        if self.first_recv_after_kill is not None and self.last_recv_before_kill is not None:
            gap = round(self.first_recv_after_kill - self.last_recv_before_kill, 3)
        return {
            "killed": self.kill[0],
            "killed_at_ms": self.kill[1],
            "fault": self.kill_kind,
            "new_active": self.new_active[0] if self.new_active else None,
            "new_active_at_ms": self.new_active[1] if self.new_active else None,
            "client_gap_ms": gap,
            "lease_renewed_at_ms": self.renewed_before_kill,
        }

    def sections(self, counts: dict) -> dict:
        """The ``tso`` and ``failover`` sections of ``summary.json``; ``counts`` = events per kind."""
        tso = {
            "allocations": self.allocations,
            "timestamps_handed_out": self.handed_out,
            "window_saves": int(counts.get("tso.save", 0)),
            "client_answers": self.client_answers,
            "client_errors": int(counts.get("client.error", 0)),
            "first_ts": self.first_ts,
            "first_ts_text": ts_text(self.first_ts) if self.first_ts is not None else None,
            "last_ts": self.last_ts,
            "last_ts_text": ts_text(self.last_ts) if self.last_ts is not None else None,
        }
        if self.first_client_error is not None:  # only then: a run without client errors keeps its summary.json
            tso["first_client_error"] = self.first_client_error
        return {"tso": tso, "failover": self.failover()}


def report(summary: dict) -> list[str]:
    """The TSO's line in the CLI's report of a run."""
    t = summary.get("tso")
    if not t:
        return []
    first = t.get("first_client_error")
    said = (f" (the first, event {first['event']:,} at {first['t_ms'] / 1000:.3f} s: {first['node']}'s request "
            f"failed: {first['error']})" if first else "")
    # said only when there are some: "0 client errors" beside another line's "4 failed" reads read as a contradiction
    errors = f", {plural(t['client_errors'], 'client error')}{said}" if t["client_errors"] else ""
    return [f"{plural(t['timestamps_handed_out'], 'timestamp')} in {plural(t['allocations'], 'allocation')}, "
            f"{plural(t['window_saves'], 'window save')}{errors}"] + failover_line(summary)


KEY_KINDS = frozenset({"session.active", "session.standby", "session.lost", "session.exit", "tso.init", "tso.save",
                       "tso.save_failed", "tso.alloc_failed"})


class KeyEvents:
    """Which TSO events ``milvus-edu timeline`` prints by default: session changes, inits, saves, the first
    answer, the first logical-half update, the first GenerateTSO retry of each cause, the first client error of
    an outage and two answers after it."""

    def __init__(self):
        self.retries: dict[str, int] = {}  # GenerateTSO retries per cause (the error text)
        self.errors_shown = 0
        self.answers_after_gap = 0
        self.last_error_t = None
        self.first_recv = False
        self.first_half = False

    def show(self, row: dict) -> bool:
        """Whether ``row`` is a key event (call once per row, in order)."""
        kind = row["kind"]
        show = kind in KEY_KINDS
        if kind == "client.recv" and not self.first_recv:
            show = self.first_recv = True
        if kind == "tso.update" and not self.first_half and "logical_half" in str(row["detail"]):
            show = self.first_half = bool(json.loads(row["detail"]).get("reason") == "logical_half")
        if kind == "tso.alloc_retry":
            error = str(row["error"])
            self.retries[error] = self.retries.get(error, 0) + 1
            show = self.retries[error] == 1
        if kind == "client.error":
            self.errors_shown += 1
            self.last_error_t = row["t_ms"]
            show = self.errors_shown == 1
        if kind == "client.recv" and self.last_error_t is not None and self.answers_after_gap < 2:
            self.answers_after_gap += 1
            show = True
        return show

    def notes(self) -> list[str]:
        """Lines printed after the timeline."""
        lines = [f"({n} GenerateTSO retries in all: {error})" for error, n in self.retries.items() if n > 1]
        if self.errors_shown > 1:
            lines.append(f"({self.errors_shown} client errors in all; each client asks again after it)")
        return lines


def failover_line(summary: dict) -> list[str]:
    """Who failed over when, and why it took that long (from the run's own numbers); nothing without a failover."""
    f = summary.get("failover")
    if not f or f["new_active_at_ms"] is None:
        return []
    ttl_s = summary["config"]["tso"]["session_ttl_ns"] / 1e9
    old = f["killed"]
    renewed = f.get("lease_renewed_at_ms")
    why = (f"{old}'s lease, last renewed at {renewed / 1000:g} s, ran out {ttl_s:g} s later" if renewed is not None
           else f"{old}'s {ttl_s:g} s session lease had to run out")
    what = "froze" if f.get("fault") == "pause" else "died"
    return [f"failover: {old} {what} at {f['killed_at_ms'] / 1000:g} s; {f['new_active']} became active at "
            f"{f['new_active_at_ms'] / 1000:g} s ({why}; the etcd lessor deletes expired keys every 0.5 s)"]
