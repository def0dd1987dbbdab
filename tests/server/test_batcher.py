"""Queries submitted together share encoder calls, and each gets its own rows back."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from semsearch.server.batcher import MicroBatcher


@pytest.mark.parametrize("workers", [1, 2])
def test_concurrent_queries_share_batches_and_get_their_own_vectors(
    tiny_encoder, sentences, workers
) -> None:
    sizes: list[int] = []
    batcher = MicroBatcher(
        tiny_encoder.encode, max_batch=8, max_wait_ms=50, on_batch=sizes.append, workers=workers
    )
    expected = tiny_encoder.encode(sentences)
    results: dict[int, np.ndarray] = {}
    start = threading.Barrier(len(sentences))

    def ask(row: int) -> None:
        start.wait()
        results[row] = batcher.submit([sentences[row]]).result(timeout=30)

    threads = [threading.Thread(target=ask, args=(row,)) for row in range(len(sentences))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batcher.close()
    assert sum(sizes) == len(sentences) and max(sizes) <= 8 and len(sizes) < len(sentences)
    for row, vector in results.items():
        np.testing.assert_allclose(vector[0], expected[row], atol=1e-5)


def test_a_large_request_is_one_batch_and_a_failure_reaches_its_caller(
    tiny_encoder, sentences
) -> None:
    sizes: list[int] = []
    batcher = MicroBatcher(tiny_encoder.encode, max_batch=4, max_wait_ms=1, on_batch=sizes.append)
    assert batcher.submit(sentences).result(timeout=30).shape == (
        len(sentences),
        tiny_encoder.dimension,
    )
    failing = batcher.submit([None])  # type: ignore[list-item]  (the tokenizer refuses it)
    assert isinstance(failing.exception(timeout=30), Exception)
    assert batcher.submit(sentences[:1]).result(timeout=30).shape[0] == 1  # the worker lives on
    batcher.close()
    assert sizes == [len(sentences), 1, 1]  # a failed batch is a batch too


def test_then_runs_on_the_worker_with_its_own_rows_and_its_failure_is_its_own(
    tiny_encoder, sentences
) -> None:
    batcher = MicroBatcher(tiny_encoder.encode, max_batch=8, max_wait_ms=50)
    worker_threads: set[str] = set()

    def norms(vectors: np.ndarray) -> list[float]:
        worker_threads.add(threading.current_thread().name)
        return np.linalg.norm(vectors, axis=1).tolist()

    def fails(vectors: np.ndarray) -> None:
        raise RuntimeError(f"no search for {len(vectors)} rows")

    good = batcher.submit(sentences[:3], then=norms)
    bad = batcher.submit(sentences[3:4], then=fails)
    plain = batcher.submit(sentences[4:5])
    expected = np.linalg.norm(tiny_encoder.encode(sentences[:3]), axis=1)
    np.testing.assert_allclose(good.result(timeout=30), expected, rtol=1e-5)
    assert "no search for 1 rows" in str(bad.exception(timeout=30))
    assert plain.result(timeout=30).shape == (1, tiny_encoder.dimension)
    batcher.close()
    assert worker_threads == {"semsearch-encoder-0"}


def test_a_batch_is_encoded_in_groups_shortest_first(tiny_encoder, sentences) -> None:
    calls: list[list[str]] = []
    busy, release = threading.Event(), threading.Event()

    def encode(texts: list[str]) -> np.ndarray:
        busy.set()
        release.wait(timeout=30)  # the first call holds the worker while the rest queue up
        calls.append(texts)
        return tiny_encoder.encode(texts)

    batcher = MicroBatcher(encode, max_batch=8, max_wait_ms=200, group=3)
    blocker = batcher.submit(["the first request"])
    assert busy.wait(timeout=30)
    futures = [batcher.submit([text]) for text in sentences[:7]]
    release.set()
    vectors = np.concatenate([future.result(timeout=30) for future in futures])
    blocker.result(timeout=30)
    batcher.close()
    np.testing.assert_allclose(vectors, tiny_encoder.encode(sentences[:7]), atol=1e-5)
    assert [len(texts) for texts in calls] == [1, 3, 3, 1]
    lengths = [len(text) for texts in calls[1:] for text in texts]
    assert lengths == sorted(lengths)


def test_a_lone_request_does_not_wait_for_company(tiny_encoder, sentences) -> None:
    batcher = MicroBatcher(tiny_encoder.encode, max_batch=8, max_wait_ms=2000)
    batcher.submit(sentences[:1]).result(timeout=30)  # the first call pays for warming up
    started = time.monotonic()
    batcher.submit(sentences[1:2]).result(timeout=30)
    assert time.monotonic() - started < 1.0
    batcher.close()


def test_idle_work_runs_while_the_queue_is_empty_and_never_holds_a_query_back(
    tiny_encoder, sentences
) -> None:
    steps: list[float] = []

    def step() -> bool:  # endless background work, in small steps
        steps.append(time.monotonic())
        time.sleep(0.005)
        return True

    batcher = MicroBatcher(tiny_encoder.encode, max_batch=8, max_wait_ms=0, on_idle=step)
    try:
        time.sleep(0.1)
        assert len(steps) >= 5  # it worked while nobody asked
        started = time.monotonic()
        vectors = batcher.submit(sentences[:2]).result(timeout=30)
        assert vectors.shape[0] == 2 and time.monotonic() - started < 1.0
    finally:
        batcher.close()


def test_idle_work_stops_when_it_says_it_is_done_or_fails(tiny_encoder) -> None:
    calls = {"done": 0, "broken": 0}

    def done() -> bool:
        calls["done"] += 1
        return calls["done"] < 3

    def broken() -> bool:
        calls["broken"] += 1
        raise RuntimeError("no kernels today")

    for on_idle in (done, broken):
        batcher = MicroBatcher(tiny_encoder.encode, on_idle=on_idle)
        time.sleep(0.1)
        assert batcher.submit(["still answers"]).result(timeout=30).shape[0] == 1
        batcher.close()
    assert calls == {"done": 3, "broken": 1}
