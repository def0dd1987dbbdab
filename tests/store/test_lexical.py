"""The lexical (BM25) part: built with each segment, kept in step by add/delete/compact,
versioned with the generations, and scored with index-wide IDF."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from living_support import build, generated_table, write

from semsearch.checksums import content_digest
from semsearch.errors import SemsearchError
from semsearch.index import Index
from semsearch.ingest.maintain import set_lexical
from semsearch.search.searcher import Searcher
from semsearch.store.lexical import (
    LexicalPart,
    LexicalSegment,
    build_bm25,
    lexical_search,
    tokenize,
)
from semsearch.store.manifest import LexicalSpec
from semsearch.store.verify import verify_index

SPEC = LexicalSpec()


def _lexical_ids(searcher: Searcher, query: str, k: int = 5, where: str | None = None) -> list:
    return [hit.id for hit in searcher.search([query], k=k, mode="lexical", where=where)[0]]


def test_terms_are_lower_cased_stemmed_and_stop_words_dropped() -> None:
    assert tokenize(["The Running dogs of Paris", "a an the"], SPEC) == [["run", "dog", "pari"], []]
    assert tokenize(["Running"], LexicalSpec(stemmer="", stopwords="")) == [["running"]]


def test_segments_score_with_index_wide_idf() -> None:
    """Two segments score as one index over the same rows (their average lengths are equal,
    so only IDF could differ)."""
    texts = [
        "red apple pie",
        "green apple tart sweet",
        "red cherry",
        "blue plum jam",
        "red plum tart cream",
        "kiwi jam",
    ]
    whole = LexicalPart.of(build_bm25(texts, SPEC))
    first, second = (
        LexicalPart.of(build_bm25(texts[:4], SPEC)),
        LexicalPart.of(build_bm25(texts[4:], SPEC)),
    )
    allowed = np.ones(6, dtype=bool)
    queries = ["red plum", "apple cream", "kiwi"]
    one = lexical_search([LexicalSegment(whole, 0)], SPEC, queries, 6, allowed)
    two = lexical_search(
        [LexicalSegment(first, 0), LexicalSegment(second, 4)], SPEC, queries, 6, allowed
    )
    np.testing.assert_array_equal(one[1], two[1])
    np.testing.assert_allclose(one[0], two[0], rtol=1e-5)
    allowed[4] = False  # a deleted or filtered row is never a result
    assert 4 not in lexical_search([LexicalSegment(whole, 0)], SPEC, queries, 6, allowed)[1]


def test_build_records_the_part_and_add_delete_compact_keep_it_in_step(
    tmp_path, tiny_encoder
) -> None:
    folder = build(
        write(generated_table(40), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder
    )
    manifest = folder.manifest()
    assert manifest.lexical == SPEC and manifest.segments[0].lexical_dir == "lexical-g000001"
    assert any("/lexical-g000001/vocab.index.json" in name for name in manifest.files)
    searcher = Searcher(folder, encoder=tiny_encoder)
    assert set(_lexical_ids(searcher, "guitars", k=10)) == {"d0", "d3", "d24", "d27"}
    assert _lexical_ids(searcher, "guitar", where="license = 'MIT'", k=40) == ["d0"]

    index = Index(folder)
    index.add(
        generated_table(3, start=100).set_column(1, "text", pa.array(["zeppelin airship"] * 3))
    )
    searcher.refresh()
    assert sorted(_lexical_ids(searcher, "zeppelin")) == [
        "d100",
        "d101",
        "d102",
    ]  # the new segment's
    index.delete(ids=["d101"])
    searcher.refresh()
    assert sorted(_lexical_ids(searcher, "zeppelin")) == ["d100", "d102"]
    before = searcher.search(["guitar market"], k=5, mode="lexical")[0]
    index.compact()
    searcher.refresh()
    [record] = searcher.manifest.segments
    assert record.lexical_dir == f"lexical-g{searcher.generation:06d}"
    assert sorted(_lexical_ids(searcher, "zeppelin")) == ["d100", "d102"]
    after = searcher.search(["guitar market"], k=5, mode="lexical")[0]
    assert [hit.id for hit in after] == [hit.id for hit in before]
    assert verify_index(folder).status == "ok"


def test_an_index_without_a_lexical_part_opens_and_reindex_adds_it(tmp_path, tiny_encoder) -> None:
    folder = build(
        write(generated_table(30), tmp_path / "a.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        lexical=None,
    )
    searcher = Searcher(folder, encoder=tiny_encoder)
    assert searcher.manifest.lexical is None and len(searcher.search(["cat"], k=3)[0]) == 3
    with pytest.raises(SemsearchError, match="no lexical .* 'semsearch reindex docs --lexical'"):
        searcher.search(["cat"], k=3, mode="hybrid")
    added = set_lexical(folder, SPEC)
    assert added.generation == 2 and added.operation["kind"] == "lexical"
    assert set_lexical(folder, SPEC).generation == 2  # already there: nothing written
    searcher.refresh()
    assert "d1" in _lexical_ids(searcher, "cat parser")
    Index(folder).rollback(1)  # the generation without one, restored
    searcher.refresh()
    assert searcher.manifest.lexical is None
    with pytest.raises(SemsearchError, match="no lexical"):
        searcher.search(["cat"], k=3, mode="lexical")
    assert verify_index(folder).status == "ok"


def test_leftovers_of_an_interrupted_lexical_build_are_removed(tmp_path, tiny_encoder) -> None:
    folder = build(
        write(generated_table(10), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder
    )
    segment = folder.segment_dir("s000000")
    (segment / ".tmp-lexical-g000002").mkdir()
    (segment / "lexical-g000009").mkdir()
    set_lexical(folder, None)
    names = {path.name for path in segment.iterdir()}
    assert ".tmp-lexical-g000002" not in names and "lexical-g000009" not in names
    assert "lexical-g000001" in names  # generation 1 still names it


def test_a_changed_lexical_file_is_refused_when_first_read(tmp_path, tiny_encoder) -> None:
    folder = build(
        write(generated_table(10), tmp_path / "a.parquet"), tmp_path / "idx", tiny_encoder
    )
    data = folder.segment_dir("s000000") / "lexical-g000001" / "data.csc.index.npy"
    data.write_bytes(data.read_bytes()[:-4] + b"\0\0\0\0")  # same size, other scores
    searcher = Searcher(folder, encoder=tiny_encoder)  # opening does not read the BM25 part
    assert len(searcher.search(["cat"], k=2)[0]) == 2
    with pytest.raises(SemsearchError, match="data.csc.index.npy has the recorded size but not"):
        searcher.search(["cat"], k=2, mode="lexical")
    assert verify_index(folder).status == "damaged"


def test_a_manifest_written_before_lexical_parts_reads_as_one_without(
    tmp_path, tiny_encoder
) -> None:
    folder = build(
        write(generated_table(10), tmp_path / "a.parquet"),
        tmp_path / "idx",
        tiny_encoder,
        lexical=None,
    )
    for path in (folder.manifest_file, folder.path / "generations" / "g000001.json"):
        data = json.loads(path.read_text())
        data.pop("checksum"), data.pop("lexical")
        for segment in data["segments"]:
            segment.pop("lexical_dir")
        path.write_text(json.dumps({**data, "checksum": content_digest(data)}))
    assert folder.manifest().lexical is None and verify_index(folder).status == "ok"
    assert len(Searcher(folder, encoder=tiny_encoder).search(["cat"], k=2)[0]) == 2


def test_texts_without_a_single_term_make_a_part_that_finds_nothing() -> None:
    part = LexicalPart.of(build_bm25(["the a an", "!!", "x y"], SPEC))
    scores, rows = lexical_search([LexicalSegment(part, 0)], SPEC, ["the x"], 3, np.ones(3, bool))
    assert rows.tolist() == [[-1, -1, -1]] and np.isnan(scores).all()
