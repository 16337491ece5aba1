"""The labs' scratch folders (milvus_edu.labs.scratch): fresh, named, and removed when the process that made them
exits, as a notebook kernel does when it is shut down or restarted; never by a child it forks."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import milvus_edu
from milvus_edu.labs import scratch_folder

ROOT = Path(__file__).resolve().parents[1]

# Makes two folders with a file in each, prints their paths, waits for a line on stdin, then exits.
_MAKE_AND_WAIT = """
import sys
from milvus_edu.labs import scratch_folder
for prefix in ("milvus-edu-lab3-", "milvus-edu-"):
    folder = scratch_folder(prefix)
    (folder / "run").mkdir()
    (folder / "run" / "events.parquet").write_bytes(b"x")
    print(folder, flush=True)
sys.stdin.readline()
"""


def test_a_scratch_folder_is_new_named_by_its_prefix_and_gone_when_its_process_exits(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _MAKE_AND_WAIT], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    folders = [Path(proc.stdout.readline().strip()) for _ in range(2)]
    try:
        assert [f.parent for f in folders] == [tmp_path, tmp_path]
        assert folders[0].name.startswith("milvus-edu-lab3-") and folders[1].name.startswith("milvus-edu-")
        assert folders[0] != folders[1]
        assert all((f / "run" / "events.parquet").is_file() for f in folders)  # kept while the process runs
    finally:
        proc.communicate("\n", timeout=60)
    assert proc.returncode == 0
    assert not any(f.exists() for f in folders)
    assert not list(tmp_path.glob("milvus-edu-*"))


def test_a_run_whose_sinks_run_in_a_forked_process_leaves_the_folder_in_place():
    # the sink process is a forked child: when it ends it must not remove its parent's folders
    folder = scratch_folder("milvus-edu-test-")
    assert list(folder.iterdir()) == []
    run = milvus_edu.simulate("timetick-basics", seed=1, duration_s=1, out_dir=folder / "run", sink_process=True)
    assert (folder / "run" / "events.parquet").is_file()
    assert run.summary["events"] > 0


@pytest.mark.parametrize("prefix", ["runs/lab1-", "/tmp/x-"])
def test_a_prefix_that_is_a_path_is_refused_with_what_to_give(prefix):
    with pytest.raises(ValueError, match=r"is a folder name, not a path; e\.g\. scratch_folder\('milvus-edu-lab1-'\)"):
        scratch_folder(prefix)
