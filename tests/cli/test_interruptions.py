"""SIGTERM (what `docker stop` and Kubernetes send) is handled as Ctrl-C is: one line that
says what was kept, the shell's exit code, no traceback, and a build that resumes."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

TEXTS = 3_000


def _messages(stderr: str) -> list[str]:
    """stderr without the progress bars and the model's loading line."""
    lines = (line.strip() for line in stderr.replace("\r", "\n").splitlines())
    return [line for line in lines if line and not line.startswith(("encoding", "loading model"))]


def _semsearch(*args: str) -> list[str]:
    return [sys.executable, "-m", "semsearch", *args]


def _verified(path: Path):
    """The index's manifest, once `semsearch verify` would pass it (every file checked)."""
    from semsearch.store.folders import IndexFolder
    from semsearch.store.verify import verify_index

    folder = IndexFolder(path)
    report = verify_index(folder)
    assert report.status == "ok", report.problems
    return folder.manifest()


def test_sigterm_to_a_build_keeps_what_it_encoded_in_one_line_and_exits_143(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """Before, SIGTERM ended a build at once, without a word (exit -15), keeping nothing of
    the part it was encoding."""
    corpus = tmp_path / "texts.parquet"
    texts = [f"text number {i} " + "word " * (i % 20) for i in range(TEXTS)]
    pq.write_table(pa.table({"text": texts}), corpus)
    build = _semsearch(
        "build", str(corpus), "--model", str(tiny_model_dir), "--out-dir", str(tmp_path / "out")
    )
    build += ["--runtime", "torch", "--device", "cpu"]
    partial = tmp_path / "out" / ".texts.partial"
    first_slice = partial / "segments" / "s000000" / ".encoding" / "part-00000" / "slice-00000.npz"
    stderr_path = tmp_path / "stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(build, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 120
        while not first_slice.exists() and process.poll() is None:
            assert time.monotonic() < deadline, "no slice saved in 120 s"
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 143
    (line,) = _messages(stderr_path.read_text())
    kept = re.fullmatch(
        rf"stopped by SIGTERM: ([\d,]+) of 3,000 texts are encoded and kept in {partial}: "
        "run the same command again to resume from there",
        line,
    )
    assert kept, line
    assert int(kept.group(1).replace(",", "")) >= 2048  # the first slice at least

    resumed = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{partial}: {kept.group(1)} rows are encoded already" in resumed.stderr
    assert not partial.exists()
    assert _verified(tmp_path / "out" / "texts").rows == TEXTS


def test_every_command_hears_sigterm_as_ctrl_c_one_line_and_exit_143() -> None:
    """What every command's wrapper does: SIGTERM raises where the work is (cleanup runs as
    for Ctrl-C), is one line, and exits 143; the process's own handler is back after. In a
    process of its own: a SIGTERM to the test runner could reach any of its threads."""
    script = """
import os, signal, sys, time
import typer
from semsearch.cli.common import user_errors

@user_errors
def long_command():
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the work the signal stops
    finally:
        print("cleaned", flush=True)

before = signal.getsignal(signal.SIGTERM)
try:
    long_command()
except typer.Exit as ended:
    print("handler restored", signal.getsignal(signal.SIGTERM) is before, flush=True)
    sys.exit(ended.exit_code)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 143, done.stderr
    assert done.stdout.splitlines() == ["cleaned", "handler restored True"]
    assert done.stderr == "stopped by SIGTERM\n"


def test_sigterm_to_an_add_leaves_the_index_at_its_generation(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """SIGTERM while `add` encodes: one line, exit 143, and the index as it was (verified)."""
    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions

    first = tmp_path / "first.parquet"
    pq.write_table(pa.table({"text": [f"text {i}" for i in range(50)]}), first)
    out = tmp_path / "out"
    options = BuildOptions(
        corpus=first, name="texts", model=str(tiny_model_dir), out_dir=out, show_progress=False
    )
    build_index(options)
    more = tmp_path / "more.parquet"
    texts = [f"another text number {i} " + "word " * (i % 20) for i in range(TEXTS)]
    pq.write_table(pa.table({"text": texts}), more)
    add = _semsearch("add", str(more), "--index", "texts", "--index-dir", str(out))
    add += ["--runtime", "torch", "--device", "cpu"]
    stderr_path = tmp_path / "stderr"
    encoding = out / "texts" / "segments" / ".tmp-s000001"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(add, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 120
        while not encoding.exists() and process.poll() is None:
            assert time.monotonic() < deadline, "the add wrote nothing in 120 s"
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 143
    assert _messages(stderr_path.read_text()) == ["stopped by SIGTERM"]
    manifest = _verified(out / "texts")
    assert manifest.generation == 1 and manifest.rows == 50


def test_a_stopping_server_gives_a_change_what_is_left_of_10_s_then_abandons_it(
    monkeypatch, capsys
) -> None:
    from types import SimpleNamespace

    from semsearch.cli import serve_command

    waited, exits = [], []

    class Busy:  # a registry whose add never finishes
        def wait_for_writes(self, timeout_s: float) -> bool:
            waited.append(timeout_s)
            return False

    monkeypatch.setattr(serve_command.os, "_exit", exits.append)
    api = SimpleNamespace(state=SimpleNamespace(startup=SimpleNamespace(result=Busy())))
    serve_command._finish_writes(api, time.monotonic() - 8)  # SIGTERM came 8 s ago
    assert exits == [0] and 1 < waited[0] <= 1.5
    assert "did not finish within 10 s and was abandoned" in capsys.readouterr().err
