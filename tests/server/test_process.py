"""The real server process: starts on a free port, answers, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import signal
import urllib.request

from server.live import start_server


def test_serve_answers_and_stops_on_sigterm(index_dir) -> None:
    process, base = start_server(index_dir)
    try:
        with urllib.request.urlopen(f"{base}/search?q=guitar&k=3", timeout=10) as response:
            body = json.load(response)
        assert len(body["results"][0]["hits"]) == 3
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status tells of it.
    assert process.returncode in (0, -signal.SIGTERM), stderr
    assert "Traceback" not in stderr
