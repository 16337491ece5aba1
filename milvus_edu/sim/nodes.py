"""Simulated processes: rootcoord instances (session, standby watch, ``tsLoop``) and TSO clients.

The Go goroutines become SimPy processes that call the pure components:

* ``Session.ProcessActiveStandBy`` -> :meth:`RootCoordNode.run` (register, claim or watch, activate);
* the etcd keep-alive goroutine -> :meth:`RootCoordNode.keep_alive_loop` (every TTL/3);
* ``Core.tsLoop`` -> :meth:`RootCoordNode.ts_loop` (every ``UpdateTimestampStep``);
* ``Core.AllocTimestamp`` served over a simulated RPC -> :meth:`RootCoordNode.handle_alloc_timestamp`;
* a client (a proxy, the SDK) that allocates timestamps -> :class:`TSOClient`.

A killed node stops at its next step: nothing is revoked, so its lease runs out on etcd's clock.
Simplification: when a session's lease is lost, Milvus kills the process (``triggerKill``); here the
node simply stops serving, which is what the cluster observes.
"""

from __future__ import annotations

from ..config import MS
from ..rootcoord import Core
from ..sessionutil import Session, active_key, current_active
from ..storage.kv import KVError, LeaseNotFoundError
from .kernel import NodeClock, RPCError, Simulation, blocking


class RootCoordNode:
    """One rootcoord instance in active/standby mode."""

    def __init__(self, sim: Simulation, name: str, server_id: int, clock: NodeClock):
        self.sim = sim
        self.name = name
        self.clock = clock
        self.alive = True
        self.serving = False
        cfg = sim.config
        self.core = Core(sim.kv, clock.now_ns, name, cfg.tso, cfg.switches, sim.recorder)
        self.session = Session(sim.kv, "rootcoord", server_id, name, cfg.tso, recorder=sim.recorder)

    def start(self) -> None:
        """Start the node's main process."""
        self.sim.env.process(self.run())

    def run(self):
        """Register, then claim the ACTIVE key or wait as standby; when active, init TSO and serve."""
        env, p = self.sim.env, self.sim.config.tso
        self.session.register()
        env.process(self.keep_alive_loop())
        while self.alive:
            try:
                won = self.session.try_activate()
            except KVError:
                yield env.timeout(p.standby_retry_ns / MS)
                continue
            if won:
                break
            deleted = env.event()

            def on_change(event, key, deleted=deleted):
                if event == "delete" and not deleted.triggered:
                    deleted.succeed()

            cancel = self.sim.kv.watch(self.session.active_key, on_change)
            if not self.sim.kv.has(self.session.active_key) and not deleted.triggered:
                deleted.succeed()
            yield deleted
            cancel()
        if not self.alive:
            return
        while self.alive:
            try:
                self.core.init_tso_allocator()
                break
            except KVError:
                yield env.timeout(p.update_timestamp_step_ns / MS)
        self.serving = True
        env.process(self.ts_loop())

    def keep_alive_loop(self):
        """etcd's keep-alive: renew the session lease every TTL/3; a lost lease ends service."""
        env, p = self.sim.env, self.sim.config.tso
        while True:
            yield env.timeout(p.session_keepalive_ns / MS)
            if not self.alive:
                return
            try:
                self.session.keep_alive()
            except LeaseNotFoundError:
                self.serving = False
                self.alive = False
                self.sim.recorder.emit("session.lost", self.name, detail={"reason": "own lease expired"})
                return
            except KVError:
                continue

    def ts_loop(self):
        """``tsLoop``: ``UpdateTSO`` every 50 ms while alive."""
        env, p = self.sim.env, self.sim.config.tso
        while True:
            yield env.timeout(p.update_timestamp_step_ns / MS)
            if not self.alive:
                return
            self.core.ts_loop_tick()

    def handle_alloc_timestamp(self, count: int, peer: str):
        """The ``AllocTimestamp`` RPC handler (runs on this node)."""
        if not self.serving:
            raise RPCError(f"{self.name} is not the active rootcoord")
        result = yield from blocking(self.sim.env, self.core.alloc_timestamp_steps(count, peer=peer))
        return result

    def kill(self) -> None:
        """Crash: stop at once, revoke nothing."""
        self.alive = False
        self.serving = False
        self.sim.recorder.emit("fault.kill", self.name, detail={"was_active": self.session.is_active})

    def jump_clock(self, delta_ms: float) -> None:
        """Step this node's wall clock."""
        self.clock.jump(delta_ms)
        self.sim.recorder.emit("fault.clock_jump", self.name, clock_ms=self.clock.now_ms(),
                               detail={"delta_ms": delta_ms})


class TSOClient:
    """A client that asks the active rootcoord for ``count`` timestamps every ``interval_ms``.

    It finds the active rootcoord the way Milvus components do, by reading the ACTIVE session key,
    and looks again after any error.
    """

    def __init__(self, sim: Simulation, name: str, count: int = 1, interval_ms: float = 100.0,
                 jitter_ms: float = 0.0, retry_ms: float = 500.0):
        if count < 1:
            raise ValueError("count must be at least 1")
        self.sim = sim
        self.name = name
        self.count = count
        self.interval_ms = interval_ms
        self.jitter_ms = jitter_ms
        self.retry_ms = retry_ms
        self.alive = True

    def start(self) -> None:
        """Start the client's request loop."""
        self.sim.env.process(self.run())

    def run(self):
        """Request, wait for the answer, sleep, repeat."""
        env, rec = self.sim.env, self.sim.recorder
        rng = self.sim.rng(self.name)
        key = active_key("by-dev/meta", "rootcoord")
        target = None
        while self.alive:
            wait = self.interval_ms + (rng.uniform(0, self.jitter_ms) if self.jitter_ms else 0.0)
            yield env.timeout(wait)
            if target is None:
                target = current_active(self.sim.kv, key)
                if target is None:
                    rec.emit("client.error", self.name, error="no active rootcoord in the session registry")
                    yield env.timeout(self.retry_ms)
                    continue
            rec.emit("client.request", self.name, count=self.count, peer=target)
            node = self.sim.nodes[target]
            try:
                first, count = yield from self.sim.call(
                    self.name, target, lambda: node.handle_alloc_timestamp(self.count, self.name)
                )
            except RPCError as exc:
                rec.emit("client.error", self.name, peer=target, error=str(exc))
                target = None
                yield env.timeout(self.retry_ms)
                continue
            rec.emit("client.recv", self.name, ts=first, count=count, peer=target)
