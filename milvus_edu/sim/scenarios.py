"""Scenarios: the catalogue of every registered mechanism's named cluster set-ups.

A :class:`~milvus_edu.registry.Scenario` has a one-line description (shown by ``milvus-edu
scenarios``), a default duration, the mechanisms it exercises and a ``build(sim)`` function that adds
and starts nodes and schedules faults. Mechanisms bring their own (see :mod:`milvus_edu.registry`).
"""

from __future__ import annotations

from ..registry import Scenario, get_scenario, scenarios

__all__ = ["Scenario", "get_scenario", "scenarios"]
