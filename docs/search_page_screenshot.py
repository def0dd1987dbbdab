"""Retake docs/search-page-documents.png: the search page on an index of this documentation.

    python docs/search_page_screenshot.py        # a few minutes on 2 CPU cores

Builds `manual` from docs/ (the default model, chunked) in a temporary folder, serves it,
asks the page the query below, and saves what headless chromium shows, through Playwright
(`make test` installs it; chromium from `apt-get install chromium`, or SEMSEARCH_CHROMIUM=PATH).
Run it from a checkout after a change to the page, so the picture shows the page as it is.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's semsearch
QUERY = "check that the files of an index are not damaged"


def semsearch(*args: str) -> list[str]:
    """The command line of `semsearch -q ARGS`."""
    return [sys.executable, "-m", "semsearch", "-q", *args]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_ready(base: str, server: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("semsearch serve exited before it was ready")
        try:
            with urllib.request.urlopen(f"{base}/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"semsearch serve was not ready in {timeout_s:.0f} s")


def screenshot(url: str, out: Path, width: int) -> None:
    """The page at `url`, once its hits are shown, as a PNG of its full height."""
    from playwright.sync_api import sync_playwright

    chromium = (
        os.environ.get("SEMSEARCH_CHROMIUM")
        or shutil.which("chromium")
        or shutil.which("chromium-browser")
    )
    if chromium is None:
        raise SystemExit("no chromium: `apt-get install chromium` or set SEMSEARCH_CHROMIUM")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 620})
        page.goto(url)
        page.wait_for_selector("tr.hit")
        page.screenshot(path=str(out), full_page=True)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default=QUERY)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--width", type=int, default=1100, help="The browser's width in pixels.")
    parser.add_argument("--out", type=Path, default=DOCS / "search-page-documents.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="screenshot-") as scratch:
        indexes = Path(scratch) / "indexes"
        build = semsearch("build", str(DOCS), "--name", "manual", "--out-dir", str(indexes))
        subprocess.run(build, env=ENV, check=True)
        port = free_port()
        serve = semsearch("serve", "manual", "--index-dir", str(indexes), "--port", str(port))
        server = subprocess.Popen(serve, env=ENV, stdout=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_ready(base, server)
            search = urllib.parse.urlencode({"q": args.query, "k": args.k, "index": "manual"})
            screenshot(f"{base}/?{search}", args.out, args.width)
        finally:
            server.terminate()
            server.wait(timeout=60)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
