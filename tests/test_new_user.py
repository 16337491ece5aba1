"""Rough edges a new user met: following the README and the CLI with plausible mistakes, each pinned by a test that
failed before its fix."""

import milvus_edu
from run_support import run_main


def test_a_fork_whose_fault_stops_progress_blames_the_fault_not_params_the_user_never_gave(capsys, tmp_path):
    # seed-example with proxy-1 killed at 1 s: ticks stop (a stall) and tsafe-progress fails; the exit status is 0
    # because the fault is the fork's lesson, and the note must say so, not speak of --param/--option values
    milvus_edu.simulate("seed-example", duration_s=3, out_dir=tmp_path / "a", keep_events=False)
    code, out, err = run_main(capsys, "fork", str(tmp_path / "a"), "--at", "1", "--kill", "proxy-1",
                              "--out", str(tmp_path / "b"))
    assert code == 0, err
    assert "checks FAILED" in out
    assert "--param" not in out and "--option" not in out
    assert "(expected: the fork's kill proxy-1 at 1.000 s keeps this run from making progress;" in out
