"""The "why?" questions a user asks of a run (:func:`why`): a read, a flush or a violation, each answered as a
:class:`~milvus_edu.explain.chain.Chain` by the lessons' explainers (:mod:`.chain`) or from the checkers' evidence
(:mod:`.violation`)."""

from __future__ import annotations

from .chain import FLUSH_QUESTION, Chain, Question, WhyError, ask, run_events
from .violation import explain_violation, summary_of


def _number(name: str, value, meaning: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WhyError(f"{name}N takes a whole number ({meaning}), got {value!r}")
    return value


def why(run, *, read: int | None = None, flush: int | None = None, violation: int | None = None) -> Chain:
    """Why did read ``read`` wait (or time out, read stale data, or get refused)? Why did flush ``flush`` take as long as it did?
    Why did the checkers report violation ``violation``? The causal chain back to its root cause, each link an
    event. Ask exactly one.

    ``run``: a run folder (or its ``events.parquet`` / ``events.jsonl``), a :class:`~milvus_edu.sim.run.RunResult`,
    or its events DataFrame (not for ``violation``, which needs the run's summary). ``read`` is the read's
    ``request`` number as the run log and the timeline show it; ``flush`` counts the clients' flushes from 1 in the
    order they were issued; ``violation`` counts from 1 in the order ``summary.json`` lists them.
    Raises :class:`WhyError` (one line) for a folder that is not a run, a read, flush or violation that does not
    exist, a read that neither waited, nor was stale, nor was refused, or a run without violations.
    """
    asked = [name for name, value in (("read=", read), ("flush=", flush), ("violation=", violation)) if value is not None]
    if not asked:
        raise WhyError("say what to explain: read=N (the read's request number, as `milvus-edu timeline` shows it), "
                       "flush=N (the N-th client flush) or violation=N (the N-th in summary.json)")
    if len(asked) > 1:
        raise WhyError(f"ask one question at a time, not {' and '.join(name + 'N' for name in asked)}")
    if violation is not None:
        number = _number("violation=", violation, "the violation's place in summary.json, from 1")
        events = run_events(run)
        return explain_violation(events, summary_of(run), number)
    if flush is not None:
        number = _number("flush=", flush, "the flush's place among the run's client flushes, from 1")
        return ask(run_events(run), Question(FLUSH_QUESTION, {"number": number}), f"Why did flush {number} take so long?")
    _number("read=", read, "the read's request number")
    return ask(run_events(run), Question("read", {"request": read}), f"Why did read {read} wait?")
