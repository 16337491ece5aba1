"""A fifth lesson plugs in without editing any other file: the proof, end to end.

:data:`LESSON` is the smallest real lesson (the book's "Adding a lesson" section shows it): *DDL before DML*, one
scenario whose cluster is a :class:`~milvus_edu.cluster.builder.ClusterSpec` over the existing nodes, one checker
reading only the run log, a summary section, key events for ``milvus-edu timeline`` and an event kind of its own.

Its files are written once into a folder ``fifth/`` of a copy of the package (the way a contributor adds a
lesson to this repository: nothing else of the copy is edited) and once into an outside package named under the
``milvus_edu.mechanisms`` entry point (the way a lesson kept elsewhere is installed). Each copy runs in a process
of its own, so the registry of this test session never holds the fifth lesson and the four real lessons' scenarios
and golden run logs are checked against a clean registry.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import milvus_edu
import test_plugin_contract as contract
from milvus_edu.mechanisms import ENTRY_POINT_GROUP, LESSON_ORDER, lesson_folders, load_installed_lessons
from milvus_edu.registry import mechanisms, scenarios

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "fifth-ddl-before-dml"

#: The minimal lesson, file by file. Its imports are absolute, so the same files work as a folder of
#: ``milvus_edu/mechanisms/`` and as a package installed outside.
LESSON = {
    "__init__.py": '''
        """DDL before DML: a collection's CreateCollection precedes every insert into its shards."""

        from milvus_edu.events.schema import kind
        from milvus_edu.registry import Mechanism, register

        from .check import OrderChecker
        from .scenarios import SCENARIOS
        from .summary import KeyEvents, OrderSummary

        KINDS = (kind("fifth.workload", "The lesson's client starts inserting; `detail.inserts` says how many.",
                      "detail", "-"),)

        MECHANISM = register(Mechanism(
            name="fifth",
            title="DDL before DML",
            kinds=KINDS,
            scenarios=SCENARIOS,
            checker=OrderChecker,
            summary=OrderSummary,
            describe={"fifth.workload": lambda row: f"the client starts its inserts ({row['detail']})"},
            key_events=KeyEvents,
        ))
    ''',
    "scenarios.py": '''
        """The lesson's scenario: a collection created by DDL, then inserts into it through one proxy."""

        from milvus_edu.cluster.builder import ClusterSpec, CollectionSpec, DataNodeSpec, ProxySpec, build
        from milvus_edu.registry import Scenario


        def ddl_before_dml(sim, inserts=5, start_ms=400.0):
            """CreateCollection at 100 ms, then ``inserts`` inserts 50 ms apart from ``start_ms``."""
            if inserts < 0:
                raise ValueError(f"option inserts must not be negative, got {inserts}; use inserts=5 for example")
            spec = ClusterSpec(pchannels=1, proxies=(ProxySpec(),), consumers=True, datacoord=True,
                               datanodes=(DataNodeSpec(),), collections=(CollectionSpec(100, 1),),
                               create_collections_at_ms=100.0)
            cluster = build(sim, spec)
            cluster.start()

            def client():
                yield sim.env.timeout(start_ms)
                sim.recorder.emit("fifth.workload", "client-0", detail={"inserts": inserts})
                for pk in range(inserts):
                    sim.spawn(cluster.proxies[0].insert(cluster.collections[0], [pk]))
                    yield sim.env.timeout(50.0)

            sim.env.process(client())


        SCENARIOS = (Scenario(
            "fifth-ddl-before-dml", "a collection is created by DDL, then a client inserts into it", 1.0,
            ddl_before_dml, options={"inserts": 5, "start_ms": 400.0}),)
    ''',
    "check.py": '''
        """The lesson's checker: it reads only the run log."""

        from milvus_edu.check.violation import StreamingChecker
        from milvus_edu.events.dispatch import on


        class OrderChecker(StreamingChecker):
            """Every insert into a pchannel comes after, and has a larger timestamp than, its CreateCollection."""

            invariants = ("ddl_before_dml",)
            promises = {"ddl_before_dml": "every insert followed its collection's CreateCollection"}
            chances = {"ddl_before_dml": "an insert was written to a pchannel"}

            def __init__(self, limit=20):
                super().__init__(limit)
                self.created = {}  # pchannel -> (seq, ts) of its CreateCollection

            @on("mq.produce", columns=("channel", "msg_type", "ts"), ints=("ts",))
            def _produce(self, seq, channel, msg_type, ts):
                if msg_type == "CreateCollection":
                    self.created[channel] = (seq, ts)
                    return
                if msg_type != "Insert":
                    return
                self.tried["ddl_before_dml"] += 1
                ddl = self.created.get(channel)
                if ddl is None or ts <= ddl[1]:
                    after = "before any CreateCollection" if ddl is None else f"at ts {ts} <= {ddl[1]}"
                    self._add("ddl_before_dml", (seq,) if ddl is None else (ddl[0], seq),
                              f"Let event {seq + 1} be an insert into {channel} {after}. Then a consumer meets "
                              f"rows of a collection it does not know yet, because DML must follow its DDL.")
    ''',
    "summary.py": '''
        """The lesson's summary section and its key events."""

        from milvus_edu.events.dispatch import Dispatch, on


        class OrderSummary(Dispatch):
            """``summary.json``'s ``fifth`` section: how many CreateCollection and Insert messages were written."""

            def __init__(self):
                self.created = self.inserts = 0

            @on("mq.produce", columns=("msg_type",))
            def _produce(self, seq, msg_type):
                self.created += msg_type == "CreateCollection"
                self.inserts += msg_type == "Insert"

            def sections(self, counts):
                return {"fifth": {"create_collection_msgs": self.created, "insert_msgs": self.inserts}}


        class KeyEvents:
            """The timeline's key events: the workload's start and every CreateCollection."""

            def show(self, row):
                return row["kind"] == "fifth.workload" or row.get("msg_type") == "CreateCollection"

            def notes(self):
                return ["(DDL before DML: each CreateCollection above comes before the inserts)"]
    ''',
}

#: What a process with the fifth lesson registered reports, as JSON on its last line of output.
PROBE = '''
import contextlib, io, json, sys, warnings
warnings.simplefilter("error")  # a lesson that fails to load must fail this probe, not pass as a warning
import milvus_edu
from milvus_edu.cli import main
from milvus_edu.registry import mechanisms

out = sys.argv[1]
result = milvus_edu.simulate("fifth-ddl-before-dml", seed=1, out_dir=out)
with open(out + "/summary.json") as fh:
    summary = json.load(fh)
printed = {}
for name, args in {"scenarios": ["scenarios"], "timeline": ["timeline", out]}.items():
    with contextlib.redirect_stdout(io.StringIO()) as text:
        status = main(args)
    printed[name] = [status, text.getvalue()]
print(json.dumps({"mechanisms": [m.name for m in mechanisms()], "summary": summary, "printed": printed}))
'''


def write_lesson(folder: Path) -> Path:
    """Write :data:`LESSON` into ``folder`` (a new package); returns it."""
    folder.mkdir(parents=True)
    for name, text in LESSON.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return folder


def probe(pythonpath: Path, out: Path) -> dict:
    """Run :data:`PROBE` in a fresh interpreter importing ``milvus_edu`` from ``pythonpath`` first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pythonpath), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", PROBE, str(out)], capture_output=True, text=True, env=env,
                          cwd=out.parent, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_the_lesson_runs_end_to_end(report: dict, out: Path) -> None:
    """Registered after the four; checked, summarised, listed and narrated by the shared pipeline."""
    assert report["mechanisms"] == [*LESSON_ORDER, "fifth"]
    summary = report["summary"]
    assert summary["scenario"] == SCENARIO
    assert summary["checks"]["ok"] is True
    assert summary["checks"]["violation_counts"] == {"ddl_before_dml": 0}
    assert summary["fifth"] == {"create_collection_msgs": 1, "insert_msgs": 5}
    assert (out / "events.parquet").is_file()
    status, listing = report["printed"]["scenarios"]
    assert status == 0 and any(line.startswith(SCENARIO) for line in listing.splitlines())
    assert "options: inserts=5, start_ms=400" in listing
    status, timeline = report["printed"]["timeline"]
    assert status == 0
    assert "the client starts its inserts" in timeline
    assert "CreateCollection" in timeline
    assert "(DDL before DML: each CreateCollection above comes before the inserts)" in timeline


@pytest.mark.slow
def test_a_new_folder_is_a_whole_lesson(tmp_path, monkeypatch):
    """A copy of the package with one new folder ``mechanisms/fifth/`` and no other change runs the lesson, and
    the plug-in contract holds over the copy with five lessons."""
    copy = tmp_path / "src" / "milvus_edu"
    shutil.copytree(ROOT / "milvus_edu", copy, ignore=shutil.ignore_patterns("__pycache__"))
    write_lesson(copy / "mechanisms" / "fifth")
    out = tmp_path / "run"
    assert_the_lesson_runs_end_to_end(probe(copy.parent, out), out)

    monkeypatch.setattr(contract, "PACKAGE", copy)
    monkeypatch.setattr(contract, "MECHANISMS", copy / "mechanisms")
    monkeypatch.setattr(contract, "CLUSTER", copy / "cluster")
    monkeypatch.setattr(contract, "CLIENT_VOCABULARY", copy / "client" / "workload.py")
    assert contract.mechanism_names() == {*LESSON_ORDER, "fifth"}
    contract.test_shared_modules_name_no_lesson_and_lessons_import_no_other_lesson()
    contract.test_scenarios_build_their_clusters_through_the_builder()


@pytest.mark.slow
def test_an_installed_package_is_a_whole_lesson(tmp_path):
    """A package outside the repository, named under the ``milvus_edu.mechanisms`` entry point (as ``pip install``
    of a lesson with ``[project.entry-points."milvus_edu.mechanisms"] fifth = "fifth_lesson"`` leaves it), is found
    by ``import milvus_edu`` and the command line alike."""
    site = tmp_path / "site"
    write_lesson(site / "fifth_lesson")
    info = site / "fifth_lesson-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fifth-lesson\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[milvus_edu.mechanisms]\nfifth = fifth_lesson\n", encoding="utf-8")
    out = tmp_path / "run"
    assert_the_lesson_runs_end_to_end(probe(site, out), out)


def test_lesson_folders_come_in_the_books_order_then_by_name(tmp_path):
    for name in ("query", "fifth", "tso", "flush", "timetick", "alpha"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "notes").mkdir()  # a folder without __init__.py is no lesson
    (tmp_path / "helpers.py").write_text("")  # nor is a module
    assert lesson_folders([tmp_path]) == [*LESSON_ORDER, "alpha", "fifth"]


def test_this_session_holds_the_four_lessons_untouched():
    """The fifth lesson ran in processes of their own: here the registry holds exactly the four built-in lessons in
    the book's order, every scenario one of theirs (``tests/test_golden_runs.py`` checks their run logs)."""
    assert [m.name for m in mechanisms()] == list(LESSON_ORDER)
    assert "fifth" not in milvus_edu.registry._MECHANISMS and SCENARIO not in scenarios()
    assert set(scenarios()) == {s.name for m in mechanisms() for s in m.scenarios}


def test_the_books_how_to_shows_this_lesson_and_names_the_entry_point():
    """Each code block of book/design.md's "Adding a lesson" is a piece of :data:`LESSON` (line by line, indentation
    aside), so the how-to cannot drift from the lesson this module proves works."""
    page = (ROOT / "book" / "design.md").read_text(encoding="utf-8")
    section = page.split("## Adding a lesson", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    files = [[line.strip() for line in textwrap.dedent(text).splitlines()] for text in LESSON.values()]
    for block in blocks:
        lines = [line.strip() for line in block.rstrip().splitlines()]
        assert any(lines == f[i:i + len(lines)] for f in files for i in range(len(f))), block
    assert f'[project.entry-points."{ENTRY_POINT_GROUP}"]' in section


def test_a_lesson_that_fails_to_load_is_named_and_left_out(tmp_path, monkeypatch):
    """One broken installed lesson costs a warning that names it, not the command line or the other lessons."""
    (tmp_path / "broken_lesson.py").write_text("raise RuntimeError('no such component')\n", encoding="utf-8")
    info = tmp_path / "broken_lesson-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-lesson\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[milvus_edu.mechanisms]\nbroken = broken_lesson\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(UserWarning, match=r"lesson 'broken' \(module broken_lesson.*RuntimeError: no such component; "
                                         r"fix or uninstall it"):
        assert load_installed_lessons() == []
    assert [m.name for m in mechanisms()] == list(LESSON_ORDER)


def test_a_lesson_fixed_after_failing_loads_on_the_next_call(tmp_path, monkeypatch):
    """The warning says 'fix or uninstall it': once fixed, the next call imports it (a failed import was once
    remembered as done, and the fixed lesson was never loaded in that process)."""
    module = tmp_path / "mended_lesson.py"
    module.write_text("raise RuntimeError('not yet')\n", encoding="utf-8")
    info = tmp_path / "mended_lesson-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mended-lesson\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[milvus_edu.mechanisms]\nmended = mended_lesson\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.warns(UserWarning, match="mended_lesson"):
            assert load_installed_lessons() == []
        module.write_text("FIXED = True\n", encoding="utf-8")  # registers nothing: the session keeps its 4 lessons
        importlib.invalidate_caches()
        assert load_installed_lessons() == ["mended_lesson"]
        assert load_installed_lessons() == []  # imported now: not again
    finally:
        sys.modules.pop("mended_lesson", None)  # the module's folder goes with tmp_path
    assert [m.name for m in mechanisms()] == list(LESSON_ORDER)
