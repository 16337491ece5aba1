"""Helpers for the real-browser test (tests/test_browser.py).

Two pieces:

* :class:`JupyterLabServer` starts JupyterLab on 127.0.0.1 as a subprocess of the test run, with an
  isolated config / settings / runtime directory and no outbound requests (no news feed, no
  update check, no PyPI extension manager, no autosave), and stops it by pid.
* :func:`run_notebook_and_step` drives Debian's chromium with Playwright: open a notebook in
  JupyterLab, wait for the kernel, run all cells (notebook:run-all-cells), wait until done, click the
  stepper's "step forward" button and check that the state panel's text changed.

Nothing here talks to the network except loopback.  Never run ``playwright install``: the browser
is the system one (/usr/bin/chromium).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from milvus_edu.viz.stepper import SPEEDS

REPO_ROOT = Path(__file__).resolve().parents[1]
OUTPUT_DIR = REPO_ROOT / "test-output" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Contract of the stepper widget (milvus_edu.viz): root widget class, button tooltip/text, state panel.
STEPPER_CLASS = "milvus-edu-stepper"
STATE_CLASS = "milvus-edu-state"
STEP_TOOLTIP = "step forward"
STEP_TEXT = "Step ▶"

# The screen of the issue: a 1280 x 800 laptop, JupyterLab's default layout with the file browser open.
VIEWPORT = {"width": 1280, "height": 800}
BUSY_SECONDS = 60  # the longest the test keeps the kernel busy while it clicks; it interrupts the sleep when done

SERVER_START_TIMEOUT = 60.0  # s until /api/status answers
KERNEL_IDLE_TIMEOUT = 60.0  # s until the notebook's kernel is idle after opening it
RUN_ALL_TIMEOUT = 90.0  # s for Run All Cells to finish
WIDGET_TIMEOUT = 30.0  # s for the stepper to render / the state panel to change
# Hard cap for one run_notebook_and_step: a watchdog thread SIGKILLs this run's chromium after it,
# so that a wedged page (page.evaluate has no timeout of its own) fails the test instead of hanging.
BROWSER_HARD_TIMEOUT = 360.0


# --------------------------------------------------------------------------------------------------
# JupyterLab server
# --------------------------------------------------------------------------------------------------

# User settings: the news / update-check toast off ("Would you like to receive official Jupyter
# news?" is the announcements prompt; fetchNews "false" = Never answers it), no autosave (the
# notebook under test must never be written back), and no notebook windowing (all cells stay in
# the DOM, so the stepper can be found wherever it is in the notebook).
LAB_SETTINGS: dict[str, dict] = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
        "doNotDisturbMode": False,
    },
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}

# Server-side: no announcements feed, no update check, no PyPI lookups, no terminals.
SERVER_CONFIG = """\
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabApp.extension_manager = "readonly"
c.ServerApp.terminals_enabled = False
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children_by_ppid() -> dict[int, list[int]]:
    """pid -> child pids, read from /proc (Linux only; empty elsewhere)."""
    out: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return out
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ..." -- comm may contain spaces/parens, so split after the last ')'
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) >= 2:
            out.setdefault(int(fields[1]), []).append(int(entry.name))
    return out


def descendants(pid: int) -> list[int]:
    tree = _children_by_ppid()
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kill_own_descendants_matching(marker: str) -> list[int]:
    """SIGKILL the descendants of this process whose command line contains ``marker``."""
    killed = []
    for pid in descendants(os.getpid()):
        if marker in _cmdline(pid):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM the server if the test process dies without stopping it (Linux)."""
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:  # not Linux / no glibc: stop() in the fixture teardown still applies
        pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); treat it as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


@dataclass
class JupyterLabServer:
    """JupyterLab on 127.0.0.1:<free port>, serving ``root_dir``; state lives in ``work_dir``."""

    root_dir: Path
    work_dir: Path
    port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "jupyterlab.log"

    def lab_url(self, rel_path: str, workspace: str | None = None) -> str:
        """URL opening ``rel_path`` in a fresh workspace (so nothing a previous page left open
        is restored, e.g. another notebook with its own kernel)."""
        workspace = workspace or f"test-{uuid.uuid4().hex[:8]}"
        return f"{self.base_url}/lab/workspaces/{workspace}/tree/{rel_path}?token={self.token}"

    def log_tail(self, n: int = 60) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"(no JupyterLab log: {exc})"
        return "\n".join(lines[-n:])

    # -- lifecycle ---------------------------------------------------------------------------------

    def _write_config(self) -> dict[str, str]:
        config_dir = self.work_dir / "config"
        user_settings = self.work_dir / "user-settings"
        app_settings = self.work_dir / "app-settings"
        for d in (config_dir, user_settings, app_settings, self.work_dir / "workspaces",
                  self.work_dir / "runtime", self.work_dir / "ipython", self.work_dir / "data"):
            d.mkdir(parents=True, exist_ok=True)
        (config_dir / "jupyter_server_config.py").write_text(SERVER_CONFIG)
        # Same settings twice: as app-level overrides (defaults) and as the user's own settings,
        # so that nothing in the real ~/.jupyter can switch the news prompt back on.
        (app_settings / "overrides.json").write_text(json.dumps(LAB_SETTINGS, indent=2))
        for plugin_id, values in LAB_SETTINGS.items():
            pkg, plugin = plugin_id.split(":")
            target = user_settings / pkg / f"{plugin}.jupyterlab-settings"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(values, indent=2))
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(config_dir),
            JUPYTER_RUNTIME_DIR=str(self.work_dir / "runtime"),
            IPYTHONDIR=str(self.work_dir / "ipython"),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONUNBUFFERED="1",
            # the kernelspec runs "python": make that the interpreter running the tests
            PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            MPLBACKEND="module://matplotlib_inline.backend_inline",
        )
        for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            env.pop(var, None)
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return env

    def start(self) -> "JupyterLabServer":
        env = self._write_config()
        cmd = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            "--ServerApp.open_browser=False",
            f"--LabApp.user_settings_dir={self.work_dir / 'user-settings'}",
            f"--LabApp.app_settings_dir={self.work_dir / 'app-settings'}",
            f"--LabApp.workspaces_dir={self.work_dir / 'workspaces'}",
            # notebook-signing secret + trust db in work_dir, not ~/.local/share/jupyter
            f"--NotebookNotary.data_dir={self.work_dir / 'data'}",
            # window.jupyterapp lets the test run JupyterLab commands exactly as the menus do
            "--LabApp.expose_app_in_browser=True",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # CI containers run as root
        log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                cmd, cwd=self.root_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        finally:
            log.close()
        self._wait_until_up()
        return self

    def _wait_until_up(self) -> None:
        assert self.proc is not None
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        url = f"{self.base_url}/api/status?token={self.token}"
        last_err: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab exited with {self.proc.returncode} while starting.\n"
                    f"--- JupyterLab log ---\n{self.log_tail()}")
            try:
                with opener.open(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last_err = exc
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(
            f"JupyterLab did not answer on {self.base_url} within {SERVER_START_TIMEOUT:.0f}s "
            f"({last_err!r}).\n--- JupyterLab log ---\n{self.log_tail()}")

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate the server (and its kernels) by pid; SIGKILL whatever outlives ``timeout``."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        # kernels are started in their own sessions, so remember them before the server goes away
        kids = descendants(proc.pid)
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: jupyter_server shuts its kernels down and exits
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(_pid_alive(p) for p in kids) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in kids:
            if _pid_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def __enter__(self) -> "JupyterLabServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def copy_notebooks(dest_root: Path) -> Path:
    """Copy the repo's notebooks/ to ``dest_root/notebooks`` (the browser must never write the
    real notebooks: they are edited concurrently and saved outputs would dirty the repo), each lab cut
    after the cell that shows its stepper (see :func:`through_first_stepper`)."""
    dest = dest_root / "notebooks"
    shutil.copytree(REPO_ROOT / "notebooks", dest,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    for path in sorted(dest.glob("*.ipynb")):
        through_first_stepper(path)
    return dest


def through_first_stepper(path: Path) -> bool:
    """Cut the notebook at ``path`` after its first code cell that makes a ``TimelineStepper`` (the cell
    whose output the browser tests click); returns whether it had one (a notebook without is left whole).

    Every lab runs once in full in a kernel for the whole suite (``executed_labs`` in tests/conftest.py,
    judged cell by cell by tests/test_notebooks.py); what the browser adds is the stepper as a student
    sees it when that cell has run, so running the cells after it again in JupyterLab would only repeat
    the labs' longest work."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "TimelineStepper(" in cell.source:
            nb.cells = nb.cells[: i + 1]
            nbformat.write(nb, path)
            return True
    return False


# --------------------------------------------------------------------------------------------------
# A minimal stand-in for the stepper (proves the harness, independent of milvus_edu.viz)
# --------------------------------------------------------------------------------------------------

MINIMAL_STEPPER_SOURCE = f'''\
import ipywidgets as w

state = {{"t": 0}}
panel = w.HTML(value="<b>step 0</b>: nothing happened yet")
panel.add_class("{STATE_CLASS}")
step = w.Button(description="{STEP_TEXT}", tooltip="{STEP_TOOLTIP}")

def on_step(_):
    state["t"] += 1
    panel.value = f"<b>step {{state['t']}}</b>: ts advanced to {{100 + state['t']}}"

step.on_click(on_step)
stepper = w.VBox([w.HBox([step]), panel])
stepper.add_class("{STEPPER_CLASS}")
stepper
'''


def write_minimal_stepper_notebook(path: Path) -> Path:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(
        cells=[
            new_markdown_cell("# Browser harness check: a minimal stepper"),
            new_code_cell("x = 1 + 1\nx"),
            new_code_cell(MINIMAL_STEPPER_SOURCE),
        ],
        metadata={
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                           "name": "python3"},
            "language_info": {"name": "python"},
        },
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


# --------------------------------------------------------------------------------------------------
# Browser driving
# --------------------------------------------------------------------------------------------------


class BrowserCheckFailed(AssertionError):
    pass


@dataclass
class StepResult:
    before: str
    after: str
    screenshot: Path
    seconds: float
    #: Clicks on "Step ▶" while the kernel ran another cell: the panel's text after each, whether that
    #: cell was still running then ("busy"), and how long the panel took to change (ms, in the page).
    busy_panels: list[str] = field(default_factory=list)
    busy_status: list[str] = field(default_factory=list)
    busy_ms: list[float] = field(default_factory=list)
    #: The slider's value and the event number the panel shows after the clicks.
    slider_value: int | None = None
    panel_number: int | None = None
    #: Boxes in the viewport (x, y, width, height) of the panel and the lanes' picture, and the viewport.
    panel_box: dict | None = None
    plot_box: dict | None = None
    controls_box: dict | None = None
    viewport: dict | None = None
    screen: Path | None = None
    #: The panel's lines hidden below its box (px; it scrolls inside), and whether its foot shows the shadow that says so.
    panel_hidden_px: float | None = None
    panel_marked_more: bool | None = None
    #: Rapid clicks (:func:`_rapid_clicks`): one :class:`RapidRun` per sequence of clicks.
    rapid: list["RapidRun"] = field(default_factory=list)
    #: The stepper's height (px) after each busy click and each rapid run: events whose panels are short and long.
    heights: list[float] = field(default_factory=list)


@dataclass
class RapidRun:
    """One sequence of rapid clicks on the stepper and where the panel ended."""

    name: str
    #: Whether another cell still ran when the last click was made.
    busy: bool
    #: The slider's event (1-based) after the clicks, and the one the sequence was meant to end on
    #: (``None`` when the browser decides, e.g. after a Jump).
    slider: int
    expected: int | None
    #: The panel's head after it settled ("event N of M ..."), whether it still waited for details,
    #: whether the picture was faded for want of its page, and whether its text is the kernel's panel
    #: for that event.
    head: str
    waiting: bool
    stale_picture: bool
    kernel_cursor: int | None
    same_as_kernel: bool
    #: From the last click until the panel showed the details, and until the picture showed the event's
    #: page too (ms, in the page; -1: never); figures, not checks.
    settle_ms: float
    picture_ms: float
    #: Play only: frames shown with details and with the placeholder.
    frames_details: int = 0
    frames_waiting: int = 0


def launch_chromium(playwright, user_data_dir: Path):
    """A persistent context with a fresh, empty profile (launch() refuses --user-data-dir)."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir),
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
        viewport=VIEWPORT,
        timeout=60_000,
    )


def _kernel_status(page) -> str | None:
    return page.evaluate(
        """() => {
            const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
            const el = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
            return el ? el.getAttribute('data-status') : null;
        }"""
    )


def _prompts(page) -> list[str]:
    return page.evaluate(
        """() => {
            const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
            if (!panel) return [];
            return Array.from(panel.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt'))
                        .map(e => e.textContent.trim());
        }"""
    )


def _error_outputs(page) -> list[str]:
    return page.evaluate(
        """() => Array.from(document.querySelectorAll(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
              .map(e => e.textContent.slice(-2000))"""
    )


def _wait_for(predicate, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise BrowserCheckFailed(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def _wait_kernel_idle(page, timeout: float) -> None:
    _wait_for(lambda: _kernel_status(page) == "idle", timeout, "the kernel to be idle")


_KERNEL_READY_JS = """() => {
    const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const sc = w && w.sessionContext;
    const k = sc && sc.session && sc.session.kernel;
    return !!(sc && sc.isReady && k && k.status === 'idle' && k.connectionStatus === 'connected'
              && window.jupyterapp.commands.isEnabled('notebook:run-all-cells'));
}"""


def _run_all_cells(page) -> None:
    """Run All Cells: the command behind the Run menu's item, run through JupyterLab's registry,
    once the notebook's session is ready and its kernel connected (earlier, the command is a no-op)."""
    page.wait_for_function(_KERNEL_READY_JS, timeout=KERNEL_IDLE_TIMEOUT * 1000)
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


def _wait_run_all_done(page, timeout: float) -> list[str]:
    """Until every code cell has an execution count and the kernel is idle, twice in a row (so a
    queued cell that has not started yet cannot fool us).  Fails early when nothing is running
    any more but some cell never ran: Run All stopped at an error."""
    state = {"ok": 0, "stuck_since": None}

    def done():
        prompts = _prompts(page)
        idle = _kernel_status(page) == "idle"
        all_ran = bool(prompts) and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts)
        state["ok"] = state["ok"] + 1 if (all_ran and idle) else 0
        stuck = idle and not all_ran and not any("*" in p for p in prompts)
        if not stuck:
            state["stuck_since"] = None
        elif state["stuck_since"] is None:
            state["stuck_since"] = time.monotonic()
        elif time.monotonic() - state["stuck_since"] > 3:
            raise BrowserCheckFailed(
                f"Run All Cells stopped before the end; prompts={prompts}\n--- error output ---\n"
                + "\n---\n".join(_error_outputs(page)))
        return prompts if state["ok"] >= 2 else None

    return _wait_for(done, timeout, "Run All Cells to finish", interval=0.5)


def _state_text(stepper) -> str:
    return stepper.locator(f".{STATE_CLASS}").first.inner_text().strip()


_CLICK_AND_TIME_JS = """([root, before]) => new Promise((resolve) => {
    const panel = root.querySelector('.%s');
    const button = root.querySelector('button[title="%s"]');
    const t0 = performance.now();
    const done = () => resolve([panel.innerText.trim(), performance.now() - t0]);
    const obs = new MutationObserver(() => { if (panel.innerText.trim() !== before) { obs.disconnect(); done(); } });
    obs.observe(panel, {childList: true, subtree: true, characterData: true});
    button.click();
    setTimeout(() => { obs.disconnect(); done(); }, 3000);
})""" % (STATE_CLASS, STEP_TOOLTIP)

# Another cell's work: the kernel sleeps; window.__mesBusy says whether that execution is still running.
_BUSY_JS = """(seconds) => {
    const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    window.__mesBusy = true;
    const future = k.requestExecute({code: `import time\ntime.sleep(${seconds})`, store_history: false});
    future.done.then(() => { window.__mesBusy = false; }, () => { window.__mesBusy = false; });
}"""
#: End the busy cell's sleep (a KeyboardInterrupt in a request outside the notebook's cells: nothing is shown).
_INTERRUPT_JS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.interrupt()"


def _click_while_busy(page, stepper, result: StepResult) -> None:
    """Keep the kernel busy with another cell's work, click "Step ▶" three times and check that the
    panel moved after every click while the kernel was still busy."""
    page.evaluate(_BUSY_JS, BUSY_SECONDS)
    _wait_for(lambda: _kernel_status(page) == "busy", 10, "the kernel to be busy")
    root = stepper.element_handle()
    for _ in range(3):
        before = _state_text(stepper)
        text, ms = page.evaluate(_CLICK_AND_TIME_JS, [root, before])
        result.busy_panels.append(text)
        result.busy_ms.append(float(ms))
        result.busy_status.append("busy" if page.evaluate("() => window.__mesBusy") else "done")
        result.heights.append(_box(stepper)["height"])
    result.slider_value = int(page.evaluate("(r) => r.querySelector('input[type=range]').value", root))
    m = re.match(r"event ([\d,]+) of", result.busy_panels[-1])
    result.panel_number = int(m.group(1).replace(",", "")) if m else None
    page.evaluate(_INTERRUPT_JS)  # the clicks are done: a sleeping kernel only holds the test up
    _wait_kernel_idle(page, 30)


# Clicks at a given rhythm, in the page (Playwright's own clicks are too slow to be "rapid"). Each action
# is [what, wait_ms] or ["slider", event, wait_ms]; resolves with the slider's event after the last one.
_RAPID_JS = """([root, plan]) => new Promise((resolve) => {
    const q = (sel) => root.querySelector(sel);
    const slider = q('input[type=range]');
    const buttons = {jump: q('button.milvus-edu-jump'), back: q('button[title="step back"]'),
                     fwd: q('button[title="step forward"]'), play: q('button.milvus-edu-play')};
    let k = 0;
    const next = () => {
        if (k >= plan.length) { window.__mesLastClick = performance.now(); resolve(Number(slider.value)); return; }
        const a = plan[k++];
        if (a[0] === 'slider') { slider.value = String(a[1]); slider.dispatchEvent(new Event('input')); setTimeout(next, a[2]); }
        else if (a[0] === 'kind-here') { // jump to events of the kind shown: one of the run's common kinds
            const sel = q('select.mes-kind'); sel.value = q('.%s code').textContent; sel.dispatchEvent(new Event('change'));
            setTimeout(next, a[1]); }
        else if (a[0] === 'pause') { if (buttons.play.title.startsWith('pause')) buttons.play.click(); setTimeout(next, a[1]); }
        else if (a[0] === 'speed') { const s = q('select.mes-speed'); s.value = a[1]; s.dispatchEvent(new Event('change')); setTimeout(next, a[2]); }
        else { buttons[a[0]].click(); setTimeout(next, a[1]); }
    };
    next();
})""" % STATE_CLASS

# Until the panel shows the details of the slider's event (not the placeholder) and the picture is not
# faded for want of its page: [ms since the last click until the panel, until both], -1 after ``timeout_ms``.
_SETTLE_JS = """([root, timeoutMs]) => new Promise((resolve) => {
    const panel = root.querySelector('.%s');
    const slider = root.querySelector('input[type=range]');
    const img = root.querySelector('.mes-bg');
    const t0 = window.__mesLastClick;
    let panelMs = -1;
    const check = () => {
        const m = panel.innerText.match(/^event ([\\d,]+) of/);
        const at = m ? Number(m[1].replace(/,/g, '')) : null;
        const now = performance.now() - t0;
        if (!panel.classList.contains('mes-waiting') && at === Number(slider.value)) {
            if (panelMs < 0) panelMs = now;
            if (!img.classList.contains('mes-stale')) { resolve([panelMs, now]); return; }
        }
        if (now > timeoutMs) { resolve([panelMs, -1]); return; }
        setTimeout(check, 5);
    };
    check();
})""" % STATE_CLASS

# Counts Play's frames: the panel with details, and with the placeholder.
_COUNT_FRAMES_JS = """(root) => {
    const panel = root.querySelector('.%s');
    window.__mesFrames = {details: 0, waiting: 0};
    window.__mesFrameObs && window.__mesFrameObs.disconnect();
    const obs = window.__mesFrameObs = new MutationObserver(() => {
        window.__mesFrames[panel.classList.contains('mes-waiting') ? 'waiting' : 'details'] += 1;
    });
    obs.observe(panel, {childList: true});
}""" % STATE_CLASS

# The kernel's side: the stepper's cursor and its panel's text (the HTML put in a detached element).
_KERNEL_PANEL_JS = """async () => {
    const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    const reply = await k.requestExecute({code: '', silent: true, store_history: false,
        user_expressions: {c: 'stepper.cursor', h: 'stepper.panel_html'}}).done;
    const ue = reply.content.user_expressions;
    return [ue.c.data['text/plain'], ue.h.data['text/plain']];
}"""


def _kernel_panel(page) -> tuple[int, str]:
    """The stepper's cursor in the kernel and its panel HTML there."""
    import ast

    cursor, html = page.evaluate(_KERNEL_PANEL_JS)
    return int(cursor), ast.literal_eval(html)


def _settle(page, stepper, root, name: str, expected: int | None, plan_busy: bool, timeout_s: float = 20.0):
    """Wait until the panel shows the slider's event with its details, then record where it ended."""
    ms, picture_ms = page.evaluate(_SETTLE_JS, [root, timeout_s * 1000])
    slider = int(page.evaluate("(r) => r.querySelector('input[type=range]').value", root))
    head = _state_text(stepper).split("\n", 1)[0]
    waiting = bool(page.evaluate("(r) => r.querySelector('.%s').classList.contains('mes-waiting')" % STATE_CLASS, root))
    stale = bool(page.evaluate("(r) => r.querySelector('.mes-bg').classList.contains('mes-stale')", root))
    # The kernel hears the cursor once its queue of updates drains: poll for it a little.
    deadline = time.monotonic() + 10
    cursor, html = _kernel_panel(page)
    while cursor != slider - 1 and time.monotonic() < deadline:
        time.sleep(0.2)
        cursor, html = _kernel_panel(page)
    same = bool(page.evaluate("""([r, html]) => { const d = document.createElement('div'); d.innerHTML = html;
        return d.textContent === r.querySelector('.%s').textContent; }""" % STATE_CLASS, [root, html]))
    return RapidRun(name=name, busy=plan_busy, slider=slider, expected=expected, head=head, waiting=waiting,
                    stale_picture=stale, kernel_cursor=cursor, same_as_kernel=same, settle_ms=float(ms),
                    picture_ms=float(picture_ms))


def _rapid_clicks(page, stepper, result: StepResult, screen: Path) -> None:
    """Click as a hurried student does, while another cell runs and while the kernel is idle, and record
    where the panel ends each time (:class:`RapidRun`):

    * busy: Jump ▶ every 30 ms ten times, three ◀ Step then Jump, the slider to three far events, the last
      at the end of the run, and three more Jumps, all while another cell sleeps;
    * jumps: the slider far back, Jump's kind set to that event's, then Jump ▶ every 30 ms ten times,
      three ◀ Step then Jump (kernel idle);
    * scrub: the slider dragged across the run, a move every 16 ms, to a known event;
    * play: Play from the first event for two seconds, at the fastest speed that stays within 40% of the run
      (Play must not reach the end: a click on Play there starts it again from the first event), then Pause.
    """
    root = stepper.element_handle()
    n = int(page.evaluate("(r) => Number(r.querySelector('input[type=range]').max)", root))
    far = lambda f: max(1, min(n, int(round(f * n))))  # noqa: E731
    jumps = [["jump", 30]] * 10 + [["back", 30]] * 3 + [["jump", 30]]

    page.evaluate(_BUSY_JS, 4)
    _wait_for(lambda: _kernel_status(page) == "busy", 10, "the kernel to be busy")
    page.evaluate(_RAPID_JS, [root, jumps + [["slider", far(0.8), 30], ["slider", far(0.3), 30],
                                             ["slider", far(0.97), 30]] + [["jump", 30]] * 3])
    busy = bool(page.evaluate("() => window.__mesBusy"))
    result.rapid.append(_settle(page, stepper, root, "busy", None, busy))
    result.heights.append(_box(stepper)["height"])
    page.wait_for_timeout(300)
    stepper.screenshot(path=str(screen))

    page.evaluate(_RAPID_JS, [root, [["slider", far(0.1), 30], ["kind-here", 30]] + jumps])
    result.rapid.append(_settle(page, stepper, root, "jumps", None, False))
    result.heights.append(_box(stepper)["height"])

    rnd = __import__("random").Random(n)
    target = far(0.9)
    moves = [["slider", rnd.randrange(1, n + 1), 16] for _ in range(24)] + [["slider", target, 0]]
    page.evaluate(_RAPID_JS, [root, moves])
    result.rapid.append(_settle(page, stepper, root, "scrub", target, False))
    result.heights.append(_box(stepper)["height"])

    page.evaluate(_RAPID_JS, [root, [["slider", 1, 30]]])
    page.evaluate(_SETTLE_JS, [root, 20_000])
    page.evaluate(_COUNT_FRAMES_JS, root)
    # Two seconds of Play, at the fastest speed that stays within 40% of the run: a short run (lab 1's 1,254 events)
    # played at 2000 events/s for its 250 ms gave a loaded machine's kernel no time to send one event's details.
    speed = max([s for s in SPEEDS.values() if 2 * s <= 0.4 * n] or [min(SPEEDS.values())])
    play_ms = min(2000, int(0.4 * n / speed * 1000))
    page.evaluate(_RAPID_JS, [root, [["speed", f"{speed} events/s", 30], ["play", play_ms], ["pause", 0]]])
    frames = page.evaluate("() => window.__mesFrames")
    run = _settle(page, stepper, root, "play", None, False)
    run.frames_details, run.frames_waiting = int(frames["details"]), int(frames["waiting"])
    result.rapid.append(run)
    result.heights.append(_box(stepper)["height"])
    _wait_kernel_idle(page, 30)


def _box(locator) -> dict:
    box = locator.bounding_box()
    if box is None:
        raise BrowserCheckFailed(f"{locator} has no box: it is not displayed")
    return box


def _check_layout(page, stepper, result: StepResult, screen: Path) -> None:
    """With the file browser open, scroll the stepper to the top of the notebook and take a screenshot
    of the whole 1280 x 800 screen; record where the panel, the picture and the controls are."""
    page.evaluate("() => window.jupyterapp.shell.activateById('filebrowser')")
    page.wait_for_timeout(400)
    if not page.locator(".jp-FileBrowser").first.is_visible():
        raise BrowserCheckFailed("JupyterLab's file browser is not open: the layout check needs the default layout")
    stepper.evaluate("(e) => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(400)
    result.panel_box = _box(stepper.locator(f".{STATE_CLASS}").first)
    result.plot_box = _box(stepper.locator(".mes-plot").first)
    result.controls_box = _box(stepper.locator(".mes-controls").first)
    result.viewport = dict(page.viewport_size)
    result.panel_hidden_px, result.panel_marked_more = stepper.locator(f".{STATE_CLASS}").first.evaluate(
        "(p) => [p.scrollHeight - p.clientHeight - p.scrollTop, p.classList.contains('mes-more')]")
    page.screenshot(path=str(screen))
    result.screen = screen


def run_notebook_and_step(server: JupyterLabServer, rel_path: str, screenshot: Path,
                          user_data_dir: Path, stepper_checks: bool = True) -> StepResult:
    """Open ``rel_path`` (relative to the server's root_dir) in JupyterLab, Run All Cells, click
    the stepper's "step forward" button and return the state panel text before/after. With
    ``stepper_checks`` (the real stepper, not the harness stand-in) also click while the kernel is
    busy (:func:`_click_while_busy`) and check the layout at 1280 x 800 (:func:`_check_layout`).

    Raises BrowserCheckFailed (an AssertionError) with the JupyterLab log tail and the browser
    console on any failure; a screenshot of the whole page is saved next to ``screenshot`` then.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    t0 = time.monotonic()
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    console: list[str] = []
    user_data_dir = Path(user_data_dir).resolve()
    user_data_dir.mkdir(parents=True, exist_ok=True)
    watchdog_fired = threading.Event()

    def watchdog() -> None:
        watchdog_fired.set()
        console.append(f"[watchdog] {BROWSER_HARD_TIMEOUT:.0f}s passed: killed chromium pids "
                       f"{_kill_own_descendants_matching(str(user_data_dir))}")

    timer = threading.Timer(BROWSER_HARD_TIMEOUT, watchdog)
    timer.daemon = True
    timer.start()
    with sync_playwright() as pw:
        context = launch_chromium(pw, user_data_dir)
        try:
            # loopback only: anything else the page tries to fetch is refused
            context.route(re.compile(r"^(?!https?://127\.0\.0\.1[:/]|data:|blob:|about:).*"),
                          lambda route: route.abort())
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(30_000)
            page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
            page.on("pageerror", lambda e: console.append(f"[pageerror] {e}"))
            try:
                page.goto(server.lab_url(rel_path), wait_until="domcontentloaded", timeout=60_000)
                page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
                _wait_kernel_idle(page, KERNEL_IDLE_TIMEOUT)
                _run_all_cells(page)
                # Run All puts [*] on the cells at once; give it a moment before polling for "done"
                time.sleep(0.5)
                _wait_run_all_done(page, RUN_ALL_TIMEOUT)

                stepper = page.locator(f".jp-OutputArea-output .{STEPPER_CLASS}").first
                try:
                    stepper.wait_for(state="visible", timeout=WIDGET_TIMEOUT * 1000)
                except PlaywrightError:
                    texts = page.locator(".jp-OutputArea-output").all_inner_texts()
                    raise BrowserCheckFailed(
                        f"no rendered .{STEPPER_CLASS} widget in the outputs (a text repr such as "
                        f"'VBox(...)' means the widget manager did not render it). Outputs:\n"
                        + "\n---\n".join(t[:500] for t in texts)) from None
                stepper.scroll_into_view_if_needed()
                button = stepper.locator(f'button[title="{STEP_TOOLTIP}"]').first
                button.wait_for(state="visible")
                label = button.inner_text().strip()
                if label != STEP_TEXT:
                    raise BrowserCheckFailed(f"step-forward button says {label!r}, expected {STEP_TEXT!r}")
                stepper.locator(f".{STATE_CLASS}").first.wait_for(state="visible")
                before = _state_text(stepper)
                button.click()
                after = _wait_for(lambda: (lambda t: t if t != before else None)(_state_text(stepper)),
                                  WIDGET_TIMEOUT, "the state panel to change after 'step forward'")
                page.wait_for_timeout(300)  # let the repaint settle before the picture
                news = [t for t in page.locator(".Toastify__toast").all_inner_texts()
                        if "news" in t.lower() or "update" in t.lower()]
                if news:
                    raise BrowserCheckFailed(f"news/update toast is showing despite the settings: {news}")
                stepper.screenshot(path=str(screenshot))
                result = StepResult(before, after, screenshot, time.monotonic() - t0)
                if stepper_checks:  # the real stepper (not the harness stand-in): busy kernel and layout
                    _click_while_busy(page, stepper, result)
                    _rapid_clicks(page, stepper, result, screenshot.with_name(screenshot.stem + "-rapid.png"))
                    _check_layout(page, stepper, result, screenshot.with_name(screenshot.stem + "-1280x800.png"))
                return result
            except (BrowserCheckFailed, PlaywrightError) as exc:
                failure_png = screenshot.with_name(screenshot.stem + "-failure.png")
                try:
                    page.screenshot(path=str(failure_png), full_page=True)
                    shot = f"failure screenshot: {failure_png}"
                except PlaywrightError as shot_exc:
                    shot = f"(no failure screenshot: {shot_exc})"
                why = (f"watchdog: the run exceeded {BROWSER_HARD_TIMEOUT:.0f}s and its chromium was "
                       f"killed\n" if watchdog_fired.is_set() else "")
                raise BrowserCheckFailed(
                    f"{why}{exc}\n\n{shot}\nafter {time.monotonic() - t0:.1f}s, url {page.url}\n"
                    f"--- browser console (last 30) ---\n" + "\n".join(console[-30:])
                    + f"\n--- JupyterLab log tail ---\n{server.log_tail()}") from exc
        finally:
            timer.cancel()
            try:
                context.close()
            except PlaywrightError:
                pass
            # whatever chromium process of this run is left (e.g. after the watchdog) goes now
            _kill_own_descendants_matching(str(user_data_dir))
