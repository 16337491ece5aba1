"""The explorer in a real JupyterLab + Debian's chromium at 1280 x 800 (one server, one notebook): open it on
tsafe-stall-proxy-restart, scrub, jump to the liveness stall, ask "Why?" at a read that timed out and follow the
chain's last link, show only what influenced that event, fork (kill proxy-1 at the cursor), and check that with the
file browser open the controls, the diagram, the state panel and the Why panel are all in the screen. Screenshots go
to test-output/browser/explorer-*.png. See tests/browser_support.py for the harness."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import milvus_edu
from browser_support import (
    CHROMIUM,
    KERNEL_IDLE_TIMEOUT,
    OUTPUT_DIR,
    RUN_ALL_TIMEOUT,
    VIEWPORT,
    JupyterLabServer,
    _kill_own_descendants_matching,
    _run_all_cells,
    _wait_for,
    _wait_kernel_idle,
    _wait_run_all_done,
    launch_chromium,
)

pytestmark = pytest.mark.browser

SCENARIO = "tsafe-stall-proxy-restart"
DURATION_S = 12
SOURCE = (f"import milvus_edu\nrun = milvus_edu.simulate({SCENARIO!r}, seed=1, duration_s={DURATION_S})\n"
          "ex = milvus_edu.explore(run)\nex")


def _notebook(path: Path) -> Path:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell(SOURCE)], metadata={
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}})
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def _head(widget) -> str:
    return widget.locator(".mex-state .mex-head").first.inner_text()


def _box(locator) -> dict:
    box = locator.bounding_box()
    assert box is not None, f"{locator} is not displayed"
    return box


def test_explorer_in_jupyterlab(tmp_path):
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run `bash tests/run.sh` (apt-get install chromium)"
    from playwright.sync_api import sync_playwright

    run = milvus_edu.simulate(SCENARIO, seed=1, duration_s=DURATION_S)
    events = run.events
    stall = milvus_edu.explore(run).stalls[0]["seq"]
    reads_after = events[(events["kind"] == "client.read") & (events["seq"] > stall)]
    waited = set(events[events["kind"] == "querynode.wait"]["request"])
    timed_out = reads_after[reads_after["error"].notna() & reads_after["request"].isin(waited)].iloc[0]
    clicks_to_read = list(reads_after["seq"]).index(int(timed_out["seq"])) + 1
    chain = milvus_edu.why(run, read=int(timed_out["request"]))

    root = tmp_path / "lab"
    _notebook(root / "explorer.ipynb")
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    shots = {name: OUTPUT_DIR / f"explorer-{name}.png" for name in ("why", "fork", "1280x800")}
    for png in shots.values():
        png.unlink(missing_ok=True)
    profile = (tmp_path / "chromium-profile").resolve()
    with JupyterLabServer(root_dir=root, work_dir=tmp_path / "lab-state") as server, sync_playwright() as pw:
        context = launch_chromium(pw, profile)
        try:
            context.route(re.compile(r"^(?!https?://127\.0\.0\.1[:/]|data:|blob:|about:).*"),
                          lambda route: route.abort())
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(30_000)
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.lab_url("explorer.ipynb"), wait_until="domcontentloaded", timeout=60_000)
            page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
            _wait_kernel_idle(page, KERNEL_IDLE_TIMEOUT)
            _run_all_cells(page)
            time.sleep(0.5)
            _wait_run_all_done(page, RUN_ALL_TIMEOUT)
            widget = page.locator(".jp-OutputArea-output .mex-root").first
            widget.wait_for(state="visible", timeout=30_000)
            assert _head(widget).startswith(f"event 1 of {len(events):,}")

            # scrub: the slider to event 500
            widget.locator(".mex-slider").evaluate("(s) => { s.value = '500'; s.dispatchEvent(new Event('input')); }")
            assert _head(widget).startswith("event 500 of ")
            # the liveness stall: where dml_0's time tick stopped, with the checker's explanation
            widget.locator(".mex-stall-next").click()
            assert _head(widget).startswith(f"event {stall + 1:,} of ")
            assert "proxy-2" in widget.locator(".mex-details").inner_text()
            # on to the first read that timed out after it, and why
            widget.locator(".mex-kind").select_option("client.read")
            for _ in range(clicks_to_read):
                widget.locator(".mex-kind-next").click()
            assert _head(widget).startswith(f"event {int(timed_out['seq']) + 1:,} of ")
            widget.locator(".mex-why").click()
            links = widget.locator(".mex-chain .mex-link")
            _wait_for(lambda: links.count() == len(chain.links), 30, "the Why? chain")
            assert chain.question in widget.locator(".mex-details").inner_text()
            # a panel whose lines go on below its foot says so (a shadow), also where scroll bars stay hidden
            shadow_says_hidden = ("(e) => e.classList.contains('mex-more') === "
                                  "(e.scrollTop + e.clientHeight < e.scrollHeight - 1)")
            overflowing = []
            for name in (".mex-state", ".mex-details"):
                box = widget.locator(name).first.element_handle()
                page.wait_for_function(shadow_says_hidden, arg=box, timeout=10_000)  # observers run when they may
                if box.evaluate("(e) => e.classList.contains('mex-more')"):  # scrolled to its foot: none hidden
                    overflowing.append(name)
                    box.evaluate("(e) => { e.scrollTop = e.scrollHeight; }")
                    page.wait_for_function("(e) => !e.classList.contains('mex-more')", arg=box, timeout=10_000)
                    box.evaluate("(e) => { e.scrollTop = 0; }")
            assert overflowing, "the Why? chain fits: this check needs a panel with lines below its foot"
            links.nth(len(chain.links) - 1).click()  # the root cause: proxy-2 killed
            assert _head(widget).startswith(f"event {chain.links[-1].seq + 1:,} of ")
            widget.locator(".mex-influenced").check()
            page.wait_for_timeout(200)  # the dimmed picture is drawn
            widget.screenshot(path=str(shots["why"]))

            # fork: kill proxy-1 here; the widget shows the fork and where it first differs
            widget.locator(".mex-fork-action").select_option("kill")
            widget.locator(".mex-fork-node").select_option("proxy-1")
            widget.locator(".mex-fork").click()
            _wait_for(lambda: "the fork differs from event" in widget.locator(".mex-message").inner_text(), 90,
                      "the fork's first difference")
            assert "fork: kill proxy-1" in widget.locator(".mex-title").inner_text()
            assert widget.locator(".mex-show").inner_text() == "Show original"
            widget.screenshot(path=str(shots["fork"]))

            # everything a student needs in one 1280 x 800 screen with the file browser open
            page.evaluate("() => window.jupyterapp.shell.activateById('filebrowser')")
            page.wait_for_timeout(400)
            assert page.locator(".jp-FileBrowser").first.is_visible()
            widget.evaluate("(e) => e.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(400)
            page.screenshot(path=str(shots["1280x800"]))
            w, h = VIEWPORT["width"], VIEWPORT["height"]
            for name in (".mex-row", ".mex-canvas", ".mex-state", ".mex-details"):
                for k in range(widget.locator(name).count()):
                    box = _box(widget.locator(name).nth(k))
                    assert box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= w + 0.5 \
                        and box["y"] + box["height"] <= h + 0.5, (name, k, box)
            assert not errors, errors
        finally:
            context.close()
            _kill_own_descendants_matching(str(profile))
    for png in shots.values():
        assert png.is_file() and png.stat().st_size > 0
