"""The query mechanism's events in words (one function per kind, registered as ``describe``)."""

from __future__ import annotations

from ...narrate import detail_of, plural, ts_text, value


def _keys(pks) -> str:
    pks = list(pks or [])
    if not pks:
        return "nothing"
    shown = ", ".join(str(p) for p in pks[:8])
    return shown + (f" and {len(pks) - 8} more" if len(pks) > 8 else "")


#: The levels whose guarantee is the one the client sent (parseGuaranteeTsFromConsistency keeps it); the others
#: derive it from the proxy's begin timestamp.
CLIENT_GUARANTEE_LEVELS = ("Customized", "Session")


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
    level = value(row, "level")
    if level is None:
        note = " (the proxy keeps it only if the collection's level is Session or Customized)"
    elif level not in CLIENT_GUARANTEE_LEVELS:
        note = f" (a {level} read does not use it: the proxy sets its own)"
    else:
        note = ""
    return (f"{value(row, 'node')} sends {d.get('op')} #{value(row, 'request')} on {d.get('collection')} at "
            f"{_level(row)}, guarantee_timestamp={g} from the SDK{note}.")


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
    parts = [plural(value(row, 'count'), 'row')]
    if d.get("deletes"):
        parts.append(plural(d['deletes'], 'delete'))
    if d.get("dropped"):
        parts.append(f"{plural(len(d['dropped']), 'insert')} dropped as excluded")
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
            f"binlogs ({plural(value(row, 'count'), 'row')}); stream inserts of it up to {ts_text(value(row, 'ts'))} "
            "are excluded"
            f"{', its growing copy released' if d.get('released_growing') else ''}.")


def _drop(row) -> str:
    d = detail_of(row)
    if value(row, "error"):
        return f"{value(row, 'node')} fails to drop {d.get('collection')}: {value(row, 'error')}."
    if d.get("collection_id") is None:
        return f"{value(row, 'node')} drops {d.get('collection')}, which does not exist: nothing to do."
    return (f"{value(row, 'node')} drops collection {d.get('collection')} (id {d.get('collection_id')}) at "
            f"{ts_text(value(row, 'ts'))}; every proxy's meta cache was invalidated first.")


def _describe(row) -> str:
    d = detail_of(row)
    return (f"{value(row, 'node')}'s SDK describes {d.get('collection')}: id {d.get('collection_id')}, schema version "
            f"{ts_text(value(row, 'ts'))}; its inserts will send that version.")


def _retry(row) -> str:
    d = detail_of(row)
    return (f"{value(row, 'node')}'s insert into {d.get('collection')} (attempt {value(row, 'count')}) failed: "
            f"{value(row, 'error')}; the SDK forgets its description and retries in {d.get('sleep_ms'):g} ms.")


def _meta_cache(row) -> str:
    d = detail_of(row)
    # a program driving the proxy itself names a collection by id only
    node, result = value(row, "node"), d.get("result")
    coll = d.get("collection") or f"collection {d.get('collection_id')}"
    if result == "hit":
        return f"{node}'s meta cache has {coll}: id {d.get('collection_id')}."
    if result == "invalidate":
        removed = ", ".join(d.get("removed") or [])
        task = "creation" if d.get("task") == "CreateCollection" else "drop"
        return (f"rootcoord's {task} of {coll} (id {d.get('collection_id')}) at {ts_text(value(row, 'ts'))} invalidates "
                f"{node}'s meta cache: {f'removed {removed}' if removed else 'nothing to remove'}.")
    if result == "schema_mismatch":
        return (f"{node} refuses an insert into {coll}: its schema timestamp {ts_text(d.get('schema_ts'))} is not the "
                f"collection's {ts_text(value(row, 'ts'))} ({value(row, 'error')}).")
    if value(row, "error"):
        return f"{node}'s meta cache misses {coll}; rootcoord answers: {value(row, 'error')}."
    kept = "and caches it" if d.get("cached", True) else "but does not cache it (a drop came after the describe)"
    return (f"{node}'s meta cache misses {coll}; DescribeCollection gives id {d.get('collection_id')}, schema "
            f"version {ts_text(value(row, 'ts'))}, {kept}.")


def _ddl(row) -> str:
    d = detail_of(row)
    if d.get("state") == "started":
        return (f"rootcoord starts {d.get('task')} of {d.get('collection')} at {ts_text(value(row, 'ts'))}: until it "
                f"finishes, the DDL time tick stays below it.")
    err = f" with error {value(row, 'error')}" if value(row, "error") else ""
    return (f"rootcoord finishes {d.get('task')} of {d.get('collection')}{err}; the DDL minimum is "
            f"{ts_text(d.get('min_ddl_ts'))}.")


def _release(row) -> str:
    return (f"{value(row, 'node')} releases {value(row, 'vchannel')} (collection {detail_of(row).get('collection_id')} "
            f"dropped): its delegator closes at tsafe {ts_text(value(row, 'ts'))}.")


DESCRIBE = {
    "client.drop_collection": _drop,
    "client.describe_collection": _describe,
    "client.retry": _retry,
    "proxy.meta_cache": _meta_cache,
    "rootcoord.ddl": _ddl,
    "querynode.release": _release,
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
