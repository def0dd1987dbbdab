"""The real server process: starts on a free port, answers, and drains on SIGTERM."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from server.live import start_server

KEY = {"Authorization": "Bearer test-key"}


def _search(base: str, query: str) -> int:
    request = urllib.request.Request(f"{base}/search?q={query}&k=3", headers=KEY)
    with urllib.request.urlopen(request, timeout=30) as response:
        assert len(json.load(response)["results"][0]["hits"]) == 3
        return response.status


def _add(base: str, rows: list[dict]) -> int:
    request = urllib.request.Request(
        f"{base}/indexes/docs/documents",
        data=json.dumps({"rows": rows}).encode(),
        headers={"Content-Type": "application/json", **KEY},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.load(response)["added"] == len(rows)
        return response.status


def test_sigterm_drains_the_server_answers_what_is_in_flight_and_exits_0(index_dir) -> None:
    """SIGTERM (`docker stop`) while searches wait in the micro-batcher and an add through the
    API is running: every request is answered, the add is a new generation, the process
    exits 0 within 10 s with one line, and the index verifies. Before, uvicorn raised
    SIGTERM again once drained, and the process died of it (-15)."""
    import subprocess
    import sys

    # With others in flight, a batch waits up to 1 s for more queries (up to 64 a batch),
    # so the searches below are still queued in the batcher when SIGTERM arrives.
    extra = ("--max-wait-ms", "1000", "--max-batch", "64", "--api-key", "test-key")
    process, base = start_server(index_dir, extra=extra)
    rows = [
        {"doc_id": f"new{i}", "text": f"A new text, number {i}.", "topic": "new"}
        for i in range(300)
    ]
    try:
        with ThreadPoolExecutor(6) as pool:
            queries = ("guitar", "cat", "rocket", "cake", "linux")
            answers = [pool.submit(_search, base, query) for query in queries]
            added = pool.submit(_add, base, rows)
            time.sleep(0.3)
            in_flight = sum(not answer.done() for answer in [*answers, added])
            process.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            assert [answer.result(timeout=30) for answer in answers] == [200] * len(queries)
            assert added.result(timeout=30) == 200
        _, stderr = process.communicate(timeout=30)
        exit_s = time.monotonic() - stopped
    finally:
        if process.poll() is None:
            process.kill()
    assert in_flight >= 2
    assert process.returncode == 0, stderr
    assert exit_s < 10
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        "semsearch: stopped by SIGTERM after answering the requests in flight"
    )
    verified = subprocess.run(
        [sys.executable, "-m", "semsearch", "verify", "docs", "--index-dir", str(index_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stderr
    from semsearch.store.folders import IndexFolder

    manifest = IndexFolder(index_dir / "docs").manifest()
    assert manifest.generation == 2 and manifest.rows == 12 + len(rows)


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
