"""The flush mechanism's events in words (one function per kind, registered as ``describe``)."""

from __future__ import annotations

from ...narrate import detail_of, named, plural, ts_text, value


def _pos(row) -> str:
    ts = value(row, "ts")
    return "the start of the channel" if ts is None else f"{ts_text(ts)} (message {value(row, 'msg_id')})"


def _watch(row) -> str:
    d = detail_of(row)
    return (f"{value(row, 'node')} watches {value(row, 'vchannel')} from {_pos(row)}; recovered segments: "
            f"{len(d.get('flushed', []))} flushed, {len(d.get('unflushed', []))} unflushed.")


def _buffer(row) -> str:
    d = detail_of(row)
    deletes = d.get("deletes", 0)
    tail = f" and {plural(deletes, 'delete')}" if deletes else ""
    return (f"{value(row, 'node')} buffers the pack ({ts_text(value(row, 'begin_ts'))}, {ts_text(value(row, 'end_ts'))}] "
            f"of {value(row, 'vchannel')}: {plural(value(row, 'count'), 'row')}{tail}.")


def _checkpoint(row) -> str:
    d = detail_of(row)
    why = ("a flush waits on it" if d.get("flush") else "its flowgraph is closing" if d.get("closing")
           else "its periodic update is due")
    return (f"{value(row, 'node')}'s ttNode hands {value(row, 'vchannel')}'s checkpoint {ts_text(value(row, 'ts'))} "
            f"to the updater ({why}).")


def _sync(row) -> str:
    d = detail_of(row)
    what = "flush" if d.get("flush") else ("drop" if d.get("drop") else "sync")
    deletes = f" and {plural(d['deletes'], 'delete')}" if d.get("deletes") else ""
    if d.get("level") == "L0":  # the write buffer's delete-only segment: its binlogs are delta logs
        return (f"{value(row, 'node')} starts a {what} of L0 segment {value(row, 'segment')} (deletes only): "
                f"{plural(d.get('deletes') or 0, 'delete')}, reporting position {ts_text(value(row, 'ts'))}.")
    return (f"{value(row, 'node')} starts a {what} of segment {value(row, 'segment')}: "
            f"{plural(value(row, 'count'), 'row')}{deletes}, reporting position {ts_text(value(row, 'ts'))}.")


def _sync_done(row) -> str:
    err = value(row, "error")
    if err:
        return f"{value(row, 'node')}'s sync of segment {value(row, 'segment')} fails: {err}."
    return f"{value(row, 'node')}'s sync of segment {value(row, 'segment')} is done."


def _cp_rpc(row) -> str:
    positions = detail_of(row).get("positions", {})
    listed = ", ".join(f"{ch} {ts_text(ts)}" for ch, ts in sorted(positions.items()))
    err = value(row, "error")
    if err:
        # Milvus's rule, not what this run did: with drop_failed_checkpoint_tasks the task is deleted (the checker says so)
        return (f"{value(row, 'node')}'s checkpoint update ({listed}) fails: {err}; Milvus's updater keeps "
                f"a failed task for its next tick.")
    return f"{value(row, 'node')} sends checkpoints to DataCoord: {listed}."


def _flush_ts(row) -> str:
    d = detail_of(row)
    if d.get("set"):
        return f"{value(row, 'node')} sets {value(row, 'vchannel')}'s flushTs to {ts_text(value(row, 'ts'))}."
    # equal only with reset_flush_ts_inclusive (Milvus clears on a checkpoint past flushTs)
    where = "equal to it" if d.get("checkpoint") is not None and int(d["checkpoint"]) == value(row, "ts") else "past it"
    return (f"{value(row, 'node')} clears {value(row, 'vchannel')}'s flushTs {ts_text(value(row, 'ts'))}: DataCoord "
            f"stored the checkpoint {ts_text(value(row, 'tick_ts'))}, {where}.")


def _save(row) -> str:
    err = value(row, "error")
    if err:
        return f"{value(row, 'node')} refuses the sync report of segment {value(row, 'segment')}: {err}."
    d = detail_of(row)
    return (f"{value(row, 'node')} records segment {value(row, 'segment')}'s sync from {value(row, 'peer')}: "
            f"{plural(d.get('rows', 0), 'row')} more, DmlPosition {ts_text(value(row, 'ts'))}, state {d.get('state')}.")


def _channel_cp(row) -> str:
    err = value(row, "error")
    if err:
        return f"{value(row, 'node')} fails a checkpoint update from {value(row, 'peer')}: {err}."
    saved = detail_of(row).get("saved")
    verb = "stores" if saved else "ignores (not newer than the stored one)"
    return f"{value(row, 'node')} {verb} {value(row, 'vchannel')}'s checkpoint {ts_text(value(row, 'ts'))}."


def _client(what):
    def describe(row) -> str:
        err = value(row, "error")
        if err:
            return f"{value(row, 'node')}'s {what} fails: {err}."
        return (f"{value(row, 'node')}'s {what} of {plural(value(row, 'count'), 'key')} is acknowledged at "
                f"{ts_text(value(row, 'ts'))}.")
    return describe


def _client_flush(row) -> str:
    if value(row, "error"):
        return f"{value(row, 'node')}'s flush fails: {value(row, 'error')}."
    if detail_of(row).get("flushed"):
        return f"GetFlushState tells {value(row, 'node')} the flush at {ts_text(value(row, 'ts'))} is complete."
    return (f"{value(row, 'node')} flushes: flushTs {ts_text(value(row, 'ts'))}, "
            f"{plural(value(row, 'count'), 'segment')} sealed; it now polls GetFlushState.")


def _audit(row) -> str:
    d = detail_of(row)
    return (f"The audit reads segment {value(row, 'segment')} ({d.get('state')}, {d.get('level')}) back: "
            f"{plural(value(row, 'count'), 'row')} and {plural(len(d.get('deleted', [])), 'delete')} in its binlogs.")


def _sync_policy(row) -> str:
    d = detail_of(row)
    segments = d.get("segments")
    if d.get("reason") == "buffer stale":
        return (f"{value(row, 'node')}'s stale-buffer policy picks {named('segment', segments)} of "
                f"{value(row, 'vchannel')}: {'its' if len(segments or []) == 1 else 'their'} oldest row is more than "
                f"syncPeriod older than {ts_text(value(row, 'ts'))}.")
    return (f"{value(row, 'node')}'s memory check finds {d.get('buffered_bytes', 0):,} bytes buffered (watermark "
            f"{d.get('watermark_bytes', 0):,}) and evicts the oldest buffer of {value(row, 'vchannel')}: "
            f"{named('segment', segments)}.")


def _drop(row) -> str:
    n = value(row, "count")
    return (f"{value(row, 'node')} consumes the DropCollection of {value(row, 'vchannel')}: {plural(n, 'buffer')} "
            f"{'goes out as a drop sync' if n == 1 else 'go out as drop syncs'}, and its ttNode never submits this "
            "channel's checkpoint again.")


def _stop(row) -> str:
    unsent = detail_of(row).get("unsent", {})
    listed = ", ".join(f"{ch} {ts_text(ts)}" for ch, ts in sorted(unsent.items())) or "none"
    return (f"{value(row, 'node')} stops gracefully: its flowgraphs are closed, then its checkpoint updater, with "
            f"{plural(value(row, 'count'), 'task')} never sent ({listed}).")


def _steps(row) -> str:
    passed = plural(value(row, "count"), "step boundary", "step boundaries")
    return (f"At the audit, {value(row, 'node')} has passed {passed} (packs its flowgraph took, effects of its syncs "
            "and checkpoint updater): --option crash_step=N crashes datanode-1 at any of them.")


DESCRIBE = {
    "datanode.steps": _steps,
    "datanode.watch": _watch,
    "datanode.filter": lambda r: (f"{value(r, 'node')} drops a replayed insert of segment {value(r, 'segment')} at "
                                  f"{ts_text(value(r, 'ts'))}: it is already in a binlog."),
    "datanode.buffer": _buffer,
    "datanode.checkpoint": _checkpoint,
    "datanode.sync": _sync,
    "datanode.sync_done": _sync_done,
    "datanode.sync_policy": _sync_policy,
    "datanode.drop": _drop,
    "datanode.stop": _stop,
    "datanode.cp_rpc": _cp_rpc,
    "datanode.flush_ts": _flush_ts,
    "datanode.seal": lambda r: (f"{value(r, 'node')} seals {named('segment', detail_of(r).get('segments'))} of "
                                f"{value(r, 'vchannel')} at DataCoord's request."),
    "datacoord.save_binlog_paths": _save,
    "datacoord.channel_cp": _channel_cp,
    "datacoord.flush": lambda r: (f"{value(r, 'node')} flushes for {value(r, 'peer')}: flushTs {ts_text(value(r, 'ts'))}, "
                                  f"sealed {named('segment', detail_of(r).get('sealed'))}."),
    "datacoord.flush_segments": lambda r: (f"{value(r, 'node')} asks {value(r, 'peer')} to flush sealed "
                                           f"{named('segment', detail_of(r).get('segments'))} of "
                                           f"{value(r, 'vchannel')}."),
    "datacoord.segment_state": lambda r: (f"{value(r, 'node')} marks segment {value(r, 'segment')} "
                                          f"{detail_of(r).get('state')}."),
    "datacoord.reassign": lambda r: (f"{value(r, 'node')} saw {detail_of(r).get('from')}'s session expire and hands "
                                     f"its {named('channel', detail_of(r).get('channels'))} to {value(r, 'peer')}."),
    "client.insert": _client("insert"),
    "client.delete": _client("delete"),
    "client.flush": _client_flush,
    "storage.audit": _audit,
}
