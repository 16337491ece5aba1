"""The book's page on the design documents (book/seeds.md), checked without building the book.

Quick tests read the page's sources: its tables are complete, its labels unique, every model name it links
exists, every scenario, bug switch, checker and lab section it points to exists. The slow tests run the
scenarios whose numbers the page quotes and check those numbers.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import yaml

from milvus_edu.mechanisms.flush import check as check_flush
from milvus_edu.mechanisms.query import check as check_query
from milvus_edu.mechanisms.timetick import check as check_timetick
from milvus_edu.mechanisms.tso import check as check_tso
from milvus_edu.config import BugSwitches
from milvus_edu.registry import scenarios

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
PAGE = BOOK / "seeds.md"

DOCUMENTS = (
    "tso-timetick-consistency.zh.txt", "guarantee-ts.zh.txt", "datanode-flush-and-checkpoint.zh.txt",
    "datanode-ttnode-checkpoint-updater.zh.txt", "datanode-recovery-design.en.txt",
)
# The label of each section and the prefix of its rows; the chapters' tables link these labels.
SECTIONS = {"seeds-tso": "TSO", "seeds-timetick": "TT", "seeds-guarantee-ts": "GT", "seeds-flush": "FL",
            "seeds-ttnode": "CP", "seeds-recovery": "RC"}
VERDICTS = ("agrees", "older", "looser", "2.6", "not modelled")
# "\\#": a cell that starts with a bare "#" is an empty heading in MyST, and the column would have no title
HEADER = ["\\#", "Claim", "Milvus 2.5", "milvus-edu", "Where a learner sees it", "Verdict"]
INVARIANTS = set(check_flush.INVARIANTS + check_query.INVARIANTS + check_timetick.INVARIANTS + check_tso.INVARIANTS)
LAB_FILES = {1: "01_tso", 2: "02_timetick", 3: "03_flush_checkpoint", 4: "04_guarantee_ts"}


def _text() -> str:
    return PAGE.read_text(encoding="utf-8")


def _sections(text: str) -> dict[str, str]:
    """The page cut at its MyST labels: label -> the text up to the next label."""
    parts = re.split(r"^\((seeds-[a-z0-9-]+)\)=\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _rows(section: str) -> list[list[str]]:
    """The rows (header first) of the one ``milvus-edu-design-claims`` list-table in a section, as cell texts."""
    assert section.count(":class: milvus-edu-design-claims\n") == 1, "one claims table per section"
    block = section.split(":class: milvus-edu-design-claims\n", 1)[1].split("```", 1)[0]
    rows = []
    for chunk in re.split(r"^\* - ", block, flags=re.M)[1:]:
        rows.append([" ".join(cell.split()) for cell in re.split(r"^  - ", chunk, flags=re.M)])
    return rows


def _claim_rows() -> list[tuple[str, list[str]]]:
    sections = _sections(_text())
    return [(label, row) for label in SECTIONS for row in _rows(sections[label])[1:]]


# ---- the page's place in the book --------------------------------------------------------------------
def test_page_is_in_the_toc_and_the_introduction():
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text(encoding="utf-8"))
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert "seeds" in files
    assert "{doc}`seeds`" in (BOOK / "intro.md").read_text(encoding="utf-8")


def test_labels_are_unique_in_the_book_and_each_chapter_has_its_section():
    labels = []
    for page in sorted(BOOK.glob("*.md")):
        labels += re.findall(r"^\(([A-Za-z0-9_-]+)\)=$", page.read_text(encoding="utf-8"), flags=re.M)
    assert len(labels) == len(set(labels)), sorted(label for label in labels if labels.count(label) > 1)
    own = set(_sections(_text()))
    assert set(SECTIONS) | {"seeds-verdicts", "seeds-documents", "seeds-departures"} == own


def test_page_names_each_document_once_and_calls_them_design_documents():
    text = _text()
    for name in DOCUMENTS:
        assert text.count(name) == 1, name
    assert "design documents" in text
    # "seed" means the random seed here (seed 1, seed=1, the scenario seed-example), never a document
    assert not re.search(r"\bseeds?\b(?![=-]| 1\b)", text.replace("{doc}`seeds`", "")), "call them design documents"


# ---- the claims tables ---------------------------------------------------------------------------------
def test_every_claim_row_is_complete_numbered_and_judged():
    sections = _sections(_text())
    for label, prefix in SECTIONS.items():
        header, *rows = _rows(sections[label])
        assert [header[0], header[1].split(" (")[0], *header[2:]] == HEADER, label  # the claim names its section
        assert [row[0] for row in rows] == [f"{prefix}-{i}" for i in range(1, len(rows) + 1)], label
        for row in rows:
            assert len(row) == 6 and all(row), row[0]
            parts = row[5].split("; ")
            assert all(part.startswith(VERDICTS) for part in parts), (row[0], row[5])
            # a claim about Milvus names the file it checked, unless Milvus's side is outside the model
            if "not modelled" not in row[5]:
                assert re.search(r"[\w/]+\.(go|h)\b", row[2]), (row[0], "name the Go file")


def test_departures_summary_cites_rows_that_exist_and_every_departure():
    sections = _sections(_text())
    verdicts = {row[0]: row[5] for _, row in _claim_rows()}
    cited = re.findall(r"\b((?:TSO|TT|GT|FL|CP|RC)-\d+)\b", sections["seeds-departures"])
    assert cited
    for row_id in cited:
        assert row_id in verdicts, row_id
    for row_id, verdict in verdicts.items():
        if not verdict.startswith(("agrees", "not modelled")):
            assert row_id in cited, f"{row_id} ({verdict}) is missing from the summary of departures"


def _resolve(dotted: str) -> object:
    """Import the longest module prefix of ``dotted``, then walk the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("page", ["seeds.md", "quirks.md"])
def test_every_model_name_the_page_links_exists(page):
    text = (BOOK / page).read_text(encoding="utf-8")
    targets = set()
    for target in re.findall(r"\{py:[a-z]+\}`([^`]+)`", text):
        target = target.split("<")[-1].rstrip(">").lstrip("~")
        targets.add(target)
    assert targets
    for target in sorted(targets):
        assert target.startswith("milvus_edu"), target
        _resolve(target)  # raises when a module, class or function was renamed


def test_scenarios_switches_and_checkers_the_rows_point_to_exist():
    known_scenarios = set(scenarios())
    switches = set(BugSwitches.names())
    for row_id, row in ((row[0], row) for _, row in _claim_rows()):
        text = re.sub(r"\{[a-z:]+\}`[^`]*`", "", " ".join(row[1:]))  # roles link pages and code, not scenarios
        for name in re.findall(r"bug switch `([a-z_0-9]+)`", text):
            assert name in switches, (row_id, name)
        for name in re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", text):
            assert name in known_scenarios or name in INVARIANTS, (row_id, name)


def _lab_sections(number: int) -> set[str]:
    nb = json.loads((ROOT / "notebooks" / f"{LAB_FILES[number]}.ipynb").read_text(encoding="utf-8"))
    found = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            found |= set(re.findall(r"^#{2,3} (\d+[a-z]?)\. ", "".join(cell["source"]), flags=re.M))
    return found


def test_lab_sections_the_rows_point_to_exist():
    refs = re.findall(r"Lab (\d)((?:(?:,|–| and)? ?§\d+[a-z]?)+)", _text())
    assert refs
    for lab, sections in refs:
        have = _lab_sections(int(lab))
        for section in re.findall(r"§(\d+[a-z]?)", sections):
            assert section in have, f"Lab {lab} has no section {section}"


# ---- the numbers the page quotes, from the runs (slow: each runs a scenario) --------------------------
def _counts(scenario: str, switches: list[str]) -> dict[str, int]:
    import milvus_edu

    counts = milvus_edu.simulate(scenario, seed=1, switches=switches).summary["checks"]["violation_counts"]
    return {k: v for k, v in counts.items() if v}


@pytest.mark.slow
@pytest.mark.parametrize("row_id, scenario, switches, expected", [
    ("FL-6", "checkpoint-during-sync", ["checkpoint_ignores_syncing_segments"],
     {"checkpoint-safe": 4, "flush-durable": 4, "flush-completes": 1}),
    ("FL-8", "flush-ts-boundary", ["reset_flush_ts_inclusive"], {}),
    ("FL-8", "flush-ts-slow-store", ["reset_flush_ts_inclusive", "checkpoint_ignores_syncing_segments"],
     {"checkpoint-safe": 4, "flush-durable": 4}),
    ("FL-9", "checkpoint-rpc-lost", ["drop_failed_checkpoint_tasks"], {"checkpoint-retried": 2}),
    ("FL-11", "datanode-crash-recovery", ["skip_recovery_filter"], {"durable": 10918}),
])
def test_bug_switch_numbers_in_the_rows_match_a_run(row_id, scenario, switches, expected):
    row = dict((row[0], row) for _, row in _claim_rows())[row_id]
    for invariant, count in expected.items():
        assert f"`{invariant}`" in row[4] and f"{count:,}" in row[4], row_id
    assert _counts(scenario, switches) == expected  # FL-8: nothing with the switch alone


@pytest.mark.slow
def test_flush_ts_sync_is_not_a_flush_sync_fl3():
    import milvus_edu

    ev = milvus_edu.simulate("flush-manual", seed=1).events
    syncs = ev[(ev.kind == "datanode.sync") & ev.segment.isin([10000, 10001])]
    flags = [(round(t / 1000, 2), json.loads(d)["flush"]) for t, d in zip(syncs.t_ms, syncs.detail)]
    assert flags[:4] == [(12.26, False), (12.26, False), (14.66, True), (14.66, True)]
    seals = ev[ev.kind == "datacoord.flush_segments"]
    assert round(seals.t_ms.iloc[0] / 1000, 2) == 14.65  # DataCoord's FlushSegments, then the seal, then the sync
    assert seals.t_ms.iloc[0] < syncs.t_ms.iloc[2]


@pytest.mark.slow
def test_timetick_numbers_tt2_tt6_tt7_tt8():
    import milvus_edu

    seed4 = milvus_edu.simulate("timetick-basics", seed=4).events
    ticks = seed4[(seed4.kind == "mq.produce") & (seed4.msg_type == "TimeTick")]
    per_round = ticks.groupby(ticks.t_ms // 200).ts.nunique()
    assert (len(per_round), int((per_round > 1).sum())) == (24, 2)  # TT-2: "with `seed=4` ... 2 of the 24 rounds"
    ev = milvus_edu.simulate("timetick-basics", seed=1).events
    ticks = ev[(ev.kind == "mq.produce") & (ev.msg_type == "TimeTick")]
    rounds = ticks.t_ms // 200
    from_ddl = ticks.detail.str.contains('"min_from":"ddl"').groupby(rounds).all()
    assert (len(from_ddl), int(from_ddl.sum())) == (24, 16)  # TT-2: "with `seed=1` ... in 16 of the 24 rounds"
    assert (ticks[from_ddl[rounds].to_numpy()].groupby("t_ms").ts.nunique() == 1).all()  # "every pchannel gets it"
    others = ticks[~from_ddl[rounds].to_numpy()]
    assert set(others.detail.str.extract(r'"min_from":"([^"]+)"')[0]) == {"proxy-2"}  # "proxy-2's value is older"
    assert int((others.groupby(others.t_ms // 200).ts.nunique() > 1).sum()) == 4  # "in 4 of them ... different"
    sync = json.loads(ev[ev.kind == "rootcoord.ticker_start"].detail.iloc[0])["sync_ts_phase_ms"]
    assert round(sync, -1) == 100  # "sent about 100 ms old"
    seconds = 4.0  # the proxies start their loops at 0.2 s; the run is 5 s long
    late = ev[ev.t_ms >= 1000]
    for kind, per_s in (("proxy.tick", 10), ("proxy.report", 5)):
        per_proxy = late[late.kind == kind].groupby("node").size()
        assert len(per_proxy) == 2 and all(abs(n / seconds - per_s) <= 0.5 for n in per_proxy), kind
    ddl = late[(late.kind == "rootcoord.timetick_update") & (late.peer == "ddl")]
    assert abs(len(ddl) / seconds - 5) <= 0.5


@pytest.mark.slow
def test_tso_batches_and_no_retry_tso3():
    import milvus_edu

    for scenario, batch in (("tso-basics", 1000), ("tso-clock-skew", 40000)):
        ev = milvus_edu.simulate(scenario, seed=1).events
        assert batch in set(ev[ev.kind == "tso.alloc"]["count"]), scenario
        assert not (ev.kind == "tso.alloc_retry").any(), scenario
