"""Views of a run log: the timeline stepper (an anywidget front end over matplotlib lanes) and the lane protocol.

Views read events only — a DataFrame in memory or a run folder on disk — never live objects, and
never re-run model logic. See :class:`TimelineStepper` and :mod:`milvus_edu.viz.lanes`. Each
mechanism brings its own lanes and panel (:mod:`milvus_edu.registry`); this package names none.

The names below are loaded when first used: a lesson's panel reads :mod:`milvus_edu.viz.columns` when
``milvus_edu`` is imported, and that must not load matplotlib and the widget libraries (half of
``import milvus_edu``, and of every ``milvus-edu`` command's start) for a run that draws nothing.
"""

from __future__ import annotations

import importlib

#: Each public name and the submodule that defines it.
_HOMES = {
    "TimelineStepper": "stepper", "default_lanes": "stepper",
    "Lane": "lanes", "EventsLane": "lanes",
    "RunIndex": "data", "as_frame": "data", "run_mechanisms": "data",
}

__all__ = ["TimelineStepper", "Lane", "EventsLane", "default_lanes", "RunIndex", "as_frame", "run_mechanisms"]


def __getattr__(name: str):
    """Import the submodule that defines ``name`` on first use (PEP 562)."""
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
        globals()[name] = value  # later uses find it without coming here
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
