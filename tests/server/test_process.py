"""The real server process: starts on a free port, answers, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from server.live import start_server


def _search(base: str, query: str) -> int:
    with urllib.request.urlopen(f"{base}/search?q={query}&k=3", timeout=30) as response:
        assert len(json.load(response)["results"][0]["hits"]) == 3
        return response.status


def test_serve_answers_and_finishes_requests_in_flight_on_sigterm(index_dir) -> None:
    # With others in flight, a batch waits up to 1 s for more queries, so some of the
    # requests below are still being served when SIGTERM arrives (a request that found the
    # server idle is answered at once); a graceful stop answers them all before exiting.
    process, base = start_server(index_dir, extra=("--max-wait-ms", "1000"))
    try:
        with ThreadPoolExecutor(4) as pool:
            answers = [
                pool.submit(_search, base, query) for query in ("guitar", "cat", "rocket", "cake")
            ]
            time.sleep(0.3)
            in_flight = sum(not answer.done() for answer in answers)
            process.send_signal(signal.SIGTERM)
            assert [answer.result(timeout=30) for answer in answers] == [200] * 4
        assert in_flight >= 1
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells of it.
    assert process.returncode in (0, -signal.SIGTERM), stderr
    assert "Traceback" not in stderr


@pytest.mark.slow
def test_adds_by_another_process_under_load_fail_no_request(index_dir, tmp_path) -> None:
    """Clients search without pause while `semsearch add` (another process) writes two
    generations: every request succeeds, and the answers move to the new generations."""
    import subprocess
    import sys
    import threading

    import pyarrow as pa
    import pyarrow.parquet as pq

    process, base = start_server(index_dir)
    failures, generations, stop = [], set(), threading.Event()

    def client() -> None:
        while not stop.is_set():
            try:
                with urllib.request.urlopen(
                    f"{base}/search?q=a+violin+concert&k=5", timeout=30
                ) as response:
                    generations.add(json.load(response)["generation"])
            except Exception as exc:  # any failure is what this test looks for
                failures.append(repr(exc))

    threads = [threading.Thread(target=client) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        for batch in range(2):
            rows = tmp_path / f"more{batch}.parquet"
            pq.write_table(
                pa.table(
                    {
                        "doc_id": [f"n{batch}"],
                        "text": [f"A violin concert, number {batch}."],
                        "topic": ["music"],
                    }
                ),
                rows,
            )
            added = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "semsearch",
                    "add",
                    str(rows),
                    "--index",
                    "docs",
                    "--index-dir",
                    str(index_dir),
                    "--device",
                    "cpu",
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert added.returncode == 0, added.stderr
        deadline = time.monotonic() + 5
        while 3 not in generations and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert failures == []
    assert {1, 3} <= generations


@pytest.mark.slow
def test_serve_with_nothing_to_serve_is_one_line(tmp_path, index_dir) -> None:
    import subprocess
    import sys

    for args in (["--index-dir", str(tmp_path / "empty")], ["nope", "--index-dir", str(index_dir)]):
        process = subprocess.run(
            [sys.executable, "-m", "semsearch", "serve", *args, "--port", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert process.returncode == 2 and "Traceback" not in process.stderr
        assert len(process.stderr.strip().splitlines()) == 1 and process.stderr.startswith(
            "error: "
        )


def test_serve_exits_with_one_line_when_its_indexes_cannot_load(
    tmp_path, corpus_file, tiny_model_dir
) -> None:
    import shutil
    import subprocess
    import sys

    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions

    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    build_index(
        BuildOptions(
            corpus=corpus_file,
            name="docs",
            id_column="doc_id",
            model=str(model),
            out_dir=tmp_path / "idx",
            device="cpu",
            show_progress=False,
        )
    )
    shutil.rmtree(model)  # the index's model is gone: the server cannot load it
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "semsearch",
            "serve",
            "--index-dir",
            str(tmp_path / "idx"),
            "--port",
            "0",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode != 0
    errors = [line for line in finished.stderr.splitlines() if "could not start" in line]
    assert len(errors) == 1 and errors[0].startswith("error: "), finished.stderr
    assert "Traceback" not in finished.stderr
