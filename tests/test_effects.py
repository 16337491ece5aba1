"""The effect driver: results are sent back, failures are thrown in where the effect was asked."""

import pytest

from milvus_edu.effects import drive


def _steps():
    first = yield "alloc"
    try:
        yield "save"
    except RuntimeError as exc:
        return (first, f"recovered from {exc}")
    return (first, "saved")


def test_results_are_sent_back_in_order():
    asked = []

    def handle(effect):
        asked.append(effect)
        return 7 if effect == "alloc" else None

    assert drive(_steps(), handle) == (7, "saved")
    assert asked == ["alloc", "save"]


def test_a_failure_is_raised_at_the_step_that_asked():
    def handle(effect):
        if effect == "save":
            raise RuntimeError("rpc down")
        return 1

    assert drive(_steps(), handle) == (1, "recovered from rpc down")


def test_an_uncaught_failure_reaches_the_caller():
    def handle(effect):
        raise ValueError("no ids")

    with pytest.raises(ValueError, match="no ids"):
        drive(_steps(), handle)


def test_sleeping_answers_sleep_effects_with_seconds_and_passes_the_rest_on():
    from milvus_edu.effects import Call, Sleep, sleeping

    slept = []

    def steps():
        yield Sleep(250_000_000)
        got = yield Call("rootcoord-1", lambda: None)
        yield Sleep(1_000)
        return got

    assert drive(steps(), sleeping(slept.append, lambda effect: effect.dst)) == "rootcoord-1"
    assert slept == [0.25, 1e-06]
    with pytest.raises(TypeError, match="no handler"):
        drive(steps(), sleeping(slept.append))


def test_started_answers_at_once_or_resumes_the_same_steps_where_they_stopped():
    from milvus_edu.effects import Sleep, started

    def steps(waits: int):
        got = []
        for i in range(waits):
            try:
                got.append((yield Sleep(i + 1)))
            except KeyError as exc:
                got.append(f"failed {exc.args[0]}")
        return got

    assert started(steps(0)) == []  # no effect needed: the value itself, no generator
    rest = started(steps(3))
    answers = iter(["a", KeyError("b"), "c"])

    def handle(effect):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return f"{answer}{effect.duration_ns}"

    assert drive(rest, handle) == ["a1", "failed b", "c3"]  # the first effect is Sleep(1), as the steps' own
