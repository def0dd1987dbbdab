"""Every shell command and `curl` example in the code blocks of README.md and docs/*.md, run
as written; and every relative link of those pages leads to a file.

The blocks are read from the pages themselves, so an example that stops working fails here.
The blocks about the demo index (`debian-demo`) run where `make demo` and one build of the
user's own leave a user: a folder whose `indexes/` holds that index and another (`own`), and
whose `.venv/bin/semsearch` is semsearch. The others run in one folder holding the files they
name (`corpus.parquet` with `id`, `text`, `year` and `license` columns, `queries.txt`, ...,
and `docs/`, a copy of the project's own documentation as a folder of documents), made from
the demo corpus, and an `indexes/` that already holds `own`: README.md first, then the pages
in name order, so a page may use the `corpus` index that the README's quick start builds.
Every server so serves two indexes or more, and an example that does not name its index
fails. `semsearch` is the package run by this interpreter. Of the servers, the
pages' address and ports are the only things changed: each listens on a free port, the
`curl` lines of a block are sent to the block's first, and a block's servers stop at its end.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from server.live import free_port

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Records of what was measured when, not instructions: their commands are not run.
NOT_INSTRUCTIONS = {"results-history.md"}
DEMO_CORPUS = ROOT / "data" / "demo" / "debian_packages.parquet"
SHELL_BLOCKS = {"bash", "sh", "shell", "console"}
PAGES_SERVER = "127.0.0.1:8000"

# Commands not run, each with why; everything else in a shell block runs.
SKIPPED = [
    (r"^make ", "sets up .venv and runs the suites: this test runs inside them"),
    (r"^\. \.venv(-gpu)?/bin/activate", "sets the PATH of a shell: here semsearch is on it"),
    (r"^pip install ", "installs an extra: set-up, not an example of use"),
    (r"^ray start|--engine ray", "needs a Ray cluster: `make test-ray` runs --engine ray"),
    (r"^semsearch train\b", "trains a model (minutes to hours): tests/cli/test_train_command.py"),
    (r"models/(stsb|cross)|--model lstm", "uses a model trained by a skipped `train` line"),
    (r"\.\./shared/data", "reads the project's shared STS-B and BEIR data, which a clone lacks"),
    (r"^semsearch bench pairs", "a measurement of minutes: tests/bench/test_bench_pairs.py"),
    (
        r"^semsearch word-",
        "trains word vectors on corpora the pages do not ship: tests/cli/test_word_commands.py",
    ),
]


def pages() -> list[Path]:
    """README.md, then docs/*.md in name order (the order their examples run in)."""
    docs = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in NOT_INSTRUCTIONS)
    return [README, *docs]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence
    language: str
    commands: list[str]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def about_the_demo(self) -> bool:
        return any("debian-demo" in command for command in self.commands)


def example_blocks() -> list[Block]:
    """The fenced code blocks of every page, each with its commands (continued lines joined)."""
    return [block for page in pages() for block in page_blocks(page)]


def page_blocks(page: Path) -> list[Block]:
    blocks, language, start, lines = [], None, 0, []
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence and language is None:
            language, start, lines = fence[1], number, []
        elif line.startswith("```"):
            commands, pending = [], ""
            for text in lines:
                pending += text.rstrip()
                if pending.endswith("\\"):
                    pending = pending[:-1] + " "
                    continue
                if pending.strip() and not pending.lstrip().startswith("#"):
                    commands.append(pending.strip())
                pending = ""
            blocks.append(Block(page, start, language, commands))
            language = None
        else:
            lines.append(line)
    return blocks


def skip_reason(command: str) -> str | None:
    return next((why for pattern, why in SKIPPED if re.search(pattern, command)), None)


def test_every_command_of_the_readme_is_in_a_shell_block() -> None:
    """A command in a block without a shell language would escape the test below."""
    for block in example_blocks():
        if block.language not in SHELL_BLOCKS:
            commands = [c for c in block.commands if re.match(r"(semsearch|curl|pip|make) ", c)]
            assert not commands, f"{block.where}: tag this block ```bash: {commands}"


def test_the_skipped_commands_are_few_and_each_is_named_for_a_reason() -> None:
    commands = [
        c for block in example_blocks() if block.language in SHELL_BLOCKS for c in block.commands
    ]
    skipped = [c for c in commands if skip_reason(c)]
    assert len(skipped) < len(commands) / 2, skipped
    assert len(SKIPPED) <= 10, "a long skip list: make the examples runnable instead"
    for pattern, _ in SKIPPED:  # every entry is still needed
        assert any(re.search(pattern, command) for command in commands), pattern


class Shell:
    """Runs the pages' lines with `bash -c` in one folder, `semsearch` being this checkout."""

    def __init__(self, folder: Path, bin_dir: Path) -> None:
        self.folder = folder
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "KEY": "readme-test-key",
        }

    def run(self, command: str, where: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (
            f"{where}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
        assert "Traceback" not in done.stderr, f"{where}: {command}\n{done.stderr[-3000:]}"
        return done

    def start(self, command: str, log: Path) -> subprocess.Popen:
        """`command` in the background, its output in `log` (a pipe nobody reads could fill
        and stop it)."""
        with log.open("w") as output:
            return subprocess.Popen(
                ["bash", "-c", f"exec {command}"],
                cwd=self.folder,
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )


@pytest.fixture(scope="session")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `semsearch` on the PATH that is this interpreter running this checkout."""
    folder = tmp_path_factory.mktemp("bin")
    script = folder / "semsearch"
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m semsearch "$@"\n')
    script.chmod(0o755)
    return folder


@pytest.fixture(scope="session")
def own_index(tmp_path_factory: pytest.TempPathFactory, bin_dir: Path) -> Path:
    """An index of the user's own (`own`: 30 packages), put beside the pages' indexes so that
    every server serves two or more: a request must name its index."""
    folder = tmp_path_factory.mktemp("own")
    pq.write_table(pq.read_table(DEMO_CORPUS).slice(0, 30), folder / "own.parquet")
    Shell(folder, bin_dir).run(
        "semsearch build own.parquet --id-column package --out-dir indexes", "own index"
    )
    return folder / "indexes" / "own"


@pytest.fixture(scope="session")
def demo_folder(tmp_path_factory: pytest.TempPathFactory, bin_dir: Path, own_index: Path) -> Path:
    """Where `make demo` and a build of one's own leave a user: `indexes/debian-demo`, built
    by its command, `indexes/own`, and `.venv/bin/semsearch`."""
    folder = tmp_path_factory.mktemp("demo")
    shutil.copytree(own_index, folder / "indexes" / own_index.name)
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "bin" / "semsearch").symlink_to(bin_dir / "semsearch")
    Shell(folder, bin_dir).run(
        f"semsearch build {shlex.quote(str(DEMO_CORPUS))} --name debian-demo --id-column "
        "package --out-dir indexes --overwrite",
        "Makefile (demo)",
    )
    return folder


@pytest.fixture(scope="session")
def corpus_folder(tmp_path_factory: pytest.TempPathFactory, own_index: Path) -> Path:
    """The files the pages' other examples name, cut from the demo corpus, and `indexes/own`."""
    folder = tmp_path_factory.mktemp("corpus")
    shutil.copytree(own_index, folder / "indexes" / own_index.name)
    demo = pq.read_table(DEMO_CORPUS)
    rows = 400
    table = pa.table(
        {
            "id": demo["package"],
            "text": demo["text"],
            "year": pa.array([2008 + i % 17 for i in range(demo.num_rows)], pa.int64()),
            "license": pa.array(
                [
                    ("MIT", "GPL-2", "BSD-3-Clause", "Apache-2.0")[i % 4]
                    for i in range(demo.num_rows)
                ]
            ),
        }
    )
    pq.write_table(table.slice(0, rows), folder / "corpus.parquet")
    pq.write_table(table.slice(rows, 30), folder / "more.parquet")
    changed = table.slice(0, 5).set_column(1, "text", pc.utf8_upper(table.slice(0, 5)["text"]))
    pq.write_table(
        pa.concat_tables([table.slice(rows + 30, 20), changed]), folder / "new_rows.parquet"
    )
    (folder / "queries.txt").write_text("resize images\nplay chess\nencrypt my backups\n")
    shutil.copytree(ROOT / "docs", folder / "docs")  # a folder of documents: the project's own
    (folder / "gone.txt").write_text("".join(f"{i}\n" for i in table["id"][10:13].to_pylist()))
    return folder


def _wait_ready(base: str, server: subprocess.Popen, log: Path, where: str) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"{where}: the server exited: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{where}: the server was not ready in 180 s")


def _stop(servers: list[subprocess.Popen]) -> None:
    while servers:
        server = servers.pop()
        server.send_signal(signal.SIGTERM)
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture()
def servers() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    _stop(started)


def _serve(shell: Shell, command: str, where: str, servers: list) -> str:
    """`semsearch serve ...` started on a free port (its --port, or the default 8000,
    replaced); its base URL once it is ready."""
    port = free_port()
    command = re.sub(r"\s+#\s.*$", "", command)  # the comment, so that --port can follow
    if re.search(r"--port \d+", command):
        command = re.sub(r"--port \d+", f"--port {port}", command)
    else:
        command += f" --port {port}"
    log = shell.folder / f"serve-{port}.log"
    server = shell.start(command, log)
    servers.append(server)
    base = f"http://127.0.0.1:{port}"
    _wait_ready(base, server, log, where)
    return base


def _check_answer(command: str, done: subprocess.CompletedProcess, where: str) -> None:
    """A `curl` answers JSON, not an error (curl exits 0 on a 400 too); one to /search answers
    results, each with hits."""
    body = json.loads(done.stdout)
    assert not (isinstance(body, dict) and "error" in body), f"{where}: {command}\n{done.stdout}"
    if "/search" not in command:
        return
    assert body["results"], f"{where}: {command}\n{done.stdout}"
    assert all(result["hits"] for result in body["results"]), f"{where}: {command}\n{done.stdout}"


@pytest.mark.slow
def test_the_pages_commands_run_as_written(demo_folder, corpus_folder, bin_dir, servers) -> None:
    if shutil.which("curl") is None:
        pytest.skip("no curl")
    ran = 0
    for block in example_blocks():
        if block.language not in SHELL_BLOCKS:
            continue
        shell = Shell(demo_folder if block.about_the_demo else corpus_folder, bin_dir)
        base = None
        where = f"the block at {block.where}"
        for command in block.commands:
            if skip_reason(command):
                continue
            if command.startswith("semsearch serve"):
                started = _serve(shell, command, where, servers)
                base = base or started
            elif command.startswith("curl "):
                assert base is not None, f"{where}: a curl line before any `semsearch serve`"
                sent = command.replace(f"http://{PAGES_SERVER}", base)
                _check_answer(command, shell.run(sent, where), where)
            else:
                shell.run(command, where)
            ran += 1
        _stop(servers)  # a server holds memory and warms up in the background: not for long
    assert ran >= 30  # the pages' examples, not a parser that found none


def relative_links(page: Path) -> list[tuple[int, str]]:
    """The page's Markdown links and images that name a path: not a URL, not an anchor alone."""
    found, in_code = [], False
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        outside_code = re.sub(r"`[^`]*`", "", line)
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", outside_code):
            if not re.match(r"(https?|mailto):|#", target):
                found.append((number, target))
    return found


def test_every_relative_link_of_the_pages_leads_to_a_file() -> None:
    links = [(page, number, target) for page in pages() for number, target in relative_links(page)]
    broken = [
        f"{page.relative_to(ROOT)}:{number}: {target}"
        for page, number, target in links
        if not (page.parent / target.split("#")[0]).exists()
    ]
    assert not broken, broken
    assert len(links) >= 20  # the pages' links, not a pattern that found none


def test_the_link_finder_finds_a_broken_link(tmp_path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](page.md) [gone](gone.md#part) [web](https://x.org) [here](#top)\n"
        "`[code](not-a-link.md)`\n```\n[block](nor-this.md)\n```\n"
    )
    assert relative_links(page) == [(1, "page.md"), (1, "gone.md#part")]
