"""The SimPy simulator: kernel (clocks, network, RNG streams), scenarios, runs (the nodes are :mod:`milvus_edu.cluster`)."""

from .kernel import EPOCH_NS, NetworkParams, NodeClock, RPCError, Simulation
from .run import RunFolderError, RunResult, prepare_out_dir, simulate
from .scenarios import Scenario, get_scenario, scenarios

__all__ = [
    "Simulation", "NodeClock", "NetworkParams", "RPCError", "EPOCH_NS",
    "simulate", "RunResult", "RunFolderError", "prepare_out_dir", "scenarios", "Scenario", "get_scenario",
]
