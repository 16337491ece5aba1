"""Why did a checker report a violation? The lessons' own chains after the checker's explanation: the TSO lesson's
for its three invariants (the InitTimestamp that started too low, the window its predecessor never re-saved, the
failover), the flush lesson's for a flush that never completed, and the TimeTick lesson's for ticks a paused proxy
held; each checked against the events it points to."""

import pytest

import milvus_edu
from milvus_edu.explain import why
from milvus_edu.narrate import detail_dict


@pytest.fixture(scope="module")
def skipped_load():
    return milvus_edu.simulate("tso-failover", seed=1, switches=("tso_skip_load_on_init",))


@pytest.fixture(scope="module")
def unsaved_window():
    return milvus_edu.simulate("tso-failover", seed=1, switches=("tso_no_window_save",))


def kind_at(result, seq):
    events = result.events
    return str(events[events["seq"] == seq].iloc[0]["kind"])


def numbered(result, invariant):
    """The 1-based numbers of the run's violations of ``invariant``."""
    violations = result.summary["checks"]["violations"]
    return [n for n, v in enumerate(violations, 1) if v["invariant"] == invariant]


def after_explanation(chain):
    """The links the lesson added after the checker's own explanation."""
    at = next(i for i, link in enumerate(chain.links) if "the checker's invariant" in link.text)
    return chain.links[at + 1:]


@pytest.mark.parametrize("invariant", ["global-monotonic", "client-monotonic"])
def test_a_window_started_at_the_own_clock_is_traced_to_the_switch_and_the_failover(skipped_load, invariant):
    numbers = numbered(skipped_load, invariant)
    assert numbers
    chain = why(skipped_load, violation=numbers[0])
    added = after_explanation(chain)
    assert [kind_at(skipped_load, link.seq) for link in added] == [
        "tso.init", "session.active", "session.lost", "fault.kill"]
    init = skipped_load.events[skipped_load.events["seq"] == added[0].seq].iloc[0]
    assert init["node"] == "rootcoord-2"
    assert "tso_skip_load_on_init" in added[0].text and "its own clock" in added[0].text
    ignored = detail_dict(init["detail"])["ignored_window_end_ms"]
    assert milvus_edu.narrate.wall_text(ignored) in added[0].text
    assert chain.root.node == "rootcoord-1" and "killed" in chain.root.text


def test_a_window_never_re_saved_is_traced_to_the_last_save(unsaved_window):
    chain = why(unsaved_window, violation=numbered(unsaved_window, "global-monotonic")[0])
    added = after_explanation(chain)
    assert [kind_at(unsaved_window, link.seq) for link in added] == [
        "tso.init", "tso.alloc", "session.active", "session.lost", "fault.kill"]
    assert "tso_no_window_save" in added[1].text
    events = unsaved_window.events
    saves = events[(events["kind"] == "tso.save") & (events["node"] == "rootcoord-1")
                   & (events["seq"] < added[1].seq)]
    assert f"(event {int(saves.iloc[-1]['seq']) + 1:,})" in added[1].text


def test_an_allocation_past_the_window_is_traced_to_updates_that_did_not_save(unsaved_window):
    chain = why(unsaved_window, violation=numbered(unsaved_window, "window")[0])
    (link,) = after_explanation(chain)
    assert kind_at(unsaved_window, link.seq) == "tso.save"
    assert "UpdateTimestamp" in link.text and "tso_no_window_save" in link.text


def test_without_a_switch_the_failover_keeps_timestamps_increasing():
    """The same failover, faithful: the checkers find nothing to explain (so the chains above come from the switch)."""
    assert milvus_edu.simulate("tso-failover", seed=1).summary["checks"]["violations"] == []


@pytest.mark.slow
def test_a_flush_that_never_completed_follows_the_flush_lessons_chain():
    """``flush-completes`` rests on the client's flush: the chain goes on as ``why(run, flush=N)`` for that flush, to the
    channel checkpoint that never reached flushTs (a gap of Milvus itself, quirk P24)."""
    run = milvus_edu.simulate("flush-stuck-memory-sync", seed=1, duration_s=66)
    (number,) = numbered(run, "flush-completes")
    chain = why(run, violation=number)
    flush = why(run, flush=1)
    added = after_explanation(chain)
    assert [link.text for link in added] == [link.text for link in flush.links]
    assert "had not finished when the run ended" in added[0].text
    assert "never handed the updater a checkpoint" in chain.root.text


def test_ticks_held_up_by_a_paused_proxy_are_traced_to_the_pause():
    """A proxy paused for 3 s (a GC or VM pause) sends no report: rootcoord's ticks stop, the checker reports the
    stall as the pause's effect, and the TimeTick lesson's chain for the stopped ticks ends at the pause, not at the
    resume that ended it."""
    run = milvus_edu.simulate("timetick-basics", seed=1, duration_s=6, options={"inserts_per_s": 100},
                              interventions=[milvus_edu.Pause("proxy-2", 1000, duration_ms=3000)])
    assert run.summary["checks"]["ok"]
    stall = run.summary["checks"]["stalls"][0]
    assert stall["held_by"] == "proxy-2" and "was paused" in stall["explanation"]
    events = run.events
    pause = events[events["kind"] == "fault.pause"].iloc[0]
    from milvus_edu.explain.chain import Question, ask

    chain = ask(events, Question("tick-stopped", {"pchannel": str(events[events["kind"] == "mq.produce"].iloc[0]["channel"]),
                                                  "after_seq": int(pause["seq"]) - 1}), "")
    assert chain.root.seq == int(pause["seq"]) and "paused" in chain.root.text and "3.000 s" in chain.root.text
