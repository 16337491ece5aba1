"""The base of every simulated node: being alive, killed, restarted and paused, and the one effect interpreter.

A node's work runs as generators driven by the node itself: :meth:`Node.process` starts one as a SimPy
process, :meth:`Node.bound` gives it to a caller that drives it inline (``yield from``). Each is bound to the
node's current *life*, a counter bumped by every kill and restart: the node resumes the generator only while
that life lasts and closes it at its first resumption after the node died — so no handler or loop checks
liveness by hand, and no restart counter is passed around. While the node is paused (a GC or VM pause) every
resumption waits until it resumes.

A generator yields either a SimPy event (the node's own timers and wake-ups) or an effect of
:mod:`milvus_edu.effects`; the node performs the effect (:meth:`Node.perform`, one performer per effect type in
the class's ``PERFORMERS`` table) and sends the result back, or throws the failure in at the yielding line. An
effect in flight completes even if the node dies meanwhile — an RPC already sent reaches its callee and is
answered, as a gRPC request on the wire outlives its client — but nothing of the dead life runs after it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, ClassVar

from simpy.events import Event

from ..config import MS
from ..effects import Call, Parallel, Sleep
from ..sim.kernel import RPCError, Simulation


class Node:
    """A simulated Milvus process: ``name``, ``sim``, ``alive``, ``paused``, and the work bound to its life.

    ``incarnation`` counts restarts (a restarted DataNode reports it); the private life counter also moves on
    every kill, so work of a killed node stops even before a restart. Subclasses extend ``PERFORMERS`` (effect
    type -> name of a generator method taking the effect) with the effects their components yield.
    """

    PERFORMERS: ClassVar[dict[type, str]] = {Sleep: "_perform_sleep", Call: "_perform_call",
                                             Parallel: "_perform_parallel"}
    #: The bug switches (:class:`~milvus_edu.config.BugSwitches`) whose wrong rule this component (or a request it
    #: serves) follows; a switch that no node of a run's cluster declares cannot act in it, and ``simulate`` warns.
    SWITCHES: ClassVar[tuple[str, ...]] = ()
    #: What the component is called in such a warning ("the QueryNode").
    COMPONENT: ClassVar[str] = ""

    def __init__(self, sim: Simulation, name: str):
        self.sim = sim
        self.name = name
        self.alive = True
        self.incarnation = 0
        self._life = 0
        self._resume: Event | None = None  # a SimPy event while paused
        # effect type -> this node's performer, looked up for every effect
        self._performers = {kind: getattr(self, name) for kind, name in self.PERFORMERS.items()}

    # ---- life cycle ----------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        """Whether the node is frozen (it runs nothing until it resumes)."""
        return self._resume is not None

    def _end_life(self) -> None:
        """The node stops: every generator of this life is closed at its next resumption."""
        self.alive = False
        self._life += 1

    def _new_life(self) -> None:
        """A restart: alive again, a fresh incarnation; nothing of the previous one runs any more."""
        self.alive = True
        self.incarnation += 1
        self._life += 1

    def kill_detail(self, why: str) -> dict:
        """The ``detail`` of this node's ``fault.kill`` event (subclasses say what matters about them)."""
        return {"why": why}

    def kill(self, why: str = "killed") -> None:
        """Crash: stop at once, revoke nothing; a node already dead stays as it is."""
        if not self.alive:
            return
        self._end_life()
        self.sim.recorder.emit("fault.kill", self.name, detail=self.kill_detail(why))

    def pause_detail(self) -> dict:
        """Extra ``detail`` of this node's ``fault.pause`` event."""
        return {}

    def pause(self, duration_ms: float) -> None:
        """Freeze for ``duration_ms`` (a long GC or VM pause), then resume.

        While paused the node runs nothing: no loop step, no RPC answer. Its wall clock keeps running, so it
        resumes unaware that time passed.
        """
        if not duration_ms > 0:
            raise ValueError(f"pause duration must be positive, got {duration_ms!r} ms")
        if not self.alive:
            raise ValueError(f"cannot pause {self.name}: it is not running")
        if self._resume is not None:
            raise ValueError(f"{self.name} is already paused; resume it before pausing again")
        env = self.sim.env
        self._resume = env.event()
        self.sim.recorder.emit("fault.pause", self.name, detail={"duration_ms": duration_ms, **self.pause_detail()})

        def resume_later():
            yield env.timeout(duration_ms)
            event, self._resume = self._resume, None
            if self.alive:
                self.sim.recorder.emit("fault.resume", self.name, detail={"paused_ms": duration_ms})
            event.succeed()

        env.process(resume_later())

    def switches_changed(self) -> None:
        """A bug switch was flipped part-way (:meth:`~milvus_edu.sim.kernel.Simulation.set_switch`). A node that
        reads ``self.sim.config.switches`` where it uses a switch needs nothing; one whose components copied a
        switch when they were built hands them the new value here."""

    def until_resumed(self):
        """Wait while the node is paused (``yield from``); :class:`RPCError` if it died meanwhile (a request
        that reached a paused node is answered when it resumes)."""
        while self._resume is not None:
            yield self._resume
        if not self.alive:
            raise RPCError(f"{self.name} exited before answering")

    # ---- work bound to the node's life -------------------------------------------------------------
    def process(self, gen: Generator) -> Any:
        """Start ``gen`` as a SimPy process bound to the node's current life; returns the process."""
        return self.sim.env.process(self.bound(gen))

    def serve(self, gen: Generator):
        """Drive a request handler's generator on this node (``yield from``): bound to the node's life, and
        :class:`RPCError` ("exited before answering") when the node dies before the answer."""
        return self.bound(gen, self._exited)

    def _exited(self):
        raise RPCError(f"{self.name} exited before answering")

    def callback(self, fn: Callable, *args) -> Callable:
        """``fn(*args, ...)`` as a callback (a watch, an event's callback) that does nothing once this life ended."""
        life = self._life

        def call(*more):
            if self._life == life:
                fn(*args, *more)

        return call

    def bound(self, gen: Generator, on_stop: Callable[[], Any] | None = None):
        """Drive ``gen`` (``yield from`` it): SimPy events it yields are waited for, effects performed.

        After each resumption the node first waits out a pause, then, if the life ``gen`` was given in (now,
        not when it first runs) has ended, closes ``gen`` and returns ``on_stop()`` (``None`` without it); the
        same when ``gen`` ended that life itself and yields again. Returns ``gen``'s value.
        """
        # work handed to a dead node never runs: no life will match
        return self._drive(gen, self._life if self.alive else -1, on_stop)

    def on_behalf(self, gen: Generator):
        """Drive ``gen`` (``yield from`` it) for a caller whose work it is, not bound to this node's life: its
        effects are performed by this node (its links, its latencies) and its value returned, even if the node
        dies meanwhile."""
        return self._drive(gen, None, None)

    def _drive(self, gen: Generator, life: int | None, on_stop: Callable[[], Any] | None):
        """The simulator's driver of a node's work: events waited for, effects performed, the life checked."""
        send = gen.send
        value = error = None
        try:
            while True:
                if self._resume is not None:
                    yield from self._held()
                if life is not None and self._life != life:
                    gen.close()
                    return None if on_stop is None else on_stop()
                try:
                    item = send(value) if error is None else gen.throw(error)
                except StopIteration as stop:
                    return stop.value
                if life is not None and self._life != life:  # it ended its own life (a crash point), asks for more
                    gen.close()
                    return None if on_stop is None else on_stop()
                error = None
                try:
                    if isinstance(item, Event):
                        value = yield item
                    else:
                        value = yield from self.perform(item)
                except Exception as exc:  # noqa: BLE001 - thrown into gen at the line that yielded
                    value, error = None, exc
        finally:
            # an error gen did not handle leaves through this frame, whose traceback then holds it: not held here too,
            # or the two make a reference cycle that only the collector frees
            error = None
            # closed from outside (whoever drove this stopped): gen's cleanup runs now, not whenever it is freed
            gen.close()

    def _held(self):
        while self._resume is not None:
            yield self._resume

    # ---- the effect interpreter -------------------------------------------------------------------
    def perform(self, effect):
        """Perform one effect in simulated time (``yield from``); returns its result or raises its failure."""
        performer = self._performers.get(type(effect))
        if performer is None:
            raise TypeError(f"{self.name} cannot perform {effect!r}")
        return performer(effect)

    def _perform_sleep(self, effect: Sleep):
        yield self.sim.env.timeout(effect.duration_ns / MS)

    def _perform_call(self, effect: Call):
        # Simulation.call's own generator, not one around it: every RPC of a node passes here
        return self.sim.call(self.name, effect.dst, effect.handler)

    def _perform_parallel(self, effect: Parallel):
        """Every effect in a process of its own; the list of results, a failure standing as its exception."""
        env = self.sim.env
        calls = [env.process(self._outcome(e)) for e in effect.effects]
        yield env.all_of(calls)
        return [c.value for c in calls]

    def _outcome(self, effect):
        try:
            return (yield from self.perform(effect))
        except Exception as exc:  # noqa: BLE001 - a failed effect is a result of the wave
            return exc
