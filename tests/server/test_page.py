"""The search page in a real headless browser: Debian's chromium, driven by Playwright.

Skipped, saying why, where Playwright or a chromium binary is missing (`.ci/run` installs
both). With SEMSEARCH_SCREENSHOT=PATH the test also saves its screenshot there (docs/search-page.png),
and with SEMSEARCH_DOCS_SCREENSHOT=PATH the /docs test saves its own (docs/api-docs-offline.png).
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from server.live import start_server

from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "data" / "demo" / "debian_packages.parquet"
CHROMIUM = (
    os.environ.get("SEMSEARCH_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)


@pytest.fixture()
def real_index_dir(tmp_path: Path, corpus_file: Path) -> Path:
    """The test corpus indexed by the real default model, so the screenshot shows real ranks."""
    folder = tmp_path / "indexes"
    build_index(
        BuildOptions(
            corpus=corpus_file,
            name="docs",
            id_column="doc_id",
            out_dir=folder,
            device="cpu",
            show_progress=False,
        )
    )
    return folder


@pytest.fixture()
def browser():
    playwright_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed"
    )
    if CHROMIUM is None:
        pytest.skip("no chromium binary: `apt-get install chromium` (or set SEMSEARCH_CHROMIUM)")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.mark.slow
def test_typing_a_query_shows_ranked_results(browser, real_index_dir, tmp_path) -> None:
    process, base = start_server(real_index_dir)
    try:
        page = browser.new_page(viewport={"width": 1100, "height": 620})
        page.goto(base)
        page.wait_for_selector("#index option[value='docs']", state="attached")
        # The menu counts documents, the corpus' rows (a chunked index: its chunks beside).
        assert page.locator("#index option[value='docs']").inner_text() == "docs (12 documents)"
        page.fill("#q", "The cat sleeps on the sofa.")
        page.fill("#k", "4")
        page.click("#go")
        page.wait_for_selector("tr.hit")
        ids = page.locator("tr.hit td.id").all_inner_texts()
        assert len(ids) == 4 and ids[0] == "d2"
        assert "topic" in page.locator("#head").inner_text()
        page.fill("#where", "topic = 'finance'")
        page.click("#go")
        page.wait_for_function("document.querySelectorAll('tr.hit').length === 2")
        assert set(page.locator("tr.hit td.id").all_inner_texts()) == {"d4", "d5"}
        page.fill("#where", "nope = 1")
        page.click("#go")
        page.wait_for_selector("#status.error")
        assert "nope" in page.locator("#status").inner_text()
        page.fill("#where", "")
        page.fill("#q", "my cat naps on the couch")
        page.fill("#k", "5")
        page.click("#go")
        page.wait_for_selector("tr.hit")
        shot = tmp_path / "search-page.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:4] == b"\x89PNG"
        if os.environ.get("SEMSEARCH_SCREENSHOT"):
            shutil.copyfile(shot, Path(os.environ["SEMSEARCH_SCREENSHOT"]))
        # The search is in the URL: a bookmark or a reload shows the same hits.
        assert "q=my+cat" in page.url or "q=my%20cat" in page.url
        phone = browser.new_page(viewport={"width": 390, "height": 800})
        phone.goto(page.url)
        phone.wait_for_selector("tr.hit")
        assert phone.input_value("#q") == "my cat naps on the couch"
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        if os.environ.get("SEMSEARCH_SCREENSHOT"):
            narrow = Path(os.environ["SEMSEARCH_SCREENSHOT"]).with_suffix(".390px.png")
            phone.screenshot(path=str(narrow), full_page=True)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


@pytest.mark.slow
def test_the_api_docs_render_with_nothing_but_the_server_reachable(browser, index_dir) -> None:
    """/docs in a browser that may reach the server alone: Swagger UI draws the API's
    operations (it drew a blank page offline when its files came from a CDN)."""
    process, base = start_server(index_dir)
    try:
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        outside: list[str] = []

        def only_the_server(route) -> None:
            if route.request.url.startswith(base):
                route.continue_()
            else:
                outside.append(route.request.url)
                route.abort()

        page.route("**/*", only_the_server)
        page.goto(f"{base}/docs")
        page.wait_for_selector(".swagger-ui .opblock-summary-path")
        assert "semsearch" in page.locator(".swagger-ui .info .title").inner_text()
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert "/search" in paths and "/indexes/{name}/documents" in paths
        assert outside == []
        if os.environ.get("SEMSEARCH_DOCS_SCREENSHOT"):
            page.screenshot(path=os.environ["SEMSEARCH_DOCS_SCREENSHOT"], full_page=False)
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


@pytest.fixture()
def demo_index_dir(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """40 rows of the demo corpus (four columns, long descriptions) on the tiny model: what a
    phone shows of the README's demo, in seconds."""
    corpus = tmp_path / "demo.parquet"
    pq.write_table(pq.read_table(DEMO_CORPUS).slice(0, 40), corpus)
    folder = tmp_path / "indexes"
    build_index(
        BuildOptions(
            corpus=corpus,
            name="debian-demo",
            id_column="package",
            model=str(tiny_model_dir),
            out_dir=folder,
            device="cpu",
            show_progress=False,
        )
    )
    return folder


# The right edge of the page's widest element, and the room the index <select> lacks for the
# name it shows (its text's width plus room for the arrow, less its width; > 0 cuts the name).
WIDEST = "Math.max(...[...document.querySelectorAll('body *')].map(e => e.getBoundingClientRect().right))"
INDEX_NAME_CUT = """(() => {
  const select = document.getElementById("index"), probe = document.createElement("span");
  probe.style.font = getComputedStyle(select).font;
  probe.textContent = select.options[select.selectedIndex].text;
  document.body.append(probe);
  const lacking = probe.getBoundingClientRect().width + 40 - select.clientWidth;
  probe.remove();
  return lacking;
})()"""


def test_the_page_fits_a_390_px_phone(browser, demo_index_dir, tmp_path) -> None:
    """At 390 px the results table ran 270 px past the screen's edge (scrolling sideways,
    its columns cut) and the index's name was cut in its half-width <select>."""
    process, base = start_server(demo_index_dir)
    try:
        phone = browser.new_page(viewport={"width": 390, "height": 800})
        phone.goto(f"{base}/?q=edit+photos+and+images&k=5&index=debian-demo")
        phone.wait_for_selector("tr.hit")
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390
        assert phone.evaluate(WIDEST) <= 390
        assert phone.evaluate(INDEX_NAME_CUT) <= 0
        assert "short_description" in phone.locator("tr.hit td.extra").first.evaluate(
            "td => getComputedStyle(td, '::before').content"
        )
        shot = tmp_path / "search-page-390.png"
        phone.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:4] == b"\x89PNG"
        wide = browser.new_page(viewport={"width": 1100, "height": 620})
        wide.goto(phone.url)
        wide.wait_for_selector("tr.hit")
        assert wide.locator("#head th").count() == 6 and wide.locator("#head").is_visible()
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


@pytest.fixture()
def documents_index_dir(tmp_path: Path, tiny_model_dir: Path) -> Path:
    """Three Markdown files, each last modified at a known moment, indexed on the tiny model:
    the page's `modified` column."""
    folder = tmp_path / "notes"
    folder.mkdir()
    moment = 1_795_896_221.767616  # 2026-11-28T20:03:41.767616+00:00
    for number, topic in enumerate(["cats sleep on sofas", "markets and shares", "rockets"]):
        path = folder / f"note{number}.md"
        path.write_text(f"# Note {number}\n\nA note about {topic}.\n")
        os.utime(path, (moment, moment))
    out = tmp_path / "indexes"
    build_index(
        BuildOptions(
            corpus=folder,
            name="notes",
            model=str(tiny_model_dir),
            out_dir=out,
            device="cpu",
            show_progress=False,
        )
    )
    return out


def test_the_page_shows_dates_as_people_read_them(browser, documents_index_dir) -> None:
    """`modified` read `2026-11-28T20:03:41.767616+00:00`; the API keeps that ISO value."""
    process, base = start_server(documents_index_dir)
    try:
        page = browser.new_page(viewport={"width": 1100, "height": 620})
        page.goto(f"{base}/?q=cats&k=3&index=notes")
        page.wait_for_selector("tr.hit")
        modified = page.locator("tr.hit td.extra[data-label='modified']").first
        assert modified.inner_text() == "28 Nov 2026, 20:03 UTC"
        assert modified.get_attribute("title") == "2026-11-28T20:03:41.767616+00:00"
        answer = page.evaluate("fetch('/search?q=cats&k=1&index=notes').then(r => r.json())")
        assert answer["results"][0]["hits"][0]["modified"] == "2026-11-28T20:03:41.767616+00:00"
        shown = page.evaluate(
            "['2026-11-28', '2026-11-28T21:03:00+01:00', '2026-11-28T20:03:41', 'Nov 2026',"
            " '2026-13-01', 20261128].map(readableDate)"
        )
        assert shown == [
            "28 Nov 2026",
            "28 Nov 2026, 20:03 UTC",
            "28 Nov 2026, 20:03",
            None,
            None,
            None,
        ]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
