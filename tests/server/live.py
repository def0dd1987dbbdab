"""Starting `semsearch serve` as a real process on a free local port, for the tests that need one."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(
    index_dir: Path, timeout_s: float = 60, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, str]:
    """The server process (with `extra` options) and its base URL, once `/ready` answers 200."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "semsearch",
            "serve",
            "--index-dir",
            str(index_dir),
            "--port",
            str(port),
            "--device",
            "cpu",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base}/ready", timeout=2) as response:
                if response.status == 200:
                    return process, base
        except OSError:
            pass
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the server was not ready in {timeout_s:.0f} s")
        time.sleep(0.2)
