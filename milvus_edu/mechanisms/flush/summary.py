"""The flush mechanism's part of a run's summary, its CLI report line and its key events."""

from __future__ import annotations

from ...events.dispatch import Dispatch, on
from ...narrate import plural, times

class FlushSummary(Dispatch):
    """Counts syncs, checkpoints, flushes, restarts and the final audit while a run is recorded."""

    def __init__(self):
        self.syncs = 0
        self.synced_rows = 0
        self.failed_syncs = 0
        self.saved = 0
        self.save_errors = 0
        self.cp_stored = 0
        self.cp_ignored = 0
        self.cp_rpc_errors = 0
        self.filtered = 0
        self.acked_rows = 0
        self.deleted_keys = 0
        self.flushes = 0
        self.flushed = 0
        self.crashes = 0
        self.restarts = 0
        self.takeovers = 0
        self.audit_segments = 0
        self.audit_rows = 0
        self.audit_deleted = 0
        self.flushed_segments = 0
        self.last_cp: dict[str, int] = {}
        self.steps: int | None = None
        self.flush_ts_cleared = 0
        self.flush_ts_cleared_at_equal = 0

    @on("datanode.sync", columns=("count",))
    def _sync(self, seq: int, count) -> None:
        self.syncs += 1
        self.synced_rows += int(count or 0)

    @on("datanode.sync_done", columns=("error",))
    def _sync_done(self, seq: int, error) -> None:
        self.failed_syncs += error is not None

    @on("datacoord.save_binlog_paths", columns=("error",))
    def _saved(self, seq: int, error) -> None:
        self.save_errors += error is not None
        self.saved += error is None

    @on("datacoord.channel_cp", columns=("error", "detail", "vchannel", "ts"), objects=("detail",))
    def _channel_cp(self, seq: int, error, detail: dict, vch: str, ts) -> None:
        if error is not None:
            return
        if detail.get("saved"):
            self.cp_stored += 1
            self.last_cp[vch] = int(ts)
        else:
            self.cp_ignored += 1

    @on("datanode.cp_rpc", columns=("error",))
    def _cp_rpc(self, seq: int, error) -> None:
        self.cp_rpc_errors += error is not None

    @on("datanode.filter", columns=("count",))
    def _filtered(self, seq: int, count) -> None:
        self.filtered += int(count or 0)

    @on("client.insert", columns=("error", "count"))
    def _inserted(self, seq: int, error, count) -> None:
        if error is None:
            self.acked_rows += int(count)

    @on("client.delete", columns=("error", "count"))
    def _deleted(self, seq: int, error, count) -> None:
        if error is None:
            self.deleted_keys += int(count)

    @on("client.flush", columns=("error", "detail"), objects=("detail",))
    def _flush(self, seq: int, error, detail: dict) -> None:
        if error is not None:
            return
        if detail.get("flushed"):
            self.flushed += 1
        else:
            self.flushes += 1

    @on("storage.audit", columns=("detail", "count"), objects=("detail",))
    def _audit(self, seq: int, detail: dict, count) -> None:
        self.audit_segments += 1
        self.audit_rows += int(count)
        self.audit_deleted += len(detail.get("deleted", []))
        self.flushed_segments += detail.get("state") == "Flushed"

    @on("datanode.steps", columns=("count",))
    def _steps(self, seq: int, count) -> None:
        """One row per DataNode (its ``node``): its own step boundaries."""
        self.steps = (self.steps or 0) + int(count)

    @on("fault.kill", columns=("node",))
    def _crash(self, seq: int, node) -> None:
        self.crashes += str(node).startswith("datanode")

    @on("fault.restart", columns=("node",))
    def _restart(self, seq: int, node) -> None:
        self.restarts += str(node).startswith("datanode")

    @on("datacoord.reassign", columns=())
    def _takeover(self, seq: int) -> None:
        self.takeovers += 1

    @on("datanode.flush_ts", columns=("detail", "ts"), objects=("detail",))
    def _flush_ts(self, seq: int, detail: dict, ts) -> None:
        if detail.get("set") is False:
            self.flush_ts_cleared += 1
            self.flush_ts_cleared_at_equal += int(detail.get("checkpoint", -1)) == int(ts)

    def sections(self, counts: dict) -> dict:
        """The ``flush`` section of ``summary.json``."""
        return {"flush": {
            "acknowledged_rows": self.acked_rows,
            "acknowledged_deletes": self.deleted_keys,
            "syncs": self.syncs,
            "synced_rows": self.synced_rows,
            "failed_syncs": self.failed_syncs,
            "binlog_reports_stored": self.saved,
            "binlog_reports_refused": self.save_errors,
            "channel_checkpoints_stored": self.cp_stored,
            "channel_checkpoints_ignored": self.cp_ignored,
            "checkpoint_rpc_errors": self.cp_rpc_errors,
            "rows_filtered_on_replay": self.filtered,
            "flushes": self.flushes,
            "flushes_completed": self.flushed,
            "datanode_crashes": self.crashes,
            "datanode_restarts": self.restarts,
            "channel_takeovers": self.takeovers,
            "audited": self.audit_segments > 0,
            "audit_segments": self.audit_segments,
            "audit_flushed_segments": self.flushed_segments,
            "audit_rows": self.audit_rows,
            "audit_deleted_keys": self.audit_deleted,
            "final_channel_checkpoints": dict(sorted(self.last_cp.items())),
            "datanode_steps": self.steps,
            "flush_ts_cleared": self.flush_ts_cleared,
            "flush_ts_cleared_at_equal": self.flush_ts_cleared_at_equal,
        }}


def report(summary: dict) -> list[str]:
    """The flush lines in the CLI's report of a run."""
    f = summary.get("flush")
    if not f:
        return []
    lines = [f"{plural(f['acknowledged_rows'], 'row')} and {plural(f['acknowledged_deletes'], 'delete')} "
             f"acknowledged; {plural(f['syncs'], 'sync')} cut ({plural(f['synced_rows'], 'row')}, "
             f"{f['failed_syncs']:,} failed); {plural(f['channel_checkpoints_stored'], 'channel checkpoint')} stored "
             f"({f['channel_checkpoints_ignored']:,} ignored as not newer)"]
    if f.get("flush_ts_cleared_at_equal"):
        lines.append(f"the DataNode cleared flushTs {plural(f['flush_ts_cleared'], 'time')}, "
                     f"{f['flush_ts_cleared_at_equal']:,} of them on a stored checkpoint equal to flushTs (Milvus "
                     "waits for one strictly past it); no "
                     "answer a client gets depends on it (quirk P23)")
    if f["datanode_crashes"]:
        back = (f"another DataNode took over its channels {times(f['channel_takeovers'])}"
                if f.get("channel_takeovers") else f"restarted {times(f['datanode_restarts'])}")
        filtered = f["rows_filtered_on_replay"]
        lines.append(f"the DataNode crashed {times(f['datanode_crashes'])} and {back}; "
                     f"{plural(filtered, 'replayed row')} {'was' if filtered == 1 else 'were'} filtered as already "
                     "flushed")
    if f["audited"]:
        one = f["audit_segments"] == 1
        lines.append(f"final audit: {plural(f['audit_segments'], 'segment')} ({f['audit_flushed_segments']:,} "
                     f"Flushed) {'holds' if one else 'hold'} {plural(f['audit_rows'], 'row')} and "
                     f"{plural(f['audit_deleted_keys'], 'delete')} in {'its' if one else 'their'} binlogs")
    elif not f["flushes"]:  # flush-drop-collection never flushes; a run cut short ends before its final flush
        lines.append("no final audit: no client flushed in this run (durability not judged)")
    else:
        lines.append("no final audit: the run ended before the last flush completed (durability not judged)")
        if f["datanode_crashes"]:
            lines.append("after a crash, a sealed segment whose rows died in the node's memory is flushed only once the "
                         "restarted node's stale-buffer sync writes them (dataNode.segment.syncPeriod, 600 s): "
                         "try a longer --duration")
    return lines


class KeyEvents:
    """Which flush events ``milvus-edu timeline`` prints by default: watches, syncs, flush steps, seals,
    state changes, crashes, the audit, and checkpoint updates that failed."""

    SHOW = frozenset({"datanode.watch", "datanode.sync", "datacoord.flush", "datanode.flush_ts", "datanode.seal",
                      "datacoord.segment_state", "client.flush", "storage.audit", "datacoord.flush_segments",
                      "datacoord.reassign"})

    def __init__(self):
        self.hidden: dict[str, int] = {}

    def show(self, row: dict) -> bool:
        """Whether ``row`` is a key event (call once per row, in order: it counts the flush events it hides)."""
        kind = row["kind"]
        if kind in self.SHOW:
            return True
        if kind in ("datanode.cp_rpc", "datanode.sync_done") and row.get("error") is not None:
            return True
        if kind.startswith(("datanode.", "datacoord.")):
            self.hidden[kind] = self.hidden.get(kind, 0) + 1
        return False

    def notes(self) -> list[str]:
        """One line saying which DataNode and DataCoord events were left out, and how to see them."""
        if not self.hidden:
            return []
        parts = ", ".join(f"{n:,} {kind}" for kind, n in sorted(self.hidden.items()))
        return [f"not shown: {parts} (--all prints every event)"]
