"""A causal chain: why a read waited or a flush took long, told as events linked by "because", each an event
you can jump to.

The framework names no mechanism. A lesson answers the "why?" questions it knows about through its
:attr:`milvus_edu.registry.Mechanism.explainers`: a question *kind* (``"read"``, ``"tick-stopped"``, ...) maps to
``f(events, subject) -> Answer``, where ``events`` is the run log as :func:`milvus_edu.load_run` returns it and
``subject`` a small dict saying what is asked about (``{"request": 6}``). An answer gives links and, when its last
link has a cause another lesson knows, a follow-up :class:`Question`; :func:`why` keeps asking until no follow-up
is left or no lesson answers it.

Links are kept effect first, root cause last, so the chain reads in order as a sentence: "read 6 waited ...,
because ..., because ...". Each link says the word that joins it to the one before (:attr:`Link.joint`):
"because" in a lesson's answer; a violation's chain (:mod:`milvus_edu.explain.violation`) lists its evidence in
the order it happened ("and"), then the checker's verdict ("so"), then the causes ("because").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..registry import explainer

#: How many follow-up questions one chain may ask: a guard against two lessons handing a question back and forth.
MAX_HOPS = 10


class WhyError(ValueError):
    """A question the run cannot answer (no such read, a read that did not wait, a folder that is not a run);
    its message is one line saying what is wrong and how to fix it."""


@dataclass(frozen=True)
class Link:
    """One step of a chain: the event (``seq``, 0-based as in the run log; users see ``seq + 1``), its simulated
    time, the component it happened on, and one clause in Milvus words saying what it shows."""

    seq: int
    t_ms: float
    node: str
    text: str
    #: The word that joins this link to the one before it: "because" (it explains that one), or, in a violation's
    #: chain, whose evidence comes in the order it happened, "and" (more evidence) and "so" (the checker's verdict).
    joint: str = "because"

    @classmethod
    def of(cls, row, text: str, joint: str = "because") -> "Link":
        """The link of a run-log row (a dict or a pandas row) saying ``text``, joined by ``joint``."""
        return cls(int(row["seq"]), float(row["t_ms"]), str(row["node"]), text, joint)

    def __str__(self) -> str:
        return f"event {self.seq + 1:,} ({self.t_ms / 1000:.3f} s, {self.node}): {self.text}"


@dataclass(frozen=True)
class Question:
    """A "why?" question: its kind (which lesson answers it) and its subject."""

    kind: str
    subject: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """An explainer's answer: its links (effect first) and, optionally, the question that explains the last one."""

    links: tuple[Link, ...]
    follow: Question | None = None
    title: str = ""
    """The question as the answer found it (``Why did read 5 read stale data?``); empty keeps the asker's."""


@dataclass(frozen=True)
class Chain:
    """The whole answer to ``question``: links effect first, root cause last."""

    question: str
    links: tuple[Link, ...]

    @property
    def root(self) -> Link:
        """The last link: the root cause the chain found."""
        return self.links[-1]

    def lines(self) -> list[str]:
        """The chain as the terminal prints it: the question, then one line per link with its event and time."""
        out = [self.question]
        for i, link in enumerate(self.links):
            lead = "  " if i == 0 else f"  {link.joint} "
            out.append(f"{lead}{link}")
        return out

    def __str__(self) -> str:
        text = "".join((f", {link.joint} " if i else "") + link.text for i, link in enumerate(self.links))
        return text[:1].upper() + text[1:] + "."


def run_events(run) -> pd.DataFrame:
    """The run log of a :class:`~milvus_edu.sim.run.RunResult`, a DataFrame, or a run folder / events file."""
    if isinstance(run, pd.DataFrame):
        from ..events import FIELD_NAMES

        missing = [name for name in FIELD_NAMES if name not in run.columns]
        if missing:  # the explainers read every column; a KeyError from deep inside names none of this
            raise WhyError(f"these events lack the run-log column {missing[0]!r}; pass the whole run log "
                           "(milvus_edu.load_run(folder)) or the run folder")
        return run
    if hasattr(run, "events") and hasattr(run, "summary"):
        return run.events
    if isinstance(run, (str, Path)):
        from ..events import RunLogError, load_run

        try:
            return load_run(run)
        except RunLogError as exc:
            raise WhyError(str(exc)) from None
    raise WhyError(f"expected a run folder, an events file, a run result or its events, got {type(run).__name__}")


def ask(events: pd.DataFrame, question: Question, title: str) -> Chain:
    """Answer ``question`` on ``events``, following every follow-up question a registered lesson answers.

    ``WhyError`` when no lesson answers the first question, or (from the explainer) when the subject is not in the
    run or has nothing to explain.
    """
    answer = explainer(question.kind)
    if answer is None:
        raise WhyError(f"no registered lesson explains questions of kind {question.kind!r}")
    links: list[Link] = []
    asked = {(question.kind, tuple(sorted(question.subject.items())))}
    for _ in range(MAX_HOPS):
        result = answer(events, question.subject)
        if not links and result.title:
            title = result.title
        links.extend(result.links)
        question = result.follow
        if question is None:
            break
        key = (question.kind, tuple(sorted(question.subject.items())))
        answer = explainer(question.kind)
        if answer is None or key in asked:
            break
        asked.add(key)
    return Chain(title, tuple(links))


#: The question kind the flush lesson answers for ``why(run, flush=N)``: how long a client's flush took, and why.
FLUSH_QUESTION = "flush-wait"
