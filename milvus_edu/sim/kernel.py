"""The simulation kernel: SimPy environment, seeded randomness, node clocks and the network.

Determinism rules (architecture guide):

* one ``random.Random`` per component, seeded from ``(seed, component name)`` — string seeding goes
  through SHA-512, so it does not depend on ``PYTHONHASHSEED``; adding randomness to one component
  never shifts another's stream;
* simulated time is in milliseconds (``env.now``); node clocks derive integer nanoseconds from it;
* simultaneous SimPy events fire in scheduling order, and processes are started in a fixed order,
  so ties always resolve the same way;
* nothing reads the wall clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from types import GeneratorType
from dataclasses import dataclass, replace
from functools import partial
from operator import attrgetter

import simpy

from ..config import MS, Config
from ..events import SIM_EPOCH_MS, Recorder
from ..storage.kv import MemoryKV

#: The processes :class:`Simulation` keeps are pruned of those finished when they reach this many, or twice
#: as many as were running at the last pruning.
_PRUNE_MIN = 1024

#: Unix time (ns) at simulated time 0 (the run-log contract's ``SIM_EPOCH_MS``), so timestamps look real.
EPOCH_NS = SIM_EPOCH_MS * MS


class RPCError(Exception):
    """A simulated RPC failed: lost, refused by a dead node, or answered with an error."""


class NodeClock:
    """A node's wall clock: true time plus a fixed offset, a drift rate, and any jumps so far."""

    def __init__(self, env: simpy.Environment, offset_ms: float = 0.0, drift_ppm: float = 0.0):
        self.env = env
        self.offset_ns = int(round(offset_ms * MS))
        self.drift_ppm = drift_ppm

    def now_ns(self) -> int:
        """The clock reading in Unix nanoseconds."""
        true_ns = round(self.env.now * MS)
        drift_ns = round(true_ns * self.drift_ppm / 1e6) if self.drift_ppm else 0
        return EPOCH_NS + self.offset_ns + true_ns + drift_ns

    def now_ms(self) -> int:
        """The clock reading in Unix milliseconds."""
        return self.now_ns() // MS

    def jump(self, delta_ms: float) -> None:
        """Step the clock (an NTP step, a VM resume); negative goes back."""
        self.offset_ns += int(round(delta_ms * MS))


@dataclass(frozen=True)
class NetworkParams:
    """Latency and failure model of every RPC (per direction)."""

    latency_ms: float = 0.5  # fixed part of one-way latency
    jitter_ms: float = 0.3  # mean of the exponential extra delay
    drop_prob: float = 0.0  # probability that a request is lost
    timeout_ms: float = 1000.0  # the caller's deadline when an answer never comes


class Simulation:
    """One simulated cluster run: environment, recorder, KV (etcd), network, nodes."""

    def __init__(self, seed: int, recorder: Recorder, config: Config | None = None,
                 network: NetworkParams | None = None):
        self.seed = seed
        self.env = simpy.Environment()
        self.recorder = recorder
        env = self.env
        # Every process the run starts, so that close() can end those still waiting (pruned as they finish).
        self._processes: list[simpy.Process] = []
        self._prune_at = _PRUNE_MIN
        env.process = self._process
        self._close_hooks: list[Callable[[], None]] = []
        # env.now, read for every event: SimPy's property returns env._now, read here without a Python call
        recorder.now_ms = partial(attrgetter("_now"), env)
        self.config = config or Config()
        self.net = network or NetworkParams()
        # etcd runs on true time: leases are measured on its clock.
        self.etcd_clock = NodeClock(self.env)
        self.kv = MemoryKV(self.etcd_clock.now_ns)
        self.kv.watch("by-dev/meta/session/", self._on_session_key)
        self.nodes: dict[str, object] = {}
        #: The run folder, when the run writes one (set before the run starts): mechanisms that keep
        #: files of their own (the DataNode's binlogs) put them inside it.
        self.out_dir = None
        self._rngs: dict[str, random.Random] = {}
        self._net_rngs: dict[str, random.Random] = {}  # src -> rng("net/<src>"), looked up on every RPC leg
        #: The bug switches flipped part-way (:meth:`set_switch`), in order: ``{"switch", "on", "t_ms"}``.
        self.switches_flipped: list[dict] = []
        #: The run's planned end in simulated ms (``simulate`` sets it before the scenario is built), None when
        #: not known: a workload checks its steps against it.
        self.until_ms: float | None = None
        self._lessor_started = False

    def _process(self, generator: Generator) -> simpy.Process:
        """``env.process``: start ``generator`` as a SimPy process, and keep it for :meth:`close`."""
        proc = simpy.Process(self.env, generator)
        procs = self._processes
        procs.append(proc)
        if len(procs) >= self._prune_at:  # most processes are short (an RPC's, a message's): keep the running
            procs[:] = [p for p in procs if p.is_alive]
            self._prune_at = max(2 * len(procs), _PRUNE_MIN)
        return proc

    def on_close(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` when the run is closed (:meth:`close`), after its processes are: a part of the cluster
        that is no node (the cluster builder's components) drops what it holds there."""
        self._close_hooks.append(hook)

    def close(self) -> None:
        """End the run for good, once its log and summary are made (``simulate`` calls it): close every process
        still waiting, in the order they started, so that their ``finally:`` blocks (a lock released, a watch
        cancelled) run now on an intact cluster; empty the event queue; call the :meth:`on_close` hooks; then drop
        what every node, the environment and the simulation hold. Nothing of the run can be used afterwards.

        Why: a finished cluster is a web of reference cycles (SimPy's environment refers to itself, nodes to the
        simulation and to each other, components to their parents' bound methods). Left so, only the cyclic
        collector frees it: a pass over every object the process holds, two when suspended generators are in it
        (their finalizers' effects bring the cluster back to life). Dropped here, reference counting frees the
        broker's logs, the buffers and the nodes at once (``tests/test_run_gc.py``).
        """
        for proc in self._processes:
            if proc.is_alive:
                proc._generator.close()
                vars(proc).clear()  # it and the event it waited for refer to each other
        self._processes.clear()
        self.env._queue.clear()
        for hook in self._close_hooks:
            hook()
        for node in self.nodes.values():
            vars(node).clear()
        vars(self.env).clear()
        vars(self).clear()

    def rng(self, name: str) -> random.Random:
        """The random stream of one component (created on first use)."""
        rng = self._rngs.get(name)
        if rng is None:
            rng = self._rngs[name] = random.Random(f"{self.seed}/{name}")
        return rng

    def _net_rng(self, src: str) -> random.Random:
        rng = self._net_rngs.get(src)
        if rng is None:
            rng = self._net_rngs[src] = self.rng(f"net/{src}")
        return rng

    def add(self, node) -> None:
        """Register a node under its name."""
        if node.name in self.nodes:
            raise ValueError(f"duplicate node name {node.name}")
        self.nodes[node.name] = node

    def set_switch(self, name: str, on: bool) -> bool:
        """Turn bug switch ``name`` on or off for every node from now on
        (:class:`~milvus_edu.sim.interventions.SetSwitch`); ``False``, and nothing recorded, when it is so already.

        The run's :attr:`config` is replaced by one with the new switches (components that read
        ``sim.config.switches`` where they use a switch see it at once), a ``fault.switch`` event names the switch,
        and each node's ``switches_changed`` hook hands the new value to the components that copied a switch when
        they were built, in the nodes' registration order.
        """
        switches = self.config.switches
        if getattr(switches, name) == on:
            return False
        self.config = replace(self.config, switches=replace(switches, **{name: on}))
        self.switches_flipped.append({"switch": name, "on": on, "t_ms": self.env.now})
        self.recorder.emit("fault.switch", "sim", detail={"switch": name, "on": on})
        for node in self.nodes.values():
            node.switches_changed()
        return True

    def one_way(self, src: str) -> float:
        """One network leg's latency from ``src``, drawn from ``src``'s own stream: the fixed part plus
        ``rng.expovariate(1 / jitter_ms)``."""
        net = self.net
        if not net.jitter_ms > 0:
            return net.latency_ms + 0.0  # a float, as when a jitter is drawn
        return net.latency_ms + self._net_rng(src).expovariate(1.0 / net.jitter_ms)

    def call(self, src: str, dst: str, handler: Callable[[], object]):
        """A request/response RPC from ``src`` to node ``dst`` running ``handler()`` there (``yield from`` it).

        ``handler`` answers at once (a plain function's return value) or returns a generator, which the
        callee drives bound to its life (:meth:`milvus_edu.cluster.node.Node.serve`): it may wait, and it
        fails when the callee dies first. A request reaching a paused node is handled when it resumes.

        Raises :class:`RPCError` when the request is lost (after the caller's timeout), when ``dst``
        is dead (connection refused), or when the handler raises.
        """
        if self.net.drop_prob > 0 and self._net_rng(src).random() < self.net.drop_prob:
            self.recorder.emit("rpc.drop", src, peer=dst, detail={"leg": "request"})
            yield self.env.timeout(self.net.timeout_ms)
            raise RPCError("context deadline exceeded")
        yield self.env.timeout(self.one_way(src))
        node = self.nodes.get(dst)
        if node is None or not node.alive:
            raise RPCError(f"connection refused by {dst}")
        try:
            if node._resume is not None:  # paused: the request waits in the node's queue
                yield from node.until_resumed()
            result = handler()
            if type(result) is GeneratorType:
                result = yield from node.serve(result)
        except RPCError:
            raise
        except Exception as exc:  # the remote error travels back as the RPC's status
            yield self.env.timeout(self.one_way(dst))
            raise RPCError(str(exc)) from exc
        yield self.env.timeout(self.one_way(dst))
        if not node.alive:
            raise RPCError(f"{dst} died before answering")
        return result

    def _on_session_key(self, event: str, key: str) -> None:
        if event == "delete":
            self.recorder.emit("session.lost", "etcd", detail={"key": key})

    def lease_reaper(self):
        """etcd's lessor: revoke expired leases every 500 ms (their keys vanish, watchers are told)."""
        period = self.config.tso.lease_check_ns / MS
        while True:
            yield self.env.timeout(period)
            self.kv.expire_leases()

    def spawn(self, generator: Generator) -> None:
        """Start ``generator`` as a process started for its effects alone (a client's request): nothing
        waits for it, so it returns no process (use ``env.process`` for a process to wait for)."""
        self.env.process(generator)

    def at(self, t_ms: float, action: Callable[[], None]) -> None:
        """Run ``action`` at simulated time ``t_ms`` (faults, clock jumps)."""

        def proc():
            yield self.env.timeout(t_ms)
            action()

        self.env.process(proc())

    def run(self, until_ms: float) -> None:
        """Start etcd's lessor (on the first call), then run the simulation until ``until_ms``.

        A run may be advanced in steps (``simulate`` does so to report progress): etcd has one lessor however many
        steps, or each step would start another, off the first one's 500 ms grid, and a lease that ran out between
        two of its checks would be revoked earlier than in the same run advanced at once."""
        if not self._lessor_started:
            self._lessor_started = True
            self.env.process(self.lease_reaper())
        self.env.run(until=until_ms)
