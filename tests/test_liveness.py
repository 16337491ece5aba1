"""Progress (liveness) checks and what a run did not test.

Each progress invariant is shown to fail on a constructed run log (events with chosen times) and on a run whose
parameters stop progress, and to pass on normal runs; a stall that an injected fault explains is reported as a
stall with its cause, not as a violation. Every constructed log is checked both ways (``write`` of each row and the
recorder's ``write_batch``), which must agree.
"""

from __future__ import annotations

import json

import pytest

import milvus_edu
from milvus_edu import cli
from milvus_edu.mechanisms.flush.check import FlushChecker
from milvus_edu.mechanisms.query.check import QueryChecker
from milvus_edu.mechanisms.timetick.check import TimeTickChecker
from milvus_edu.mechanisms.tso.check import TSOChecker
from milvus_edu.config import MS, Config
from milvus_edu.events import Recorder
from test_dispatch import _assert_same, _batched, _rows
from test_recorder_fast import BatchGrabber

CH = "by-dev-rootcoord-dml_0"
VCH = "by-dev-rootcoord-dml_0_100v0"
S = 1_000_000_000


def _log(emits: list[tuple[float, str, str, dict]], batch_rows: int = 4) -> list:
    """The batches of a run log made of ``(t_ms, kind, node, columns)``, closed by ``run.end`` at the last time."""
    now = [0.0]
    grabber = BatchGrabber()
    recorder = Recorder("made", now_ms=lambda: now[0], sinks=[grabber], batch_rows=batch_rows)
    for t_ms, kind, node, fields in emits:
        now[0] = t_ms
        recorder.emit(kind, node, **fields)
    recorder.close()
    return grabber.batches


def _check(cls, emits):
    """The checker after reading the log both ways (they must agree)."""
    batches = _log(emits)
    slow = _rows(cls, batches)
    _assert_same(_batched(cls, batches), slow, {})
    return slow


def _insert(t_ms: float, ts: int) -> tuple:
    return (t_ms, "mq.produce", "proxy-1", {"channel": CH, "vchannel": VCH, "msg_type": "Insert", "msg_id": int(t_ms),
                                            "end_ts": ts, "ts": ts})


def _tick(t_ms: float, ts: int, min_from: str = "proxy-1") -> tuple:
    return (t_ms, "mq.produce", "rootcoord-1", {"channel": CH, "msg_type": "TimeTick", "tick_ts": ts, "ts": ts,
                                                "detail": {"min_from": min_from}})


def _waiting(t_ms: float, *names: str) -> tuple:
    return (t_ms, "rootcoord.timetick_update", "rootcoord-1", {"peer": "proxy-1", "ts": 1,
                                                               "detail": {"sent": False, "waiting_for": list(names)}})


def _end(t_ms: float) -> tuple:
    return (t_ms, "run.end", "sim", {})


def _ticks_stop(extra=(), resume_ms: float | None = None) -> list:
    """Ticks every 200 ms until 1 s; rootcoord then waits for proxy-2's report; ticks resume at ``resume_ms``."""
    emits = [_insert(100.0, 5)] + [_tick(200.0 * i, 10 * i) for i in range(1, 6)]
    emits += [_waiting(1000.0 + 200.0 * i, "proxy-2") for i in range(1, 10)]
    emits += list(extra)
    if resume_ms is not None:
        emits.append(_tick(resume_ms, 1000))
    return sorted(emits, key=lambda e: e[0]) + [_end(max(resume_ms or 0.0, 3000.0) + 100.0)]


# ---- TimeTick: tick-progress

def test_ticks_that_stop_without_a_fault_break_tick_progress_naming_the_session_rootcoord_waited_for():
    checker = _check(TimeTickChecker, _ticks_stop())
    (v,) = checker.result()
    assert v.invariant == "tick-progress" and not checker.stalls
    assert "waiting for proxy-2's report" in v.explanation and "until the run ended" in v.explanation
    assert "1,000 ms (5 x proxy.timeTickInterval 200 ms)" in v.explanation


def test_ticks_that_resume_late_without_a_fault_break_tick_progress():
    (v,) = _check(TimeTickChecker, _ticks_stop(resume_ms=2500.0)).result()
    assert v.invariant == "tick-progress" and "for 1,500 ms until event" in v.explanation


def test_a_stalled_report_loop_explains_the_stall_when_ticks_resume_within_the_bound_after_it():
    stall = (1000.0, "fault.stall", "proxy-2", {"detail": {"duration_ms": 1500.0, "loop": "sendChannelsTimeTickLoop"}})
    checker = _check(TimeTickChecker, _ticks_stop([stall], resume_ms=2600.0))
    assert checker.result() == [] and checker.counts["tick-progress"] == 0
    (explained,) = checker.stalls
    assert explained["held_by"] == "proxy-2" and explained["channels"] == [CH] and explained["to_ms"] == 2600.0
    assert "report loop was stalled" in explained["explanation"]
    # the same fault does not cover ticks that come back more than the bound after it ended
    (late,) = _check(TimeTickChecker, _ticks_stop([stall], resume_ms=3600.0)).result()
    assert late.invariant == "tick-progress"


def test_a_paused_proxy_explains_the_stall_until_the_pause_ends_or_its_expired_session_is_dropped():
    pause = (1000.0, "fault.pause", "proxy-2", {"detail": {"duration_ms": 1500.0}})
    checker = _check(TimeTickChecker, _ticks_stop([pause], resume_ms=2600.0))
    assert checker.result() == [] and checker.counts["tick-progress"] == 0
    (explained,) = checker.stalls
    assert explained["held_by"] == "proxy-2" and "was paused" in explained["explanation"]
    assert "until 2.500 s" in explained["explanation"]
    # a pause longer than the lease: rootcoord drops the expired session before the pause ends, and the ticks
    # come back then, not at the pause's end
    long = (1000.0, "fault.pause", "proxy-2", {"detail": {"duration_ms": 60_000.0}})
    dropped = (2500.0, "rootcoord.session_del", "rootcoord-1", {"peer": "proxy-2"})
    checker = _check(TimeTickChecker, _ticks_stop([long, dropped], resume_ms=2501.0))
    assert checker.result() == [] and "dropped its expired session" in checker.stalls[0]["explanation"]
    # ticks that come back more than the bound after the pause ended are not explained by it
    (late,) = _check(TimeTickChecker, _ticks_stop([pause], resume_ms=3600.0)).result()
    assert late.invariant == "tick-progress"


def test_a_crashed_proxys_session_explains_the_stall_until_its_lease_expires():
    kill = (1000.0, "fault.kill", "proxy-2", {"detail": {"server_id": 12}})
    dropped = (2500.0, "rootcoord.session_del", "rootcoord-1", {"peer": "proxy-2"})
    checker = _check(TimeTickChecker, _ticks_stop([kill, dropped], resume_ms=2501.0))
    assert checker.result() == [] and "lease expired" in checker.stalls[0]["explanation"]
    # still stalled at the end, but the lease (common.session.ttl, 60 s) cannot have expired yet: explained
    checker = _check(TimeTickChecker, _ticks_stop([kill]))
    assert checker.result() == [] and checker.stalls[0]["to_ms"] is None
    assert "after the run's end" in checker.stalls[0]["explanation"]
    # with a 100 ms session TTL the lease (plus etcd's 500 ms check) expired at 1.6 s, and the ticks did not come
    # back within the bound after it: a violation
    batches = _log(_ticks_stop([kill]))
    config = Config().with_params({"tso.session_ttl_ns": 100 * MS})
    checker = TimeTickChecker()
    checker.configure(config)
    for batch in batches:
        checker.write_batch(batch)
    assert [v.invariant for v in checker.result()] == ["tick-progress"]


def test_a_tick_written_on_time_whose_value_stands_still_is_a_stall_held_by_the_sessions_minimum():
    emits = [_insert(100.0, 5)] + [_tick(200.0 * i, 10) for i in range(1, 12)] + [_tick(2400.0, 20, "proxy-2")]
    checker = _check(TimeTickChecker, emits + [_end(2500.0)])
    assert checker.result() == []
    (stall,) = checker.stalls
    assert stall["held_by"] == "proxy-1" and "proxy-1's report" in stall["explanation"]


def test_a_value_held_by_two_sessions_names_the_one_that_held_most_rounds_and_says_how_many():
    """Ten unmoved rounds, seven held by proxy-1's report and three by proxy-2's: "every round" would be false. The
    event cited is the first round proxy-1 held (a tick, not a report), and the rounds came at least once every
    200 ms."""
    held = [_tick(200.0 * i, 10, "proxy-2" if i in (2, 3, 4) else "proxy-1") for i in range(1, 12)]
    checker = _check(TimeTickChecker, [_insert(100.0, 5)] + held + [_tick(2400.0, 20, "proxy-2"), _end(2500.0)])
    (stall,) = checker.stalls
    text = stall["explanation"]
    assert "7 of the 10 rounds' minimum on " + CH + " came from proxy-1's report" in text
    assert "(the first such round is the tick of event 6)" in text  # the tick at 1.0 s, seq 5
    assert "at least once every 200 ms" in text


def test_the_bound_comes_from_proxy_time_tick_interval():
    checker = TimeTickChecker()
    checker.configure(Config().with_params({"timetick.time_tick_interval_ns": 400 * MS}))
    assert checker.bound_ms == 2000.0
    for batch in _log(_ticks_stop(resume_ms=2500.0)):  # 1.5 s without a tick: within 5 x 400 ms
        checker.write_batch(batch)
    assert checker.result() == []


def test_a_run_without_time_ticks_fails_tick_progress_and_the_cli_calls_it_a_lesson(tmp_path, capsys):
    run = milvus_edu.simulate("timetick-basics", seed=1, duration_s=2.0, keep_events=False,
                              params={"timetick.tt_msg_enabled": False})
    checks = run.summary["checks"]
    assert not checks["ok"] and {n for n, c in checks["violation_counts"].items() if c} == {"tick-progress"}
    assert "tick-progress" not in checks["vacuous"]["timetick"]  # it had every chance to fail, and did
    code = cli.main(["simulate", "--scenario", "timetick-basics", "--duration", "2", "--out", str(tmp_path / "r"),
                     "--param", "timetick.tt_msg_enabled=false"])
    out = capsys.readouterr().out
    assert code == 0 and "checks FAILED" in out and "keep this run from making progress" in out


@pytest.mark.parametrize("scenario,held_by,fault", [("timetick-proxy-stall", "proxy-2", "fault.stall"),
                                                    ("timetick-proxy-restart", "proxy-2", "fault.kill")])
def test_the_fault_scenarios_pass_and_report_their_stall_with_the_session_and_the_fault(scenario, held_by, fault):
    params = {"tso.session_ttl_ns": 6 * S} if scenario == "timetick-proxy-restart" else {}
    run = milvus_edu.simulate(scenario, seed=2, duration_s=9.0, params=params, options={"inserts_per_s": 100.0})
    checks = run.summary["checks"]
    assert checks["ok"], checks["violations"][:1]
    stalls = [s for s in checks["stalls"] if s["cause_seq"] is not None]
    assert stalls and all(s["mechanism"] == "timetick" and s["held_by"] == held_by for s in stalls)
    events = run.events.set_index("seq")
    assert events.loc[stalls[0]["cause_seq"], "kind"] == fault
    assert stalls[0]["to_ms"] is not None and len(stalls[0]["channels"]) == 4  # every pchannel, resumed


def test_a_normal_run_has_no_stall_and_tests_every_timetick_invariant():
    checks = milvus_edu.simulate("timetick-basics", seed=3, duration_s=2.0, keep_events=False).summary["checks"]
    assert checks["ok"] and checks["stalls"] == []
    # proxies ask rootcoord for timestamps, but no TSO client does: client-monotonic is untested
    assert checks["vacuous"] == {"timetick": [], "tso": ["client-monotonic"]}


# ---- Query: tsafe-progress and read-answered

def _watch(t_ms: float = 0.0, ts: int = 1) -> tuple:
    return (t_ms, "querynode.watch", "querynode-1", {"channel": CH, "vchannel": VCH, "ts": ts})


def _tsafe(t_ms: float, ts: int) -> tuple:
    return (t_ms, "querynode.tsafe", "querynode-1", {"vchannel": VCH, "ts": ts})


def test_tsafe_that_follows_the_ticks_late_or_never_breaks_tsafe_progress():
    on_time = _check(QueryChecker, [_watch(), _tick(100.0, 10), _tsafe(300.0, 10), _end(3000.0)])
    assert on_time.result() == [] and on_time.tried["tsafe-progress"] == 1
    late = _check(QueryChecker, [_watch(), _tick(100.0, 10), _tick(300.0, 20), _tsafe(1500.0, 20), _end(3000.0)])
    (v,) = late.result()
    assert v.invariant == "tsafe-progress" and "reached it only at event" in v.explanation
    never = _check(QueryChecker, [_watch(), _tick(100.0, 10), _tsafe(300.0, 10), _tick(500.0, 20), _end(3000.0)])
    (v,) = never.result()
    assert v.invariant == "tsafe-progress" and "had not reached it when the run ended" in v.explanation
    # a tick written before the vchannel was served asks nothing of it
    assert _check(QueryChecker, [_tick(100.0, 10), _watch(200.0, 10), _end(3000.0)]).result() == []


def _seeking_watch(t_ms: float = 0.0, ts: int = 1, start_msg_id: int = 3) -> tuple:
    """A watch whose new dispatcher seeks to the position (message ``start_msg_id``, timestamp ``ts``)."""
    return (t_ms, "querynode.watch", "querynode-1", {"channel": CH, "vchannel": VCH, "ts": ts,
                                                     "detail": {"start_msg_id": start_msg_id}})


def _tick_id(t_ms: float, ts: int, msg_id: int) -> tuple:
    t = _tick(t_ms, ts)
    return (t[0], t[1], t[2], {**t[3], "msg_id": msg_id})


def test_the_tick_that_ends_a_new_dispatchers_seek_asks_nothing_and_the_next_tick_carries_its_obligation():
    """Go's Seek reads the first tick at or past the watch position and drops it: no pack ends there, so tsafe reaches
    it only with the next tick. When ticks stop right after it, the stall is TimeTick's, not a tsafe-progress one."""
    stopped = _check(QueryChecker, [_seeking_watch(), _tick_id(100.0, 10, 4), _end(3000.0)])
    assert stopped.result() == [] and stopped.tried["tsafe-progress"] == 0
    # the next tick is owed: applied late, it is a violation naming that tick
    late = _check(QueryChecker, [_seeking_watch(), _tick_id(100.0, 10, 4), _tick_id(300.0, 20, 5),
                                 _tsafe(1500.0, 20), _end(3000.0)])
    (v,) = late.result()
    assert v.invariant == "tsafe-progress" and "the time tick 20 (no time)" in v.explanation
    # a tick below the position is skipped by the seek and asks nothing; the first one at the position ends it
    below = _check(QueryChecker, [_seeking_watch(ts=10), _tick_id(100.0, 5, 4), _tick_id(300.0, 10, 5),
                                  _end(3000.0)])
    assert below.result() == [] and below.tried["tsafe-progress"] == 0
    # the seek's stop tick already written (a position in the past): the first tick after the watch is owed
    past = _check(QueryChecker, [_tick_id(100.0, 10, 4), _seeking_watch(200.0, ts=5, start_msg_id=2),
                                 _tick_id(300.0, 20, 5), _end(3000.0)])
    (v,) = past.result()
    assert v.invariant == "tsafe-progress" and "had not reached it when the run ended" in v.explanation


def test_a_fork_that_kills_a_proxy_right_after_the_querynode_seeked_is_a_stall_not_a_violation(tmp_path):
    """seed-example's QueryNode watches at 0.50 s; its seek ends at the 0.86 s tick; proxy-1 dies at 1 s and no tick
    comes again. The checker once called that tick's missing pack a tsafe-progress violation."""
    run = milvus_edu.simulate("seed-example", seed=1)
    forked, _ = milvus_edu.fork(run, 1000.0, milvus_edu.Kill("proxy-1"))
    checks = forked.summary["checks"]
    assert checks["ok"] and checks["violation_counts"].get("tsafe-progress", 0) == 0
    assert [s["mechanism"] for s in checks["stalls"]] == ["timetick"]


def _read(t_ms: float, request: int = 1) -> tuple:
    return (t_ms, "client.read_start", "Client1", {"request": request, "level": "Strong", "guarantee_ts": 0})


def _wait(t_ms: float, guarantee: int, request: int = 1) -> tuple:
    return (t_ms, "querynode.wait", "querynode-1", {"request": request, "vchannel": VCH, "level": "Strong",
                                                    "guarantee_ts": guarantee, "tick_ts": 1})


def test_a_read_left_hanging_breaks_read_answered_unless_it_waits_for_its_guarantee_or_was_just_sent():
    (v,) = _check(QueryChecker, [_read(100.0), _end(3000.0)]).result()
    assert v.invariant == "read-answered" and "no proxy settled it" in v.explanation
    waiting = [_watch(), _read(100.0), _wait(110.0, 50), _tick(150.0, 10), _tsafe(200.0, 10), _end(3000.0)]
    assert _check(QueryChecker, waiting).result() == []  # tsafe is still below its guarantee
    not_woken = [_watch(), _read(100.0), _wait(110.0, 50), _tick(150.0, 60), _tsafe(200.0, 60), _end(3000.0)]
    (v,) = _check(QueryChecker, not_woken).result()
    assert v.invariant == "read-answered" and "never woken" in v.explanation
    assert _check(QueryChecker, [_read(2500.0), _end(3000.0)]).result() == []  # sent 0.5 s before the end
    answered = [_read(100.0), (200.0, "client.read", "Client1", {"request": 1, "error": "deadline exceeded"}),
                _end(3000.0)]
    assert _check(QueryChecker, answered).result() == []


def test_a_read_that_waited_through_the_proxy_restart_stall_was_answered():
    run = milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1, duration_s=20.0, keep_events=False,
                              params={"tso.session_ttl_ns": 6 * S})
    checks = run.summary["checks"]
    assert checks["ok"], checks["violations"][:1]
    assert checks["stalls"] and checks["stalls"][0]["held_by"] == "proxy-2"


# ---- what a run did not test

def test_vacuous_invariants_are_named_per_mechanism_and_printed_after_the_checks(tmp_path, capsys):
    code = cli.main(["simulate", "--scenario", "seed-example", "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    vacuous = summary["checks"]["vacuous"]
    assert code == 0 and set(vacuous) == {"query", "timetick", "tso"}
    assert vacuous["query"] == ["session-sees-own", "bounded-staleness"]  # the design documents' table reads at Strong only
    assert vacuous["timetick"] == ["pack-exact"]  # the QueryNode consumes, not the TimeTick consumers
    assert "not tested in this run (nothing gave them a chance to fail): query: session-sees-own, " \
           "bounded-staleness; timetick: pack-exact" in out
    assert out.index("checks passed") < out.index("not tested in this run")


def test_a_run_with_reads_at_every_level_tests_every_read_invariant():
    checks = milvus_edu.simulate("insert-delete-reorder", seed=1, keep_events=False).summary["checks"]
    assert checks["ok"] and checks["vacuous"]["query"] == []


@pytest.mark.parametrize("cls", [TimeTickChecker, TSOChecker, QueryChecker])
def test_every_invariant_of_an_annotated_checker_says_what_gives_it_a_chance(cls):
    assert set(cls.chances) == set(cls.invariants)
    assert cls().vacuous() == list(cls.invariants)  # nothing read yet: nothing tested


def test_a_checker_that_does_not_annotate_reports_nothing_vacuous():
    class Unannotated(FlushChecker):
        chances = {}

    checker = Unannotated()
    assert checker.vacuous() == [] and checker.stalls == []


@pytest.mark.slow
def test_a_flush_run_says_which_flush_invariants_it_did_not_test():
    """flush-basics has no failed update RPC and is far shorter than a checkpoint's bound; the stuck run
    never declares a flush done nor reaches its audit."""
    basics = milvus_edu.simulate("flush-basics", seed=1, keep_events=False).summary["checks"]
    assert basics["vacuous"]["flush"] == ["checkpoint-retried", "checkpoint-advances"]
    stuck = milvus_edu.simulate("flush-stuck-memory-sync", seed=1, keep_events=False).summary["checks"]
    assert stuck["vacuous"]["flush"] == ["flush-durable", "checkpoint-retried", "durable", "checkpoint-advances"]


# ---- TimeTick: a vchannel nobody consumes is not kept for pack-exact

def _pack(t_ms: float, begin: int, end: int, msgs: list[tuple[int, int]]) -> list:
    """The consumer's rows for one pack of VCH: each message (msg_id, ts) delivered, then the pack."""
    rows = [(t_ms, "mq.consume", "consumer-0", {"channel": CH, "vchannel": VCH, "msg_id": m, "ts": ts,
                                                "msg_type": "Insert", "tick_ts": end}) for m, ts in msgs]
    return rows + [(t_ms, "mq.pack", "consumer-0", {"channel": CH, "vchannel": VCH, "begin_ts": begin,
                                                    "end_ts": end, "tick_ts": end, "count": len(msgs)})]


def test_writes_to_a_vchannel_without_packs_are_let_go_after_ten_ticks_and_a_late_pack_is_judged_from_then_on():
    """A flush or query run logs no pack: its TimeTick checker must not keep every write to the end. After
    UNCONSUMED_TICKS ticks with no pack of the vchannel its writes are let go; a consumer that shows up later is not
    blamed for delivering them, and what is written after that is checked as before."""
    from milvus_edu.mechanisms.timetick.check import UNCONSUMED_TICKS
    emits = [_insert(100.0 * i, 10 * i - 5) for i in range(1, 16)]  # msg ids 100..1500, ts 5..145
    emits += [_tick(100.0 * i + 50.0, 10 * i) for i in range(1, 16)]  # a tick after each write
    checker = _check(TimeTickChecker, sorted(emits, key=lambda e: e[0]) + [_end(1600.0)])
    assert checker.result() == [] and not any(checker._pending.values())
    assert UNCONSUMED_TICKS == 10 and checker._let_go == {VCH: 1500}  # the 5 written after the tenth tick too
    # a consumer that comes late delivers the old writes in its first pack, then a new write comes in a wrong pack
    late = emits + _pack(1600.0, 0, 150, [(100 * i, 10 * i - 5) for i in range(1, 16)])
    late += [_insert(1700.0, 155), _tick(1750.0, 160)] + _pack(1760.0, 150, 152, [(1700, 155)])
    (v,) = _check(TimeTickChecker, sorted(late, key=lambda e: e[0]) + [_end(1800.0)]).result()
    assert v.invariant == "pack-exact" and "message 1700" in v.explanation and "does not hold it" in v.explanation


def test_a_consumed_vchannel_keeps_its_writes_until_their_pack_whatever_the_ticks():
    emits = [_insert(100.0, 5)] + _pack(150.0, 0, 3, []) + [_tick(200.0 * i, 10 * i) for i in range(1, 16)]
    checker = _check(TimeTickChecker, sorted(emits, key=lambda e: e[0]) + [_end(3200.0)])
    assert checker._pending == {VCH: {100: (5, 0)}} and not checker._let_go
