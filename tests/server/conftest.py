"""A served index on the tiny model, and a test client that runs the app's lifespan."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.server.app import create_app
from semsearch.server.registry import IndexRegistry
from semsearch.server.schemas import Limits, ServerConfig

API_KEY = "test-key"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of each test's own: a checked OpenVINO export that an earlier test (a CLI
    query) left would otherwise replace the torch encoder these tests are about."""
    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "own-cache"))
    return tmp_path / "own-cache"


@pytest.fixture()
def index_dir(tmp_path: Path, corpus_file: Path, tiny_model_dir: Path) -> Path:
    folder = tmp_path / "indexes"
    build_index(
        BuildOptions(
            corpus=corpus_file,
            name="docs",
            id_column="doc_id",
            model=str(tiny_model_dir),
            out_dir=folder,
            device="cpu",
            show_progress=False,
        )
    )
    return folder


class ReadyClient(TestClient):
    """A test client whose `with` block starts once the server is ready (its indexes load
    in the background): the tests ask questions of a served index, not of a starting one."""

    def __enter__(self) -> ReadyClient:
        super().__enter__()
        self.app.state.startup.wait(timeout=60)
        return self

    @property
    def registry(self) -> IndexRegistry:
        return self.app.state.startup.result


def serve(index_dir: Path, **options) -> ReadyClient:
    config = ServerConfig(
        index_dir=index_dir,
        device="cpu",
        refresh_every_s=0.05,
        limits=Limits(max_k=50, max_queries=8, max_query_chars=200, max_body_bytes=100_000),
        **options,
    )
    return ReadyClient(create_app(config), raise_server_exceptions=False)


@pytest.fixture()
def client(index_dir: Path) -> Iterator[ReadyClient]:
    with serve(index_dir) as test_client:
        yield test_client


@pytest.fixture()
def writer(index_dir: Path) -> Iterator[ReadyClient]:
    with serve(index_dir, api_key=API_KEY) as test_client:
        test_client.headers["Authorization"] = f"Bearer {API_KEY}"
        yield test_client
