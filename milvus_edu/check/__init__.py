"""Invariants over the run log: pure functions of events, each returning a list of violations."""

from .tso import INVARIANTS, TSOChecker, Violation, check_tso

__all__ = ["INVARIANTS", "TSOChecker", "Violation", "check_tso"]
