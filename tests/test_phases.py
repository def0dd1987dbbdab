"""The phase timer: nesting pauses the outer phase, threads overlap and say so, no timer costs nothing."""

from __future__ import annotations

import threading
import time

import pytest

from semsearch import phases


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_nested_phase_pauses_the_one_around_it():
    clock = Clock()
    timer = phases.PhaseTimer(clock)
    with timer.phase("index"):
        clock.now += 1
        with timer.phase("train"):
            clock.now += 2
        clock.now += 3
    clock.now += 0.5  # in no phase
    report = timer.report()
    assert report.phases == {"index": 4.0, "train": 2.0}
    assert report.overlapped_s == 0
    assert report.other_s == pytest.approx(0.5)
    assert report.wall_s == pytest.approx(6.5)


def test_phases_in_threads_overlap_and_the_sum_still_makes_the_wall_time():
    with phases.timing() as timer:

        def tokenise() -> None:
            with phases.phase("tokenise"):
                time.sleep(0.2)

        thread = threading.Thread(target=phases.in_context(tokenise))
        thread.start()
        with phases.phase("encode"):
            time.sleep(0.3)
        thread.join()
    report = timer.report()
    assert set(report.phases) == {"encode", "tokenise"}
    assert report.overlapped_s == pytest.approx(0.2, abs=0.05)
    total = sum(report.phases.values()) - report.overlapped_s + report.other_s
    assert total == pytest.approx(report.wall_s, abs=0.002)
    assert report.other_s < 0.1 * report.wall_s


def test_a_thread_started_without_the_context_times_nothing():
    with phases.timing() as timer:
        thread = threading.Thread(target=lambda: phases.phase("lost").__enter__())
        thread.start()
        thread.join()
    assert "lost" not in timer.report().phases


def test_without_a_timer_phases_and_notes_do_nothing():
    assert phases.current() is None
    with phases.phase("read"):
        phases.note(strategy="exact")
        phases.count("rows", 3)
    assert phases.current() is None


def test_an_inner_command_times_into_the_open_timer_unless_fresh():
    with phases.timing() as outer:
        with phases.timing() as inner:
            assert inner is outer
        with phases.timing(fresh=True) as fresh:
            assert fresh is not outer
            with phases.phase("search"):
                phases.count("candidates", 10)
                phases.count("candidates", 5)
        assert phases.current() is outer
    assert "search" not in outer.report().phases
    assert fresh.report().facts == {"candidates": 15}


def test_timed_items_time_each_step_and_a_report_inside_a_phase_counts_it():
    clock = Clock()
    timer = phases.PhaseTimer(clock)

    def slow_items():
        for item in range(3):
            clock.now += 1
            yield item

    token = phases._CURRENT.set(timer)
    try:
        assert list(phases.timed(slow_items(), "read")) == [0, 1, 2]
        with phases.phase("write"):
            clock.now += 2
            inside = timer.report()
    finally:
        phases._CURRENT.reset(token)
    assert timer.report().phases == {"read": 3.0, "write": 2.0}
    assert inside.phases["write"] == 2.0 and inside.other_s == 0


def test_the_line_and_the_record_name_every_phase():
    report = phases.PhaseReport(10.0, {"read": 1.0, "encode": 9.5}, 1.0, 0.5, {"rows": 3})
    assert report.line() == (
        "read 1.000 s, encode 9.500 s, 1.000 s of them overlapped; other 0.500 s; wall 10.0 s"
    )
    assert report.to_dict() == {
        "wall_s": 10.0,
        "phases": {"read": 1.0, "encode": 9.5},
        "overlapped_s": 1.0,
        "other_s": 0.5,
        "facts": {"rows": 3},
    }
