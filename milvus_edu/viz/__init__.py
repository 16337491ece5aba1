"""Views of a run log: the timeline stepper (an anywidget front end over matplotlib lanes) and the lane protocol.

Views read events only — a DataFrame in memory or a run folder on disk — never live objects, and
never re-run model logic. See :class:`TimelineStepper` and :mod:`milvus_edu.viz.lanes`. Each
mechanism brings its own lanes and panel (:mod:`milvus_edu.registry`); this package names none.
"""

from .data import RunIndex, as_frame, run_mechanisms
from .lanes import EventsLane, Lane
from .stepper import TimelineStepper, default_lanes

__all__ = ["TimelineStepper", "Lane", "EventsLane", "default_lanes", "RunIndex", "as_frame", "run_mechanisms"]
