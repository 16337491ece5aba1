"""The test suite's time on a fresh clone: the figure of the "whole suite in at most 10 minutes" target.

Clones this checkout's commit (``--rev``, default ``HEAD``; uncommitted changes are not in a clone) into a
temporary folder and runs ``.ci/run`` there, which runs the README's test command verbatim (``bash
tests/run.sh``: the pip install, then pytest on one worker per CPU and one more). Prints:

* the wall time of the whole command and pytest's own, and the tests passed;
* the CPU seconds the machine spent meanwhile (``/proc/stat``: user and system time of every process, ours and
  the host's), and how many of the CPUs that is on average: on this 2-core machine the suite is CPU-bound, so
  the CPU seconds move with the code and the wall time with the CPU seconds;
* the CPU seconds of the kernel's memory monitor (``kdamond``), which this host runs and which takes a
  quarter of a core while the suite runs: part of the machine's time that no change here can save;
* bare SimPy's timeout rate (``bench_sim.bare_simpy_rate``) just before and just after: the same tree's time
  moves by more than a minute between hours on a shared machine, and this rate says how fast the machine was;
* with ``--by-process``, the CPU seconds of each kind of process (pytest's workers and what they fork, JVMs,
  notebook kernels, Chromium, JupyterLab, jupyter-book, the Milvus server...), from a poll of ``/proc`` every
  second. The poll misses processes that live less than a second, so the kinds add up to a little less
  than the machine's total; it costs about 1% of the machine, so leave it off for the time itself. Each process, its
  kind, command line and CPU seconds are written to ``processes.json`` beside the log.

The command's ``pip install -e`` points the editable install at the clone; when the run ends, this script
points it back at the checkout it was installed from (or at this one, when milvus_edu came from elsewhere). The clone is removed unless
``--keep``; the run's log is kept and its path printed. Prints figures only; exit status 0 when the suite
passed, 1 when it failed (with the log's last lines), 2 for a mistake in the arguments. Linux only (``/proc``).
Run from anywhere: ``python benchmarks/suite_time.py [--rev HEAD] [--by-process] [--keep]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: Kinds of processes for --by-process: the first pattern found in a process's command line names its kind.
KINDS = (
    ("JVM (Spark, its class archive)", re.compile(r"(^|/)java ")),
    ("Chromium", re.compile(r"chrom")),
    ("notebook kernels", re.compile(r"ipykernel")),
    ("JupyterLab", re.compile(r"jupyter[-_ ]?lab|jupyter_server")),
    ("jupyter-book", re.compile(r"jupyter_book")),
    ("Spark's Python workers", re.compile(r"pyspark\.(daemon|worker)")),
    ("Milvus server", re.compile(r"(^|/)milvus run |/bin/milvus( |$)")),
    ("Playwright's driver", re.compile(r"playwright|(^|/)node ")),
    ("pytest workers and their forks", re.compile(r"exec\(eval\(sys\.stdin\.readline\(\)\)\)|xdist")),
    ("pip", re.compile(r"-m pip ")),
    ("the class archive's maker (its Python side)", re.compile(r"milvus_edu\.analysis\.class_archive")),
    ("the CLI in its own process", re.compile(r"-m milvus_edu\b|(^|/)milvus-edu( |$)")),
    ("pytest's main process", re.compile(r"-m pytest\b|(^|/)py\.?test( |$)")),
)


def machine_cpu_s() -> float:
    """CPU seconds every CPU of the machine spent running something since boot (user, nice, system, irq)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / TICK


def kernel_thread_cpu_s(prefix: str) -> float:
    """CPU seconds of the kernel threads whose name starts with ``prefix`` (``kdamond``: DAMON's monitor)."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        if name.startswith(prefix):
            rest = stat[stat.rindex(")") + 2:].split()
            total += (int(rest[11]) + int(rest[12])) / TICK
    return total


class ProcessPoll:
    """Every second, each process's CPU seconds so far (by pid and start time) and its command line."""

    def __init__(self, period_s: float = 1.0):
        self.period_s = period_s
        self.seen: dict[tuple[int, int], list] = {}  # (pid, start) -> [command line, CPU s in the run, base]
        with open("/proc/uptime") as f:  # processes that start later count from their start
            self._started = float(f.read().split()[0]) * TICK
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._me = os.getpid()

    def __enter__(self) -> ProcessPoll:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.poll()

    def poll(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == self._me:
                continue
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                rest = stat[stat.rindex(")") + 2:].split()
                key = (int(pid), int(rest[19]))
                cpu = (int(rest[11]) + int(rest[12])) / TICK
                entry = self.seen.get(key)
                if entry is None:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    base = cpu if key[1] < self._started else 0.0  # a process older than the run: from now on
                    entry = self.seen[key] = [cmd or f"[{stat[stat.index('(') + 1: stat.rindex(')')]}]", 0.0, base]
                entry[1] = cpu - entry[2]
            except (OSError, ValueError, IndexError):
                continue  # it ended meanwhile

    def save(self, path: Path) -> None:
        """Every process seen, its kind, its command line and its CPU seconds in the run, most first (JSON)."""
        rows = sorted(({"kind": kind_of(cmd), "cpu_s": round(cpu, 2), "pid": pid, "cmd": cmd}
                       for (pid, _start), (cmd, cpu, _base) in self.seen.items() if cpu > 0),
                      key=lambda row: -row["cpu_s"])
        path.write_text(json.dumps(rows, indent=1))

    def by_kind(self) -> collections.Counter:
        kinds: collections.Counter = collections.Counter()
        for cmd, cpu, _base in self.seen.values():
            kinds[kind_of(cmd)] += cpu
        return kinds


def kind_of(cmd: str) -> str:
    """The kind of process a command line is (:data:`KINDS`; a kernel thread's is its name in brackets)."""
    kind = next((name for name, pattern in KINDS if pattern.search(cmd)), None)
    if kind is None:
        kind = "kernel threads" if cmd.startswith("[") else "other"
    return kind


def editable_origin() -> Path | None:
    """The checkout a fresh ``python`` imports milvus_edu from, when it is one (a folder with a pyproject.toml)."""
    out = subprocess.run([sys.executable, "-c", "import milvus_edu, sys; sys.stdout.write(milvus_edu.__file__)"],
                         cwd=tempfile.gettempdir(), capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout:
        return None
    root = Path(out.stdout).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


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


def watch(proc: subprocess.Popen, log: Path, started: float) -> None:
    """Wait for ``proc``, saying every minute how far the tests are (one mark per test in pytest's output)."""
    while True:
        try:
            proc.wait(timeout=60)
            return
        except subprocess.TimeoutExpired:
            where = tests_done(log.read_text(errors="replace"))
            print(f"  {minutes(time.monotonic() - started)} elapsed, {where}", flush=True)


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
    commit = rev.stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_sim import bare_simpy_rate

    work = Path(tempfile.mkdtemp(prefix="milvus-edu-suite-"))
    clone, log = work / "clone", work / "suite.log"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--detach", commit], check=True)
    origin = editable_origin()
    print(f"commit {commit[:10]} cloned to {clone}" + (" (uncommitted changes of the checkout are not in it)"
                                                       if dirty and args.rev == "HEAD" else ""))
    rate_before = bare_simpy_rate()
    print(f"bare SimPy before: {rate_before / 1e6:.2f} million timeouts/s; running .ci/run (log: {log})", flush=True)

    kd0, cpu0, t0 = kernel_thread_cpu_s("kdamond"), machine_cpu_s(), time.monotonic()
    poll = ProcessPoll() if args.by_process else None
    try:
        if poll:
            poll.__enter__()
        with log.open("wb") as out:
            proc = subprocess.Popen(["bash", str(clone / ".ci" / "run")], cwd=clone, stdout=out,
                                    stderr=subprocess.STDOUT)
            try:
                watch(proc, log, t0)
            except KeyboardInterrupt:
                proc.terminate()
                proc.wait()
                raise
    finally:
        if poll:
            poll.__exit__()
        wall, cpu, kd = time.monotonic() - t0, machine_cpu_s() - cpu0, kernel_thread_cpu_s("kdamond") - kd0
        home = origin or ROOT  # a package installed from elsewhere than a checkout gives way to this one
        if editable_origin() != home:
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            "-e", str(home)], capture_output=True)
            print(f"the editable install points at {home} again")
    rate_after = bare_simpy_rate()

    text = log.read_text(errors="replace")
    summary = re.findall(r"^=+ (.*) in ([\d.]+)s(?: \([\d:]+\))? =+$", text, flags=re.M)
    cpus = len(os.sched_getaffinity(0))
    print(f"\n.ci/run on a fresh clone of {commit[:10]}: {minutes(wall)} (exit status {proc.returncode})")
    if summary:
        outcome, pytest_s = summary[-1]
        print(f"  pytest: {outcome} in {minutes(float(pytest_s))}; the rest (pip, start-up) {wall - float(pytest_s):.0f} s")
    print(f"  machine CPU: {cpu:,.0f} s, {cpu / wall:.2f} of its {cpus} CPUs on average; of it the host's memory "
          f"monitor (kdamond) {kd:,.0f} s")
    print(f"  bare SimPy: {rate_before / 1e6:.2f} million timeouts/s before, {rate_after / 1e6:.2f} after")
    if poll:
        kinds = poll.by_kind()
        poll.save(work / "processes.json")
        print(f"  by process (a poll each second; {sum(kinds.values()):,.0f} of the {cpu:,.0f} CPU s; each process in "
              f"{work / 'processes.json'}):")
        for kind, seconds in kinds.most_common():
            if seconds >= 0.5:
                print(f"    {seconds:8,.0f}  {kind}")
    if args.keep:
        print(f"  the clone is kept: {clone}")
    else:
        shutil.rmtree(clone, ignore_errors=True)
    if proc.returncode != 0:
        print("\n" + "\n".join(text.splitlines()[-25:]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
