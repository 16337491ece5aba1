"""Scenarios: the catalogue of every registered mechanism's named cluster set-ups.

A :class:`~milvus_edu.registry.Scenario` has a one-line description (shown by ``milvus-edu
scenarios``), a default duration, the mechanisms it exercises and a ``build(sim)`` function that adds
and starts nodes and schedules faults. Mechanisms bring their own (see :mod:`milvus_edu.registry`).

An option that is a time in the run (when a node crashes, when a collection is dropped) declares it by its default,
an :class:`At`: :func:`~milvus_edu.sim.run.simulate` then warns when the value given is at or after the run's end. An
option that is a delay after such a time (how long a killed node stays down) declares it by an :class:`After` naming
that option: the warning then comes when the time plus the delay is at or after the run's end.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from ..registry import Scenario, get_scenario, scenarios


class At(float):
    """The default of a scenario option that is a time in the run, in seconds from its start, at which the scenario
    does something (``crash_at_s``: a crash). A value given for the option is an ``At`` too (``scenario_options``
    converts a value to its default's type), so :func:`warn_times_after` can tell that it falls after the run."""

    __slots__ = ()


class After(float):
    """The default of a scenario option that is a delay, in seconds, after the time another option of the scenario
    sets (an :class:`At`), at which the scenario does something: ``After(2.0, since=<that option's name>)`` does it 2 s
    after that time. A value given for the option is an ``After`` of the same ``since`` (``scenario_options`` converts
    a value to its default's type, and each ``since`` has a type of its own), so :func:`warn_times_after` can tell
    that the time plus the delay falls after the run."""

    __slots__ = ()
    #: The name of the option this delay counts from (set on the type: ``type(value)(raw)`` keeps it).
    since = ""
    _of_since: dict[str, type[After]] = {}

    def __new__(cls, value=0.0, since: str | None = None):
        if since is not None and since != cls.since:
            cls = After._of_since.get(since) or After._of_since.setdefault(
                since, type(f"After[{since}]", (After,), {"__slots__": (), "since": since, "__module__": __name__}))
        if not cls.since:
            raise TypeError("After needs the name of the option the delay counts from: After(2.0, since='...')")
        return super().__new__(cls, value)

    def __reduce__(self):  # pickled by the public type: its per-since type is made again on loading
        return After, (float(self), self.since)


def warn_times_after(options: Mapping[str, object], until_ms: float, given=None) -> None:
    """Warn (``UserWarning``, one per option) of what an option times that will not happen before the run's end
    ``until_ms``, as with a workload's steps after the end: an :class:`At` option at or after the end, an
    :class:`After` option whose start (the option it counts from) plus the delay is at or after it.

    ``options`` are the run's options after ``scenario_options``; only those named in ``given`` warn (the options
    the user gave, in that order; ``None``: every one of ``options``). A delay whose start is itself at or after the
    end does not warn: what it would follow does not happen either (the start's own warning says so, when given).
    Not an error: the run is still one, and an option set past the end is a way to leave out what it times."""
    end_s = until_ms / 1000
    for name in options if given is None else [n for n in given if n in options]:
        value = options[name]
        if isinstance(value, At) and value * 1000.0 >= until_ms:
            warnings.warn(f"option {name}={value:g} is at or after the run's end ({end_s:g} s), so what it "
                          f"times will not happen in this run; {name} is in seconds from the run's start: give a "
                          "longer run or an earlier time", UserWarning, stacklevel=3)
        elif isinstance(value, After):
            start = float(options[value.since])
            if start * 1000.0 < until_ms <= (start + value) * 1000.0:
                warnings.warn(f"option {name}={value:g} puts what it times at {start + value:g} s, at or after the "
                              f"run's end ({end_s:g} s), so it will not happen in this run; {name} is in seconds "
                              f"after {value.since} ({start:g} s): give a longer run or a shorter delay", UserWarning,
                              stacklevel=3)


def idle_switches(nodes, switches) -> list[str]:
    """The names among ``switches`` that no node in ``nodes`` declares (a component's ``SWITCHES``): a switch whose
    component the cluster lacks cannot act in the run."""
    here = {name for node in nodes for name in getattr(type(node), "SWITCHES", ())}
    return [name for name in switches if name not in here]


def where_switch_acts(switch: str, limit: int = 3) -> tuple[str, list[str]]:
    """The ``COMPONENT`` of the node class that declares ``switch`` ("" when no registered scenario's cluster has
    one), and up to ``limit`` registered scenarios whose cluster has it: first those whose description or story names
    the switch (made to show it), then those that exercise the fewest lessons (a TSO switch shows in a TSO scenario,
    not in a flush one that merely has a rootcoord), then by name. One pass over the built clusters (building runs
    nothing: ~0.4 ms a scenario)."""
    component, found = "", []
    for name, spec, sim in _built_clusters():
        owners = [type(node) for node in sim.nodes.values() if switch in getattr(type(node), "SWITCHES", ())]
        if owners:
            component = component or getattr(owners[0], "COMPONENT", "") or owners[0].__name__
            found.append((switch not in f"{spec.description} {spec.story or ''}", len(spec.mechanisms), name))
    return component, [name for *_, name in sorted(found)[:limit]]


def cluster_of(scenario: str):
    """The nodes of ``scenario``'s cluster built with its default options (nothing run): which components it has."""
    return list(_built(get_scenario(scenario)).nodes.values())


def _built_clusters():
    """``(name, scenario, simulation)`` of each registered scenario built with its default options (nothing run)."""
    for name, spec in sorted(scenarios().items()):
        yield name, spec, _built(spec)


def _built(spec: Scenario):
    """A simulation with ``spec``'s cluster built with its default options: building emits nothing and runs nothing."""
    from ..config import Config
    from ..events import Recorder
    from ..registry import scenario_options
    from .kernel import Simulation

    sim = Simulation(0, Recorder(spec.name, sinks=[]), Config())
    spec.build(sim, **scenario_options(spec, None))
    return sim


def warn_idle_switches(scenario: str, nodes, switches) -> None:
    """Warn (``UserWarning``, one per switch) of each of ``switches`` that no node of the run's cluster (``nodes``)
    declares: the component whose rule it breaks is not in ``scenario``, so the run is the same as without it."""
    for name in idle_switches(nodes, switches):
        component, scenarios_with_it = where_switch_acts(name)
        where = ", ".join(scenarios_with_it)
        warnings.warn(f"switch {name} cannot act in {scenario}: it changes {component or 'a component'}, which this "
                      f"scenario's cluster does not have, so it changes nothing in this run but its name"
                      + (f"; try it in a scenario with one, e.g. {where}" if where else ""), UserWarning, stacklevel=3)


__all__ = ["After", "At", "Scenario", "cluster_of", "get_scenario", "idle_switches", "scenarios",
           "warn_idle_switches", "warn_times_after", "where_switch_acts"]
