"""Lab 2's self-checks judge against the run log: right answers pass, typical wrong ones get their hint."""

from __future__ import annotations

import pytest

import milvus_edu
from milvus_edu.mechanisms.timetick.labs import (check_out_of_order, check_pack_count, check_root_invariant, check_round_tick,
                                      out_of_order_count, round_tick, round_values)
from milvus_edu.narrate import ts_text

CH = "by-dev-rootcoord-dml_0"


@pytest.fixture(scope="module")
def events():
    return milvus_edu.simulate("timetick-basics", seed=4, duration_s=1.5).events


def test_out_of_order_right_swaps_and_float_pitfall(events):
    late, swaps = out_of_order_count(events, CH)
    assert late > 0 and late != swaps
    assert check_out_of_order(late, events, CH)
    assert "running maximum" in str(check_out_of_order(swaps, events, CH))
    assert "Not answered yet" in str(check_out_of_order(None, events, CH))
    assert not check_out_of_order(str(late), events, CH)  # a string is refused even when its value is right


def test_out_of_order_hints_every_pchannel_and_every_message(events):
    """The two counts a student may give instead: the late messages of every pchannel, and all messages of this one."""
    channels = events.loc[(events.kind == "mq.produce") & events.msg_type.isin(["Insert", "Delete"]), "channel"]
    everywhere = sum(out_of_order_count(events, ch)[0] for ch in channels.unique())
    late, swaps = out_of_order_count(events, CH)
    assert everywhere not in (late, swaps)
    assert f"Take only the rows whose channel is {CH}" in str(check_out_of_order(everywhere, events, CH))
    total = int((channels == CH).sum())
    assert total not in (late, swaps, everywhere)
    assert "every DML message on the pchannel" in str(check_out_of_order(total, events, CH))


def test_round_tick_is_the_minimum_over_every_session(events):
    updates = events[(events.kind == "rootcoord.timetick_update") & events.detail.str.contains('"sent":true')]
    seq = int(updates.iloc[2].seq)
    values = round_values(events, seq, CH)
    assert "ddl" in values and len(values) == 3
    assert round_tick(events, seq, CH) == min(values.values())
    assert check_round_tick(min(values.values()), events, seq, CH)
    assert "minimum" in str(check_round_tick(max(values.values()), events, seq, CH))
    text = check_round_tick(ts_text(min(values.values())), events, seq, CH)
    assert not text and "as the int" in str(text)
    # the tick's physical part (ms) was judged as if it were a hybrid timestamp of 1970
    assert "physical part alone" in str(check_round_tick(min(values.values()) >> 18, events, seq, CH))
    assert "far below any hybrid timestamp" in str(check_round_tick(900, events, seq, CH))


def test_pack_count_and_the_by_arrival_mistake(events):
    pack = events[(events.kind == "mq.pack") & (events["count"] > 0)].iloc[2]
    assert check_pack_count(int(pack["count"]), events, int(pack.seq))
    assert not check_pack_count(int(pack["count"]) + 1, events, int(pack.seq))


def test_root_invariant_names():
    assert check_root_invariant("Watermark")
    assert "consequence" in str(check_root_invariant("pack_exact"))
    assert "bug switch" in str(check_root_invariant("allocate_outside_enqueue_lock"))
    assert "Not answered yet" in str(check_root_invariant(None))
    assert not check_root_invariant(7)


def test_out_of_order_distances_are_whole_tsloop_steps(events):
    """Section 8's claim: an out-of-order message is below an earlier one by 0 ms or by whole 50 ms steps of the
    physical part (tsLoop), never by a fraction of a step; both 0 and 50 occur."""
    import numpy as np

    dml = events[(events.kind == "mq.produce") & (events.msg_type == "Insert")]
    gaps = []
    for _ch, rows in dml.groupby("channel"):
        ts = rows.end_ts.to_numpy("int64")
        before = np.maximum.accumulate(np.concatenate([[0], ts[:-1]]))
        late = ts < before
        gaps.append((before[late] >> 18) - (ts[late] >> 18))
    gaps = np.concatenate(gaps)
    assert len(gaps) and set(np.unique(gaps % 50)) == {0} and {0, 50} <= set(np.unique(gaps))


@pytest.mark.slow
def test_section_3_opens_at_a_pack_whose_messages_the_panel_names(events):
    """The stepper of section 3 opens at the first pack with messages; its panel lists them by the events that
    wrote them."""
    from milvus_edu.viz import TimelineStepper

    first = int(events[(events.kind == "mq.pack") & (events["count"] > 0)].seq.iloc[0])
    stepper = TimelineStepper(events, window_s=0.4)
    stepper.goto_event(first + 1)
    pack = stepper.state()["last_pack"]
    assert pack["index"] == first and len(pack["messages"]) == int(events["count"].iloc[first]) > 0
    assert f"event {pack['messages'][0]['index'] + 1:,}" in stepper.panel_html


def _fixed_run(rate: float):
    run = milvus_edu.simulate("timetick-unlocked-enqueue", seed=1, options={"inserts_per_s": rate})
    ev = run.events
    p1 = ev[ev.node == "proxy-1"]
    unfinished = set(p1.ts[p1.kind == "proxy.enqueue"]) - set(p1.ts[p1.kind == "proxy.finish"])
    written = int(((ev.kind == "mq.produce") & (ev.msg_type != "TimeTick")).sum())
    delivered = int((ev.kind == "mq.consume").sum())
    return run, unfinished, written, delivered


def test_section_6_the_lock_keeps_order_but_at_600_inserts_a_second_the_queue_never_drains():
    """Lab 2, section 6, without the switch: no broken promise at either load; at 600 inserts/s proxy-1's queue grows
    to the end, its oldest task never finishes, ticks stall on proxy-1 and readers get almost nothing; at 150/s the
    queue drains and no stall is listed."""
    busy, stuck, written, delivered = _fixed_run(600.0)
    checks = busy.summary["checks"]
    assert checks["ok"] and not any(checks["violation_counts"].values())
    assert [s["held_by"] for s in checks["stalls"]] == ["proxy-1"]
    # every round's minimum sits just below the oldest unfinished task's timestamp, for good
    assert busy.events.loc[busy.events.kind == "mq.produce", "tick_ts"].max() == min(stuck) - 1
    assert len(stuck) > 100 and delivered < written / 10
    calm, left, written, delivered = _fixed_run(150.0)
    checks = calm.summary["checks"]
    assert checks["ok"] and not checks["stalls"]
    assert len(left) < 20 and delivered > written / 2
    assert calm.summary["timetick"]["repeated_ticks"] < busy.summary["timetick"]["repeated_ticks"]
