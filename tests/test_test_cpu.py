"""The per-test CPU census (``MILVUS_EDU_TEST_CPU`` in tests/conftest.py, ``benchmarks/test_cpu.py``): a test's own
CPU and its reaped children's are counted on it, nothing is written without the variable, and the report adds up."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ENV_TEST_CPU, SUITE_JAVA_OPTIONS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "test_cpu.py"

# Two tests run through this suite's conftest.py: one burns CPU in pytest's process, one in a child it waits for.
_PROBE = '''
import subprocess, sys, time

def _burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def test_own():
    _burn(0.3)

def test_child():
    code = "import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", code], check=True)
'''


def _module():
    spec = importlib.util.spec_from_file_location("test_cpu_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_probe(tmp_path: Path, census: Path | None) -> None:
    """Run the probe tests under a copy of this suite's conftest.py, in a folder of their own (not tests/, which a
    run beside this one may be collecting)."""
    folder = tmp_path / "probe"
    folder.mkdir()
    shutil.copyfile(ROOT / "tests" / "conftest.py", folder / "conftest.py")
    (folder / "test_probe.py").write_text(_PROBE, encoding="utf-8")
    # not this run's: its census file, its pytest options, the xdist worker it runs on
    env = {k: v for k, v in os.environ.items() if k != ENV_TEST_CPU and not k.startswith("PYTEST_")}
    if census is not None:
        env[ENV_TEST_CPU] = str(census)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "-n", "0", "--rootdir", str(folder), str(folder)], cwd=folder, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow  # a pytest process of its own
def test_each_test_gets_its_own_cpu_and_its_childrens(tmp_path):
    census = tmp_path / "census.jsonl"
    _run_probe(tmp_path, census)
    lines = {line["test"].rsplit("::", 1)[1]: line for line in map(json.loads, census.read_text().splitlines())}
    assert set(lines) == {"test_own", "test_child"}
    own, child = lines["test_own"], lines["test_child"]
    assert own["cpu_s"] >= 0.3 and own["children_cpu_s"] < 0.1
    assert child["children_cpu_s"] >= 0.3 and child["cpu_s"] < 0.3
    assert all("wall_s" in line and line["slow"] is False and line["worker"] == "main" for line in lines.values())


@pytest.mark.slow  # a pytest process of its own
def test_without_the_variable_nothing_is_written(tmp_path):
    _run_probe(tmp_path, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe"]
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".jsonl", ".json")]


def test_the_report_adds_up_and_lists_the_costliest_first():
    test_cpu = _module()
    assert test_cpu.ENV_TEST_CPU == ENV_TEST_CPU  # the script runs the suite with the variable conftest.py reads
    lines = [
        {"test": "tests/test_a.py::test_1", "cpu_s": 1.0, "children_cpu_s": 4.0, "wall_s": 5.0, "slow": True},
        {"test": "tests/test_a.py::test_2", "cpu_s": 2.0, "children_cpu_s": 0.0, "wall_s": 2.0, "slow": False},
        {"test": "tests/test_b.py::test_3", "cpu_s": 3.0, "children_cpu_s": 0.0, "wall_s": 3.0, "slow": False},
    ]
    text = test_cpu.report(lines, top=2)
    assert text.startswith("3 tests, 10 CPU s (6 in pytest's processes, 4 in children they reaped)")
    assert "slow: 1 tests, 5 CPU s; quick: 2 tests, 5 CPU s" in text
    costliest = text.split("costliest tests")[1].split("costliest modules")[0]
    assert costliest.index("test_a.py::test_1") < costliest.index("test_b.py::test_3")
    assert "test_2" not in costliest  # --top 2
    modules = text.split("costliest modules")[1]
    assert modules.index("tests/test_a.py") < modules.index("tests/test_b.py") and "7.0" in modules


def test_a_missing_census_file_is_one_line_and_status_2(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nothing.jsonl")], capture_output=True,
                          text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().count("\n") == 0 and "no census file" in proc.stderr


def test_the_runs_scratch_files_go_to_its_own_base_folder(tmp_path_factory):
    """tests/conftest.py's scratch folder: this process, and what it starts, make their temporary files in
    ``<the run's base folder>/tmp`` (which pytest removes three runs later), not in the machine's /tmp."""
    base = tmp_path_factory.getbasetemp()
    scratch = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "tmp"  # a worker's base is in the run's
    assert scratch.is_dir()
    assert Path(tempfile.gettempdir()) == scratch
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"], capture_output=True,
                           text=True, check=True)
    assert Path(child.stdout.strip()) == scratch
    assert os.environ["SPARK_LOCAL_DIRS"] == str(scratch)
    java = os.environ["JAVA_TOOL_OPTIONS"]
    assert java == f"{SUITE_JAVA_OPTIONS} -Djava.io.tmpdir={scratch}" or not java.startswith(SUITE_JAVA_OPTIONS)
