"""The query mechanism's events in words (one function per kind, registered as ``describe``)."""

from __future__ import annotations

from ...narrate import detail_of, ts_text, value


def _keys(pks) -> str:
    pks = list(pks or [])
    if not pks:
        return "nothing"
    shown = ", ".join(str(p) for p in pks[:8])
    return shown + (f" and {len(pks) - 8} more" if len(pks) > 8 else "")


def _level(row) -> str:
    return value(row, "level") or "the collection's default level"


def _create(row) -> str:
    d = detail_of(row)
    if value(row, "error"):
        return f"{value(row, 'node')} fails to create {d.get('collection')}: {value(row, 'error')}."
    return (f"{value(row, 'node')} creates collection {d.get('collection')} (id {d.get('collection_id')}, default level "
            f"{value(row, 'level')}) at {ts_text(value(row, 'ts'))}; the QueryNode loads it.")


def _read_start(row) -> str:
    d = detail_of(row)
    g = value(row, "guarantee_ts")
    return (f"{value(row, 'node')} sends {d.get('op')} #{value(row, 'request')} on {d.get('collection')} at "
            f"{_level(row)}, guarantee_timestamp={g} from the SDK.")


def _read(row) -> str:
    d = detail_of(row)
    if value(row, "error"):
        return f"{value(row, 'node')}'s {d.get('op')} #{value(row, 'request')} fails: {value(row, 'error')}."
    return (f"{value(row, 'node')}'s {d.get('op')} #{value(row, 'request')} ({value(row, 'level')}) returns "
            f"{_keys(d.get('pks'))}, read at {ts_text(value(row, 'ts'))}.")


def _proxy_read(row) -> str:
    d = detail_of(row)
    src = "the TSO" if d.get("from_tso") else "its own clock"
    return (f"{value(row, 'node')} starts read #{value(row, 'request')} at {ts_text(value(row, 'ts'))} (from {src}); "
            f"level {value(row, 'level')} asks every shard for tsafe >= {ts_text(value(row, 'guarantee_ts'))}.")


def _watch(row) -> str:
    return (f"{value(row, 'node')} serves {value(row, 'vchannel')}: its delegator starts with tsafe "
            f"{ts_text(value(row, 'ts'))}.")


def _pack(row) -> str:
    d = detail_of(row)
    parts = [f"{value(row, 'count')} row(s)"]
    if d.get("deletes"):
        parts.append(f"{d['deletes']} delete(s)")
    if d.get("dropped"):
        parts.append(f"{len(d['dropped'])} insert(s) dropped as excluded")
    return (f"{value(row, 'node')}'s pipeline applies the pack ({ts_text(value(row, 'begin_ts'))}, "
            f"{ts_text(value(row, 'end_ts'))}] of {value(row, 'vchannel')}: {', '.join(parts)}.")


def _tsafe(row) -> str:
    return f"{value(row, 'vchannel')}'s tsafe is now {ts_text(value(row, 'ts'))}: every message up to it is applied."


def _wait(row) -> str:
    return (f"read #{value(row, 'request')} ({value(row, 'level')}) waits on {value(row, 'vchannel')}: tsafe "
            f"{ts_text(value(row, 'tick_ts'))} is below its guarantee {ts_text(value(row, 'guarantee_ts'))}.")


def _qn_read(row) -> str:
    d = detail_of(row)
    if value(row, "error"):
        return f"read #{value(row, 'request')} on {value(row, 'vchannel')} fails: {value(row, 'error')}."
    waited = d.get("waited_ms") or 0
    wait = f" after waiting {waited:.1f} ms" if waited else " at once"
    return (f"read #{value(row, 'request')} on {value(row, 'vchannel')} reads at {ts_text(value(row, 'ts'))}{wait}: "
            f"{_keys(d.get('pks'))}.")


def _load(row) -> str:
    d = detail_of(row)
    return (f"{value(row, 'node')} loads flushed segment {value(row, 'segment')} of {value(row, 'vchannel')} from its "
            f"binlogs ({value(row, 'count')} rows); stream inserts of it up to {ts_text(value(row, 'ts'))} are excluded"
            f"{', its growing copy released' if d.get('released_growing') else ''}.")


DESCRIBE = {
    "client.create_collection": _create,
    "client.read_start": _read_start,
    "client.read": _read,
    "proxy.read": _proxy_read,
    "querynode.watch": _watch,
    "querynode.pack": _pack,
    "querynode.tsafe": _tsafe,
    "querynode.wait": _wait,
    "querynode.read": _qn_read,
    "querynode.load": _load,
}
