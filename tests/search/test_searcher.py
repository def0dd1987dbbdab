"""Searching: neighbours with metadata, parameter overrides, and model checks."""

from __future__ import annotations

import pytest
import torch

from semsearch.ann.vector_index import prepare_vectors
from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.models import BiEncoder
from semsearch.search.hybrid import Fusion
from semsearch.search.searcher import Searcher


def _build(corpus, out_dir, encoder, **changes):
    options = BuildOptions(
        corpus=corpus,
        name="docs",
        id_column="doc_id",
        out_dir=out_dir,
        show_progress=False,
        **changes,
    )
    return build_index(options, encoder=encoder)


def test_default_model_finds_the_paraphrase(corpus_file, tmp_path, default_encoder) -> None:
    folder = _build(corpus_file, tmp_path, default_encoder)
    searcher = Searcher(folder, encoder=default_encoder)
    [hits] = searcher.search(["a kitten napping on a couch"], k=3)
    assert [hit.rank for hit in hits] == [1, 2, 3]
    assert hits[0].id == "d3" and hits[0].metadata["topic"] == "pets"
    assert hits[0].score >= hits[1].score >= hits[2].score
    assert {hits[0].id, hits[1].id} == {"d2", "d3"}


def test_many_queries_in_one_call(corpus_file, tmp_path, tiny_encoder, sentences) -> None:
    searcher = Searcher(_build(corpus_file, tmp_path, tiny_encoder), encoder=tiny_encoder)
    results = searcher.search(sentences[:3], k=1)
    assert [hits[0].text for hits in results] == sentences[:3]


@pytest.mark.slow  # torch.compile: about half a minute
def test_a_compiled_searcher_finds_the_same_rows(corpus_file, tmp_path, tiny_model_dir) -> None:
    build = BiEncoder.load(str(tiny_model_dir), device="cpu")
    folder = _build(corpus_file, tmp_path, build, model=str(tiny_model_dir))
    plain = Searcher(folder, device="cpu").search(["a cat on the sofa"], k=5)
    [hits] = Searcher(folder, device="cpu", compile=True).search(["a cat on the sofa"], k=5)
    assert [hit.id for hit in hits] == [hit.id for hit in plain[0]]
    assert [hit.score for hit in hits] == pytest.approx([hit.score for hit in plain[0]], abs=1e-5)


def test_k_larger_than_the_index_returns_everything(corpus_file, tmp_path, tiny_encoder) -> None:
    searcher = Searcher(_build(corpus_file, tmp_path, tiny_encoder), encoder=tiny_encoder)
    assert len(searcher.search(["anything"], k=100)[0]) == 12


def test_search_parameters_can_be_overridden(tmp_path, tiny_encoder) -> None:
    path = tmp_path / "c.csv"
    path.write_text("doc_id,text\n" + "".join(f"{i},text number {i}\n" for i in range(300)))
    searcher = Searcher(_build(path, tmp_path, tiny_encoder, index="ivf"), encoder=tiny_encoder)
    queries = [f"text number {i}" for i in range(0, 300, 7)]
    narrow = [[hit.id for hit in hits] for hits in searcher.search(queries, k=10, nprobe=1)]
    nlist = int(searcher.manifest.index.factory.split(",")[0][3:])
    wide = [[hit.id for hit in hits] for hits in searcher.search(queries, k=10, nprobe=nlist)]
    exact = searcher.snapshot.exact_search(
        prepare_vectors(tiny_encoder.encode(queries), "cosine"), 10
    )[1]
    ids = searcher.metadata.column("doc_id").to_pylist()
    assert wide == [[ids[row] for row in line] for line in exact]  # every list visited: exact
    assert narrow != wide  # the override took effect for that call...
    assert searcher.manifest.index.search_params["nprobe"] < nlist  # ...and changed nothing stored
    # HNSW's parameter on an IVF index changes nothing: dropped, with a note saying so
    assert searcher.search(["text"], k=5, efSearch=10).notes[0].startswith("efSearch 10 ignored")


def test_l2_index_reports_distances(corpus_file, tmp_path, tiny_encoder, sentences) -> None:
    searcher = Searcher(
        _build(corpus_file, tmp_path, tiny_encoder, metric="l2"), encoder=tiny_encoder
    )
    [hits] = searcher.search([sentences[0]], k=2)
    assert searcher.score_name == "distance" and hits[0].score == pytest.approx(0, abs=1e-3)


def test_a_model_whose_weights_changed_is_refused(corpus_file, tmp_path, tiny_model_dir) -> None:
    model_dir = tmp_path / "model"
    BiEncoder.load(str(tiny_model_dir), device="cpu").save(model_dir)
    folder = _build(corpus_file, tmp_path / "idx", BiEncoder.load(str(model_dir), device="cpu"))
    retrained = BiEncoder.load(str(model_dir), device="cpu")
    with torch.no_grad():
        next(retrained.parameters()).add_(0.01)
    retrained.save(model_dir)  # same folder, new weights: the manifest's model is not the same
    with pytest.raises(SemsearchError, match="built with model weights"):
        Searcher(folder, device="cpu")


def test_empty_query_and_bad_k_are_refused(corpus_file, tmp_path, tiny_encoder) -> None:
    searcher = Searcher(_build(corpus_file, tmp_path, tiny_encoder), encoder=tiny_encoder)
    with pytest.raises(SemsearchError, match="empty"):
        searcher.search(["  "])
    with pytest.raises(SemsearchError, match="at least 1"):
        searcher.search(["x"], k=0)


def test_refresh_moves_to_a_rebuilt_index_of_the_same_generation(tmp_path, tiny_encoder) -> None:
    small, large = tmp_path / "small.csv", tmp_path / "large.csv"
    small.write_text("doc_id,text\n" + "".join(f"{i},small text {i}\n" for i in range(5)))
    large.write_text("doc_id,text\n" + "".join(f"{i},large text {i}\n" for i in range(30)))
    searcher = Searcher(_build(small, tmp_path, tiny_encoder), encoder=tiny_encoder)
    _build(large, tmp_path, tiny_encoder, overwrite=True)  # generation 1 again, another build
    assert searcher.refresh() and searcher.generation == 1
    assert len(searcher.search(["text"], k=50)[0]) == 30


def test_lexical_and_hybrid_modes_with_a_filter(corpus_file, tmp_path, tiny_encoder) -> None:
    searcher = Searcher(_build(corpus_file, tmp_path, tiny_encoder), encoder=tiny_encoder)
    [lexical] = searcher.search_vectors(None, k=5, queries=["fast JSON parsing"], mode="lexical")
    assert [hit.id for hit in lexical] == ["d10", "d11"]  # the rows sharing a term, best first
    dense = [hit.id for hit in searcher.search(["guitar on stage"], k=3)[0]]
    convex = Fusion("convex", alpha=1.0)
    assert [
        hit.id for hit in searcher.search(["guitar on stage"], k=3, mode="hybrid", fusion=convex)[0]
    ] == dense
    [hybrid] = searcher.search(["guitar cake"], k=12, mode="hybrid", where="topic = 'food'")
    assert {hit.metadata["topic"] for hit in hybrid} == {"food"} and len(hybrid) == 2
    assert searcher.score_name_for("hybrid") == "score"
    with pytest.raises(SemsearchError, match="--mode 'bm25' is not known"):
        searcher.search(["guitar"], mode="bm25")


def test_a_lexical_only_searcher_loads_no_model(corpus_file, tmp_path, tiny_encoder) -> None:
    searcher = Searcher(_build(corpus_file, tmp_path, tiny_encoder), lexical_only=True)
    assert searcher.encoder is None
    assert [hit.id for hit in searcher.search(["cat on the sofa"], k=3, mode="lexical")[0]] == [
        "d2"
    ]
    with pytest.raises(SemsearchError, match="loaded no model: --mode hybrid needs one"):
        searcher.search(["cat"], mode="hybrid")
