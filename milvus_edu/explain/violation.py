"""Why did a checker report a violation? The checker's own evidence, told as a chain, then the lessons' answers.

A violation in a run's ``summary.json`` (``checks.violations``) names its invariant, the events it rests on
(``seqs``) and the checker's explanation ("Let … Then … because …"). The chain lists those events in the order
they happened, each with what it means (:func:`milvus_edu.narrate.describe`), ends with the explanation, then
follows the lesson that answers :data:`VIOLATION_QUESTION` for the invariant, if one does, and, when one of the
events is a request some lesson explains (a read that waited or read stale data), follows that
lesson's chain back to its root cause.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..narrate import describe
from ..registry import explainer
from .chain import Chain, Link, Question, WhyError, ask

#: The question asked about a violation of an invariant, when a lesson answers it: the subject is
#: ``{"seqs": [...]}``, the events the violation rests on (the TSO lesson explains where a timestamp that went
#: back came from).
VIOLATION_QUESTION = "violation:{invariant}"
#: The question asked about a request found among a violation's evidence (answered by whichever lesson registered
#: it); a request it cannot explain (not a read, or one that did not wait) adds nothing.
REQUEST_QUESTION = "read"


def summary_of(run) -> Mapping:
    """The run's summary: a :class:`~milvus_edu.sim.run.RunResult`'s, or ``summary.json`` in a run folder (or beside
    its events file). ``WhyError`` when there is none (an events DataFrame alone has no summary)."""
    if hasattr(run, "summary") and hasattr(run, "events"):
        return run.summary
    if isinstance(run, (str, Path)):
        path = Path(run)
        found = path / "summary.json" if path.is_dir() else path.with_name("summary.json")
        try:
            summary = json.loads(found.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise WhyError(f"{found} does not exist: violations are kept in a run's summary.json; pass the run "
                           f"folder `milvus-edu simulate --out` wrote") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise WhyError(f"{found} is not a readable run summary ({exc}); run the scenario again") from None
        if not isinstance(summary, dict):
            raise WhyError(f"{found} is not a run summary (it holds a JSON {type(summary).__name__}); run the "
                           "scenario again")
        return summary
    raise WhyError("violations are kept in the run's summary: pass the run folder or the run result, not its events")


def explain_violation(events: pd.DataFrame, summary: Mapping, number: int) -> Chain:
    """The chain for violation ``number`` (1-based, in the order ``summary.json`` lists them): its evidence events,
    the checker's explanation, then the chain of the first evidence request a lesson explains."""
    checks = summary.get("checks")
    # no list at all is an edited summary, not a clean run: "every invariant held" would be a claim nobody made
    violations = checks.get("violations") if isinstance(checks, dict) else None
    if not isinstance(violations, list) or not all(isinstance(v, dict) for v in violations):
        raise WhyError("this summary.json's checks.violations is not a list of violations (was it edited?); run the "
                       "scenario again for its summary")
    if not violations:
        raise WhyError("this run has no violations: its checkers found every invariant held (run a scenario with a "
                       "bug switch, e.g. `milvus-edu simulate --scenario NAME --switch SWITCH`, to see one)")
    if not 1 <= number <= len(violations):
        raise WhyError(f"there is no violation {number} in this run: its violations are numbered 1 to "
                       f"{len(violations)} (summary.json lists them under checks.violations)")
    violation = violations[number - 1]
    invariant = str(violation.get("invariant"))
    try:
        seqs = sorted({int(s) for s in violation.get("seqs") or ()})
    except (TypeError, ValueError):
        raise WhyError(f"violation {number}'s seqs in summary.json are not event numbers (was it edited?); run the "
                       "scenario again for its summary") from None
    rows = events[events["seq"].isin(seqs)].sort_values("seq")
    if len(rows) != len(seqs):
        raise WhyError(f"violation {number} rests on events this run log does not hold; pass the run folder whose "
                       f"summary.json reported it")
    # the evidence in the order it happened ("..., and ..."), then the checker's verdict on it ("so ..."); what the
    # lessons add after that explains the verdict ("because ...")
    links = [Link.of(r, describe(r).rstrip("."), "and") for r in rows.to_dict("records")]
    if links:
        last = links[-1]
        links.append(Link(last.seq, last.t_ms, last.node,
                          f"the checker's invariant {invariant} broke: {violation.get('explanation', '')}".rstrip("."),
                          "so"))
    title = f"Why was invariant {invariant} violated (violation {number})?"
    question = Question(VIOLATION_QUESTION.format(invariant=invariant), {"seqs": tuple(seqs)})
    if explainer(question.kind) is not None:
        links.extend(link for link in ask(events, question, "").links if not _said(link, links))
    requests = [int(r) for r in rows["request"].dropna()] if "request" in rows else []
    if explainer(REQUEST_QUESTION) is not None:
        for request in dict.fromkeys(requests):
            subject = {"request": request}
            shards = rows[(rows["request"] == request) & rows["vchannel"].notna()]["vchannel"]
            if len(shards):  # the shard the violation names, not whichever the request waited longest on
                subject["vchannel"] = str(shards.iloc[0])
            try:
                more = ask(events, Question(REQUEST_QUESTION, subject), "")
            except WhyError:
                continue
            links.extend(link for link in more.links if not _said(link, links))
            break
    if not links:
        raise WhyError(f"violation {number} names no event to explain it by")
    return Chain(title, tuple(links))


def _said(link: Link, links: list[Link]) -> bool:
    """Whether ``links`` already tell ``link``: the same event and words, whatever word joins it."""
    return any((other.seq, other.text) == (link.seq, link.text) for other in links)
