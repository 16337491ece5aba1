"""milvus-edu: see how Milvus 2.5 keeps order and consistency.

A faithful, readable Python model of Milvus's TSO, TimeTick, DataNode flush/checkpoint and QueryNode
guarantee-ts reads, run as a deterministic SimPy simulation that
writes a run log. Start with ``milvus_edu.simulate("tso-failover", seed=1)`` or ``milvus-edu demo``.
"""

from .version import __version__

from .events import load_run  # noqa: E402
from .sim.run import simulate  # noqa: E402
from .sim.run import replay  # noqa: E402
from .sim.run import fork  # noqa: E402
from .sim.interventions import ClockJump, Kill, Pause, Restart, SetSwitch  # noqa: E402
from .export import export_perfetto  # noqa: E402
from . import mechanisms  # noqa: E402,F401  (registers the built-in mechanisms)
from .explain import why  # noqa: E402


def explore(run_or_path_or_frame, **opts):
    """Open the explorer (:class:`milvus_edu.explorer.Explorer`) on a run result, a run folder or a run-log
    DataFrame: the whole cluster on one cursor, as a JupyterLab widget or headless. ``opts``: ``span_s`` (the
    visible time window), ``cursor`` (the first event shown, 0-based). Imported on first use: it needs the
    widget libraries, which ``import milvus_edu`` does not load."""
    from .explorer import explore as _explore

    return _explore(run_or_path_or_frame, **opts)


__all__ = ["__version__", "simulate", "load_run", "replay", "fork", "Kill", "Restart", "Pause", "ClockJump",
           "SetSwitch", "export_perfetto", "why", "explore"]
