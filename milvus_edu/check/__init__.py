"""Invariants over the run log: streaming checkers, pure functions of events, each reporting
:class:`Violation` s explained in words. Each mechanism registers its checker
(:attr:`milvus_edu.registry.Mechanism.checker`)."""

from .tso import INVARIANTS, TSOChecker, check_tso
from .violation import Violation

__all__ = ["INVARIANTS", "TSOChecker", "Violation", "check_tso"]
