"""Scenarios: the catalogue of every registered mechanism's named cluster set-ups.

A :class:`~milvus_edu.registry.Scenario` has a one-line description (shown by ``milvus-edu
scenarios``), a default duration, the mechanisms it exercises and a ``build(sim)`` function that adds
and starts nodes and schedules faults. Mechanisms bring their own (see :mod:`milvus_edu.registry`).

An option that is a time in the run (when a node crashes, when a collection is dropped) declares it by its default,
an :class:`At`: :func:`~milvus_edu.sim.run.simulate` then warns when the value given is at or after the run's end.
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


def warn_times_after(options: Mapping[str, object], until_ms: float) -> None:
    """Warn (``UserWarning``, one per option) for each :class:`At` option of ``options`` (the options given, after
    ``scenario_options``) at or after the run's end ``until_ms``:
    what it times never happens, as with a workload's steps after the end. Not an error: the run is still one, and
    an option set past the end is a way to leave out what it times."""
    for name, value in options.items():
        if isinstance(value, At) and value * 1000.0 >= until_ms:
            warnings.warn(f"option {name}={value:g} is at or after the run's end ({until_ms / 1000:g} s), so what it "
                          f"times will not happen in this run; {name} is in seconds from the run's start: give a "
                          "longer run or an earlier time", UserWarning, stacklevel=3)


__all__ = ["At", "Scenario", "get_scenario", "scenarios", "warn_times_after"]
