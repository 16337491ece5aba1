"""benchmarks/suite_time.py, the fresh-clone time of the suite: what it can check without running the suite again
(its mistakes are one line and status 2, and so is a second run while one runs; it sorts processes into the kinds it
reports; it reads the machine's CPU time and each process's own, from its start or from the first poll)."""

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
    ("/usr/local/bin/jupyter-book build /tmp/b", "jupyter-book"),
    ("/usr/bin/headless_shell --type=gpu-process", "Chromium"),
    ("/usr/bin/python -m milvus_edu.cli demo --out /tmp/chromium-notes", "the CLI in its own process"),
    ("python3 (ended before it was first seen)", "other"),
    ("[kdamond.0]", "kernel threads"),
    ("bash /tmp/milvus-edu-suite-x/clone/.ci/run", "other"),
])
def test_each_process_is_counted_under_its_kind(cmd, kind):
    poll = suite_time.ProcessPoll()
    poll.seen[(1, 0)] = [cmd, 2.5, 0.0, "x"]
    assert poll.by_kind() == {kind: 2.5}


def _burner() -> subprocess.Popen:
    """A child that, for each line it reads, burns the CPU seconds the line says and answers "done"."""
    return subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfor line in sys.stdin:\n    t = time.process_time()\n"
         "    while time.process_time() - t < float(line): pass\n    print('done', flush=True)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _burn(child: subprocess.Popen, seconds: float) -> None:
    child.stdin.write(f"{seconds}\n")
    child.stdin.flush()
    assert child.stdout.readline() == "done\n"


def _cpu_of(poll, pid: int) -> float:
    return next(cpu for (p, _start), (_cmd, cpu, _base, _name) in poll.seen.items() if p == pid)


def test_a_process_started_after_the_poll_is_counted_from_its_start_and_an_older_one_from_the_first_poll():
    older = _burner()
    try:
        _burn(older, 0.3)
        poll = suite_time.ProcessPoll()
        newer = _burner()
        try:
            _burn(newer, 0.3)
            poll.poll()
            _burn(older, 0.2)
            poll.poll()
            assert 0.28 <= _cpu_of(poll, newer.pid) <= 1.2  # its whole 0.3 s, start-up included
            assert 0.15 <= _cpu_of(poll, older.pid) <= 0.28  # the 0.2 s since the first poll, not the 0.3 before
        finally:
            newer.stdin.close()
            newer.wait()
    finally:
        older.stdin.close()
        older.wait()
    cpu, steal = suite_time.machine_cpu_s()
    assert cpu > 0 and steal >= 0


def test_a_process_that_execs_another_program_is_filed_under_the_new_one():
    child = subprocess.Popen(["bash", "-c", "read x; exec sleep 30"], stdin=subprocess.PIPE, text=True)
    try:
        poll = suite_time.ProcessPoll()
        poll.poll()
        assert next(cmd for (p, _), (cmd, *_rest) in poll.seen.items() if p == child.pid).startswith("bash -c")
        child.stdin.write("\n")
        child.stdin.flush()
        comm = Path(f"/proc/{child.pid}/comm")
        for _ in range(500):  # until bash has become sleep
            if comm.read_text().strip() == "sleep":
                break
            time.sleep(0.01)
        poll.poll()
        assert [cmd for (p, _), (cmd, *_rest) in poll.seen.items() if p == child.pid] == ["sleep 30"]
    finally:
        child.kill()
        child.wait()


def test_a_stat_line_is_read_after_the_last_parenthesis_of_the_name():
    line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 10 0 0 0 250 50 0 0 20 0 1 0 987654 1000 10 0 0 0 0 0 0 0"
    stat = suite_time.parse_stat(line)
    assert stat.name == "a (b) c" and stat.state == "S" and not stat.kernel_thread
    assert stat.cpu_s == pytest.approx(300 / suite_time.TICK) and stat.start == 987654
    kthread = line.replace(" 4194560 ", f" {0x00208040} ")
    assert suite_time.parse_stat(kthread).kernel_thread


def test_minutes_and_pytest_summary():
    assert suite_time.minutes(586.6) == "9:46.6" and suite_time.minutes(659.96) == "11:00.0"
    log = "....\n==== slowest 15 durations ====\n12.0s call x\n===== 2670 passed in 586.62s (0:09:46) =====\n"
    assert suite_time.pytest_summary(log) == ("2670 passed", 586.62)
    assert suite_time.pytest_summary("= 1 failed, 3 passed in 2.50s =\n") == ("1 failed, 3 passed", 2.5)
    assert suite_time.pytest_summary("pip output only\n") is None


def test_a_second_run_refuses_to_start_while_one_runs(tmp_path):
    import fcntl

    with open(tmp_path / f"{suite_time.CLONE_PREFIX}lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 2 and "another run of it is under way" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == [f"{suite_time.CLONE_PREFIX}lock"]  # nothing cloned


def test_progress_counts_one_mark_per_test_in_pytest_output_so_far():
    assert suite_time.tests_done("Successfully installed milvus-edu\n") == "installing and collecting"
    out = ("3 workers [2652 items]\n\n" + "." * 70 + "F. [  2%]\n" + "." * 72 + " [  5%]\n" + "..sx.E"
           + "\n" + "...........  # not a progress line\n")
    assert suite_time.tests_done(out) == "150 of 2,652 tests done"
    assert suite_time.tests_done("collected 3 items\n\ntests/test_a.py .F") == "2 of 3 tests done"


def test_the_processes_are_saved_most_cpu_first_with_their_kinds(tmp_path):
    import json

    poll = suite_time.ProcessPoll()
    poll.seen[(7, 1)] = ["python3 -m pyspark.daemon pyspark.worker", 1.5, 0.0, "python3"]
    poll.seen[(8, 1)] = ["/usr/bin/java -cp x org.apache.spark.deploy.SparkSubmit", 40.0, 0.0, "java"]
    poll.seen[(9, 1)] = ["[kworker/0:1]", 0.0, 3.0, "kworker/0:1"]  # older than the run, idle during it: left out
    poll.save(tmp_path / "p.json")
    rows = json.loads((tmp_path / "p.json").read_text())
    assert [(r["pid"], r["kind"], r["cpu_s"]) for r in rows] == [
        (8, "JVM (Spark, its class archive)", 40.0), (7, "Spark's Python workers", 1.5)]


def test_started_the_poll_reads_the_processes_in_its_thread_until_stopped():
    poll = suite_time.ProcessPoll(period_s=0.05)
    child = _burner()
    try:
        poll.start()
        _burn(child, 0.2)
        for _ in range(200):  # until a poll of the thread has seen the burn
            if any(p == child.pid and cpu >= 0.18 for (p, _), (_cmd, cpu, *_rest) in poll.seen.items()):
                break
            time.sleep(0.01)
        poll.stop()
        assert 0.18 <= _cpu_of(poll, child.pid) <= 1.0
        seen = {key: list(entry) for key, entry in poll.seen.items()}
        _burn(child, 0.1)
        time.sleep(0.15)
        assert poll.seen == seen  # stopped: nothing read any more
    finally:
        child.stdin.close()
        child.wait()
