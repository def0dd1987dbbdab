"""The overlapped stages: order, the memory bound, and failures that stop every stage."""

from __future__ import annotations

import threading
import time

import pytest

from semsearch.ingest.pipeline import Pipeline, Stopped


def _stage_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("semsearch-")]


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_every_item_goes_through_every_stage_in_order(depth) -> None:
    written: list[int] = []
    Pipeline(depth).run(range(50), lambda x: x + 1, lambda x: x * 2, written.append)
    assert written == [(x + 1) * 2 for x in range(50)]
    assert _stage_threads() == []


@pytest.mark.parametrize("depth", [1, 2])
def test_the_items_alive_at_once_stay_within_the_bound(depth) -> None:
    produced = written = 0
    most = 0

    def items():
        nonlocal produced, most
        for item in range(40):
            produced += 1
            most = max(most, produced - written)
            yield item

    def slow_write(item: int) -> None:
        nonlocal written
        time.sleep(0.005)  # the reader runs ahead until the queues are full
        written += 1

    Pipeline(depth).run(items(), lambda x: x, lambda x: x, slow_write)
    assert written == 40
    # it did run ahead, and no further: one item in each of 4 stages, `depth` in each of 3 queues
    assert depth < most <= 3 * depth + 4


@pytest.mark.parametrize("stage", ["read", "tokenise", "encode", "write"])
def test_a_failing_stage_is_raised_once_and_stops_the_others(stage) -> None:
    written: list[int] = []
    encoded: list[int] = []

    def fail_at(name: str, item: int) -> int:
        if name == stage and item == 3:
            raise ValueError(f"{name} broke")
        return item

    def items():
        for item in range(10_000):
            yield fail_at("read", item)

    def encode(item: int) -> int:
        encoded.append(item)
        return fail_at("encode", item)

    with pytest.raises(ValueError, match=f"^{stage} broke$"):
        Pipeline(1).run(
            items(),
            lambda x: fail_at("tokenise", x),
            encode,
            lambda x: written.append(fail_at("write", x)),
        )
    assert _stage_threads() == []  # every stage has stopped
    assert len(encoded) < 20  # and none ran on through the rest of the items
    assert 3 not in written


def test_an_interrupt_in_the_encoder_stops_the_other_stages() -> None:
    def encode(item: int) -> int:
        if item == 2:
            raise KeyboardInterrupt
        return item

    with pytest.raises(KeyboardInterrupt):
        Pipeline(1).run(iter(range(10_000)), lambda x: x, encode, lambda x: None)
    assert _stage_threads() == []


def test_a_long_stage_can_give_up_within_its_work_when_another_fails() -> None:
    pipeline = Pipeline(1)
    checks = 0

    def write(item: int) -> None:
        raise OSError("disk full")

    def encode(item: int) -> int:
        nonlocal checks
        for _ in range(1000 if item else 1):  # part 1's batches; part 0's write fails meanwhile
            time.sleep(0.002)
            checks += 1
            pipeline.check()
        return item

    with pytest.raises(OSError, match="disk full"):
        pipeline.run(range(5), lambda x: x, encode, write)
    assert checks < 500  # part 1 stopped within its batches
    with pytest.raises(Stopped):
        pipeline.check()
