"""The TimeTick mechanism's scenarios: proxies writing to pchannels, rootcoord's ticks, consumers.

Every scenario runs one rootcoord (TSO and timetick sync), ``proxies`` proxies and 4 pchannels
(Milvus's default ``rootCoord.dmlChannelNum`` is 16; 4 keep the pictures readable). Two collections
share the pchannels: collection 100 has 4 shards (one vchannel on every pchannel) and collection 101
has 2 (on the first two), so a pchannel's dispatcher splits its packs between vchannels. Clients send
inserts of 1-8 rows at Poisson times; primary keys are hashed to shards with Milvus's ``Hash32Int64``.
"""

from __future__ import annotations

from ...cluster.builder import Cluster, ClusterSpec, CollectionSpec, ProxySpec, build, check_proxy_count
from ...mq.fast import KeysHashedAhead
from ...registry import Scenario
from ...sim.kernel import Simulation

PCHANNELS = 4
# Rows per insert, drawn with rng.choice: the same draw as rng.randint(1, 8), minus randrange's
# argument checks (both are 1 + _randbelow(8)).
_ROWS_PER_INSERT = range(1, 9)
WORKLOAD_START_MS = 200.0  # after rootcoord became active and the proxies' tickers started


def cluster_spec(proxies: int = 2, task_ms: float = 4.0, pchannels: int = PCHANNELS,
                 slow_link_ms: float = 0.0, alloc_hiccup: tuple[float, float] = (0.0, 0.0)) -> ClusterSpec:
    """A TimeTick cluster: rootcoord, ``proxies`` proxies (proxy-1's link to rootcoord ``slow_link_ms`` slower each
    way and its AllocTimestamp answers held up as ``alloc_hiccup`` says), ``pchannels`` pchannels with a consumer
    each, and collections 100 (a shard on every pchannel) and 101 (on the first two)."""
    check_proxy_count(proxies, "a TimeTick cluster")
    first = ProxySpec(task_ms=task_ms, rootcoord_extra_ms=slow_link_ms, alloc_hiccup=alloc_hiccup)
    return ClusterSpec(pchannels=pchannels, proxies=(first,) + (ProxySpec(task_ms=task_ms),) * (proxies - 1),
                       consumers=True,
                       collections=(CollectionSpec(100, pchannels), CollectionSpec(101, min(2, pchannels))))


def _inserts(cluster: Cluster, proxy, rate: float):
    """Inserts of 1-8 rows to ``proxy`` at Poisson times, ``rate`` per ms, three in four into collection 100."""
    sim = cluster.sim
    env = sim.env
    rng = sim.rng(f"clients/{proxy.name}")
    if rate <= 0:
        return
    yield env.timeout(WORKLOAD_START_MS)
    next_pk = 0
    ahead = KeysHashedAhead()
    while True:
        yield env.timeout(rng.expovariate(rate))
        if not proxy.alive:
            continue
        collection = cluster.collections[0] if rng.random() < 0.75 else cluster.collections[1]
        rows = rng.choice(_ROWS_PER_INSERT)
        pks = ahead.keys(proxy.server_id * 10**9, next_pk, rows)  # a restarted proxy has a new server id
        next_pk += rows
        sim.spawn(proxy.insert(collection, pks))  # nothing waits for a request's end


def _run(sim: Simulation, proxies: int = 2, inserts_per_s: float = 1000.0, task_ms: float = 4.0,
         **faults) -> Cluster:
    """Build the cluster, start it and its insert stream."""
    spec = cluster_spec(proxies, task_ms, **faults)
    if inserts_per_s < 0:
        raise ValueError(f"inserts per second must not be negative, got {inserts_per_s}; use inserts_per_s=0 or more")
    if task_ms < 0:  # the proxy would quietly run every task in no time, as for task_ms=0
        raise ValueError(f"option task_ms must not be negative, got {task_ms:g}; use task_ms=4 for example")
    cluster = build(sim, spec)
    cluster.start()
    for p in cluster.proxies:  # the clients' insert stream: each proxy takes its share
        sim.env.process(_inserts(cluster, p, inserts_per_s / len(cluster.proxies) / 1000.0))
    return cluster


OPTIONS = {"proxies": 2, "inserts_per_s": 1000.0, "task_ms": 4.0}


def _basics(sim: Simulation, **options) -> None:
    _run(sim, **options)


def _need_two_proxies(scenario: str, proxies: int, what: str) -> None:
    if proxies < 2:
        raise ValueError(f"{scenario} needs at least 2 proxies (proxy-2 {what})")


def _proxy_stall(sim: Simulation, proxies: int = 2, **options) -> None:
    _need_two_proxies("timetick-proxy-stall", proxies, "stalls")
    cluster = _run(sim, proxies, **options)
    sim.at(3_000.0, lambda: cluster.node("proxy-2").stall_reports(3_000.0))


def _proxy_restart(sim: Simulation, proxies: int = 2, **options) -> None:
    _need_two_proxies("timetick-proxy-restart", proxies, "restarts")
    cluster = _run(sim, proxies, **options)
    proxy = cluster.node("proxy-2")
    sim.at(2_000.0, lambda: cluster.kill("proxy-2"))
    sim.at(5_000.0, lambda: cluster.restart("proxy-2", proxy.server_id + 100))  # a new session


def _slow_link(sim: Simulation, **options) -> None:
    _run(sim, slow_link_ms=20.0, **options)


def _unlocked_enqueue(sim: Simulation, **options) -> None:
    # Now and then an AllocTimestamp answer to proxy-1 is held up (a retransmission): with the lock the
    # queue waits; without it, later tasks overtake the held one into the statistics.
    _run(sim, alloc_hiccup=(0.02, 300.0), **options)


SCENARIOS = (
    Scenario(
        "timetick-basics", "Two proxies, 4 pchannels, 1,000 inserts/s: ticks, out-of-order messages, packs.", 5.0,
        _basics,
        "proxy-1 and proxy-2 take inserts concurrently, so messages reach each pchannel out of timestamp order. "
        "Every 200 ms each proxy reports its per-pchannel minimum; when all have reported, rootcoord writes the "
        "minimum as a time tick into every pchannel, and each pchannel's dispatcher hands out the pack of messages "
        "up to the tick.", ("timetick", "tso"), options=OPTIONS,
    ),
    Scenario(
        "timetick-proxy-stall", "proxy-2's report loop hangs from 3 s to 6 s: ticks stop on every pchannel.", 8.0,
        _proxy_stall,
        "Milvus issue #34392's symptom: one proxy stops reporting, rootcoord's gate waits for every session, so no "
        "pchannel gets a tick for 3 s although writes go on; consumers receive nothing until the ticks resume.",
        ("timetick", "tso"), options=OPTIONS,
    ),
    Scenario(
        "timetick-proxy-restart", "proxy-2 crashes at 2 s and restarts at 5 s; its old session blocks ticks.", 70.0,
        _proxy_restart,
        "The restarted proxy registers a new session, but rootcoord also waits for the old one until its 60 s "
        "lease runs out: ticks stop from the crash until about 62 s, then resume.", ("timetick", "tso"),
        options={**OPTIONS, "inserts_per_s": 100.0},
    ),
    Scenario(
        "timetick-slow-link", "proxy-1's link to rootcoord is 20 ms slower each way: its inserts queue on the "
        "enqueue lock and the ticks lag.", 5.0,
        _slow_link,
        "Every DML timestamp is one AllocTimestamp round trip made while holding the enqueue lock, so proxy-1 "
        "takes at most one insert per ~41 ms; its queue backs up, its reported minimum trails, and so does every "
        "time tick, the minimum over all the reports.", ("timetick", "tso"), options={**OPTIONS, "inserts_per_s": 40.0},
    ),
    Scenario(
        "timetick-unlocked-enqueue", "proxy-1's AllocTimestamp answers are sometimes held up 300 ms; run it with "
        "the allocate_outside_enqueue_lock switch.", 5.0,
        _unlocked_enqueue,
        "The design documents' six steps: with the switch, a task whose timestamp came back late enters the statistics after "
        "younger tasks were reported, so rootcoord writes a tick above it and its message arrives below the tick.",
        ("timetick", "tso"), options={**OPTIONS, "inserts_per_s": 600.0},
    ),
)
