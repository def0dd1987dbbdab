"""Start-up in the background: fp32 answers at once, bf16 takes over once its kernels are warm."""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient
from server.conftest import API_KEY

import semsearch.server.app as app_module
from semsearch.server.app import create_app
from semsearch.server.registry import IndexRegistry
from semsearch.server.schemas import ServerConfig
from semsearch.server.warmup import QueryPrecisionWarmup


def test_queries_encode_in_fp32_until_this_thread_has_warmed_bf16(tiny_encoder) -> None:
    warmup = QueryPrecisionWarmup(tiny_encoder, "bf16", largest_batch=1, workers=1)
    assert warmup.precision() == "fp32" and not warmup.warm and "warming" in warmup.state
    steps = 0
    while warmup.step():
        steps += 1
        assert steps < 1000
    assert steps == 62  # one encode per query length from 3 to 64 tokens
    assert warmup.precision() == "bf16" and warmup.warm and warmup.state == "bf16"
    other: list[str] = []  # another thread has compiled nothing yet: it stays on fp32
    thread = threading.Thread(target=lambda: other.append(warmup.precision()))
    thread.start()
    thread.join()
    assert other == ["fp32"]


def test_fp32_asked_for_needs_no_warm_up(tiny_encoder) -> None:
    warmup = QueryPrecisionWarmup(tiny_encoder, "fp32", largest_batch=8, workers=2)
    assert warmup.warm and warmup.precision() == "fp32" and not warmup.step()


@pytest.fixture()
def slow_start(monkeypatch):
    """The registry waits for `release` before it opens anything."""
    release = threading.Event()

    class Held(IndexRegistry):
        def __init__(self, *args, **kwargs) -> None:
            assert release.wait(30)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(app_module, "IndexRegistry", Held)
    yield release
    release.set()


def test_the_server_answers_while_it_starts_and_health_needs_no_key(index_dir, slow_start) -> None:
    config = ServerConfig(index_dir=index_dir, device="cpu", api_key=API_KEY, precision="fp32")
    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        health = client.get("/health")  # no key, no data
        assert health.status_code == 503 and health.json() == {"status": "starting"}
        starting = client.get("/ready")
        assert starting.status_code == 503 and starting.json()["status"] == "starting"
        search = client.get("/search", params={"q": "x"}, headers={"X-API-Key": API_KEY})
        assert search.status_code == 503 and search.json()["error"].startswith("starting")
        assert search.headers["retry-after"] == "1"
        slow_start.set()
        client.app.state.startup.wait(30)
        ready = client.get("/ready")
        assert ready.status_code == 200 and ready.json() == {
            "status": "ok",
            "warm": True,
            "precision": "fp32",
        }
        keyed = client.get("/ready", headers={"X-API-Key": API_KEY}).json()
        assert keyed["indexes"]["docs"]["generation"] == 1
        assert client.get("/health").json() == {"status": "alive"}
        assert client.get("/health").status_code == 200
        assert (
            client.get("/search", params={"q": "x"}, headers={"X-API-Key": API_KEY}).status_code
            == 200
        )


def test_a_start_that_fails_says_why(tmp_path, index_dir) -> None:
    config = ServerConfig(index_dir=tmp_path / "nothing", device="cpu")
    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        client.app.state.startup.wait(30)
        ready = client.get("/ready")
        assert ready.status_code == 503 and ready.json()["status"] == "failed"
        assert "no indexes to serve" in ready.json()["detail"]
        assert "no indexes to serve" in client.get("/search", params={"q": "x"}).json()["error"]
        health = client.get("/health")
        assert health.status_code == 503 and health.json() == {"status": "failed"}


@pytest.fixture()
def checked_export(index_dir, tiny_model_dir, monkeypatch, openvino_tiny_model, tmp_path):
    """The tiny model's checked OpenVINO export in a fresh cache, as a first query leaves it."""
    ov = pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    from semsearch.models.bi_encoder import BiEncoder
    from semsearch.models.openvino_runtime import export_for_queries

    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)
    encoder = BiEncoder.load(str(tiny_model_dir), device="cpu")
    assert export_for_queries(encoder)
    return encoder


def test_with_a_checked_export_the_server_is_warm_once_ready(index_dir, checked_export, caplog):
    import openvino as ov

    from semsearch.models.exported_query_encoder import ExportedQueryEncoder, native_bf16

    config = ServerConfig(index_dir=index_dir, device="cpu", api_key=API_KEY)
    with (
        caplog.at_level("INFO", logger="semsearch.server"),
        TestClient(create_app(config), raise_server_exceptions=False) as client,
    ):
        client.app.state.startup.wait(30)
        assert client.get("/health").json() == {"status": "alive"}
        ready = client.get("/ready").json()
        encoder = client.app.state.startup.result.indexes["docs"].searcher.encoder
        assert isinstance(encoder, ExportedQueryEncoder)
        # bf16 where the CPU runs it natively (and it passed its check), else fp32
        assert encoder.precision == ("bf16" if native_bf16(ov) else "fp32")
        assert ready["warm"] and ready["precision"] == f"{encoder.precision} ({encoder.runtime})"
        found = client.get(
            "/search", params={"q": "fast json parsing", "k": 3}, headers={"X-API-Key": API_KEY}
        )
        assert found.status_code == 200
        added = client.post(
            "/indexes/docs/documents",
            headers={"X-API-Key": API_KEY},
            json={
                "rows": [{"doc_id": "n1", "text": "A violin concert tonight.", "topic": "music"}]
            },
        )
        assert added.status_code == 200, added.text  # rows added through the export
        top = client.get(
            "/search",
            params={"q": "A violin concert tonight.", "k": 1},
            headers={"X-API-Key": API_KEY},
        ).json()
        assert top["results"][0]["hits"][0]["id"] == "n1"
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("ready in"))
    assert f"on {encoder.runtime}" in line and "index docs" in line


@pytest.mark.default_runtime
def test_an_index_built_by_default_is_served_on_its_export(
    tmp_path, corpus_file, tiny_model_dir, monkeypatch, openvino_tiny_model
) -> None:
    """The default build (`--runtime auto`) leaves a checked export that `serve` answers with
    from the start, without a first query to make it."""
    ov = pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    from semsearch.ingest.build import build_index
    from semsearch.ingest.build_options import BuildOptions
    from semsearch.models.exported_query_encoder import ExportedQueryEncoder

    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)
    build_index(
        BuildOptions(
            corpus=corpus_file,
            name="docs",
            model=str(tiny_model_dir),
            out_dir=tmp_path / "idx",
            device="cpu",
            show_progress=False,
        )
    )
    config = ServerConfig(index_dir=tmp_path / "idx", device="cpu")
    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        registry = client.app.state.startup.wait(30)
        assert isinstance(registry.indexes["docs"].searcher.encoder, ExportedQueryEncoder)


def test_a_precision_without_a_check_keeps_the_torch_encoder(
    index_dir, tiny_model_dir, monkeypatch, openvino_tiny_model, tmp_path
) -> None:
    ov = pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    from semsearch.models.bi_encoder import BiEncoder
    from semsearch.models.openvino_runtime import OpenVinoEncoder

    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ov, "convert_model", lambda *args, **kwargs: openvino_tiny_model)
    assert OpenVinoEncoder.attach(
        BiEncoder.load(str(tiny_model_dir), device="cpu", runtime="torch"), "fp32"
    )
    config = ServerConfig(index_dir=index_dir, device="cpu", precision="bf16")
    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        registry = client.app.state.startup.wait(30)
        assert isinstance(registry.indexes["docs"].searcher.encoder, BiEncoder)
