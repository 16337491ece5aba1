"""Interventions: what a run changes at given simulated times on top of its scenario (the explorer's "fork here").

Four kinds are faults: a small frozen dataclass naming a node and a time, applied through the node's own fault API,
so they record the same ``fault.*`` events a scenario's fault does:

* :class:`Kill` — ``Node.kill``: the node crashes (a node already dead stays as it is);
* :class:`Restart` — the node's ``restart``: a killed proxy or DataNode starts again (a proxy with a new server id,
  as Milvus gives one); a node that is running is left as it is (a restart does not kill it first, and
  :func:`milvus_edu.fork` refuses one that the original's log shows running then, as it refuses a kill or a pause
  of a node it shows down and a switch flipped to what it already is);
* :class:`Pause` — ``Node.pause``: a GC or VM pause of ``duration_ms``; a node dead or already paused then is left
  as it is;
* :class:`ClockJump` — a rootcoord's ``jump_clock``: its wall clock steps by ``delta_ms``.

The fifth, :class:`SetSwitch`, turns a bug switch on (or off) for the whole cluster from its time on
(:meth:`~milvus_edu.sim.kernel.Simulation.set_switch`): the run's config is replaced, a ``fault.switch`` event
names the switch, and every node whose components copied a switch when they were built (the rootcoords' TSO
allocator, each DataNode's buffer manager, checkpoint updater, ddNodes and write buffers, the QueryNode's
delegators and pipelines) hands them the new value through its ``switches_changed`` hook; the other components read
the switch where they use it. The checkers read no switch at all, only events, so a flipped switch is caught by the
same checker that catches it on from the start. A switch already so at that time is left as it is (nothing is
recorded).

Simplification: a flip changes the rule in every component at one simulated instant, between two steps, and what
the old rule already did stays done (rows a delete hid stay hidden, a TSO window already initialised keeps its
start); Milvus has no such switch, so the flip stands for a binary swapped between two steps.

:func:`schedule` starts ONE process for all of a run's interventions, and only when there are some. Its start
and its timeouts take SimPy event ids, but ids only break ties between events at the same time and every other
event keeps its relative order, so the run log before the first intervention's time is the run log without
interventions, byte for byte (``tests/test_fork.py`` checks it).
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import MISSING, asdict, dataclass, fields, replace

from ..config import BugSwitches

#: A restarted proxy's new server id is its old one plus this (the scenarios' convention: a new session).
RESTART_SERVER_ID_STEP = 100
#: The run-log kinds after which a node is down until its next :data:`UP_KIND`, each with the word for it: a crash
#: (``Node.kill``), a DataNode's graceful stop, a process that exited on losing its session.
DOWN_KINDS = {"fault.kill": "killed", "datanode.stop": "stopped", "session.exit": "exited"}
#: The run-log kind of a node that was down starting again.
UP_KIND = "fault.restart"


def _time(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a non-negative number of milliseconds, got {value!r}")
    return float(value)


class _Intervention(ABC):
    """What every intervention has: a ``kind``, a time ``t_ms`` (``None``: "at the fork's time", which
    :func:`milvus_edu.fork` fills in), a dict form, a check against the run and a way to happen in it."""

    kind = ""
    t_ms: float | None

    def _check_time(self) -> None:
        if self.t_ms is not None:  # 2000 and 2000.0 are one time: one token
            object.__setattr__(self, "t_ms", _time(self.t_ms, "an intervention's t_ms"))

    def to_dict(self) -> dict:
        """The JSON form kept in the run token and summary.json: ``{"kind": ..., "t_ms": ..., ...}``."""
        return {"kind": self.kind, **asdict(self)}

    @abstractmethod
    def validate(self, sim) -> None:
        """Raise ``ValueError`` (one line) when the run ``sim`` cannot take this intervention at all."""

    @abstractmethod
    def happen(self, sim) -> None:
        """Apply to the run ``sim`` now."""

    @abstractmethod
    def describe(self) -> str:
        """A few words for people: ``kill proxy-1 at 2.000 s``."""


@dataclass(frozen=True)
class _NodeIntervention(_Intervention):
    """A fault on one node, through the node's own fault API."""

    node: str
    t_ms: float | None = None

    def __post_init__(self):
        if not isinstance(self.node, str) or not self.node:
            raise ValueError(f"an intervention names a node (e.g. 'proxy-1'), got {self.node!r}")
        self._check_time()

    def check(self, node) -> None:
        """Raise ``ValueError`` (one line) when ``node`` cannot take this intervention at all."""

    def idle(self, down: str | None) -> str | None:
        """Why this intervention would do nothing to its node at its time, in one line, given ``down``: ``None`` when
        the run shows the node running then, else how it went down (``killed at 1.000 s``). ``None`` when it would
        do something."""
        return None

    def _when(self) -> str:
        return f"at {self.t_ms / 1000:.3f} s in this run"

    def validate(self, sim) -> None:
        node = sim.nodes.get(self.node)
        if node is None:
            raise ValueError(f"this run has no node named {self.node!r}; its nodes are {', '.join(sim.nodes)}")
        self.check(node)

    def happen(self, sim) -> None:
        self.apply(sim.nodes[self.node])

    @abstractmethod
    def apply(self, node) -> None:
        """Apply to ``node`` now."""

    def describe(self) -> str:
        return f"{self.kind} {self.node} at {self.t_ms / 1000:.3f} s"


@dataclass(frozen=True)
class Kill(_NodeIntervention):
    """Crash ``node`` at ``t_ms``."""

    kind = "kill"

    def idle(self, down: str | None) -> str | None:
        if down is not None:
            return f"{self.node} is down {self._when()} ({down}), and a kill leaves a node that is down as it is"
        return None

    def apply(self, node) -> None:
        node.kill()


@dataclass(frozen=True)
class Restart(_NodeIntervention):
    """Start ``node`` again at ``t_ms`` if it is dead then (a proxy gets a new server id, as in Milvus)."""

    kind = "restart"

    def check(self, node) -> None:
        if not callable(getattr(node, "restart", None)):
            raise ValueError(f"{self.node} cannot be restarted in this model (proxies and DataNodes can); "
                             "kill it instead")

    def idle(self, down: str | None) -> str | None:
        # Milvus has no restart of a running process: a new one starts after the old one is gone (apply: the same)
        if down is None:
            return (f"{self.node} is running {self._when()}, and a restart starts again only a node that is down; "
                    "kill it first, then restart it later")
        return None

    def apply(self, node) -> None:
        if node.alive:
            return
        if inspect.signature(node.restart).parameters:  # a proxy: Milvus gives it a new ServerID
            node.restart(node.server_id + RESTART_SERVER_ID_STEP)
        else:
            node.restart()


@dataclass(frozen=True)
class Pause(_NodeIntervention):
    """Freeze ``node`` for ``duration_ms`` from ``t_ms`` (a long GC or VM pause), if it is running then."""

    duration_ms: float = 1000.0
    kind = "pause"

    def __post_init__(self):
        super().__post_init__()
        if not _time(self.duration_ms, "a pause's duration_ms") > 0:
            raise ValueError(f"a pause's duration_ms must be positive, got {self.duration_ms!r}")
        object.__setattr__(self, "duration_ms", float(self.duration_ms))

    def check(self, node) -> None:
        if not callable(getattr(node, "pause", None)):
            raise ValueError(f"{self.node} cannot be paused in this model; choose a node the run's nodes list")

    def idle(self, down: str | None) -> str | None:
        if down is not None:
            return f"{self.node} is down {self._when()} ({down}), and only a running node can be paused"
        return None

    def apply(self, node) -> None:
        if node.alive and not node.paused:
            node.pause(self.duration_ms)

    def describe(self) -> str:
        return f"pause {self.node} for {self.duration_ms:g} ms at {self.t_ms / 1000:.3f} s"


#: The largest clock step a :class:`ClockJump` takes, 100 years: far more than any NTP step, and far enough below
#: what the 46-bit physical part of a hybrid timestamp holds (some 2,200 years of milliseconds) that no timestamp
#: the rootcoord then hands out overflows.
MAX_CLOCK_JUMP_MS = 100 * 365.25 * 86_400_000


@dataclass(frozen=True)
class ClockJump(_NodeIntervention):
    """Step ``node``'s wall clock by ``delta_ms`` at ``t_ms`` (negative goes back): an NTP step."""

    delta_ms: float = 0.0
    kind = "clock_jump"

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.delta_ms, bool) or not isinstance(self.delta_ms, (int, float)) \
                or not math.isfinite(self.delta_ms) or self.delta_ms == 0:
            raise ValueError(f"a clock jump's delta_ms must be a non-zero number, got {self.delta_ms!r}")
        if abs(self.delta_ms) > MAX_CLOCK_JUMP_MS:
            raise ValueError(f"a clock jump's delta_ms must be at most 100 years ({MAX_CLOCK_JUMP_MS:.4g} ms) either "
                             f"way, got {self.delta_ms!r}")
        object.__setattr__(self, "delta_ms", float(self.delta_ms))

    def check(self, node) -> None:
        if not callable(getattr(node, "jump_clock", None)):
            raise ValueError(f"{self.node}'s clock cannot jump in this model (rootcoords' clocks can); "
                             "choose a rootcoord")

    def apply(self, node) -> None:
        node.jump_clock(self.delta_ms)

    def describe(self) -> str:
        return f"jump {self.node}'s clock by {self.delta_ms:+g} ms at {self.t_ms / 1000:.3f} s"


@dataclass(frozen=True)
class SetSwitch(_Intervention):
    """Turn bug switch ``name`` on (``on=False``: off) at ``t_ms``, for every component from then on; a switch
    already so then is left as it is."""

    name: str
    on: bool = True
    t_ms: float | None = None
    kind = "switch"

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise ValueError(f"a switch intervention names a bug switch, got {self.name!r}")
        BugSwitches.from_names([self.name])  # the one-line error naming the valid switches
        if not isinstance(self.on, bool):
            raise ValueError(f"a switch is turned on (True) or off (False), got {self.on!r}")
        self._check_time()

    def validate(self, sim) -> None:
        """Any run can take it: the name was checked when it was made."""

    def idle(self, on: set[str]) -> str | None:
        """Why this flip would do nothing, given the switches ``on`` at its time; ``None`` when it would do something."""
        if (self.name in on) != self.on:
            return None
        state = "already on" if self.on else "not on"
        return (f"switch {self.name} is {state} at {self.t_ms / 1000:.3f} s in this run, so turning it "
                f"{'on' if self.on else 'off'} changes nothing; the switches on then: {', '.join(sorted(on)) or 'none'}")

    def happen(self, sim) -> None:
        sim.set_switch(self.name, self.on)

    def describe(self) -> str:
        return f"switch {self.name} {'on' if self.on else 'off'} at {self.t_ms / 1000:.3f} s"


KINDS: dict[str, type[_Intervention]] = {k.kind: k for k in (Kill, Restart, Pause, ClockJump, SetSwitch)}


def from_dict(data: dict) -> _Intervention:
    """The intervention of a :meth:`to_dict` form; ``ValueError`` for anything else."""
    if not isinstance(data, dict) or data.get("kind") not in KINDS:
        raise ValueError(f"not an intervention: {data!r} (kinds: {', '.join(KINDS)})")
    cls = KINDS[data["kind"]]
    names = [f.name for f in fields(cls)]
    rest = {k: v for k, v in data.items() if k != "kind"}
    unknown = sorted(set(rest) - set(names))
    needed = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING] + ["t_ms"]
    missing = [name for name in needed if rest.get(name) is None]
    if unknown or missing:
        what = f"has no field {unknown[0]!r}" if unknown else f"lacks {missing[0]!r}"
        raise ValueError(f"not a {data['kind']} intervention: {data!r} {what}; give {', '.join(names)}")
    return cls(**rest)


def _not_one(item) -> ValueError:
    """The one-line refusal of ``item``, which is not an intervention."""
    if isinstance(item, type) and issubclass(item, _Intervention):
        return ValueError(f"{item.__name__} is the class, not an intervention: call it with the node (or switch) and "
                          f"the time, e.g. Kill('proxy-1', 2000.0)")
    return ValueError(f"not an intervention: {item!r}; use Kill, Restart, Pause, ClockJump or SetSwitch")


def canonical(interventions: Iterable) -> tuple:
    """``interventions`` (objects or their dict forms, a list or one) as objects sorted by time; equal times keep
    their order, which is the order they are applied in."""
    if isinstance(interventions, (_Intervention, dict, str)):  # one, not a list of them (nor of characters)
        interventions = [interventions]
    try:
        items = [from_dict(i) if isinstance(i, dict) else i for i in interventions]
    except TypeError:  # not iterable: one thing that is not an intervention
        raise _not_one(interventions) from None
    for item in items:
        if not isinstance(item, _Intervention):
            raise _not_one(item)
        if item.t_ms is None:
            raise ValueError(f"{item!r} has no time: give t_ms")
    return tuple(sorted(items, key=lambda i: i.t_ms))


def at(intervention: _Intervention, t_ms: float) -> _Intervention:
    """``intervention`` at ``t_ms`` when it has no time of its own."""
    if not isinstance(intervention, _Intervention):
        raise _not_one(intervention)
    return intervention if intervention.t_ms is not None else replace(intervention, t_ms=t_ms)


def validate(sim, interventions: tuple, duration_ms: float) -> None:
    """Raise ``ValueError`` (one line) for an intervention on a node the run does not have, one the node cannot
    take, or one at or after the run's end; run before anything is written."""
    for item in interventions:
        item.validate(sim)
        if item.t_ms >= duration_ms:
            raise ValueError(f"{item.describe()} is at or after the run's end ({duration_ms / 1000:g} s); "
                             "choose an earlier time")


def schedule(sim, interventions: tuple) -> None:
    """Apply ``interventions`` (sorted by time) at their times: one process, started only when there are some,
    before the run starts (at simulated time 0)."""
    if not interventions:
        return
    env = sim.env

    def apply_all():
        # every timer set at time 0 for its own time: each fires at exactly its t_ms (no sum of rounded delays)
        timers = [env.timeout(item.t_ms) for item in interventions]
        for item, timer in zip(interventions, timers):
            yield timer
            item.happen(sim)

    env.process(apply_all())


__all__ = ["Kill", "Restart", "Pause", "ClockJump", "SetSwitch", "KINDS", "DOWN_KINDS", "UP_KIND", "from_dict",
           "canonical", "at", "validate", "schedule"]
