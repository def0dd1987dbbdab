"""The HTTP API end to end on the tiny model: answers, bad input, auth, writes, live updates."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import write_corpus
from server.conftest import API_KEY, ReadyClient, serve

from semsearch.index import Index
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.search.hybrid import Fusion
from semsearch.search.searcher import Searcher
from semsearch.store.folders import find_index


def _ids(body: dict, query: int = 0) -> list:
    return [hit["id"] for hit in body["results"][query]["hits"]]


@pytest.fixture(scope="module")
def served_index_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """The corpus of `corpus_file` indexed once for this module's tests that change nothing."""
    folder = tmp_path_factory.mktemp("served")
    corpus = write_corpus(folder / "corpus.parquet")
    build_index(
        BuildOptions(
            corpus=corpus,
            name="docs",
            id_column="doc_id",
            model=str(tiny_model_dir),
            out_dir=folder / "indexes",
            device="cpu",
            show_progress=False,
        )
    )
    return folder / "indexes"


@pytest.fixture(scope="module")
def client(
    served_index_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReadyClient]:
    """One server for the tests that change neither its index nor its counters (a server per
    test spent 0.2 s each starting): on torch and in fp32 throughout, as a test's own server
    is in its first second (bf16 may take over later); a test that writes, deletes or
    counts takes `own_client`."""
    from semsearch.models import bi_encoder

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path_factory.mktemp("own-cache")))
        patch.setattr(
            bi_encoder,
            "resolve_runtime",
            lambda runtime, device: "torch" if runtime == "auto" else runtime,
        )
        with serve(served_index_dir, precision="fp32") as test_client:
            yield test_client


@pytest.fixture()
def own_client(index_dir: Path) -> Iterator[ReadyClient]:
    """A server of the test's own, on its own index (`index_dir`)."""
    with serve(index_dir) as test_client:
        yield test_client


def test_health_and_indexes(client) -> None:
    ready = client.get("/ready")
    assert ready.status_code == 200 and ready.json()["indexes"]["docs"]["generation"] == 1
    listing = client.get("/indexes").json()
    assert [(i["name"], i["rows"], i["healthy"]) for i in listing] == [("docs", 12, True)]
    described = client.get("/indexes/docs").json()
    assert described["manifest"]["rows"] == 12 and [
        g["generation"] for g in described["generations"]
    ] == [1]


def test_search_answers_like_the_library(
    client, served_index_dir, tiny_model_dir, sentences
) -> None:
    searcher = Searcher(find_index("docs", served_index_dir), device="cpu")
    expected = [[hit.to_dict() for hit in hits] for hits in searcher.search(sentences[:3], k=4)]
    got = client.post("/search", json={"queries": sentences[:3], "k": 4}).json()
    assert got["index"] == "docs" and got["generation"] == 1
    for query, (result, hits) in enumerate(zip(got["results"], expected)):
        assert result["query"] == sentences[query]
        assert [h["id"] for h in result["hits"]] == [h["id"] for h in hits]
        assert [h["score"] for h in result["hits"]] == pytest.approx(
            [h["score"] for h in hits], abs=1e-5
        )
        assert set(result["hits"][0]) == {"query", "rank", "score", "id", "text", "topic"}
    single = client.get(
        "/search", params={"q": sentences[2], "k": 2, "where": "topic = 'pets'"}
    ).json()
    assert set(_ids(single)) == {"d2", "d3"}  # the filter keeps the two pets rows


def test_get_search_documents_its_parameters_and_ignores_unknown_ones(client, sentences) -> None:
    parameters = client.get("/openapi.json").json()["paths"]["/search"]["get"]["parameters"]
    by_name = {parameter["name"]: parameter for parameter in parameters}
    assert {"q", "k", "where", "nprobe", "mode", "alpha"} <= set(
        by_name
    ) and "queries" not in by_name
    assert by_name["q"]["required"] and not by_name["k"]["required"]
    plain = client.get("/search", params={"q": sentences[0], "k": 3}).json()
    busted = client.get("/search", params={"q": sentences[0], "k": 3, "_": "1700000000"}).json()
    assert len(_ids(plain)) == 3 and _ids(busted) == _ids(plain)


@pytest.mark.parametrize(
    "method,path,payload,status,message",
    [
        ("get", "/search", {"q": " "}, 422, "empty"),
        ("get", "/search", {"q": "x", "k": 0}, 422, "k"),
        ("get", "/search", {"q": "x", "k": 51}, 422, "limit is 50"),
        ("get", "/search", {"q": "x" * 201}, 422, "limit is 200"),
        ("get", "/search", {"q": "x", "index": "nope"}, 404, "no index named 'nope'"),
        ("get", "/search", {"q": "x", "where": "topic >>> 1"}, 400, ""),
        ("get", "/search", {"q": "x", "where": "missing = 1"}, 400, "missing"),
        ("get", "/search", {"q": "x", "nprobe": -1}, 422, "nprobe"),
        ("get", "/search", {}, 422, "q"),
        ("post", "/search", {"q": "x", "queries": ["y"]}, 422, "not both"),
        ("post", "/search", {"queries": ["x"] * 9}, 422, "1 to 8 queries"),
        ("post", "/search", {"q": "x", "colour": "red"}, 422, "colour"),
        ("post", "/search", {"q": 5}, 422, "q"),
        ("get", "/indexes/nope", None, 404, "no index named 'nope'"),
        (
            "post",
            "/indexes/docs/documents",
            {"rows": [{"doc_id": "n", "text": "t"}]},
            403,
            "writes are off",
        ),
        ("delete", "/indexes/docs/documents", {"ids": ["d1"]}, 403, "writes are off"),
    ],
)
def test_bad_requests_get_one_json_error(client, method, path, payload, status, message) -> None:
    if method == "get":
        response = client.get(path, params=payload)
    else:
        response = client.request(method.upper(), path, json=payload)
    assert response.status_code == status, response.text
    assert message in response.json()["error"] and "Traceback" not in response.text


def test_body_over_the_limit(client) -> None:
    response = client.post(
        "/search",
        content=b"{" + b" " * 200_000 + b"}",
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 413 and "bytes" in response.json()["error"]


def _chunked(body: bytes, size: int = 1000):
    yield from (body[start : start + size] for start in range(0, len(body), size))


def test_a_chunked_body_is_limited_too_and_read_whole_when_it_fits(client, sentences) -> None:
    headers = {"content-type": "application/json"}
    over = client.post("/search", content=_chunked(b"{" + b" " * 200_000 + b"}"), headers=headers)
    assert over.status_code == 413 and "bytes" in over.json()["error"]
    fits = client.post(
        "/search", content=_chunked(b'{"q": "%s", "k": 2}' % sentences[0].encode()), headers=headers
    )
    assert fits.status_code == 200 and len(fits.json()["results"][0]["hits"]) == 2


def test_unexpected_failure_is_a_500_with_a_request_id(client, monkeypatch) -> None:
    served = client.registry.get("docs")

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(served.searcher, "search_vectors", broken)
    response = client.get("/search", params={"q": "guitar"})
    assert response.status_code == 500
    assert (
        response.json()["error"]
        == f"internal error (request id {response.headers['x-request-id']})"
    )
    assert "disk on fire" not in response.text


def test_api_key_guards_every_endpoint(index_dir) -> None:
    with serve(index_dir, api_key=API_KEY) as client:
        assert client.get("/search", params={"q": "x"}).status_code == 401
        assert client.get("/indexes").status_code == 401
        assert (
            client.get("/search", params={"q": "x"}, headers={"X-API-Key": "wrong"}).status_code
            == 401
        )
        assert (
            client.get("/search", params={"q": "x"}, headers={"X-API-Key": API_KEY}).status_code
            == 200
        )
        assert client.get("/").status_code == 200  # the page holds no data; it sends the key


def test_upsert_and_delete_through_the_api(writer) -> None:
    added = writer.post(
        "/indexes/docs/documents",
        json={"rows": [{"doc_id": "n1", "text": "A violin concert tonight.", "topic": "music"}]},
    )
    assert added.status_code == 200, added.text
    body = writer.get("/search", params={"q": "A violin concert tonight.", "k": 1}).json()
    assert _ids(body) == ["n1"] and body["generation"] == 2
    deleted = writer.request("DELETE", "/indexes/docs/documents", json={"ids": ["n1"]})
    assert deleted.status_code == 200, deleted.text
    assert "n1" not in _ids(
        writer.get("/search", params={"q": "A violin concert tonight.", "k": 12}).json()
    )
    missing_text = writer.post("/indexes/docs/documents", json={"rows": [{"doc_id": "n2"}]})
    assert missing_text.status_code == 400 and "text" in missing_text.json()["error"]


def test_changes_from_another_writer_are_served_within_a_second(own_client, index_dir) -> None:
    Index.open("docs", index_dir).delete(ids=["d0"])
    deadline = time.monotonic() + 1.0
    while own_client.get("/ready").json()["indexes"]["docs"]["generation"] != 2:
        assert time.monotonic() < deadline, "the server did not move to generation 2 within 1 s"
        time.sleep(0.02)
    assert "d0" not in _ids(own_client.get("/search", params={"q": "guitar", "k": 12}).json())


def test_a_vanished_index_is_unhealthy_not_fatal(own_client, index_dir) -> None:
    import shutil

    shutil.rmtree(index_dir / "docs")
    deadline = time.monotonic() + 2.0
    while own_client.get("/ready").status_code != 503:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert own_client.get("/search", params={"q": "x"}).status_code == 503
    assert own_client.get("/metrics").status_code == 200


def test_metrics_count_requests_and_batches(own_client) -> None:
    own_client.get("/search", params={"q": "guitar"})
    own_client.get("/search", params={"q": "x", "k": 0})
    text = own_client.get("/metrics").text
    assert 'semsearch_requests_total{route="/search",status="200"} 1.0' in text
    assert 'semsearch_errors_total{route="/search",status="422"} 1.0' in text
    assert "semsearch_encoder_batch_texts_count 1.0" in text
    assert 'semsearch_index_generation{index="docs"} 1.0' in text


def test_the_page(client) -> None:
    page = client.get("/")
    assert page.status_code == 200 and '<form id="search">' in page.text


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_lexical_and_hybrid_answer_like_the_library(
    client, served_index_dir, sentences, mode, monkeypatch
) -> None:
    searcher = Searcher(find_index("docs", served_index_dir), device="cpu")
    expected = [[hit.id for hit in hits] for hits in searcher.search(sentences[:2], k=4, mode=mode)]
    if mode == "lexical":  # BM25 alone never waits for the encoder
        served = client.registry.get("docs")
        monkeypatch.setattr(
            served.batcher, "submit", lambda *a, **k: pytest.fail("lexical encoded")
        )
    body = client.post("/search", json={"queries": sentences[:2], "k": 4, "mode": mode}).json()
    assert body["mode"] == mode and [_ids(body, 0), _ids(body, 1)] == expected
    single = client.get(
        "/search",
        params={"q": sentences[0], "k": 4, "mode": mode, "fusion": "convex", "alpha": 0.5},
    ).json()
    convex = searcher.search(sentences[:1], k=4, mode=mode, fusion=Fusion("convex", alpha=0.5))
    assert _ids(single) == [hit.id for hit in convex[0]] and _ids(single)


def test_bad_modes_and_an_index_without_bm25(client, tmp_path, corpus_file, tiny_model_dir) -> None:
    assert client.get("/search", params={"q": "x", "mode": "sparse"}).status_code == 422
    assert client.get("/search", params={"q": "x", "mode": "hybrid", "alpha": 2}).status_code == 422
    assert client.get("/indexes").json()[0]["modes"] == ["dense", "lexical", "hybrid"]
    folder = tmp_path / "plain"
    build_index(
        BuildOptions(
            corpus=corpus_file,
            name="plain",
            id_column="doc_id",
            model=str(tiny_model_dir),
            out_dir=folder,
            device="cpu",
            show_progress=False,
            lexical=None,
        )
    )
    with serve(folder) as plain:
        response = plain.get("/search", params={"q": "x", "mode": "hybrid"})
        assert (
            response.status_code == 400
            and "semsearch reindex plain --lexical" in response.json()["error"]
        )
        assert plain.get("/indexes").json()[0]["modes"] == ["dense"]


@pytest.mark.parametrize(
    "payload,where",
    [
        (b'{"q": "\\ud800"}', "q"),
        (b'{"queries": ["fine", "bad \\udfff end"]}', "queries"),
        (b'{"q": "x", "where": "topic = \'\\ud800\'"}', "where"),
    ],
)
def test_a_lone_surrogate_is_a_422_not_a_500(client, payload, where) -> None:
    response = client.post("/search", content=payload, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith(where) and "surrogate" in response.json()["error"]


@pytest.mark.parametrize(
    "parameter,value",
    [("ef_search", 10**9), ("nprobe", 10**9), ("oversample", 10**9), ("k", 10**9)],
)
def test_per_call_work_has_a_hard_ceiling(client, parameter, value) -> None:
    response = client.post("/search", json={"q": "guitar", parameter: value})
    assert response.status_code == 422 and parameter in response.json()["error"], response.text


def test_a_write_with_a_field_the_index_lacks_is_refused(writer) -> None:
    row = {"doc_id": "n1", "text": "A violin concert tonight.", "topic": "music", "colour": "red"}
    refused = writer.post("/indexes/docs/documents", json={"rows": [row]})
    assert refused.status_code == 422 and "'colour'" in refused.json()["error"], refused.text
    assert writer.get("/ready").json()["indexes"]["docs"]["generation"] == 1  # nothing written
    del row["colour"]
    assert writer.post("/indexes/docs/documents", json={"rows": [row]}).status_code == 200


def test_the_write_body_is_documented_with_an_example(client) -> None:
    api = client.get("/openapi.json").json()
    operation = api["paths"]["/indexes/{name}/documents"]["post"]
    assert '{"rows": [' in operation["description"]
    schema = api["components"]["schemas"]["DocumentsRequest"]
    assert (
        schema["examples"][0]["rows"][0]["text"]
        and "metadata" in schema["properties"]["rows"]["description"]
    )


def test_errors_name_the_api_fields_not_the_command_line_flags(client) -> None:
    from semsearch.server.access import api_words

    response = client.get("/search", params={"q": "x", "where": "missing = 1"})
    assert response.status_code == 400 and "--" not in response.json()["error"]
    assert response.json()["error"].startswith("where names the column 'missing'")
    assert api_words("give either ids (--ids FILE) or a filter (--where EXPR)") == (
        "give either ids (ids) or a filter (where)"
    )
    assert api_words("--ef-search 5 and --nprobe 3; keep --overwrite") == (
        "ef_search 5 and nprobe 3; keep --overwrite"
    )


def test_the_page_is_self_contained_and_keeps_the_search_in_its_url(client) -> None:
    page = client.get("/").text
    assert '<link rel="icon" href="data:image/svg+xml,' in page  # no /favicon.ico 404
    assert "graphics" not in page and "section" not in page  # no Debian-specific example
    assert "history.pushState" in page and "popstate" in page and "location.search" in page
    assert "Columns to filter on" in page and "@media (max-width" in page
    columns = client.get("/indexes").json()[0]["columns"]
    assert "topic" in columns  # what the page lists as filterable


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_load_nothing_from_the_internet(client, page) -> None:
    """Swagger UI and ReDoc come from the server itself: loaded from a CDN, /docs was a
    blank page on a machine without the internet."""
    html = client.get(page)
    assert html.status_code == 200
    assert re.findall(r"https?://[^\s\"'<>]*", html.text) == []
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html.text)
    assert any(asset.endswith(".js") for asset in assets), html.text
    for asset in [*assets, client.app.openapi_url]:
        answer = client.get(asset)
        assert answer.status_code == 200 and answer.content, asset


def test_nprobe_on_a_flat_index_is_answered_with_a_note(client) -> None:
    """docs/serving.md's POST example sends nprobe 64 to the demo index, which is flat."""
    answer = client.post("/search", json={"queries": ["guitar", "cat"], "k": 3, "nprobe": 64})
    assert answer.status_code == 200, answer.text
    assert [len(result["hits"]) for result in answer.json()["results"]] == [3, 3]
    assert answer.json()["notes"] == [
        "nprobe 64 ignored: this index has no use for it (nprobe is for IVF indexes, efSearch "
        "for HNSW, oversample for disk; a flat index searches every row)"
    ]


def test_the_library_s_notes_on_clamped_values_reach_the_answer(client, monkeypatch) -> None:
    served = client.registry.get("docs")
    original = served.searcher.search_vectors

    class Noted(list):
        notes = ["--ef-search 900 is more than this index can use: searched with 12"]

    def noted(*args, **kwargs) -> Noted:
        results = original(*args, **kwargs)
        answer = Noted(results)
        answer.params = results.params  # what the search ran with, as the route reads it
        return answer

    monkeypatch.setattr(served.searcher, "search_vectors", noted)
    body = client.get("/search", params={"q": "guitar", "k": 2}).json()
    assert body["notes"] == ["ef_search 900 is more than this index can use: searched with 12"]
    assert len(body["results"][0]["hits"]) == 2
    monkeypatch.undo()
    assert "notes" not in client.get("/search", params={"q": "guitar", "k": 2}).json()


def test_post_search_by_vector_answers_like_the_library(
    client, served_index_dir, tiny_model_dir, sentences
) -> None:
    searcher = Searcher(find_index("docs", served_index_dir), device="cpu")
    vectors = searcher.encoder.encode(sentences[2:4])
    expected = searcher.search_vectors(vectors, k=3)
    one = client.post("/search", json={"vector": vectors[0].tolist(), "k": 3})
    assert one.status_code == 200, one.text
    assert [hit["id"] for hit in one.json()["results"][0]["hits"]] == [h.id for h in expected[0]]
    # A vector's query is its row, named as `query --vectors --json` names it, in the result
    # and in its hits alike.
    [result] = one.json()["results"]
    assert result["query_row"] == 0 and "query" not in result
    assert {hit["query_row"] for hit in result["hits"]} == {0}
    assert not any("query" in hit for hit in result["hits"])
    many = client.post("/search", json={"vectors": vectors.tolist(), "k": 3}).json()
    assert [[hit["id"] for hit in r["hits"]] for r in many["results"]] == [
        [h.id for h in hits] for hits in expected
    ]


def _own_vectors_index(tmp_path) -> tuple:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = np.random.default_rng(5).normal(size=(20, 8)).astype(np.float32)
    path = tmp_path / "mine.parquet"
    pq.write_table(pa.table({"emb": pa.array(list(base), pa.list_(pa.float32()))}), path)
    folder = tmp_path / "own-indexes"
    build_index(
        BuildOptions(
            corpus=path, vector_column="emb", model=None, out_dir=folder, show_progress=False
        )
    )
    return folder, base


def test_an_index_of_your_own_vectors_is_served_by_vector(tmp_path) -> None:
    folder, base = _own_vectors_index(tmp_path)
    with serve(folder) as own:
        found = own.post("/search", json={"vector": base[11].tolist(), "k": 2})
        assert found.status_code == 200, found.text
        assert found.json()["results"][0]["hits"][0]["id"] == 11
        assert "text" not in found.json()["results"][0]["hits"][0]  # it has no text column
        text = own.post("/search", json={"q": "a guitar"})
        assert text.status_code == 400
        assert text.json()["error"] == (
            "index 'mine' holds your own vectors and names no model: query with "
            '"vector": [...], or rebuild with --model NAME'
        )


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ('{"vector": [1, 2, 3]}', 400, "are 3-d; the index holds 8-d"),
        ('{"vector": [NaN, 1, 1, 1, 1, 1, 1, 1]}', 400, "NaN or infinite values"),
        ('{"vectors": [[1, 1, 1, 1, 1, 1, 1, 1], [1, 1]]}', 400, "ragged"),
        ('{"vector": ["a", 1, 1, 1, 1, 1, 1, 1]}', 422, "vector"),
        ('{"vector": [1, 1, 1, 1, 1, 1, 1, 1], "q": "x"}', 422, "either texts"),
        ('{"vector": [1, 1, 1, 1, 1, 1, 1, 1], "mode": "hybrid"}', 422, "searches texts"),
        ('{"vectors": []}', 422, "send 1 to 8 vectors"),
    ],
)
def test_bad_query_vectors_get_one_json_error(tmp_path, body, status, message) -> None:
    folder, _ = _own_vectors_index(tmp_path)
    with serve(folder) as own:
        answer = own.post("/search", content=body, headers={"content-type": "application/json"})
        assert answer.status_code == status, answer.text
        assert message in answer.json()["error"]


def test_upserts_into_an_index_of_your_own_vectors_carry_the_vector_column(tmp_path) -> None:
    folder, _ = _own_vectors_index(tmp_path)
    with serve(folder, api_key=API_KEY) as own:
        own.headers["Authorization"] = f"Bearer {API_KEY}"
        east = [1.0] + [0.0] * 7
        added = own.post("/indexes/mine/documents", json={"rows": [{"emb": east}]})
        assert added.status_code == 200, added.text
        assert added.json()["added"] == 1
        wrong = own.post("/indexes/mine/documents", json={"rows": [{"emb": [1.0, 0.0]}]})
        assert wrong.status_code == 400
        assert "2-d vector in row 0, the index's are 8-d" in wrong.json()["error"]
        deadline = time.monotonic() + 5
        while own.post("/search", json={"vector": east, "k": 1}).json()["generation"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        hit = own.post("/search", json={"vector": east, "k": 1}).json()["results"][0]["hits"][0]
        assert hit["id"] == 20 and hit["score"] == pytest.approx(1)


def test_a_damaged_index_is_the_server_s_problem_and_ready_names_it(tmp_path) -> None:
    """A disk index's vector file changed under the server: the search answers 503 (not a
    client error) in one line, and /ready names the index and why it cannot serve."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = np.random.default_rng(6).normal(size=(300, 16)).astype(np.float32)
    path = tmp_path / "disky.parquet"
    pq.write_table(pa.table({"emb": pa.array(list(base), pa.list_(pa.float32()))}), path)
    folder = tmp_path / "disk-indexes"
    built = build_index(
        BuildOptions(
            corpus=path,
            vector_column="emb",
            model=None,
            out_dir=folder,
            index="disk",
            target_recall=None,
            show_progress=False,
        )
    )
    with serve(folder) as served:
        query = {"vector": base[3].tolist(), "k": 5}
        assert served.post("/search", json=query).status_code == 200
        part = built.segment_dir(built.manifest().segments[0].name) / "part-00000.npy"
        data = bytearray(part.read_bytes())
        data[-64:] = bytes(64)  # the same size, other vectors
        part.write_bytes(bytes(data))
        refused = served.post("/search", json=query)
        assert refused.status_code == 503, refused.text
        message = refused.json()["error"]
        assert "disky" in message and "changed" in message and "\n" not in message
        ready = served.get("/ready")
        assert ready.status_code == 503 and ready.json()["status"] == "degraded"
        state = ready.json()["indexes"]["disky"]
        assert state["healthy"] is False and "changed" in state["problem"]
        time.sleep(0.2)  # the refresher runs every 0.05 s: it must not call it healthy again
        assert served.get("/ready").json()["indexes"]["disky"]["healthy"] is False
        assert served.post("/search", json=query).status_code == 503


def test_with_several_indexes_served_a_search_names_one(tmp_path, corpus_file, tiny_model_dir):
    """A search without `index` while two are served is a 400 that says how to name one."""
    for name in ("docs", "other"):
        build_index(
            BuildOptions(
                corpus=corpus_file,
                name=name,
                id_column="doc_id",
                model=str(tiny_model_dir),
                out_dir=tmp_path / "indexes",
                device="cpu",
                show_progress=False,
            )
        )
    with serve(tmp_path / "indexes") as two:
        unnamed = two.get("/search", params={"q": "cat"})
        assert unnamed.status_code == 400
        assert unnamed.json()["error"] in (
            f"several indexes are served: name one with index=NAME (one of {names})"
            for names in ("docs, other", "other, docs")
        )
        named = two.post("/search", json={"q": "cat", "index": "other", "k": 2})
        assert named.status_code == 200 and named.json()["index"] == "other"
        unknown = two.get("/search", params={"q": "cat", "index": "nope"})
        assert unknown.status_code == 404 and "nope" in unknown.json()["error"]
