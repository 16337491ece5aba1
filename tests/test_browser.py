"""Real-browser test: JupyterLab + Debian's chromium (driven by Playwright) + the stepper widget.

The suite starts its own JupyterLab on 127.0.0.1 (free port, random token, isolated settings with
the news/update toast off) serving a *temporary copy* of notebooks/, opens a notebook, runs all
cells (JupyterLab's notebook:run-all-cells command, the one behind Run > Run All Cells), clicks the
stepper's "step forward" button and checks that the state panel changed; then keeps the kernel busy
with another cell, clicks "Step ▶" three times and checks the panel moved each time (the stepper runs
in the browser), that the slider and the panel name the same event, and that at 1280 x 800 with the
file browser open the controls, the lanes and the panel are all in the screen; then clicks as a hurried
student does (Jump ▶ every 30 ms, three ◀ Step then Jump, the slider dragged far, Play at 2000 events/s),
while another cell runs and while the kernel is idle, and checks that the panel always ends on the details
of the slider's event, the ones the kernel has for it.  Screenshots (the stepper, after the rapid clicks:
``*-rapid.png``, and the whole screen: ``*-1280x800.png``) go to test-output/browser/.  See
tests/browser_support.py.

* test_browser_harness_with_minimal_widget -- a tiny ipywidgets stand-in for the stepper, written
  to a temp notebook; proves the harness (server, widget rendering, clicks) works by itself.
* test_tso_notebook_stepper -- the real thing: notebooks/01_tso.ipynb and its TimelineStepper.
* test_timetick_notebook_stepper -- the same for lab 2, notebooks/02_timetick.ipynb.
* test_flush_notebook_stepper -- the same for lab 3, notebooks/03_flush_checkpoint.ipynb, whose stepper opens at
  the stored checkpoint equal to flushTs.
* test_query_notebook_stepper -- the same for lab 4, notebooks/04_guarantee_ts.ipynb, whose stepper opens where a
  Strong read starts waiting for tsafe.
* test_stepper_js_asks_once_resends_after_silence_and_ignores_late_answers -- no JupyterLab: stepper.js in a
  bare page, its messages to and from a TimelineStepper carried by the test (lost, late, out of order).
"""

from __future__ import annotations

import re

from pathlib import Path

import pytest

from browser_support import (
    CHROMIUM,
    OUTPUT_DIR,
    REPO_ROOT,
    JupyterLabServer,
    copy_notebooks,
    run_notebook_and_step,
    write_minimal_stepper_notebook,
)

pytestmark = pytest.mark.browser

TSO_NOTEBOOK = "notebooks/01_tso.ipynb"


def _require_browser_stack() -> None:
    """Fail (never skip) when the stack is missing: `bash tests/run.sh` installs all of it."""
    import ipywidgets  # noqa: F401
    import jupyterlab  # noqa: F401
    import playwright.sync_api  # noqa: F401

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run `bash tests/run.sh` (apt-get install chromium)"


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """One JupyterLab for this module, serving a temp dir with a copy of notebooks/ and the
    harness notebook; stopped by pid (terminate, then kill) when the module is done."""
    _require_browser_stack()
    root = tmp_path_factory.mktemp("lab-root")
    copy_notebooks(root)
    write_minimal_stepper_notebook(root / "harness" / "minimal_stepper.ipynb")
    server = JupyterLabServer(root_dir=root, work_dir=tmp_path_factory.mktemp("lab-state"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _check_step(server: JupyterLabServer, rel_path: str, png_name: str, tmp_path: Path, stepper_checks=True):
    png = OUTPUT_DIR / png_name
    png.unlink(missing_ok=True)
    png.with_name(png.stem + "-failure.png").unlink(missing_ok=True)  # stale one from an earlier run
    result = run_notebook_and_step(server, rel_path, png, user_data_dir=tmp_path / "chromium-profile",
                                   stepper_checks=stepper_checks)
    print(f"\n{rel_path}: state {result.before!r} -> {result.after!r} "
          f"in {result.seconds:.1f}s; screenshot {result.screenshot}")
    assert result.after != result.before
    assert result.after.strip(), "state panel is empty after stepping"
    assert png.is_file() and png.stat().st_size > 0, f"screenshot {png} missing or empty"
    return result


def _check_stepper_answers_while_busy_and_fits(result) -> None:
    """The panel moved on every click while the kernel ran another cell; the slider and the panel name
    the same event; at 1280 x 800 with the file browser open the controls, the picture and the panel
    are in the screen, and the panel hides no line without a sign of it."""
    print(f"  while busy: {result.busy_status} in {[round(ms) for ms in result.busy_ms]} ms; "
          f"slider {result.slider_value}, panel {result.panel_number}; panel box {result.panel_box}; "
          f"screen {result.screen}")
    assert result.busy_status == ["busy"] * 3, "the kernel was not busy during the clicks"
    assert len(set([result.after] + result.busy_panels)) == 4, "the panel did not move on every click"
    start = int(re.match(r"event ([\d,]+) of ", result.before).group(1).replace(",", ""))
    assert result.slider_value == result.panel_number == start + 4  # one click, then three more
    w, h = result.viewport["width"], result.viewport["height"]
    assert (w, h) == (1280, 800)
    for name, box in (("panel", result.panel_box), ("picture", result.plot_box), ("controls", result.controls_box)):
        assert box["x"] >= 0 and box["y"] >= 0, (name, box)
        assert box["x"] + box["width"] <= w and box["y"] + box["height"] <= h, (name, box)
    assert result.screen.is_file() and result.screen.stat().st_size > 0
    # The widget keeps one height from event to event (its panel scrolls inside), so the cells below it stay put.
    print(f"  stepper heights: {[round(h, 1) for h in result.heights]}; picture {result.plot_box}")
    assert len(result.heights) == 7 and max(result.heights) - min(result.heights) <= 1, result.heights
    # Lines below the panel's box are there only with the shadow that says so (scroll bars may be hidden).
    assert (result.panel_hidden_px > 1) == result.panel_marked_more, (result.panel_hidden_px, result.panel_marked_more)
    _check_rapid_clicks_end_on_details(result)


def _check_rapid_clicks_end_on_details(result) -> None:
    """After every sequence of rapid clicks (busy kernel or idle, Jump, Step, slider, Play) the panel
    settles on the slider's event with its details, which are the kernel's panel for that event, and
    the picture is that event's page; the kernel hears the same cursor."""
    for run in result.rapid:
        print(f"  rapid {run.name}: busy={run.busy} slider {run.slider} (meant {run.expected}) panel "
              f"{run.head!r}; details after {run.settle_ms:.0f} ms, picture after {run.picture_ms:.0f} ms; kernel cursor {run.kernel_cursor}"
              + (f"; play frames {run.frames_details} with details, {run.frames_waiting} waiting"
                 if run.name == "play" else ""))
    assert [r.name for r in result.rapid] == ["busy", "jumps", "scrub", "play"]
    assert result.rapid[0].busy, "the kernel was not busy during the first rapid clicks"
    for run in result.rapid:
        assert run.settle_ms >= 0 and not run.waiting, f"{run.name}: the panel still waits for details: {run.head!r}"
        assert run.head.startswith(f"event {run.slider:,} of "), (run.name, run.head, run.slider)
        assert run.expected is None or run.slider == run.expected, (run.name, run.slider, run.expected)
        assert run.kernel_cursor == run.slider - 1, (run.name, run.kernel_cursor, run.slider)
        assert run.same_as_kernel, f"{run.name}: the panel's text is not the kernel's panel for event {run.slider}"
        assert not run.stale_picture, f"{run.name}: the picture lacks the page of event {run.slider}"
    assert result.rapid[-1].frames_details > 0, "Play showed no event's details"


def test_the_lab_copies_the_browser_runs_end_with_the_cell_that_shows_the_stepper(tmp_path):
    import nbformat

    dest = copy_notebooks(tmp_path)
    for name in (TSO_NOTEBOOK, TIMETICK_NOTEBOOK, FLUSH_NOTEBOOK, QUERY_NOTEBOOK):
        whole = nbformat.read(REPO_ROOT / name, as_version=4).cells
        cut = nbformat.read(dest / Path(name).name, as_version=4).cells
        assert 0 < len(cut) < len(whole) and [c.source for c in cut] == [c.source for c in whole[: len(cut)]]
        assert "TimelineStepper(" in cut[-1].source and cut[-1].cell_type == "code"


def test_browser_harness_with_minimal_widget(lab_server, tmp_path):
    """The harness itself: a minimal stand-in stepper renders as DOM and reacts to the click."""
    result = _check_step(lab_server, "harness/minimal_stepper.ipynb", "harness_stepper.png", tmp_path,
                         stepper_checks=False)
    assert "step 0" in result.before
    assert "step 1" in result.after


def test_tso_notebook_stepper(request, tmp_path):
    """notebooks/01_tso.ipynb: run it in JupyterLab, step the TimelineStepper forward once."""
    assert "TimelineStepper" in (REPO_ROOT / TSO_NOTEBOOK).read_text(encoding="utf-8")
    lab_server = request.getfixturevalue("lab_server")
    result = _check_step(lab_server, TSO_NOTEBOOK, "stepper.png", tmp_path)
    assert result.before.startswith("event 1 of ") and result.after.startswith("event 2 of ")
    _check_stepper_answers_while_busy_and_fits(result)


TIMETICK_NOTEBOOK = "notebooks/02_timetick.ipynb"


def test_timetick_notebook_stepper(request, tmp_path):
    """notebooks/02_timetick.ipynb: run it in JupyterLab, step its TimelineStepper forward once."""
    assert "TimelineStepper" in (REPO_ROOT / TIMETICK_NOTEBOOK).read_text(encoding="utf-8")
    lab_server = request.getfixturevalue("lab_server")
    result = _check_step(lab_server, TIMETICK_NOTEBOOK, "stepper-timetick.png", tmp_path)
    # section 3 opens the stepper at the first pack with messages, then steps once; which event that is depends on
    # the run (the ticker phases drawn from the seed move it), so it is worked out here from the lab's own run
    import milvus_edu
    events = milvus_edu.simulate("timetick-basics", seed=1).events
    first_pack = int(events[(events.kind == "mq.pack") & (events["count"] > 0)].seq.iloc[0]) + 1
    assert result.before.startswith(f"event {first_pack:,} of {len(events):,}") and "mq.pack" in result.before
    assert result.after.startswith(f"event {first_pack + 1:,} of ")
    _check_stepper_answers_while_busy_and_fits(result)


FLUSH_NOTEBOOK = "notebooks/03_flush_checkpoint.ipynb"


def test_flush_notebook_stepper(request, tmp_path):
    """notebooks/03_flush_checkpoint.ipynb: run it in JupyterLab, step its TimelineStepper forward once from the
    event it opens at (the checkpoint equal to flushTs); the flush panel rows are there."""
    assert "TimelineStepper" in (REPO_ROOT / FLUSH_NOTEBOOK).read_text(encoding="utf-8")
    lab_server = request.getfixturevalue("lab_server")
    result = _check_step(lab_server, FLUSH_NOTEBOOK, "stepper-flush.png", tmp_path)
    before = int(re.match(r"event ([\d,]+) of ", result.before).group(1).replace(",", ""))
    assert before > 1 and result.after.startswith(f"event {before + 1:,} of ")
    assert "write buffer" in result.after and "cp updater" in result.after
    _check_stepper_answers_while_busy_and_fits(result)


QUERY_NOTEBOOK = "notebooks/04_guarantee_ts.ipynb"


def test_query_notebook_stepper(request, tmp_path):
    """notebooks/04_guarantee_ts.ipynb: run it in JupyterLab, step its TimelineStepper forward once from the event it
    opens at (read t6 waiting for tsafe); the panel moves."""
    assert "TimelineStepper" in (REPO_ROOT / QUERY_NOTEBOOK).read_text(encoding="utf-8")
    lab_server = request.getfixturevalue("lab_server")
    result = _check_step(lab_server, QUERY_NOTEBOOK, "stepper-query.png", tmp_path)
    before = int(re.match(r"event ([\d,]+) of ", result.before).group(1).replace(",", ""))
    assert before > 1 and result.after.startswith(f"event {before + 1:,} of ")
    _check_stepper_answers_while_busy_and_fits(result)


# The real stepper.js in a bare page, its widget model a stand-in whose messages the test carries to and
# from a TimelineStepper by hand: the test decides which answer comes when (none, late, out of order).
_STAND_IN_JS = """async ({js, traits}) => {
  const bytes = (b64) => { const s = atob(b64); const a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i); return new DataView(a.buffer); };
  const state = {...traits, times: bytes(traits.times), kind_codes: bytes(traits.kind_codes),
                 window: bytes(traits.window), backgrounds: {}};
  for (const [k, v] of Object.entries(traits.backgrounds)) state.backgrounds[k] = bytes(v);
  const handlers = {};
  window.__sent = [];
  window.__deliver = (content, buffers) => (handlers['msg:custom'] || []).forEach((cb) => cb(content, buffers.map(bytes)));
  const model = {get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {},
                 on(ev, cb) { (handlers[ev] = handlers[ev] || []).push(cb); }, off() {},
                 send(m) { window.__sent.push(m); }};
  const mod = await import(URL.createObjectURL(new Blob([js], {type: 'text/javascript'})));
  mod.default.render({model, el: document.getElementById('root')});
}"""


def test_stepper_js_asks_once_resends_after_silence_and_ignores_late_answers(tmp_path):
    """stepper.js against a stand-in model: one request in flight at a time, carrying the browser's
    cursor; a request never answered is sent again after a silence (RESEND_MS, 3 s, and not a millisecond
    sooner); an answer older than the one shown does not take the panel back; the panel ends on the
    details the kernel has for the event.

    The page's timers run on Playwright's clock, paused, and move only when the test moves it: the
    kernel's answers (``st.answer``) may take seconds on a loaded machine, and on the page's own clock a
    slow answer would be asked for again (a fresh-clone run at half speed failed so, 2026-11-27)."""
    import base64
    import json as _json

    from playwright.sync_api import sync_playwright

    import milvus_edu
    from milvus_edu.viz import TimelineStepper

    _require_browser_stack()
    st = TimelineStepper(milvus_edu.simulate("tso-failover", seed=1).events)
    v = st.widget
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    traits = {"n": v.n, "title": v.title, "kind_names": v.kind_names, "geometry": v.geometry, "margin": v.margin,
              "cursor": v.cursor, "jump_kind": v.jump_kind, "speeds": v.speeds, "speed": v.speed, "message": "",
              "times": b64(v.times), "kind_codes": b64(v.kind_codes), "window": b64(v.window),
              "backgrounds": {k: b64(png) for k, png in v.backgrounds.items()}}
    js = (REPO_ROOT / "milvus_edu" / "viz" / "stepper.js").read_text(encoding="utf-8")

    def answers(want: dict) -> list:
        sent = []
        st.view.send = lambda content, buffers=None: sent.append((content, [b64(b) for b in buffers or ()]))
        st.answer(want)
        return sent

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.clock.install(time=0)
            page.clock.pause_at(1000)  # no timer fires until run_for below
            page.set_content("<html><body><div id='root'></div></body></html>")
            page.evaluate(_STAND_IN_JS, {"js": js, "traits": traits})
            sent = lambda: page.evaluate("() => window.__sent")  # noqa: E731
            deliver = lambda msgs: [page.evaluate("([c, b]) => window.__deliver(c, b)", m) for m in msgs]  # noqa: E731
            panel = lambda: page.evaluate("() => document.querySelector('.milvus-edu-state').textContent")  # noqa: E731
            waiting = lambda: page.evaluate(  # noqa: E731
                "() => document.querySelector('.milvus-edu-state').classList.contains('mes-waiting')")
            slide = lambda event: page.evaluate(  # noqa: E731
                "(v) => { const s = document.querySelector('input[type=range]'); s.value = String(v);"
                " s.dispatchEvent(new Event('input')); }", event)

            first = sent()  # the view starts with a short window: it asks for the full one at once
            assert len(first) == 1 and first[0]["cursor"] == 0 and first[0]["have"] == [0, v.margin]
            deliver(answers(first[0]))
            assert len(sent()) == 1 and not waiting()

            slide(1500)  # far outside the window: asked for once, with the browser's cursor
            slide(1700)  # more moves while the request is in flight: no more requests
            slide(1800)
            wants = sent()[1:]
            assert [w["cursor"] for w in wants] == [1499] and waiting()
            lost = wants[0]  # never answered (say the kernel restarted): asked again after a silence
            page.clock.run_for(2999)
            assert len(sent()) == 2 and waiting()
            page.clock.run_for(1)
            assert len(sent()) == 3
            again = sent()[2]
            assert again["cursor"] == 1799 and again["req"] > lost["req"]
            deliver(answers(again))  # a short window around 1799; near its edge, the full one is asked for
            assert not waiting() and panel().startswith("event 1,800 of ")
            full = sent()[3]
            assert full["cursor"] == 1799 and full["have"][0] <= 1799 < full["have"][1]
            deliver(answers(full))
            st.view.cursor = 1799
            expected = page.evaluate("(h) => { const d = document.createElement('div'); d.innerHTML = h;"
                                     " return d.textContent; }", st.panel_html)
            assert panel() == expected
            deliver(answers(lost))  # the lost request's answer comes late: it does not take the panel back
            assert panel() == expected and not waiting()
            page.clock.run_for(30_000)  # past RESEND_MAX_MS: nothing is in flight, so nothing is asked for again
            assert len(sent()) == 4, _json.dumps(sent()[4:])[:300]
        finally:
            browser.close()
