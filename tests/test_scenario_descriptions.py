"""Every scenario's description and story say only what its run shows.

Each sentence of a scenario's ``description`` and ``story`` that names an event (a crash, a restart, a pause,
a stall, an overflow, a retry, a wait, an expiry, a failure, a timeout, a refusal, an exit) must be borne out
by the run log of that scenario at seed 1 and its default duration.

How: :data:`EVENT_WORD` finds the words that name an event. :data:`VOCABULARY` is a list of phrases, each a
regular expression with a predicate over the run that must hold when a sentence uses it. For each event
word, the first phrase (in list order, so the specific ones come first) whose match in the sentence covers
the word decides. A word that no phrase covers fails the test: teach the vocabulary the new phrase and the
events that prove it, rather than loosening the check.

Switch and option names (``skip_recovery_filter``) and parenthesised lists of names are left out before the
words are looked for: they name knobs, not events.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import pytest

import milvus_edu
from milvus_edu.registry import scenarios

LEVELS = r"(?-i:(?P<level>Strong|Bounded|Session|Eventually|Customized))"  # capitalised: "session" is not a level

#: Words that name an event; each one found in a sentence must be covered by a phrase of the vocabulary.
EVENT_WORD = re.compile(
    r"\b(?:crash\w*|kill\w*|dies|died|dead|restart\w*|freez\w*|froze\w*|paus\w*|resum\w*|wakes?|stall\w*|"
    r"hangs?|hung|stops?|stopped|blocks?|overflow\w*|runs? out|ran out|retr(?:y|ies|ied|ying)|wait\w*|"
    r"expir\w*|fail\w*|lost|los(?:e|es|ing)|drops?|dropped|time[sd]? out|timeouts?|refus\w*|exit\w*|down)\b",
    re.IGNORECASE)

#: Names, not events: knobs (``a_switch``), Go identifiers (``waitTSafe``), dotted keys
#: (``common.session.ttl``) and lists of names in parentheses ("(filter, ids, limit, timeout)").
_NAMES = re.compile(r"\b\w+(?:\.\w+)+\b|\b\w+_\w+\b|\b[a-z]+[A-Z]\w*|\((?:\s*\w+\s*,)+\s*\w+\s*\)")


class Run:
    """One scenario's run at seed 1: its events and summary, with the questions the vocabulary asks."""

    def __init__(self, events: pd.DataFrame, summary: dict):
        self.events = events
        self.summary = summary
        self.kinds = events["kind"].astype(str)

    def rows(self, *kinds: str) -> pd.DataFrame:
        """The rows of these kinds."""
        return self.events[self.kinds.isin(kinds)]

    def has(self, *kinds: str) -> bool:
        """Whether any row is of one of these kinds."""
        return bool(self.kinds.isin(kinds).any())

    def errors(self, pattern: str = "") -> pd.DataFrame:
        """Rows whose ``error`` matches ``pattern`` (any error when empty)."""
        err = self.events["error"]
        rows = self.events[err.notna()]
        return rows[rows["error"].astype(str).str.contains(pattern, case=False, regex=True)] if pattern else rows

    def waited(self, level: str | None = None) -> bool:
        """Some read waited for tsafe (``querynode.wait``), of ``level`` when given."""
        waits = self.rows("querynode.wait")
        return bool(len(waits if level is None else waits[waits["level"] == level]))

    def timed_out(self, level: str | None = None) -> bool:
        """Some read (or call) ended with a deadline or timeout error, of ``level`` when given."""
        rows = self.errors("deadline exceeded|timed out|timeout")
        return bool(len(rows if level is None else rows[rows["level"] == level]))

    def tick_gap_ms(self) -> float:
        """The longest time between two time ticks written to one pchannel (0 without time ticks)."""
        if "msg_type" not in self.events:
            return 0.0
        ticks = self.events[(self.kinds == "mq.produce") & (self.events["msg_type"] == "TimeTick")]
        if len(ticks) < 2:
            return 0.0
        return float(ticks.groupby("channel")["t_ms"].apply(lambda t: t.diff().max()).max())

    def ticks_stall(self) -> bool:
        """Time ticks stop for more than a second (they are written every 200 ms)."""
        return self.tick_gap_ms() > 1_000.0

    def retried(self, *kinds: str) -> bool:
        """Something failed and was tried again: GenerateTSO's own retries, a failed row followed by a success
        of the same kind on the same node, or a client's error followed by a new request from it."""
        if not kinds and self.has("tso.alloc_retry"):
            return True
        ev = self.events
        failed = self.errors()
        if kinds:
            failed = failed[failed["kind"].isin(kinds)]
        for (kind, node), rows in failed.groupby(["kind", "node"]):
            again = "client.request" if kind == "client.error" else kind
            later = ev[(self.kinds == again) & (ev["node"] == node) & (ev["seq"] > rows["seq"].min())]
            if again == kind:
                later = later[later["error"].isna()]
            if len(later):
                return True
        return False

    def session_expired(self) -> bool:
        """A lease ran out: etcd deleted a session key, or a coordinator saw a session go."""
        return self.has("session.lost", "rootcoord.session_del", "datacoord.reassign")

    def refused_without_waiting(self) -> bool:
        """A read was refused (lag too large) and never waited."""
        refused = self.errors("lag too large")
        refused = refused[refused["kind"] == "querynode.read"]
        waits = self.rows("querynode.wait")
        return bool(len(refused)) and not set(refused["request"]) & set(waits["request"])


@dataclass(frozen=True)
class Phrase:
    """A phrase a description may use, and what the run must show when it does."""

    pattern: str
    shows: str  # what the run must hold, for the failure message
    holds: Callable[[Run, re.Match], bool]

    def matches(self, sentence: str):
        return re.finditer(self.pattern, sentence, re.IGNORECASE)


#: The specific phrases first: a word is judged by the first phrase whose match covers it.
VOCABULARY: tuple[Phrase, ...] = (
    # negations and comparisons
    Phrase(r"\bnothing is lost\b", "every checker passes", lambda r, m: r.summary["checks"]["ok"]),
    Phrase(rf"\b{LEVELS}\b[^.;]*?\bdoes not wait\b", "no read of that level waits",
           lambda r, m: not r.waited(m["level"])),
    Phrase(rf"\b{LEVELS}\b[^.;]*?\bhave no timeout\b", "no read of that level times out",
           lambda r, m: not r.timed_out(m["level"])),
    Phrase(r"\brefuses?\b[^.;]*?\binstead of waiting\b", "a read refused (lag too large) that never waited",
           lambda r, m: r.refused_without_waiting()),
    Phrase(r"\bas a restarted \w+ would\b", "(a comparison: names no event of this run)", lambda r, m: True),
    Phrase(r"\brestarted \w+ asks [^.;]*?where to resume\b", "a restart, then the node watching its channels again",
           lambda r, m: r.has("fault.restart") and r.has("datanode.watch", "querynode.watch")),
    # waits
    Phrase(r"\bwaits? as standby\b", "a session.standby event", lambda r, m: r.has("session.standby")),
    Phrase(rf"\b{LEVELS}\b[^.;]*?\btime[sd]? out\b", "a read of that level ends with a timeout",
           lambda r, m: r.timed_out(m["level"])),
    Phrase(rf"\b{LEVELS}\b[^.;]*?\bwait(?:s|ing)?\b", "a querynode.wait of that level",
           lambda r, m: r.waited(m["level"])),
    Phrase(r"\b(?:rootcoord|gate)\b[^.;]*?\bwaits? for\b", "time ticks stop for more than 1 s",
           lambda r, m: r.ticks_stall()),
    Phrase(r"\b(?:reads?|search(?:es)?|quer(?:y|ies)|one)\b[^.;,]*?\bwaits?\b", "a querynode.wait",
           lambda r, m: r.waited()),
    Phrase(r"\bupdates? wait for the next tick\b", "a failed datanode.cp_rpc later succeeds",
           lambda r, m: r.retried("datanode.cp_rpc")),
    Phrase(r"\bwaiting on its watch\b[^.;]*?\bexit\b", "a session.exit", lambda r, m: r.has("session.exit")),
    # ticks
    Phrase(r"\bticks? stops?\b[^.;]*?\bresume\b|\bticks? resume\b", "time ticks stop for more than 1 s, then go on",
           lambda r, m: r.ticks_stall()),
    Phrase(r"\bticks? stops?\b|\bblocks? ticks\b|\bstops? reporting\b", "time ticks stop for more than 1 s",
           lambda r, m: r.ticks_stall()),
    # the TSO
    Phrase(r"\boverflow\w*", "a GenerateTSO retry for logical overflow",
           lambda r, m: len(r.errors("max logical")) > 0),
    Phrase(r"\blease\b[^.;]*?\b(?:runs? out|ran out|expir\w*)", "a session lease expiry",
           lambda r, m: r.session_expired()),
    Phrase(r"\b(?:session|lease)\b[^.;]*?\bexpir\w*", "a session lease expiry", lambda r, m: r.session_expired()),
    Phrase(r"\bexpir\w*", "a session lease expiry", lambda r, m: r.session_expired()),
    # faults
    Phrase(r"\bmemory is lost\b", "a fault.kill", lambda r, m: r.has("fault.kill")),
    Phrase(r"\b(?:crash\w*|kill\w*|dies|died|dead)\b", "a fault.kill", lambda r, m: r.has("fault.kill")),
    Phrase(r"\brestart\w*", "a fault.restart", lambda r, m: r.has("fault.restart")),
    Phrase(r"\b(?:freez\w*|froze\w*|paus\w*)", "a fault.pause", lambda r, m: r.has("fault.pause")),
    Phrase(r"\b(?:resum\w*|wakes? up)", "a fault.resume", lambda r, m: r.has("fault.resume")),
    Phrase(r"\b(?:stall\w*|hangs?|hung)\b", "a fault.stall", lambda r, m: r.has("fault.stall")),
    Phrase(r"\bis down\b", "calls failing on etcd", lambda r, m: len(r.errors("etcd")) > 0),
    # failures and what follows them
    Phrase(r"\bretr(?:y|ies|ied|ying)\b", "a failure tried again", lambda r, m: r.retried()),
    Phrase(r"\bfail\w*", "a row with an error", lambda r, m: len(r.errors()) > 0),
    Phrase(r"\brefus\w*", "a call refused (not ready, lag too large, connection refused)",
           lambda r, m: len(r.errors("not ready|lag too large|refused")) > 0),
    Phrase(r"\btime[sd]? out\b|\btimeouts?\b", "a call that timed out", lambda r, m: r.timed_out()),
    Phrase(r"\b(?:drops?|dropped)\b[^.;]*?\b(?:collection|C\d+)\b|\b(?:C\d+|collection)\b[^.;]*?\b(?:drops?|dropped)\b",
           "a collection dropped (a client's drop_collection, or a DataNode consuming DropCollection)",
           lambda r, m: r.has("client.drop_collection", "datanode.drop")),
    Phrase(r"\bdrop mode\b|\bwith drop\b|\bas drops\b|\bdropped flag\b|\bmarks?\b[^.;]*?\bDropped\b|\bchannel was dropped\b",
           "a DataNode consuming its collection's DropCollection (datanode.drop)", lambda r, m: r.has("datanode.drop")),
    Phrase(r"\bstops? gracefully\b", "a graceful DataNode stop (datanode.stop)", lambda r, m: r.has("datanode.stop")),
    Phrase(r"\bflush waits?\b[^.;]*?\bnever\b", "a flush-completes violation (a flush never answered)",
           lambda r, m: any(v["invariant"] == "flush-completes" for v in r.summary["checks"]["violations"])),
    Phrase(r"\bthe drop\b[^.;]*?\b(?:DDL|meta caches?)\b", "a collection drop run as a DDL task on rootcoord",
           lambda r, m: r.has("client.drop_collection") and r.has("rootcoord.ddl")),
    Phrase(r"\bdrops?\b[^.;]*?\b(?:inserts?|rows?)\b", "a datanode.filter (rows already in binlogs dropped)",
           lambda r, m: r.has("datanode.filter")),
    Phrase(r"\b(?:drops?|dropped|lost|los(?:e|es|ing))\b", "a lost message or session (rpc.drop, session.lost)",
           lambda r, m: r.has("rpc.drop", "session.lost")),
    Phrase(r"\bexit\w*", "a session.exit", lambda r, m: r.has("session.exit")),
)


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (at '.', '!' or '?' followed by a space or the end)."""
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def judge(sentence: str, run: Run) -> list[str]:
    """What is wrong with ``sentence`` for ``run``: one line per event word not borne out (empty: all true)."""
    text = _NAMES.sub(lambda m: " " * len(m.group()), sentence)  # same length: spans stay comparable
    problems = []
    for word in EVENT_WORD.finditer(text):
        verdict = None
        for phrase in VOCABULARY:
            match = next((m for m in phrase.matches(text) if m.start() <= word.start() and word.end() <= m.end()),
                         None)
            if match is not None:
                verdict = None if phrase.holds(run, match) else (
                    f"'{match.group()}' needs {phrase.shows}, and the run has none")
                break
        else:
            verdict = (f"'{word.group()}' names an event the vocabulary does not know: add a phrase for it "
                       "to VOCABULARY in tests/test_scenario_descriptions.py")
        if verdict:
            problems.append(verdict)
    return problems


SCENARIOS = sorted(scenarios())


@pytest.fixture(scope="module")
def runs() -> dict[str, Run]:
    """Each scenario's run at seed 1 and its default duration, made once for the module (on first use)."""
    return {}


#: A sentence about another setting ("With --option stop_at_s=25 the DataNode ...") is judged on a run with it.
_OPTION = re.compile(r"--option (\w+)=([\w.]+)")


def _run(runs: dict[tuple, Run], name: str, sentence: str = "") -> Run:
    """The scenario's run at seed 1, with the options ``sentence`` names (made once per set of options)."""
    options = dict(_OPTION.findall(sentence))
    key = (name, tuple(sorted(options.items())))
    if key not in runs:
        # a sentence may set a time past the run on purpose ("drop_at_s=100 (after the run)")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"option \S+ (is|puts what it times) at or after the run's end")
            result = milvus_edu.simulate(name, seed=1, options=options)
        runs[key] = Run(result.events, result.summary)
    return runs[key]


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS)
def test_every_event_a_description_names_is_in_the_run(runs, name):
    scenario = scenarios()[name]
    wrong = [f"{sentence!r}: {problem}"
             for text in (scenario.description, scenario.story)
             for sentence in sentences(text)
             for problem in judge(sentence, _run(runs, name, sentence))]
    assert not wrong, f"{name} (seed 1) says what its run does not show:\n" + "\n".join(wrong)


# ---- the vocabulary itself ---------------------------------------------------------------------------------
def _fake(rows: list[dict], ok: bool = True) -> Run:
    base = {"seq": 0, "t_ms": 0.0, "node": "n", "kind": "run.start", "error": None, "level": None,
            "request": None}
    frame = pd.DataFrame([{**base, "seq": i, **row} for i, row in enumerate(rows)] or [base])
    return Run(frame, {"checks": {"ok": ok}})


def test_a_claimed_crash_needs_a_kill():
    assert judge("proxy-2 crashes at 2 s.", _fake([]))
    assert not judge("proxy-2 crashes at 2 s.", _fake([{"kind": "fault.kill"}]))


def test_an_unknown_event_phrase_fails_until_it_is_taught():
    (problem,) = judge("The timestamp oracle waits politely.", _fake([{"kind": "querynode.wait"}]))
    assert "does not know" in problem


def test_a_negation_is_judged_as_one():
    waited = _fake([{"kind": "querynode.wait", "level": "Bounded"}])
    assert judge("A Bounded read does not wait.", waited)
    assert not judge("A Bounded read does not wait.", _fake([{"kind": "querynode.wait", "level": "Strong"}]))


def test_a_retry_needs_a_failure_tried_again():
    failed_once = [{"kind": "client.error", "node": "c", "error": "service not ready"}]
    assert judge("Clients retry later.", _fake(failed_once))
    assert not judge("Clients retry later.", _fake(failed_once + [{"kind": "client.request", "node": "c"}]))


def test_knob_names_are_not_events():
    assert not judge("Run it with the drop_failed_checkpoint_tasks switch.", _fake([]))
    assert not judge("waitTSafe reads common.session.ttl.", _fake([]))
    assert not judge("Steps take options (filter, ids, limit, timeout).", _fake([]))


def test_sentences_split_at_full_stops_only():
    assert sentences("At 10 s it dies. It restarts 2.5 s later; then ticks resume.") == [
        "At 10 s it dies.", "It restarts 2.5 s later; then ticks resume."]


def test_an_overflow_needs_generate_tso_to_refuse_one():
    claim = "client-1 takes batches of 40,000, so the logical counter overflows."  # tso-clock-skew's old story
    assert judge(claim, _fake([{"kind": "tso.update"}]))
    refused = {"kind": "tso.alloc_retry", "error": "logical part outside of max logical interval"}
    assert not judge(claim, _fake([refused]))
