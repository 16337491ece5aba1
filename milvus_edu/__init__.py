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
from .sim.interventions import ClockJump, Kill, Pause, Restart  # noqa: E402
from .export import export_perfetto  # noqa: E402
from . import mechanisms  # noqa: E402,F401  (registers the built-in mechanisms)
from .explain import why  # noqa: E402

__all__ = ["__version__", "simulate", "load_run", "replay", "fork", "Kill", "Restart", "Pause", "ClockJump",
           "export_perfetto", "why"]
