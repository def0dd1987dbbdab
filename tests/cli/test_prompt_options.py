"""Prompts end to end: `build` records the model folder's prompts (or --query-prompt and
--document-prompt), `info` shows them, `query` and `add` use them (a query may override its
own), and an index built before prompts were recorded still opens, with none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.checksums import content_digest
from semsearch.store.manifest import CHECKSUM_KEY, MANIFEST_FILE, generation_file


@pytest.fixture(scope="module")
def st_model(prompted_model_dir: Path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    return sentence_transformers.SentenceTransformer(str(prompted_model_dir), device="cpu")


def _build(cli, corpus: Path, model: Path, *options: str) -> None:
    result = cli(
        "build",
        str(corpus),
        "--name",
        "docs",
        "--id-column",
        "doc_id",
        "--model",
        str(model),
        "--out-dir",
        cli.index_dir,
        "--device",
        "cpu",
        "--index-type",
        "flat",
        "--runtime",
        "torch",
        "--no-lexical",
        *options,
    )
    assert result.exit_code == 0, result.output


def _model_info(cli) -> dict:
    result = cli("info", "docs", "--index-dir", cli.index_dir, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["model"]


def _hits(cli, text: str, *options: str, runtime: str = "torch") -> list[dict]:
    result = cli(
        "query",
        text,
        "--index",
        "docs",
        "--index-dir",
        cli.index_dir,
        "-k",
        "4",
        "--json",
        "--device",
        "cpu",
        "--runtime",
        runtime,
        *options,
    )
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def _assert_scores(hits: list[dict], query: np.ndarray, document_vector) -> None:
    """Each hit's score is the cosine of the query vector with its text's document vector
    (both unit length: the model normalises)."""
    assert hits
    for hit in hits:
        expected = float(np.dot(query, document_vector(hit["text"])))
        assert hit["score"] == pytest.approx(expected, abs=1e-5), hit


def test_build_records_the_folders_prompts_and_query_uses_them(
    cli, corpus_file, prompted_model_dir, st_model
) -> None:
    _build(cli, corpus_file, prompted_model_dir)
    model = _model_info(cli)
    assert (model["query_prompt"], model["document_prompt"]) == ("query: ", "passage: ")
    shown = cli("info", "docs", "--index-dir", cli.index_dir).stdout
    assert "'query: '" in shown and "'passage: '" in shown
    text = "someone plays guitar"
    hits = _hits(cli, text)
    query = st_model.encode_query([text])[0]
    _assert_scores(hits, query, lambda doc: st_model.encode_document([doc])[0])
    # The prompts made a difference: without them the scores differ.
    bare = st_model.encode([text])[0]
    assert any(
        abs(hit["score"] - float(np.dot(bare, st_model.encode_document([hit["text"]])[0]))) > 1e-4
        for hit in hits
    )


@pytest.mark.default_runtime
def test_a_query_on_the_default_runtime_uses_the_recorded_prompt(
    cli, corpus_file, prompted_model_dir, st_model
) -> None:
    pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")
    _build(cli, corpus_file, prompted_model_dir)
    text = "a sleeping kitten"
    query = st_model.encode_query([text])[0]
    for _ in range(2):  # the first exports and checks, the second runs the export alone
        hits = _hits(cli, text, runtime="auto")
        _assert_scores(hits, query, lambda doc: st_model.encode_document([doc])[0])


def test_overrides_are_recorded_and_a_query_may_override_its_own(
    cli, corpus_file, prompted_model_dir, st_model, tmp_path
) -> None:
    _build(cli, corpus_file, prompted_model_dir, "--query-prompt", "", "--document-prompt", "doc: ")
    model = _model_info(cli)
    assert (model["query_prompt"], model["document_prompt"]) == ("", "doc: ")
    assert "none" in cli("info", "docs", "--index-dir", cli.index_dir).stdout

    def document(doc: str) -> np.ndarray:
        return st_model.encode([doc], prompt="doc: ")[0]

    text = "shares fell"
    _assert_scores(_hits(cli, text), st_model.encode([text])[0], document)
    searched = _hits(cli, text, "--query-prompt", "search: ")
    _assert_scores(searched, st_model.encode([text], prompt="search: ")[0], document)
    _assert_scores(_hits(cli, text), st_model.encode([text])[0], document)  # that call only

    # add encodes its rows with the recorded document prompt
    new = "a violinist performs a concerto"
    table = pa.table({"doc_id": ["n1"], "text": [new], "topic": ["music"]})
    pq.write_table(table, tmp_path / "new.parquet")
    added = cli(
        "add",
        str(tmp_path / "new.parquet"),
        "--index",
        "docs",
        "--index-dir",
        cli.index_dir,
        "--device",
        "cpu",
        "--runtime",
        "torch",
    )
    assert added.exit_code == 0, added.output
    hits = _hits(cli, new)
    assert hits[0]["id"] == "n1"
    _assert_scores(hits, st_model.encode([new])[0], document)


def test_an_index_from_before_prompts_still_opens_with_none(
    cli, corpus_file, prompted_model_dir, st_model
) -> None:
    _build(cli, corpus_file, prompted_model_dir, "--query-prompt", "", "--document-prompt", "")
    folder = Path(cli.index_dir) / "docs"
    data = json.loads((folder / MANIFEST_FILE).read_text())
    for key in ("query_prompt", "document_prompt"):
        del data["model"][key]
    data.pop(CHECKSUM_KEY)
    data[CHECKSUM_KEY] = content_digest(data)
    text = json.dumps(data, indent=2) + "\n"
    for path in (folder / MANIFEST_FILE, generation_file(folder, data["generation"])):
        path.write_text(text)
    model = _model_info(cli)
    assert (model["query_prompt"], model["document_prompt"]) == ("", "")
    verified = cli("verify", "docs", "--index-dir", cli.index_dir)
    assert verified.exit_code == 0, verified.output
    query = "bake a cake"
    _assert_scores(
        _hits(cli, query), st_model.encode([query])[0], lambda doc: st_model.encode([doc])[0]
    )


def test_prompt_options_are_in_the_help(cli) -> None:
    for command in (["build"], ["query"], ["eval", "sts"], ["eval", "pairs"], ["eval", "ir"]):
        shown = cli(*command, "--help").stdout
        assert "--query-prompt" in shown, command
    assert "--document-prompt" in cli("build", "--help").stdout
    assert "symmetric" in cli("eval", "sts", "--help").stdout
    assert "--query-prompt" in cli("mine", "--help").stdout


def test_the_server_uses_the_recorded_query_prompt(
    cli, corpus_file, prompted_model_dir, st_model, tmp_path, monkeypatch
) -> None:
    """The search page and API encode queries through the server's batcher: with the
    index's query prompt too, and hits labelled with the query as sent."""
    from server.conftest import serve

    monkeypatch.setenv("SEMSEARCH_CACHE_DIR", str(tmp_path / "server-cache"))  # torch encoder
    _build(cli, corpus_file, prompted_model_dir)
    text = "someone plays guitar"
    with serve(Path(cli.index_dir)) as client:
        got = client.post("/search", json={"queries": [text], "k": 4}).json()
    hits = got["results"][0]["hits"]
    assert got["results"][0]["query"] == text and hits[0]["query"] == text
    query = st_model.encode_query([text])[0]
    _assert_scores(hits, query, lambda doc: st_model.encode_document([doc])[0])
