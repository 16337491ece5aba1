"""Every scenario's run log is byte-identical to the digest kept in ``tests/data/golden_runs.json``.

Refactors of the simulator (the node base, the effect interpreter, speed work) must not change a
run log by accident. A deliberate change regenerates the digests with
``python benchmarks/run_digests.py --write-golden`` and says in its commit which scenarios changed and why.
"""

import json
import sys
from pathlib import Path

import pytest

from milvus_edu.registry import scenarios

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from run_digests import GOLDEN, run_log_digest  # noqa: E402

GOLDEN_RUNS = json.loads(GOLDEN.read_text())


def test_every_scenario_has_a_golden_digest():
    missing = sorted(set(scenarios()) - set(GOLDEN_RUNS["sha256"]))
    gone = sorted(set(GOLDEN_RUNS["sha256"]) - set(scenarios()))
    assert not missing and not gone, (
        f"scenarios without a golden digest: {missing}; digests of no scenario: {gone}. For a new or renamed "
        "scenario (a new lesson's), run `python benchmarks/run_digests.py --write-golden` and commit "
        "tests/data/golden_runs.json")


@pytest.mark.parametrize("name", sorted(GOLDEN_RUNS["sha256"]))
def test_run_log_is_byte_identical_to_the_golden_one(tmp_path, name):
    digest = run_log_digest(name, GOLDEN_RUNS["seed"], GOLDEN_RUNS["max_duration_s"], tmp_path / name)
    assert digest == GOLDEN_RUNS["sha256"][name], (
        f"the run log of {name} (seed {GOLDEN_RUNS['seed']}) changed; if that is deliberate, run "
        "`python benchmarks/run_digests.py --write-golden` and say why in the commit")
