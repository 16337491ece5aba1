"""The flush mechanism's part of a run's summary, its CLI report line and its key events."""

from __future__ import annotations

from ...check.violation import ROW, Read, batch_columns
from ...narrate import detail_dict

# What the fast path (FlushSummary.write_batch) reads by columns: the acknowledged writes; the rare kinds come
# as row dicts, for write.
_INSERT, _DELETE = range(2)
_READS = {"client.insert": Read(_INSERT, ("error", "count")), "client.delete": Read(_DELETE, ("error", "count"))}


class FlushSummary:
    """Counts syncs, checkpoints, flushes, restarts and the final audit while a run is recorded."""

    kinds = frozenset({"datanode.sync", "datanode.sync_done", "datacoord.save_binlog_paths", "datacoord.channel_cp",
                       "datanode.filter", "client.insert", "client.delete", "client.flush", "storage.audit",
                       "fault.kill", "fault.restart", "datanode.cp_rpc", "datanode.steps",
                       "datacoord.reassign", "datanode.flush_ts"})
    #: How write_batch reads each kind (the ones not in _READS as row dicts).
    _reads = {kind: _READS.get(kind, Read(ROW)) for kind in kinds}

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

    def write(self, row: dict) -> None:
        """Account for one row."""
        kind = row["kind"]
        failed = row.get("error") is not None
        if kind == "datanode.sync":
            self.syncs += 1
            self.synced_rows += int(row["count"] or 0)
        elif kind == "datanode.sync_done" and failed:
            self.failed_syncs += 1
        elif kind == "datacoord.save_binlog_paths":
            self.save_errors += failed
            self.saved += not failed
        elif kind == "datacoord.channel_cp" and not failed:
            if detail_dict(row["detail"]).get("saved"):
                self.cp_stored += 1
                self.last_cp[row["vchannel"]] = int(row["ts"])
            else:
                self.cp_ignored += 1
        elif kind == "datanode.cp_rpc" and failed:
            self.cp_rpc_errors += 1
        elif kind == "datanode.filter":
            self.filtered += int(row["count"] or 0)
        elif kind == "client.insert" and not failed:
            self.acked_rows += int(row["count"])
        elif kind == "client.delete" and not failed:
            self.deleted_keys += int(row["count"])
        elif kind == "client.flush" and not failed:
            if detail_dict(row["detail"]).get("flushed"):
                self.flushed += 1
            else:
                self.flushes += 1
        elif kind == "storage.audit":
            detail = detail_dict(row["detail"])
            self.audit_segments += 1
            self.audit_rows += int(row["count"])
            self.audit_deleted += len(detail.get("deleted", []))
            self.flushed_segments += detail.get("state") == "Flushed"
        elif kind == "datanode.steps":  # one row per DataNode (`node`): its own step boundaries
            self.steps = (self.steps or 0) + int(row["count"])
        elif kind == "fault.kill" and str(row["node"]).startswith("datanode"):
            self.crashes += 1
        elif kind == "fault.restart" and str(row["node"]).startswith("datanode"):
            self.restarts += 1
        elif kind == "datacoord.reassign":
            self.takeovers += 1
        elif kind == "datanode.flush_ts":
            detail = detail_dict(row["detail"])
            if detail.get("set") is False:
                self.flush_ts_cleared += 1
                self.flush_ts_cleared_at_equal += int(detail.get("checkpoint", -1)) == int(row["ts"])

    def write_batch(self, batch) -> None:
        """The recorder's fast path: what :meth:`write` does with each row of ``batch`` (a ``RowBatch``) of
        :attr:`kinds`, in ``seq`` order. The acknowledged writes are read straight from the batch's tuples; the
        rare kinds are handed to :meth:`write` as rows.

        It mirrors the branches of :meth:`write` it replaces; ``tests/test_checker_fast.py`` proves both give
        the same section on real runs.
        """
        for _, code, columns in batch_columns(batch, self._reads):
            if code == _INSERT:
                if columns[0] is None:
                    self.acked_rows += int(columns[1])
            elif code == _DELETE:
                if columns[0] is None:
                    self.deleted_keys += int(columns[1])
            else:  # ROW
                self.write(columns)

    def close(self) -> None:
        """Nothing to release."""

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
    lines = [f"{f['acknowledged_rows']:,} rows and {f['acknowledged_deletes']:,} deletes acknowledged; "
             f"{f['syncs']:,} syncs cut ({f['synced_rows']:,} rows, {f['failed_syncs']:,} failed); "
             f"{f['channel_checkpoints_stored']:,} channel checkpoints stored "
             f"({f['channel_checkpoints_ignored']:,} ignored as not newer)"]
    if f.get("flush_ts_cleared_at_equal"):
        lines.append(f"the DataNode cleared flushTs {f['flush_ts_cleared']} time(s), {f['flush_ts_cleared_at_equal']} "
                     "of them on a stored checkpoint equal to flushTs (Milvus waits for one strictly past it); no "
                     "answer a client gets depends on it (quirk P23)")
    if f["datanode_crashes"]:
        back = (f"another DataNode took its channels {f['channel_takeovers']} time(s)" if f.get("channel_takeovers")
                else f"restarted {f['datanode_restarts']}")
        lines.append(f"the DataNode crashed {f['datanode_crashes']} time(s) and {back}; "
                     f"{f['rows_filtered_on_replay']:,} replayed rows were filtered as already flushed")
    if f["audited"]:
        lines.append(f"final audit: {f['audit_segments']} segments ({f['audit_flushed_segments']} Flushed) hold "
                     f"{f['audit_rows']:,} rows and {f['audit_deleted_keys']:,} deletes in their binlogs")
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
