"""Views of a run log: the timeline stepper (ipywidgets + matplotlib) and its lanes.

Views read events only — a DataFrame in memory or a run folder on disk — never live objects, and
never re-run model logic. See :class:`TimelineStepper` and :mod:`milvus_edu.viz.lanes`.
"""

from .data import RunIndex, as_frame
from .lanes import ClientLane, EventsLane, FailoverLane, Lane, LogicalLane, PhysicalLane, tso_lanes
from .stepper import TimelineStepper

__all__ = [
    "TimelineStepper", "Lane", "tso_lanes", "PhysicalLane", "LogicalLane", "ClientLane", "EventsLane", "FailoverLane",
    "RunIndex", "as_frame",
]
