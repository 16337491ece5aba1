"""Invariants over the run log: streaming checkers, pure functions of events, each reporting
:class:`Violation` s explained in words. Each mechanism keeps its checker in its own folder
(``milvus_edu/mechanisms/<lesson>/check.py``) and registers it (:attr:`milvus_edu.registry.Mechanism.checker`)."""

from .violation import Violation

__all__ = ["Violation"]
