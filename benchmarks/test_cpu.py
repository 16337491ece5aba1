"""Where the test suite's CPU goes, test by test: the census to read before cutting the suite's time.

The suite is CPU-bound on the 2-core machine (``benchmarks/suite_time.py``), so its wall time follows the CPU
seconds it spends, and a cut is worth what it saves in CPU, not in wall time (a test that waits for a JVM costs
wall time on its worker while the others use the cores). With ``MILVUS_EDU_TEST_CPU`` set to a file,
``tests/conftest.py`` appends a JSON line per test: the pytest process's own CPU from the test's setup to its
teardown, the CPU of the child processes it reaped meanwhile (a CLI run, a notebook kernel, a JVM: each counts on
the test that ends it, a session fixture's on the first test that uses it), its wall time, whether it is marked
slow, and its xdist group. What no test reaps (the class archive's maker, started by the controller) is not in it.

``python benchmarks/test_cpu.py`` runs the README's test command (``bash tests/run.sh``, in this checkout) with the
census on and prints it; ``python benchmarks/test_cpu.py FILE`` prints the census of an earlier run's file. Extra
arguments after ``--`` go to pytest (``-- -m "not slow"``). Prints figures only; exit status 2 for a file that is
missing or holds no census line, otherwise the test command's own. For the census of a fresh clone's run, set the
variable for ``benchmarks/suite_time.py`` (``MILVUS_EDU_TEST_CPU=/tmp/census.jsonl python benchmarks/suite_time.py``),
then print the file.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_TEST_CPU = "MILVUS_EDU_TEST_CPU"  # as tests/conftest.py reads it


def load(path: Path) -> list[dict]:
    """The census lines of ``path`` (a test run twice, say by a rerun, counts twice)."""
    lines = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines.append(json.loads(line))
    return lines


def module_of(nodeid: str) -> str:
    """``tests/test_x.py::test_y[z]`` -> ``tests/test_x.py``."""
    return nodeid.split("::", 1)[0]


def report(lines: list[dict], top: int) -> str:
    """The census as text: totals (quick and slow), the costliest tests, modules and groups."""
    def cost(line: dict) -> float:
        return line["cpu_s"] + line["children_cpu_s"]

    total = sum(cost(line) for line in lines)
    out = []
    slow = [line for line in lines if line["slow"]]
    quick = [line for line in lines if not line["slow"]]
    out.append(f"{len(lines):,} tests, {total:,.0f} CPU s ({sum(line['cpu_s'] for line in lines):,.0f} in pytest's "
               f"processes, {sum(line['children_cpu_s'] for line in lines):,.0f} in children they reaped)")
    out.append(f"  slow: {len(slow):,} tests, {sum(map(cost, slow)):,.0f} CPU s; "
               f"quick: {len(quick):,} tests, {sum(map(cost, quick)):,.0f} CPU s")
    out.append(f"\nthe {top} costliest tests (CPU s: own + children's = total; wall s)")
    for line in sorted(lines, key=cost, reverse=True)[:top]:
        out.append(f"  {line['cpu_s']:7.1f} + {line['children_cpu_s']:6.1f} = {cost(line):7.1f}  {line['wall_s']:7.1f}  "
                   f"{line['test']}")
    by_module = collections.Counter()
    count = collections.Counter()
    for line in lines:
        by_module[module_of(line["test"])] += cost(line)
        count[module_of(line["test"])] += 1
    out.append(f"\nthe {top} costliest modules (CPU s, tests)")
    for module, cpu in by_module.most_common(top):
        out.append(f"  {cpu:8.1f}  {count[module]:5d}  {module}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", help="an earlier run's census file; without it, run the suite now")
    parser.add_argument("--top", type=int, default=40, help="how many tests and modules to list (default 40)")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest")
    args = parser.parse_args(argv)
    if args.file:
        path = Path(args.file)
        if not path.is_file():
            print(f"error: no census file at {path}; run `python benchmarks/test_cpu.py` to make one", file=sys.stderr)
            return 2
        status = 0
    else:
        fd, name = tempfile.mkstemp(prefix="milvus-edu-test-cpu-", suffix=".jsonl")
        os.close(fd)
        path = Path(name)
        env = {**os.environ, ENV_TEST_CPU: str(path)}
        status = subprocess.run(["bash", str(ROOT / "tests" / "run.sh"), *args.pytest_args], cwd=ROOT, env=env).returncode
        print(f"\ncensus file: {path}")
    lines = load(path)
    if not lines:
        print(f"error: {path} holds no census line (was {ENV_TEST_CPU} set for the run?)", file=sys.stderr)
        return 2
    print(report(lines, args.top))
    return status


if __name__ == "__main__":
    sys.exit(main())
