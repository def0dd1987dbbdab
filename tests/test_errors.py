"""`ResumableError`: its message, and the failure without the advice to resume; `Interrupted`."""

from __future__ import annotations

import pickle

from semsearch.errors import ResumableError


def test_a_resumable_error_keeps_its_failure_apart_and_survives_pickling() -> None:
    error = ResumableError("the Ray job wrote 1 of 2 parts", "run the same command again")
    again = pickle.loads(pickle.dumps(error))  # as it crosses a process (Ray) boundary
    for each in (error, again):
        assert str(each) == "the Ray job wrote 1 of 2 parts; run the same command again"
        assert each.failure == "the Ray job wrote 1 of 2 parts"


def test_one_line_quotes_the_first_non_blank_line_or_the_type() -> None:
    from semsearch.errors import one_line

    assert one_line(ValueError("\n  bad value  \nmore detail")) == "bad value"
    assert one_line(KeyError()) == "KeyError"
    assert one_line(OSError("x" * 500), limit=10) == "x" * 10


def test_an_interruption_is_a_keyboard_interrupt_with_the_shell_s_exit_code() -> None:
    import signal

    from semsearch.errors import Interrupted, as_interrupted

    terminated = Interrupted("stopped by SIGTERM: 4,096 texts kept", signal.SIGTERM)
    assert isinstance(terminated, KeyboardInterrupt)  # every Ctrl-C handler handles it too
    assert terminated.exit_code == 143 and terminated.stopped == "stopped by SIGTERM"
    assert str(terminated) == "stopped by SIGTERM: 4,096 texts kept"
    again = pickle.loads(pickle.dumps(terminated))
    assert (str(again), again.exit_code) == (str(terminated), 143)
    ctrl_c = as_interrupted(KeyboardInterrupt())
    assert (str(ctrl_c), ctrl_c.exit_code) == ("interrupted", 130)
    assert as_interrupted(terminated) is terminated
