"""The checkers' violation messages say what the run log shows: each clause is recomputed from the log here."""

import json

import milvus_edu
from milvus_edu.narrate import ts_text, wall_text


def _violations(run, invariant):
    return [v for v in run.summary["checks"]["violations"] if v["invariant"] == invariant]


def _row(ev, seq):
    return ev[ev.seq == seq].iloc[0]


def test_global_monotonic_blames_the_deposed_active_in_tso_pause():
    """tso-pause seed 3 (its documented gap): the resumed old active hands out the earlier batch, so the message
    must name it, not the new active whose window started past everything it could know of."""
    run = milvus_edu.simulate("tso-pause", seed=3)
    ev = run.events
    (v,) = _violations(run, "global-monotonic")
    early, late = (_row(ev, s) for s in v["seqs"])
    assert early.node == "rootcoord-1" and late.node == "rootcoord-2"
    took_over = ev[(ev.kind == "session.active") & (ev.node == "rootcoord-2")].iloc[0]
    assert took_over.seq < early.seq  # rootcoord-1 served after rootcoord-2 became active
    text = v["explanation"]
    assert (f"because rootcoord-1 was no longer the active rootcoord (rootcoord-2 had become active at event "
            f"{took_over.seq + 1:,})") in text
    assert "rootcoord-2's window did not start" not in text


def test_global_monotonic_says_the_earlier_active_passed_its_unsaved_window():
    """With tso_no_window_save the new active loads the stale saved end and starts past it, as Milvus does: the
    message must say the old active handed out past that end, with the numbers of the log."""
    run = milvus_edu.simulate("tso-failover", seed=2, switches=["tso_no_window_save"])
    ev = run.events
    v = _violations(run, "global-monotonic")[0]
    early = _row(ev, v["seqs"][0])
    init = ev[(ev.kind == "tso.init") & (ev.node == "rootcoord-2")].iloc[0]
    saved = json.loads(init.detail)["loaded_window_end_ms"]
    high = int(early.ts) + int(early["count"]) - 1
    assert f"handing out up to {ts_text(high)}" in v["explanation"]
    assert (f"past the last window end saved in the KV ({wall_text(saved)}): it had not re-saved its window; "
            f"rootcoord-2 loaded that end and started past it, at {wall_text(int(init.physical_ms))} "
            f"(event {init.seq + 1:,})") in v["explanation"]
    assert saved < high >> 18  # the earlier batch's physical part is past the saved end, as claimed


def test_global_monotonic_says_the_new_active_ignored_the_saved_window():
    run = milvus_edu.simulate("tso-failover", seed=1, switches=["tso_skip_load_on_init"])
    ev = run.events
    v = _violations(run, "global-monotonic")[0]
    init = ev[(ev.kind == "tso.init") & (ev.node == "rootcoord-2")].iloc[0]
    ignored = json.loads(init.detail)["ignored_window_end_ms"]
    assert int(init.physical_ms) < ignored
    assert (f"rootcoord-2 started its window at physical {wall_text(int(init.physical_ms))} (event {init.seq + 1:,}) "
            f"without loading the saved window end {wall_text(ignored)}") in v["explanation"]
