"""milvus-edu: see how Milvus 2.5 keeps order and consistency.

A faithful, readable Python model of Milvus's TSO (and, in later chapters, TimeTick, DataNode
flush/checkpoint and QueryNode guarantee-ts reads), run as a deterministic SimPy simulation that
writes a run log. Start with ``milvus_edu.simulate("tso-failover", seed=1)`` or ``milvus-edu demo``.
"""

__version__ = "0.1.0"


def simulate(*args, **kwargs):
    """Shortcut for :func:`milvus_edu.sim.run.simulate`."""
    from .sim.run import simulate as _simulate

    return _simulate(*args, **kwargs)


def load_run(path):
    """Shortcut for :func:`milvus_edu.events.load_run`."""
    from .events import load_run as _load_run

    return _load_run(path)


__all__ = ["__version__", "simulate", "load_run"]
