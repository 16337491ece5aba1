"""Beside a real Milvus: the PyPI ``milvus`` 2.3.5 embedded server, a workload run on it through pymilvus, its logs
read into the run log, and the comparison with the model (``pip install -e ".[real]"``).

* :mod:`.server`: :class:`RealMilvus` starts and stops a standalone server in a fresh folder on free loopback ports;
* :mod:`.workload`: :func:`run_workload` runs a workload's steps on it on a wall-clock schedule and writes a run
  folder in the run-log schema;
* :mod:`.logs`: :func:`parse_log` reads the server's log lines into the model's event kinds, so the stepper,
  ``levels.reads`` and the analyses open a real run like a simulated one;
* :mod:`.metrics`: :class:`~.metrics.MetricsSampler` samples the server's time-tick gauges while a workload runs
  (2.3.5 logs no time tick), and :func:`~.metrics.metric_events` makes them time ticks, proxy reports and tsafe;
* :mod:`.compare`: :func:`compare` runs a workload on both and lines the calls up.
"""

from .server import RealMilvus, RealMilvusError

__all__ = ["RealMilvus", "RealMilvusError"]
