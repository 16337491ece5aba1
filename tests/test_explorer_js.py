"""explorer.js in a bare page (no JupyterLab; tests/explorer_page.py): its causal past and filters are the ones
Python computes, stepping and jumps move the panel with no message to the kernel, and the words it asks the kernel
for (an event's details, a "Why?" chain) come back as a panel whose links move the cursor."""

from __future__ import annotations

from pathlib import Path

import pytest

import milvus_edu
from browser_support import CHROMIUM
from explorer_page import open_bare

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def explorer():
    return milvus_edu.explore(milvus_edu.simulate("tsafe-stall-proxy-restart", seed=1, duration_s=12))


@pytest.fixture(scope="module")
def page(explorer):
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run `bash tests/run.sh` (apt-get install chromium)"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            open_bare(page, explorer)
            yield page
            assert not errors, errors
        finally:
            browser.close()


def _head(page) -> str:
    return page.evaluate("() => document.querySelector('.mex-state .mex-head').textContent")


def test_js_causal_past_and_filters_are_pythons(page, explorer):
    for e in (0, 300, 727, 1400, len(explorer) - 1):
        js = page.evaluate("(e) => { const m = window.__model; const run = window.__mod.loadRun(m.get('meta'), "
                           "m.get('arrays')); return Array.from(window.__mod.causalPast(run, e)); }", e)
        assert [bool(x) for x in js] == explorer.causal_past(e).tolist(), e
    mask = explorer.filter(lanes=["querynode-1", "dml_0", "proxy-2"], kinds=None, channel="dml_0")
    js = page.evaluate("(f) => { const m = window.__model; const run = window.__mod.loadRun(m.get('meta'), "
                       "m.get('arrays')); return Array.from(window.__mod.visibleMask(run, f.lanes, f.kinds, f.chan)); }",
                       {"lanes": list(explorer.view.hidden_lanes), "kinds": [], "chan": "dml_0"})
    explorer.filter()
    assert [bool(x) for x in js] == mask.tolist()


def test_stepping_and_jumps_stay_in_the_browser(page, explorer):
    sent = page.evaluate("() => window.__sent.length")
    page.click(".mex-fwd")
    assert _head(page).startswith("event 2 of ")
    page.click(".mex-stall-next")
    assert _head(page).startswith(f"event {explorer.stalls[0]['seq'] + 1:,} of ")
    assert "stall 1" in page.inner_text(".mex-details")
    page.select_option(".mex-kind", "fault.kill")
    page.click(".mex-kind-next")
    assert "fault.kill" in _head(page)
    assert not page.is_enabled(".mex-viol-next")  # this run has no violation
    assert page.evaluate("() => window.__sent.length") == sent  # no kernel round trip for any of it


def test_a_request_bar_lies_on_its_own_lane(page, explorer):
    """The longest request of a client is drawn on that client's lane: a click on the lane's top edge in the middle of
    the request asks the kernel about that request (the bars once took the lane of the slice's number)."""
    import re

    a, meta = explorer.payload.arrays, explorer.payload.meta
    t = a["t"]
    procs = [meta["slice_procs"][p] for p in a["sproc"]]
    ends = [t[min(int(e), len(t) - 1)] for e in a["send"]]
    j = max((k for k in range(len(procs)) if procs[k].startswith("Client")), key=lambda k: ends[k] - t[a["sbegin"][k]])
    begin = int(a["sbegin"][j])
    page.evaluate("(c) => window.__set('cursor', c)", begin)
    span = explorer.view.span_ms
    t0 = t[begin] - 0.25 * span
    mid = t[begin] + min((ends[j] - t[begin]) / 2, 0.5 * span)
    js = Path(__file__).resolve().parents[1].joinpath("milvus_edu", "explorer", "explorer.js").read_text()
    label_w, axis_h, lane_h = (int(re.search(rf"const {n} = (\d+);", js).group(1)) for n in ("LABEL_W", "AXIS_H", "LANE_H"))
    box = page.locator(".mex-canvas").bounding_box()
    x = label_w + (mid - t0) / span * (box["width"] - 6 - label_w)
    y = axis_h + lane_h * meta["lanes"].index(procs[j]) + 4   # the bar: 4 px from 2 px below the lane's top
    page.mouse.click(box["x"] + x, box["y"] + y)
    sent = page.evaluate("() => window.__sent[window.__sent.length - 1]")
    assert (sent["type"], sent["index"]) == ("slice", j), (sent, procs[j])


def test_why_asks_the_kernel_and_its_links_move_the_cursor(page, explorer):
    events = explorer.events
    end = int(events[(events["kind"] == "client.read") & (events["request"] == 6)]["seq"].iloc[0])
    page.evaluate("(c) => window.__set('cursor', c)", end)
    assert _head(page).startswith(f"event {end + 1:,} of ")
    page.click(".mex-why")
    ask = page.evaluate("() => window.__sent[window.__sent.length - 1]")
    assert ask["type"] == "why" and ask["seq"] == end
    page.evaluate("(a) => window.__deliver(a)", explorer.answer(ask))
    links = page.locator(".mex-chain .mex-link")
    chain = explorer.why(end)
    assert links.count() == len(chain.links) and "Why did read 6 wait?" in page.inner_text(".mex-details")
    links.nth(len(chain.links) - 1).click()
    assert _head(page).startswith(f"event {chain.links[-1].seq + 1:,} of ")


def test_a_click_on_an_event_selects_it_and_asks_for_its_details(page, explorer):
    page.evaluate("(c) => window.__set('cursor', c)", 745)  # the kill of proxy-2
    page.click(".mex-fwd")
    canvas = page.locator(".mex-canvas")
    box = canvas.bounding_box()
    width = page.evaluate("() => document.querySelector('.mex-canvas').width")
    page.evaluate("(c) => window.__set('cursor', c)", 745)
    x, y = page.evaluate("() => { const d = document.querySelector('.mex-canvas').dataset;"
                         " return [Number(d.cursorX), Number(d.cursorY)]; }")
    page.click(".mex-fwd")  # away from the kill, then click on its cross
    scale = box["width"] / width
    page.mouse.click(box["x"] + x * scale, box["y"] + y * scale)
    assert _head(page).startswith("event 746 of ") and "fault.kill" in _head(page)
    ask = page.evaluate("() => window.__sent[window.__sent.length - 1]")
    assert ask["type"] == "detail" and ask["seq"] == 745
    page.evaluate("(a) => window.__deliver(a)", explorer.answer(ask))
    assert "event 746" in page.inner_text(".mex-details") and "proxy-2" in page.inner_text(".mex-details")


def test_fork_here_offers_a_switch_selector_for_the_switch_action(page, explorer):
    page.evaluate("(c) => window.__set('cursor', c)", 500)
    assert page.is_visible(".mex-fork-node") and not page.is_visible(".mex-fork-switch")
    page.select_option(".mex-fork-action", "switch")  # the switch selector takes the node selector's place
    assert page.is_visible(".mex-fork-switch") and not page.is_visible(".mex-fork-node")
    names = page.eval_on_selector_all(".mex-fork-switch option", "(os) => os.map((o) => o.value)")
    assert names == explorer.view.meta["fork_switches"] and "skip_wait_tsafe" in names
    page.select_option(".mex-fork-switch", "skip_wait_tsafe")
    page.click(".mex-fork")
    ask = page.evaluate("() => window.__sent[window.__sent.length - 1]")
    assert (ask["type"], ask["action"], ask["switch"], ask["seq"]) == ("fork", "switch", "skip_wait_tsafe", 500)
    assert "forking: switch skip_wait_tsafe on at " in page.inner_text(".mex-message")
    page.evaluate("(a) => window.__deliver(a)", {"type": "progress", "done_s": 3.0, "total_s": 12.0})
    assert page.inner_text(".mex-message").endswith(" s\u2026 25%")  # the kernel's fork, a quarter of the way
    assert page.inner_text(".mex-message").startswith("forking: switch skip_wait_tsafe on at ")
    page.select_option(".mex-fork-action", "kill")
    assert page.is_visible(".mex-fork-node") and not page.is_visible(".mex-fork-switch")


def test_filters_hide_a_lane_and_play_moves_the_cursor(page):
    page.click(".mex-filter-btn")
    height = page.evaluate("() => document.querySelector('.mex-canvas').height")
    page.locator(".mex-filters label", has_text="sim").first.locator("input").uncheck()
    assert page.evaluate("() => window.__model.get('hidden_lanes')") == ["sim"]
    assert page.evaluate("() => document.querySelector('.mex-canvas').height") < height  # its lane is gone
    page.locator(".mex-filters label", has_text="sim").first.locator("input").check()
    assert page.evaluate("() => document.querySelector('.mex-canvas').height") == height
    page.click(".mex-filter-btn")
    page.evaluate("(c) => window.__set('cursor', c)", 0)
    page.click(".mex-play")
    page.wait_for_function("() => window.__model.get('cursor') >= 20", timeout=10_000)
    page.click(".mex-play")
    stopped = page.evaluate("() => window.__model.get('cursor')")
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__model.get('cursor')") == stopped and _head(page).startswith(f"event {stopped + 1:,} ")
