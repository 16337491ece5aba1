""""Why?" as a causal chain: :func:`why` answers why a read waited, why a flush took long, or why a checker reported a
violation, link by link back to its root cause.

See :mod:`milvus_edu.explain.chain` for the framework (each lesson registers the questions it answers) and
:mod:`milvus_edu.explain.violation` for violations.
"""

from .chain import Answer, Chain, Link, Question, WhyError, ask
from .questions import why

__all__ = ["Answer", "Chain", "Link", "Question", "WhyError", "ask", "why"]
