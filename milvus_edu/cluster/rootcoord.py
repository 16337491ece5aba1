"""Simulated processes: rootcoord instances (session, keep-alive, liveness, ``tsLoop``) and TSO clients.

The Go goroutines become SimPy processes that call the pure components:

* ``Core.Register`` with ``Session.ProcessActiveStandBy`` -> :meth:`RootCoordNode.run` (register,
  claim or watch, activate; a failed activation panics the process);
* etcd clientv3's ``sendKeepAliveLoop`` (every 500 ms, send what is overdue) and ``deadlineLoop``
  (every second) -> :meth:`RootCoordNode.keep_alive_loop` and :meth:`RootCoordNode.deadline_loop`;
* ``Session.processKeepAliveResponse`` after the keep-alive channel closes ->
  :meth:`RootCoordNode.process_keep_alive_response`;
* ``Session.LivenessCheck`` with rootcoord's ``os.Exit(1)`` callback -> the watch on the ACTIVE key
  started by :meth:`RootCoordNode.start_liveness_check`;
* ``Core.tsLoop`` -> :meth:`RootCoordNode.ts_loop` (a :class:`~milvus_edu.sim.ticker.Ticker` of ``UpdateTimestampStep``);
* ``Core.AllocTimestamp`` served over a simulated RPC -> :meth:`RootCoordNode.handle_alloc_timestamp`;
* a client (a proxy, the SDK) that allocates timestamps -> :class:`TSOClient`.

A rootcoord answers ``AllocTimestamp`` only once its activation is done (``merr.CheckHealthy``): before,
the answer is ``service not ready[rootcoord=<id>]: StandBy`` or ``...: Initializing``. ``activate_ms`` is how
long the activation takes after ``InitTimestamp`` (the rest of ``initInternal`` and ``startInternal``: meta
table, proxies, scheduler); default 0, the whole activation in one step.

Faults: :meth:`RootCoordNode.kill` (a crash: nothing is revoked, the lease runs out on etcd's clock)
and :meth:`RootCoordNode.pause` (a long GC or VM pause: the node runs nothing until it resumes).

Simplification: a paused node's work that fell due during the pause runs on resume in the order
it fell due (SimPy's order); in Go those goroutines race, so this is one possible interleaving.
Simplification: a request that reached a paused node is answered on resume even if its caller
gave up (gRPC's cancellation is not propagated to the handler).
"""

from __future__ import annotations

from ..config import MS
from ..effects import started
from ..merr import wrap_err_service_not_ready
from ..rootcoord import Core
from ..sessionutil import (
    DEADLINE_LOOP_PERIOD_NS,
    RETRY_CONN_WAIT_NS,
    Session,
    active_key,
    current_active,
    retry_do_sleeps,
)
from ..sim.kernel import NodeClock, RPCError, Simulation
from ..storage.kv import KVError
from .node import Node
from ..sim.ticker import Ticker


class RootCoordNode(Node):
    """One rootcoord instance in active/standby mode.

    ``kv`` is this node's connection to etcd (default: the cluster's KV); pass a
    :class:`~milvus_edu.storage.kv.FaultyKV` to cut this node off from etcd for a while. ``activate_ms``:
    how long the activation goes on after ``InitTimestamp`` before the node is Healthy and serves.
    """

    SWITCHES = ("tso_skip_load_on_init", "tso_no_window_save")  # its TSO's (tso/tso.py)
    COMPONENT = "rootcoord's TSO"

    def __init__(self, sim: Simulation, name: str, server_id: int, clock: NodeClock, kv=None,
                 activate_ms: float = 0.0):
        if not activate_ms >= 0:
            raise ValueError(f"activate_ms must be 0 or more, got {activate_ms!r}")
        super().__init__(sim, name)
        self.server_id = server_id
        self.activate_ms = activate_ms
        self.state = "StandBy"  # commonpb.StateCode: StandBy -> Initializing -> Healthy
        self.clock = clock
        self.kv = sim.kv if kv is None else kv
        self.serving = False
        self.liveness_started = False
        cfg = sim.config
        self.core = Core(self.kv, clock.now_ns, name, cfg.tso, cfg.switches, sim.recorder)
        self.session = Session(self.kv, "rootcoord", server_id, name, cfg.tso, recorder=sim.recorder,
                               now_ns=self._monotonic_ns)
        self._cancel_watch = None

    def switches_changed(self) -> None:
        """The TSO's switches were copied into the Core when it was built: hand it the run's current ones."""
        self.core.set_switches(self.sim.config.switches)

    def _monotonic_ns(self) -> int:
        # Go's lease timers read the monotonic clock: wall-clock jumps do not move it.
        return int(round(self.sim.env.now * MS))

    # ---- life cycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the node's main process."""
        self.process(self.run())

    def run(self):
        """``Core.Register``: register the session, claim the ACTIVE key or wait as standby, activate."""
        env, p = self.sim.env, self.sim.config.tso
        registered = yield from self._register()
        if not registered:
            return
        self.process(self.keep_alive_loop())
        self.process(self.deadline_loop())
        while True:
            try:
                won = self.session.try_activate()
            except KVError:
                yield env.timeout(p.standby_retry_ns / MS)
                continue
            if won:
                break
            yield from self._wait_for_active_key_deletion()
        self.state = "Initializing"  # initInternal; clients already find this node under the ACTIVE key
        try:
            self.core.init_tso_allocator()
        except KVError as exc:
            # activateFunc's error makes ProcessActiveStandBy return it, and Core.Register panics;
            # the ACTIVE key stays under the dead process's lease until the TTL runs out.
            self._exit(f"activation failed ({exc}); Core.Register panics", how="panic")
            return
        if self.activate_ms:
            yield env.timeout(self.activate_ms)
        self.state = "Healthy"
        self.serving = True
        self.process(self.ts_loop())
        self.start_liveness_check()

    def _register(self):
        """``Session.Register``: ``registerService`` under ``retry.Do(Attempts(retryTimes))``, then panic."""
        error = None
        for sleep in retry_do_sleeps(self.session.retry_times):
            try:
                self.session.register()
                return True
            except KVError as exc:
                error = exc
            yield self.sim.env.timeout(sleep / MS)
        self._exit(f"session registration failed ({error}); Session.Register panics", how="panic")
        return False

    def _wait_for_active_key_deletion(self):
        """The standby's watch on the ACTIVE key (from the revision of its failed transaction)."""
        env, key = self.sim.env, self.session.active_key
        deleted = env.event()

        def on_change(event, changed):
            if event == "delete" and changed == key and not deleted.triggered:
                deleted.succeed()

        cancel = self.kv.watch(key, on_change)
        try:
            gone = not self.kv.has(key)
        except KVError:
            gone = True  # cannot tell: go back and retry the transaction
        if gone and not deleted.triggered:
            deleted.succeed()
        try:
            yield deleted
        finally:
            cancel()

    # ---- the lease --------------------------------------------------------------------------
    def keep_alive_loop(self):
        """etcd clientv3's ``sendKeepAliveLoop``: every 500 ms, send the keep-alive if it is overdue."""
        env = self.sim.env
        while True:
            ka = self.session.keep_alive
            if ka.due(self._monotonic_ns()):
                self.session.send_keep_alive()
                if ka.closed:  # etcd answered TTL 0
                    self.process(self.process_keep_alive_response())
            yield env.timeout(RETRY_CONN_WAIT_NS / MS)

    def deadline_loop(self):
        """etcd clientv3's ``deadlineLoop``: every second, close a keep-alive with no answer for a TTL."""
        env = self.sim.env
        while True:
            yield env.timeout(DEADLINE_LOOP_PERIOD_NS / MS)
            if self.session.check_deadline():
                self.process(self.process_keep_alive_response())

    def process_keep_alive_response(self):
        """``processKeepAliveResponse`` after the channel closed: ``KeepAliveOnce`` x3, else close ``liveCh``."""
        renewed = yield from self.session.process_keep_alive_response_steps()
        if renewed is False:
            self._on_live_ch_closed()

    def start_liveness_check(self) -> None:
        """``Session.LivenessCheck`` with rootcoord's callback (``os.Exit(1)``), started once active.

        It ends the process when ``liveCh`` closes and watches the session key, which for rootcoord
        is the ACTIVE key: a DELETE (the lease expired, or someone removed the key) exits too.
        """
        self.liveness_started = True
        if not self.session.live:
            self._exit(self.session.lost_reason or "its session is gone")
            return
        key = self.session.watched_key

        def on_change(event, changed):
            if event == "delete" and changed == key:
                self.process(self._deliver_watched_key_deletion())

        self._cancel_watch = self.kv.watch(key, self.callback(on_change))

    def _deliver_watched_key_deletion(self):
        """The DELETE reaches the node over its watch stream: once it runs and can reach etcd again."""
        while True:
            try:
                self.kv.has(self.session.watched_key)
                break
            except KVError:
                yield self.sim.env.timeout(RETRY_CONN_WAIT_NS / MS)
        self.session.on_watched_key_deleted()
        self._on_live_ch_closed()

    def _on_live_ch_closed(self) -> None:
        # Only an active rootcoord runs LivenessCheck; a standby whose liveCh closed keeps waiting
        # (its expired lease makes every later claim of the ACTIVE key fail).
        if self.liveness_started and self.alive:
            self._exit(self.session.lost_reason or "its session is gone")

    def _exit(self, reason: str, how: str = "os.Exit(1)") -> None:
        """The process ends (``os.Exit`` or a panic): nothing is revoked."""
        self._end_life()
        self.serving = False
        if self._cancel_watch is not None:
            self._cancel_watch()
            self._cancel_watch = None
        self.sim.recorder.emit("session.exit", self.name,
                               active=current_active(self.sim.kv, self.session.active_key),
                               detail={"reason": reason, "how": how, "was_active": self.session.is_active})

    # ---- serving ------------------------------------------------------------------------------
    def ts_loop(self):
        """``tsLoop``: ``UpdateTSO`` on each tick of a ``time.Ticker`` of ``UpdateTimestampStep`` (50 ms) while alive.

        The ticker keeps its grid: the first tick that fell due during a pause is taken on resume, and a second
        one too if two fell due (its jet lag is 0), then the next grid point: not a full step after the resume."""
        ticker = Ticker(self.sim.env, self.sim.config.tso.update_timestamp_step_ns / MS)
        while True:
            yield ticker.next()
            self.core.ts_loop_tick()

    def handle_alloc_timestamp(self, count: int, peer: str):
        """The ``AllocTimestamp`` RPC handler (runs on this node): ``(first_ts, count)`` at once, or the steps
        that get it when ``GenerateTSO`` must wait (:meth:`Simulation.call` drives them on this node)."""
        if not self.serving:  # merr.CheckHealthy: GenerateTSO is never reached before the node is Healthy
            raise wrap_err_service_not_ready("rootcoord", self.server_id, self.state)
        return started(self.core.alloc_timestamp_steps(count, peer=peer))  # nearly every one needs no sleep

    # ---- faults -------------------------------------------------------------------------------
    def kill(self, why: str = "killed") -> None:
        """Crash: stop at once, revoke nothing (``why`` is not recorded: the event says whether it was active)."""
        self._end_life()
        self.serving = False
        self.sim.recorder.emit("fault.kill", self.name, detail={"was_active": self.session.is_active})

    def pause_detail(self) -> dict:
        """A paused rootcoord runs no ``tsLoop``, keep-alive or RPC answer; the event says whether it was active."""
        return {"was_active": self.session.is_active}

    def jump_clock(self, delta_ms: float) -> None:
        """Step this node's wall clock."""
        self.clock.jump(delta_ms)
        self.sim.recorder.emit("fault.clock_jump", self.name, clock_ms=self.clock.now_ms(),
                               detail={"delta_ms": delta_ms})


class TSOClient(Node):
    """A client that asks the active rootcoord for ``count`` timestamps every ``interval_ms``.

    It finds the active rootcoord the way Milvus components do, by reading the ACTIVE session key,
    and looks again after any error. With ``deadline_ms`` each call gives up after that long
    ("context deadline exceeded"), as a gRPC caller with a deadline does; without it a call to a
    frozen node waits until the node answers.
    """

    def __init__(self, sim: Simulation, name: str, count: int = 1, interval_ms: float = 100.0,
                 jitter_ms: float = 0.0, retry_ms: float = 500.0, deadline_ms: float | None = None):
        if count < 1:
            raise ValueError("count must be at least 1")
        if deadline_ms is not None and not deadline_ms > 0:
            raise ValueError(f"deadline_ms must be positive or None, got {deadline_ms!r}")
        super().__init__(sim, name)
        self.count = count
        self.interval_ms = interval_ms
        self.jitter_ms = jitter_ms
        self.retry_ms = retry_ms
        self.deadline_ms = deadline_ms

    def start(self) -> None:
        """Start the client's request loop."""
        self.process(self.run())

    def _call(self, target: str):
        node = self.sim.nodes[target]
        call = self.sim.call(self.name, target, lambda: node.handle_alloc_timestamp(self.count, self.name))
        if self.deadline_ms is None:
            return (yield from call)

        def guarded():
            try:
                return True, (yield from call)
            except RPCError as exc:
                return False, exc

        env = self.sim.env
        proc = env.process(guarded())
        yield proc | env.timeout(self.deadline_ms)
        if not proc.triggered:
            raise RPCError("context deadline exceeded")
        ok, value = proc.value
        if not ok:
            raise value
        return value

    def run(self):
        """Request, wait for the answer, sleep, repeat."""
        env, rec = self.sim.env, self.sim.recorder
        emit_request = rec.emitter("client.request", "count", "peer")
        emit_recv = rec.emitter("client.recv", "ts", "count", "peer")
        rng = self.sim.rng(self.name)
        key = active_key("by-dev/meta", "rootcoord")
        target = None
        while True:
            wait = self.interval_ms + (rng.uniform(0, self.jitter_ms) if self.jitter_ms else 0.0)
            yield env.timeout(wait)
            if target is None:
                target = current_active(self.sim.kv, key)
                if target is None:
                    rec.emit("client.error", self.name, error="no active rootcoord in the session registry")
                    yield env.timeout(self.retry_ms)
                    continue
            emit_request(self.name, self.count, target)
            try:
                first, count = yield from self._call(target)
            except RPCError as exc:
                rec.emit("client.error", self.name, peer=target, error=str(exc))
                target = None
                yield env.timeout(self.retry_ms)
                continue
            emit_recv(self.name, first, count, target)

