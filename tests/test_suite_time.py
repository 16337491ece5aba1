"""benchmarks/suite_time.py, the fresh-clone time of the suite: what it can check without running the suite again
(its mistakes are one line and status 2; it sorts processes into the kinds it reports; it reads the machine's CPU
time and a process's own)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "suite_time.py"


def _module():
    spec = importlib.util.spec_from_file_location("suite_time", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


suite_time = _module()


def test_an_unknown_commit_is_one_line_and_status_2_before_anything_is_cloned(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--rev", "no-such-commit"], capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "'no-such-commit' is not a commit" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no clone, no log


@pytest.mark.parametrize(("cmd", "kind"), [
    ("/usr/lib/jvm/java-17-openjdk-amd64/bin/java -cp /x/pyspark/jars/* -Xmx1g org.apache.spark.deploy.SparkSubmit",
     "JVM (Spark, its class archive)"),
    ("/usr/lib/chromium/chromium --type=renderer --headless", "Chromium"),
    ("/usr/bin/python -m ipykernel_launcher -f /root/.local/share/jupyter/runtime/kernel-1.json", "notebook kernels"),
    ("/usr/bin/python -m jupyterlab --no-browser --port 8899", "JupyterLab"),
    ("/usr/bin/python -c import sys; from jupyter_book.cli.main import main; sys.exit(main()) build /tmp/b",
     "jupyter-book"),
    ("python3 -m pyspark.daemon pyspark.worker", "Spark's Python workers"),
    ("/x/site-packages/milvus/data/bin/milvus run standalone", "Milvus server"),
    ("/usr/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest workers and their forks"),
    ("/usr/bin/python -m pytest -n 3 --durations=15", "pytest's main process"),
    ("/usr/bin/python -m milvus_edu.cli simulate --scenario tso-basics --out /tmp/milvus-edu-suite-x/r",
     "the CLI in its own process"),
    ("/usr/bin/python -m milvus_edu.cli timeline /tmp/pytest-of-root/pytest-3/popen-gw1/test_x0/r",
     "the CLI in its own process"),
    ("/usr/bin/python -m milvus_edu.analysis.class_archive /tmp/c/.pytest_cache/milvus-edu/spark.jsa",
     "the class archive's maker (its Python side)"),
    ("/usr/bin/python -m pip install -q -e .[test]", "pip"),
    ("[kdamond.0]", "kernel threads"),
    ("bash /tmp/milvus-edu-suite-x/clone/.ci/run", "other"),
])
def test_each_process_is_counted_under_its_kind(cmd, kind):
    poll = suite_time.ProcessPoll()
    poll.seen[(1, 0)] = [cmd, 2.5, 0.0]
    assert poll.by_kind() == {kind: 2.5}


def test_a_child_started_during_the_poll_is_counted_from_its_start_and_the_machine_counts_it_too():
    cpu0 = suite_time.machine_cpu_s()
    with suite_time.ProcessPoll(period_s=0.1) as poll:
        child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                                  "while time.process_time() - t < 0.6: pass\ntime.sleep(0.5)"])
        child.wait()
        time.sleep(0.05)
    mine = [cpu for (pid, _start), (_cmd, cpu, _base) in poll.seen.items() if pid == child.pid]
    assert mine and 0.4 <= mine[0] <= 1.5  # the busy 0.6 s, seen by a poll during the 0.5 s it slept after
    assert suite_time.machine_cpu_s() - cpu0 >= mine[0]


def test_progress_counts_one_mark_per_test_in_pytest_output_so_far():
    assert suite_time.tests_done("Successfully installed milvus-edu\n") == "installing and collecting"
    out = ("3 workers [2652 items]\n\n" + "." * 70 + "F. [  2%]\n" + "." * 72 + " [  5%]\n" + "..sx.E"
           + "\n" + "...........  # not a progress line\n")
    assert suite_time.tests_done(out) == "150 of 2,652 tests done"
    assert suite_time.tests_done("collected 3 items\n\ntests/test_a.py .F") == "2 of 3 tests done"


def test_the_processes_are_saved_most_cpu_first_with_their_kinds(tmp_path):
    import json

    poll = suite_time.ProcessPoll()
    poll.seen[(7, 1)] = ["python3 -m pyspark.daemon pyspark.worker", 1.5, 0.0]
    poll.seen[(8, 1)] = ["/usr/bin/java -cp x org.apache.spark.deploy.SparkSubmit", 40.0, 0.0]
    poll.seen[(9, 1)] = ["[kworker/0:1]", 0.0, 3.0]  # older than the run, idle during it: left out
    poll.save(tmp_path / "p.json")
    rows = json.loads((tmp_path / "p.json").read_text())
    assert [(r["pid"], r["kind"], r["cpu_s"]) for r in rows] == [
        (8, "JVM (Spark, its class archive)", 40.0), (7, "Spark's Python workers", 1.5)]
