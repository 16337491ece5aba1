"""One event numbering for everything a learner reads: event n is the row with seq n - 1, on the slider,
in the state panel, in the jump messages, in the filmstrip, in ``milvus-edu timeline`` and in the
checkers' explanations ("Let event n be ...")."""

from __future__ import annotations

import io
import json
import re

import pytest

import milvus_edu
from milvus_edu.viz import TimelineStepper


def _let_event(explanation: str) -> int:
    m = re.match(r"Let events? ([\d,]+)", explanation)
    assert m, explanation
    return int(m.group(1).replace(",", ""))


def _panel_number(html: str) -> int:
    m = re.search(r"<b>event ([\d,]+)</b> of ", html)
    assert m, html[:200]
    return int(m.group(1).replace(",", ""))


@pytest.mark.parametrize("scenario, switch, kind", [
    ("tso-failover", "tso_skip_load_on_init", "rootcoord.alloc_timestamp"),
    pytest.param("timetick-unlocked-enqueue", "allocate_outside_enqueue_lock", "mq.produce",
                 marks=pytest.mark.slow),  # ~2.5 CPU s: its run is long
])
def test_slider_panel_and_checker_explanation_name_the_same_event(scenario, switch, kind):
    run = milvus_edu.simulate(scenario, seed=1, switches=[switch])
    violation = run.violations[0]
    number = _let_event(violation["explanation"])
    events = run.events
    assert int(events["seq"].iloc[number - 1]) == number - 1  # event n is seq n - 1
    st = TimelineStepper(events)
    st.goto_event(number)
    slider = st.widget.cursor + 1  # the browser's slider shows cursor + 1 (stepper.js: slider.value)
    assert slider == st.event_number == number == _panel_number(st.panel_html)
    assert st.state()["number"] == number and st.state()["seq"] == number - 1
    # The browser's own copy of the panel, in the window it was sent, says the same.
    win = json.loads(st.widget.window)
    sent = "".join(win["frags"][k] for k in win["panel"][number - 1 - win["start"]])
    assert _panel_number(sent) == number
    # The event the explanation names is one a learner can recognise at that place.
    assert events["kind"].iloc[number - 1] in {kind, "rootcoord.alloc_timestamp", "client.recv", "mq.produce",
                                               "tso.alloc"}


def test_jump_message_and_filmstrip_and_timeline_count_from_one(tmp_path):
    from milvus_edu.cli import _print_timeline

    run = milvus_edu.simulate("tso-failover", seed=1)
    st = TimelineStepper(run.events)
    kill = st.jump_to_next("fault.kill")
    assert st.jump_to_next("fault.kill") is None
    assert st.widget.message == f"no fault.kill after event {kill + 1:,}"
    out = io.StringIO()
    _print_timeline(run.events, out=out)
    line = next(l for l in out.getvalue().splitlines() if "is killed" in l)
    assert line.split()[:2] == ["event", f"{kill + 1:,}"]
    assert st.film_caption(kill).startswith(f"event {kill + 1:,} · t = 10.000 s")
