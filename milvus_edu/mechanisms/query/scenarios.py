"""The query mechanism's scenarios: the design documents' Client1/Client2 table (book/seeds.md) and incidents from real Milvus issues.

Every scenario builds the cluster of :func:`cluster_spec` (rootcoord, two proxies over two pchannels, DataCoord, a
DataNode and a QueryNode) and runs a workload of client steps (:func:`~milvus_edu.client.workload.parse_steps`) on
it. A learner's own workload runs the same way: ``build(sim, cluster_spec()).run_steps(steps)`` or the notebook API.
"""

from __future__ import annotations

from ...events import SIM_EPOCH_MS
from ...registry import Scenario
from ...sim.interventions import MAX_CLOCK_JUMP_MS
from ...sim.scenarios import After, At
from ...sim.kernel import Simulation
from ...tsoutil import compose_ts
from ...client.workload import SEED_STEPS, T0_S, parse_steps, warn_steps_after
from ...cluster.builder import Cluster, ClusterSpec, DataNodeSpec, ProxySpec, build, check_proxy_count

#: ``rootCoord.dmlChannelNum`` is 16 in Milvus; two keep the lesson readable (every collection has a shard on each).
PCHANNELS = 2


def cluster_spec(proxies: int = 2, proxy_clock_offsets_ms=(), proxy_task_ms: float = 4.0,
                 meta_cache: bool = False) -> ClusterSpec:
    """The query lesson's cluster: rootcoord, ``proxies`` proxies (client *k* talks to proxy ``k mod proxies``; each
    proxy's wall-clock error for its non-Strong reads from ``proxy_clock_offsets_ms``, negative: behind; a DML task
    takes ``proxy_task_ms`` on average), 2 pchannels, DataCoord, a DataNode (so a flush writes real Parquet binlogs)
    and a QueryNode. ``meta_cache``: model the proxies' meta caches, DDL on rootcoord's scheduler, drops and the
    SDK's schema retry (:mod:`milvus_edu.cluster.catalog`)."""
    check_proxy_count(proxies, "a cluster")
    offsets = list(proxy_clock_offsets_ms) + [0.0] * proxies
    far = [o for o in offsets if abs(o) > MAX_CLOCK_JUMP_MS]
    if far:  # a proxy's reads would ask for a timestamp past what a hybrid timestamp holds
        raise ValueError(f"a proxy's clock offset must be at most 100 years ({MAX_CLOCK_JUMP_MS:.4g} ms) either way, "
                         f"got {far[0]:g} ms")
    return ClusterSpec(pchannels=PCHANNELS,
                       proxies=tuple(ProxySpec(task_ms=proxy_task_ms, clock_offset_ms=offsets[i], record_pks=True)
                                     for i in range(proxies)),
                       datacoord=True, datanodes=(DataNodeSpec(),), querynodes=1, meta_cache=meta_cache)


def _cluster(sim: Simulation, steps, **kwargs) -> Cluster:
    cluster = build(sim, cluster_spec(**kwargs))
    cluster.start()
    cluster.run_steps(steps)
    return cluster


def _not_negative(**values) -> None:
    """Refuse a negative count or time: a count below 0 would quietly run as 0, a time below 0 fail deep in SimPy."""
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"option {name} must not be negative, got {value:g}; use {name}=0 or more")


def _seed(sim: Simulation, proxies: int = 2) -> Cluster:
    return _cluster(sim, SEED_STEPS, proxies=proxies)


def _workload(sim: Simulation, steps=(), proxies: int = 2, proxy2_clock_offset_ms: float = 0.0) -> Cluster:
    if steps:  # the learner's own workload: a step after the run's end would quietly never run
        warn_steps_after(parse_steps(steps), sim.until_ms)
    return _cluster(sim, steps or SEED_STEPS, proxies=proxies, proxy_clock_offsets_ms=(0.0, proxy2_clock_offset_ms))


def insert_then_search_steps(rounds: int = 12) -> list[dict]:
    """Client1 inserts a key and searches for it right away at the collection's default level (Bounded), then
    at Strong; Client2 does the same at Session, which sees only its own writes."""
    steps = [{"at": T0_S, "client": "Client1", "op": "create_collection", "collection": "C0"}]
    for i in range(rounds):
        at = 1.0 + 0.5 * i
        steps += [
            {"at": at, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": f"K{i}"}]},
            {"at": at, "client": "Client1", "op": "query", "collection": "C0", "ids": [f"K{i}"], "label": "default"},
            {"at": at, "client": "Client1", "op": "query", "collection": "C0", "ids": [f"K{i}"],
             "consistency_level": "Session", "label": "session"},
            {"at": at, "client": "Client1", "op": "query", "collection": "C0", "ids": [f"K{i}"],
             "consistency_level": "Strong", "label": "strong"},
        ]
    return steps


def _insert_then_search(sim: Simulation, rounds: int = 12) -> Cluster:
    _not_negative(rounds=rounds)
    return _cluster(sim, insert_then_search_steps(rounds))


def clock_skew_steps(reads: int = 6) -> list[dict]:
    """Client1 (proxy-1, a good clock) and Client2 (proxy-2, whose clock runs ahead) read Bounded every 2 s while
    Client1 writes."""
    steps = [{"at": T0_S, "client": "Client1", "op": "create_collection", "collection": "C0"}]
    for i in range(reads):
        at = 1.0 + 2.0 * i
        steps += [
            {"at": at, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": f"K{i}"}]},
            {"at": at + 0.5, "client": "Client1", "op": "search", "collection": "C0", "consistency_level": "Bounded"},
            {"at": at + 0.5, "client": "Client2", "op": "search", "collection": "C0", "consistency_level": "Bounded"},
        ]
    return steps


def _clock_skew(sim: Simulation, ahead_ms: float = 8000.0, reads: int = 6) -> Cluster:
    _not_negative(reads=reads)
    return _cluster(sim, clock_skew_steps(reads), proxy_clock_offsets_ms=(0.0, ahead_ms))


def stall_steps(reads: int = 14, timeout_s: float = 5.0) -> list[dict]:
    """Reads every 5 s at Strong (with a timeout), Bounded and Eventually while a proxy dies and comes back."""
    steps = [{"at": T0_S, "client": "Client1", "op": "create_collection", "collection": "C0"}]
    for i in range(reads):
        at = 1.0 + 5.0 * i
        steps += [
            {"at": at, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": f"K{i}"}]},
            {"at": at + 0.5, "client": "Client1", "op": "search", "collection": "C0", "consistency_level": "Strong",
             "timeout": timeout_s},
            {"at": at + 0.5, "client": "Client3", "op": "search", "collection": "C0", "consistency_level": "Bounded"},
            {"at": at + 0.5, "client": "Client5", "op": "search", "collection": "C0",
             "consistency_level": "Eventually"},
        ]
    return steps


def _stall(sim: Simulation, kill_at_s: float = 5.0, restart_after_s: float = 2.0, timeout_s: float = 5.0) -> Cluster:
    _not_negative(kill_at_s=kill_at_s, restart_after_s=restart_after_s)
    if not timeout_s > 0:
        raise ValueError(f"option timeout_s must be positive, got {timeout_s:g}; use timeout_s=5 for example")
    cluster = _cluster(sim, stall_steps(timeout_s=timeout_s))
    proxy = cluster.node("proxy-2")
    sim.at(kill_at_s * 1000.0, lambda: cluster.kill("proxy-2"))
    sim.at((kill_at_s + restart_after_s) * 1000.0, lambda: cluster.restart("proxy-2", proxy.server_id + 100))
    return cluster


def lag_steps() -> list[dict]:
    """A Customized read with a guarantee more than a day past tsafe (refused at once), and one 3 s ahead (waits)."""
    day_ahead = compose_ts(SIM_EPOCH_MS + 25 * 3600 * 1000, 0)
    soon = compose_ts(SIM_EPOCH_MS + 4500, 0)
    return [
        {"at": T0_S, "client": "Client1", "op": "create_collection", "collection": "C0"},
        {"at": 1.0, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": "A1"}]},
        {"at": 1.5, "client": "Client2", "op": "query", "collection": "C0", "consistency_level": "Customized",
         "guarantee_timestamp": day_ahead, "label": "a day ahead"},
        {"at": 1.5, "client": "Client3", "op": "query", "collection": "C0", "consistency_level": "Customized",
         "guarantee_timestamp": soon, "label": "3 s ahead"},
    ]


def _lag(sim: Simulation) -> Cluster:
    return _cluster(sim, lag_steps())


def reorder_steps() -> list[dict]:
    """Insert A, delete A, insert A again within one time-tick interval, then reads at every level."""
    steps = [
        {"at": T0_S, "client": "Client1", "op": "create_collection", "collection": "C0"},
        {"at": 1.01, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": "A"}, {"id": "B"}]},
        {"at": 1.01, "client": "Client1", "op": "delete", "collection": "C0", "ids": ["A"]},
        {"at": 1.01, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": "A"}]},
        {"at": 1.01, "client": "Client1", "op": "query", "collection": "C0", "consistency_level": "Strong",
         "label": "right after"},
    ]
    for level in ("Strong", "Session", "Bounded", "Eventually"):
        steps.append({"at": 1.3, "client": "Client1", "op": "query", "collection": "C0", "consistency_level": level})
    steps.append({"at": 1.3, "client": "Client2", "op": "query", "collection": "C0", "consistency_level": "Strong"})
    return steps


def _reorder(sim: Simulation) -> Cluster:
    return _cluster(sim, reorder_steps())


def delete_then_read_steps() -> list[dict]:
    """Client1 inserts A1 and A2, deletes A1 and reads at Strong the moment the delete returns; Client2 reads at
    Strong a tick and a half later. Client1's read waits for the very pack that carries the delete."""
    return [
        {"at": T0_S, "client": "Client1", "op": "create_collection", "collection": "C0"},
        {"at": 0.8, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": "A1"}, {"id": "A2"}]},
        {"at": 1.2, "client": "Client1", "op": "delete", "collection": "C0", "ids": ["A1"], "label": "delete A1"},
        {"at": 1.2, "client": "Client1", "op": "query", "collection": "C0", "consistency_level": "Strong",
         "label": "right after the delete"},
        {"at": 1.5, "client": "Client2", "op": "query", "collection": "C0", "consistency_level": "Strong",
         "label": "a tick and a half later"},
    ]


def _delete_then_read(sim: Simulation) -> Cluster:
    return _cluster(sim, delete_then_read_steps())


def ddl_recreate_steps(writes: int = 30, drop_at_s: float = 2.0, gap_s: float = 0.3) -> list[dict]:
    """Client1 and Client2 insert into C0 every 100 ms and Client3 queries it at Strong every 250 ms, while Admin
    drops C0 at ``drop_at_s`` and creates it again ``gap_s`` later; Client4's Strong query, 50 ms before the drop, is
    still waiting for tsafe when the QueryNode releases the old collection. Admin and Client2 talk to proxy-1,
    Client1, Client3 and Client4 to proxy-2 (clients take the proxies in turn, in order of first appearance)."""
    steps = [{"at": T0_S, "client": "Admin", "op": "create_collection", "collection": "C0"}]
    for i in range(writes):
        at = round(1.0 + 0.1 * i, 3)
        steps.append({"at": at, "client": "Client1", "op": "insert", "collection": "C0", "data": [{"id": f"A{i}"}]})
        steps.append({"at": at, "client": "Client2", "op": "insert", "collection": "C0", "data": [{"id": f"B{i}"}]})
    for i in range(int(writes * 0.4) + 2):
        steps.append({"at": round(1.0 + 0.25 * i, 3), "client": "Client3", "op": "query", "collection": "C0",
                      "consistency_level": "Strong"})
    steps.append({"at": round(drop_at_s - 0.05, 3), "client": "Client4", "op": "query", "collection": "C0",
                  "consistency_level": "Strong", "label": "in flight at the drop"})
    steps.append({"at": drop_at_s, "client": "Admin", "op": "drop_collection", "collection": "C0", "label": "drop"})
    steps.append({"at": drop_at_s + gap_s, "client": "Admin", "op": "create_collection", "collection": "C0",
                  "label": "re-create"})
    return sorted(steps, key=lambda s: s["at"])


def _ddl_recreate(sim: Simulation, writes: int = 30, drop_at_s: float = 2.0, gap_s: float = 0.3) -> Cluster:
    _not_negative(writes=writes, gap_s=gap_s)
    return _cluster(sim, ddl_recreate_steps(writes, drop_at_s, gap_s), meta_cache=True)


MECH = ("query", "timetick", "tso")

SCENARIOS = (
    Scenario(
        "seed-example", "The design documents' table: Client1 creates C0, inserts A1 and A2, deletes A1; Client2 searches at "
        "Strong in between; then a flush and a read from the sealed segment.", 8.0, _seed,
        "Each Strong search takes a fresh timestamp from the TSO and waits until the QueryNode's tsafe passed it, so "
        "Client2 sees exactly what Client1 wrote before: nothing, A1, A1 and A2, A2. After the flush the rows come "
        "from Parquet binlogs loaded as a sealed segment, and the growing copy is released.", MECH,
        options={"proxies": 2},
    ),
    Scenario(
        "workload", "Your own workload: a list of client steps (the option steps: a list in Python, a JSON file on the "
        "command line); without one, the design documents' table.", 10.0, _workload,
        "Each client runs its steps in order, each at its time or as soon as its previous call returned. A step is "
        "{at, client, op, collection, ...}: ops create_collection, insert (data or ids), delete (ids or filter), "
        "flush, search and query (consistency_level, guarantee_timestamp, filter, ids, limit, timeout). Client k "
        "talks to proxy k mod proxies.", MECH, options={"steps": (), "proxies": 2, "proxy2_clock_offset_ms": 0.0},
    ),
    Scenario(
        "insert-then-search", "Insert, then query the key at once at the default level (Bounded): often empty "
        "(Milvus issue #35090); the same query at Session or Strong always finds it.", 8.0, _insert_then_search,
        "A Bounded read does not wait: it reads at the tsafe it finds, usually one time tick behind, so a write "
        "acknowledged a few milliseconds earlier is not there yet. A Session read waits for the client's own last "
        "write, and Strong for the tick that covers it.", MECH,
        options={"rounds": 12},
    ),
    Scenario(
        "clock-skew-bounded", "proxy-2's clock runs 8 s ahead: its Bounded reads wait about 3 s each, proxy-1's "
        "answer at once (Milvus issue #16841).", 14.0, _clock_skew,
        "A Bounded read takes its begin timestamp from the proxy's own clock, not the TSO, and asks for that minus "
        "5 s. A clock that runs ahead asks for the future: the read waits until tsafe gets there. A clock behind "
        "asks for older data than it should, silently.", MECH, options={"ahead_ms": 8000.0, "reads": 6},
    ),
    Scenario(
        "tsafe-stall-proxy-restart", "proxy-2 dies at 5 s and restarts 2 s later with a new id: rootcoord waits for "
        "the dead session's reports until its lease expires, ticks stop, Strong reads time out (Milvus issue "
        "#34392).", 75.0, _stall,
        "Time ticks need a report from every proxy session. The dead proxy's session stays in etcd for its TTL "
        "(60 s), so no tick is sent and tsafe stands still: Strong reads wait and time out; Bounded reads answer from "
        "stale data until tsafe is more than 5 s behind, then wait too (they have no timeout here); Eventually always "
        "answers, from ever older data. When the lease expires, ticks flow and tsafe catches up at once.", MECH,
        options={"kill_at_s": At(5.0), "restart_after_s": After(2.0, since="kill_at_s"), "timeout_s": 5.0},
    ),
    Scenario(
        "lag-too-large", "A Customized read with a guarantee a day ahead is refused at once: Timestamp lag too large "
        "(Milvus issue #36960); one 3 s ahead waits.", 8.0, _lag,
        "waitTSafe refuses a guarantee more than queryNode.scheduler.maxTimestampLag (24 h) past tsafe instead of "
        "waiting for it; a nearer one waits until tsafe reaches it and reads at that tsafe.", MECH,
    ),
    Scenario(
        "insert-delete-reorder", "Insert A, delete A, insert A again inside one tick: one pack applies both inserts "
        "before the delete, and timestamps still give the right answer.", 4.0, _reorder,
        "The pipeline applies a pack's inserts before its deletes, so both copies of A are in the segment when the "
        "delete arrives. The delete hides only rows inserted before it, so every read sees exactly one A, the "
        "second. Try it with --switch delete_ignores_timestamps.", MECH,
    ),
    Scenario(
        "delete-then-read", "Client1 deletes A1 and queries at Strong the moment the delete returns: the query waits "
        "for the time tick that carries the delete and returns only A2.", 3.0, _delete_then_read,
        "The deleteNode applies a pack's deletes before it publishes the pack's end as tsafe, so a read served at "
        "that tsafe finds A1 already deleted. Try it with --switch update_tsafe_before_delete: tsafe comes first, and "
        "Client1's query returns the deleted A1.", MECH,
    ),
    Scenario(
        "ddl-recreate-under-load", "C0 is dropped at 2 s and created again 0.3 s later while two clients insert "
        "and one queries at Strong: the proxies' meta caches, collection not found, and the SDK's schema retry.", 5.0,
        _ddl_recreate,
        "The drop runs on rootcoord's DDL scheduler and first invalidates every proxy's meta cache; the QueryNode "
        "then releases the old collection. Until the new C0 exists, inserts and reads fail with collection not found "
        "(the SDK does not retry that). The new C0 has a new id and schema version: the first insert of each client "
        "still sends the old version, the proxy answers collection schema mismatch, and the SDK describes again and "
        "retries into the new collection.", MECH,
        options={"writes": 30, "drop_at_s": At(2.0), "gap_s": After(0.3, since="drop_at_s")},
    ),
)
