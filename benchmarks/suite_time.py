"""The test suite's time on a fresh clone: the figure of the "whole suite in at most 10 minutes" target.

Clones this checkout's commit (``--rev``, default ``HEAD``; uncommitted changes are not in a clone) into a
temporary folder and runs ``.ci/run`` there, which runs the README's test command verbatim (``bash
tests/run.sh``: the pip install, then pytest on one worker per CPU and one more). Prints:

* the wall time of the whole command and pytest's own, and the tests passed;
* the CPU seconds the machine spent meanwhile (``/proc/stat``: user, nice, system, irq and softirq time of every
  process, ours and the host's), and how many of its CPUs that is on average: on this 2-core machine the suite
  is CPU-bound, so the CPU seconds move with the code and the wall time with the CPU seconds; and the steal
  time, what the hypervisor gave other machines while ours waited;
* the CPU seconds of the kernel's memory monitor (``kdamond``), which this host runs and which on some days takes
  a quarter of a core while the suite runs: part of the machine's time that no change here can save;
* bare SimPy's timeout rate (``bench_sim.bare_simpy_rate``) just before and just after: the same tree's time
  moves by more than a minute between hours on a shared machine, and this rate says how fast the machine was;
* with ``--by-process``, the CPU seconds of each kind of process (pytest's workers and what they fork, JVMs,
  notebook kernels, Chromium, JupyterLab, jupyter-book, the Milvus server...), from a poll of ``/proc`` every
  second. The poll misses processes that live less than a second and the last second of each, so the kinds
  add up to a little less than the machine's total; it costs about 1% of the machine, so leave it off for the
  time itself. Each process, its kind, command line and CPU seconds are written to ``processes.json`` beside
  the log.

The test command installs into the Python environment it runs in (``pip install -e ".[test]"``; from an older
``--rev``, that may change the versions of dependencies, which stay changed) and points the editable install at
the clone. When the run ends, however it ends (Ctrl-C or a SIGTERM stop the suite first), this script points the
editable install back at the checkout it was installed from, or at this one when milvus_edu was not an editable
install of a checkout; if that fails it says which command to run and keeps the clone. One run at a time: a
second refuses to start while one runs. The clone is removed unless ``--keep``; the run's log is kept and its
path printed. Prints figures only; exit status 0 when the suite passed, 1 when it failed (with the log's last
lines) or the install could not be pointed back, 2 for a mistake in the arguments or a run already under way,
130 when interrupted. Linux only (``/proc``). Run from anywhere, with the Python whose environment the suite
should use: ``python benchmarks/suite_time.py [--rev HEAD] [--by-process] [--keep]``.
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PF_KTHREAD = 0x00200000  # a kernel thread, in /proc/<pid>/stat's flags
CLONE_PREFIX = "milvus-edu-suite-"

#: Kinds of processes for --by-process: the first pattern found in a process's command line names its kind.
KINDS = (
    ("JVM (Spark, its class archive)", re.compile(r"(^|/)java ")),
    ("Chromium", re.compile(r"^\S*(chrom(e|ium)|headless_shell)\S*( |$)")),
    ("notebook kernels", re.compile(r"ipykernel")),
    ("JupyterLab", re.compile(r"jupyter[-_ ]?lab|jupyter_server")),
    ("jupyter-book", re.compile(r"jupyter[-_]book")),
    ("Spark's Python workers", re.compile(r"pyspark\.(daemon|worker)")),
    ("Milvus server", re.compile(r"(^|/)milvus run |/bin/milvus( |$)")),
    ("Playwright's driver", re.compile(r"playwright|(^|/)node ")),
    ("pytest workers and their forks", re.compile(r"exec\(eval\(sys\.stdin\.readline\(\)\)\)|xdist")),
    ("pip", re.compile(r"-m pip ")),
    ("the class archive's maker (its Python side)", re.compile(r"milvus_edu\.analysis\.class_archive")),
    ("the CLI in its own process", re.compile(r"-m milvus_edu\b|(^|/)milvus-edu( |$)")),
    ("pytest's main process", re.compile(r"-m pytest\b|(^|/)py\.?test( |$)")),
)


class Stat(NamedTuple):
    """What ``/proc/<pid>/stat`` says of a process (``man 5 proc``)."""

    name: str  # the command's name, as the kernel keeps it (``comm``)
    state: str  # R, S, D, Z (a zombie: ended, not reaped yet)...
    kernel_thread: bool
    cpu_s: float  # user and system time so far
    start: int  # clock ticks after boot


def parse_stat(text: str) -> Stat:
    """A ``/proc/<pid>/stat`` line: the name stands in parentheses and may hold spaces or ``)``, so the fields are
    counted after its last ``)`` (field 3, the state, is ``rest[0]``)."""
    close = text.rindex(")")
    rest = text[close + 2:].split()
    return Stat(name=text[text.index("(") + 1: close], state=rest[0], kernel_thread=bool(int(rest[6]) & PF_KTHREAD),
                cpu_s=(int(rest[11]) + int(rest[12])) / TICK, start=int(rest[19]))


def read_stat(pid: str) -> Stat:
    return parse_stat(Path(f"/proc/{pid}/stat").read_text())


def machine_cpu_s() -> tuple[float, float]:
    """CPU seconds every CPU of the machine spent running something since boot (user, nice, system, irq, softirq),
    and the steal time (waiting while the hypervisor ran other machines)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq) / TICK, steal / TICK


def kernel_thread_cpu_s(prefix: str) -> float:
    """CPU seconds of the kernel threads whose name starts with ``prefix`` (``kdamond``: DAMON's monitor)."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = read_stat(pid)
            except (OSError, ValueError, IndexError):
                continue  # it ended meanwhile
            if stat.kernel_thread and stat.name.startswith(prefix):
                total += stat.cpu_s
    return total


class ProcessPoll:
    """Every second, each process's CPU seconds in the run (by pid and start time) and its command line."""

    def __init__(self, period_s: float = 1.0):
        self.period_s = period_s
        self.seen: dict[tuple[int, int], list] = {}  # (pid, start) -> [command line, CPU s in the run, base, name]
        with open("/proc/uptime") as f:  # processes that start later (or in the same clock tick) count from their start
            self._started = int(float(f.read().split()[0]) * TICK)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._me = os.getpid()

    def start(self) -> None:
        """Poll every ``period_s`` in a thread of its own until :meth:`stop`."""
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.poll()

    def poll(self) -> None:
        """Read every process's CPU time once. A process first seen is counted from its start when it started
        after the poll was made, else from now; one that ``exec``s another program (a shell script that becomes
        a JVM) changes its name, and its command line is read again."""
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == self._me:
                continue
            try:
                stat = read_stat(pid)
                key = (int(pid), stat.start)
                entry = self.seen.get(key)
                if entry is None or (entry[3] != stat.name and stat.state != "Z"):
                    cmd = self._command(pid, stat)
                    if entry is None:
                        base = stat.cpu_s if stat.start < self._started else 0.0  # older than the run: from now on
                        entry = self.seen[key] = [cmd, 0.0, base, stat.name]
                    else:
                        entry[0], entry[3] = cmd, stat.name
                entry[1] = stat.cpu_s - entry[2]
            except (OSError, ValueError, IndexError):
                continue  # it ended meanwhile

    @staticmethod
    def _command(pid: str, stat: Stat) -> str:
        if stat.kernel_thread:
            return f"[{stat.name}]"
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        return cmd or f"{stat.name} (ended before it was first seen)"  # a zombie has no command line

    def save(self, path: Path) -> None:
        """Every process seen, its kind, its command line and its CPU seconds in the run, most first (JSON)."""
        rows = sorted(({"kind": kind_of(cmd), "cpu_s": round(cpu, 2), "pid": pid, "cmd": cmd}
                       for (pid, _start), (cmd, cpu, _base, _name) in self.seen.items() if cpu > 0),
                      key=lambda row: -row["cpu_s"])
        path.write_text(json.dumps(rows, indent=1))

    def by_kind(self) -> collections.Counter:
        """CPU seconds in the run per kind of process (:func:`kind_of`)."""
        kinds: collections.Counter = collections.Counter()
        for cmd, cpu, _base, _name in self.seen.values():
            kinds[kind_of(cmd)] += cpu
        return kinds


def kind_of(cmd: str) -> str:
    """The kind of process a command line is (:data:`KINDS`; a kernel thread's is its name in brackets)."""
    kind = next((name for name, pattern in KINDS if pattern.search(cmd)), None)
    if kind is None:
        kind = "kernel threads" if cmd.startswith("[") and cmd.endswith("]") else "other"
    return kind


def editable_origin() -> Path | None:
    """The checkout a fresh ``python`` imports milvus_edu from, when it is one (a folder with a pyproject.toml)
    and not a clone this script made."""
    out = subprocess.run([sys.executable, "-c", "import milvus_edu, sys; sys.stdout.write(milvus_edu.__file__)"],
                         cwd=tempfile.gettempdir(), capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout:
        return None
    root = Path(out.stdout).resolve().parents[1]
    if any(part.startswith(CLONE_PREFIX) for part in root.parts):  # a run that was killed left it there
        return None
    return root if (root / "pyproject.toml").is_file() else None


def point_back(home: Path) -> bool:
    """Point the editable install at ``home``: without pip's build isolation first (as tests/run.sh does where it
    can), then with it; whether it worked."""
    for isolation in (["--no-build-isolation"], []):
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *isolation, "-e", str(home)],
                              capture_output=True, text=True)
        if done.returncode == 0:
            return True
    return False


def minutes(seconds: float) -> str:
    """``m:ss.s``."""
    whole, rest = divmod(round(seconds, 1), 60)
    return f"{int(whole)}:{rest:04.1f}"


def tests_done(text: str) -> str:
    """How far pytest is, from its output so far: tests reported of those collected, or what it is still doing."""
    found = re.search(r"(?:workers? \[|collected )(\d+) items?", text)
    if found is None:
        return "installing and collecting"
    done = 0
    for line in text[found.end():].splitlines():
        marks = re.fullmatch(r"(?:\S+\.py )?([.FEsxX]+)(?:\s+\[\s*\d+%\])?", line.strip())  # -n 0 names files
        if marks:
            done += len(marks.group(1))
    return f"{done:,} of {int(found.group(1)):,} tests done"


def pytest_summary(text: str) -> tuple[str, float] | None:
    """pytest's last line (``2670 passed in 586.62s (0:09:46)``): what it says of the tests, and its seconds."""
    found = re.findall(r"^=+ (.*) in ([\d.]+)s(?: \([\d:]+\))? =+$", text, flags=re.M)
    return (found[-1][0], float(found[-1][1])) if found else None


def watch(proc: subprocess.Popen, log: Path, started: float) -> None:
    """Wait for ``proc``, saying every minute how far the tests are (one mark per test in pytest's output)."""
    while True:
        try:
            proc.wait(timeout=60)
            return
        except subprocess.TimeoutExpired:
            where = tests_done(log.read_text(errors="replace"))
            print(f"  {minutes(time.monotonic() - started)} elapsed, {where}", flush=True)


def stop(proc: subprocess.Popen, clone: Path) -> None:
    """Stop the test command and everything it started: its own session (pytest, its workers, their JVMs), then
    what left that session but still names the clone (the class archive's maker and its JVM)."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait_s)
            break
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue
    mark = str(clone).encode()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = []
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and mark in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(int(pid), sig)
                    left.append(int(pid))
            except OSError:
                continue
        deadline = time.monotonic() + 10
        while left and time.monotonic() < deadline:
            left = [pid for pid in left if _alive(pid)]
            time.sleep(0.2)
        if not left:
            return


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, ended but not yet reaped by its parent, does not)."""
    try:
        return read_stat(str(pid)).state != "Z"
    except (OSError, ValueError, IndexError):
        return False


def _interrupted(signum, _frame):
    raise KeyboardInterrupt  # SIGTERM and SIGHUP end the run as Ctrl-C does: the suite stopped, the install back


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default="HEAD", help="the commit to clone and test (default: HEAD)")
    parser.add_argument("--by-process", action="store_true",
                        help="also give the CPU seconds of each kind of process (polls /proc every second)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = parser.parse_args(argv)

    if not Path("/proc/stat").is_file():
        print("suite_time.py: needs Linux's /proc; run it on the development machine", file=sys.stderr)
        return 2
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{args.rev}^{{commit}}"],
                         capture_output=True, text=True)
    if rev.returncode != 0:
        print(f"suite_time.py: {args.rev!r} is not a commit of {ROOT}; give one `git log` shows", file=sys.stderr)
        return 2
    lock = open(Path(tempfile.gettempdir()) / f"{CLONE_PREFIX}lock", "w")  # noqa: SIM115 - held for the whole run
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("suite_time.py: another run of it is under way (both would move the one editable install); wait for it",
              file=sys.stderr)
        return 2
    commit = rev.stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupted)

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_sim import bare_simpy_rate

    home = editable_origin() or ROOT  # where the editable install points when the run ends
    work = Path(tempfile.mkdtemp(prefix=CLONE_PREFIX))
    clone, log = work / "clone", work / "suite.log"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--detach", commit], check=True)
    print(f"commit {commit[:10]} cloned to {clone}" + (" (uncommitted changes of the checkout are not in it)"
                                                       if dirty and args.rev == "HEAD" else ""))
    rate_before = bare_simpy_rate()
    print(f"bare SimPy before: {rate_before / 1e6:.2f} million timeouts/s; running .ci/run (log: {log})", flush=True)

    # the test command's `python` is this one's, whatever PATH says
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    kd0, (cpu0, steal0), t0 = kernel_thread_cpu_s("kdamond"), machine_cpu_s(), time.monotonic()
    poll = ProcessPoll() if args.by_process else None
    proc = None
    interrupted, pointed_back = False, True
    try:
        if poll:
            poll.start()
        with log.open("wb") as out:
            proc = subprocess.Popen(["bash", str(clone / ".ci" / "run")], cwd=clone, stdout=out,
                                    stderr=subprocess.STDOUT, env=env, start_new_session=True)
            watch(proc, log, t0)
    except KeyboardInterrupt:
        interrupted = True
        print("\nstopping the suite...", flush=True)
        if proc is not None:
            stop(proc, clone)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the install is pointed back whatever comes now
        if poll:
            poll.stop()
        wall = time.monotonic() - t0
        cpu, steal = (now - then for now, then in zip(machine_cpu_s(), (cpu0, steal0)))
        kd = kernel_thread_cpu_s("kdamond") - kd0
        if editable_origin() != home:
            pointed_back = point_back(home)
            print(f"the editable install points at {home} again" if pointed_back else
                  f"could not point the editable install back at {home}: run `{sys.executable} -m pip install "
                  f"--no-deps -e {home}`; the clone it points at is kept")
        if not args.keep and pointed_back:
            shutil.rmtree(clone, ignore_errors=True)
    if interrupted:
        print(f"interrupted after {minutes(wall)}; the log so far: {log}", file=sys.stderr)
        return 130
    rate_after = bare_simpy_rate()

    text = log.read_text(errors="replace")
    cpus = os.cpu_count() or 1  # /proc/stat counts every CPU of the machine
    print(f"\n.ci/run on a fresh clone of {commit[:10]}: {minutes(wall)} (exit status {proc.returncode})")
    summary = pytest_summary(text)
    if summary:
        outcome, pytest_s = summary
        print(f"  pytest: {outcome} in {minutes(pytest_s)}; the rest (pip, start-up) {wall - pytest_s:.0f} s")
    print(f"  machine CPU: {cpu:,.0f} s, {cpu / wall:.2f} of its {cpus} CPUs on average; of it the host's memory "
          f"monitor (kdamond) {kd:,.0f} s; steal time {steal:,.0f} s")
    print(f"  bare SimPy: {rate_before / 1e6:.2f} million timeouts/s before, {rate_after / 1e6:.2f} after")
    if poll:
        kinds = poll.by_kind()
        poll.save(work / "processes.json")
        print(f"  by process (a poll each second; {sum(kinds.values()):,.0f} of the {cpu:,.0f} CPU s; each process "
              f"in {work / 'processes.json'}):")
        for kind, seconds in kinds.most_common():
            if seconds >= 0.5:
                print(f"    {seconds:8,.0f}  {kind}")
    if args.keep:
        print(f"  the clone is kept: {clone}")
    if proc.returncode != 0 or not pointed_back:
        if proc.returncode != 0:
            print("\n" + "\n".join(text.splitlines()[-25:]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
