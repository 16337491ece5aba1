"""Invariants over the run log: pure functions of events, each returning a list of violations."""

from .tso import Violation, check_tso

__all__ = ["Violation", "check_tso"]
