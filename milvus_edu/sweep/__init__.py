"""Simulation sweeps as Spark jobs: a grid of scenarios, switch sets, options, parameters and seeds, run
inside Spark's executors, written as Parquet run folders and two tables (runs and verdicts).

* :func:`run_sweep` runs (or resumes) a sweep and returns a :class:`Sweep`; :func:`load_sweep` loads
  a swept folder; :class:`GridError` is a bad grid, :class:`SweepFolderError` a folder holding no sweep.
* How the package reaches the executors: :func:`run_sweep` zips ``milvus_edu/`` and ships it with
  ``SparkContext.addPyFile`` (see :mod:`milvus_edu.sweep.run`).
* :class:`StandaloneCluster` starts a one-machine Spark standalone cluster from the pyspark installation.
"""

from .cluster import StandaloneCluster
from .grid import GridError, normalise_grid, run_specs
from .load import SetAside, Sweep, SweepFolderError, load_sweep
from .run import run_sweep

__all__ = ["GridError", "SetAside", "StandaloneCluster", "Sweep", "SweepFolderError", "load_sweep",
           "normalise_grid", "run_specs", "run_sweep"]
