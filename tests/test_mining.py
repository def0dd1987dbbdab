"""Paraphrase mining: pairs kept once and sorted, cuts respected, copies handled, index = file."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.ingest.update import delete_rows
from semsearch.mining import (
    PAIR_COLUMNS,
    CorpusSource,
    MiningOptions,
    MiningResult,
    mine_corpus,
    mine_index,
)
from semsearch.mining import neighbours as neighbours_module
from semsearch.mining.recall import mined_recall

SUBJECTS = ["A man", "The woman", "A child", "An old dog", "The cat", "A student"]
VERBS = ["is reading", "plays with", "looks at", "carries", "paints"]
OBJECTS = ["a red ball", "the newspaper", "a wooden box", "an old guitar", "some flowers"]
COPIED = "Add your description here"


def generated_texts(count: int, seed: int = 0) -> list[str]:
    """`count` distinct short sentences built from a small grammar, in a shuffled order."""
    texts = [" ".join(words) + "." for words in itertools.product(SUBJECTS, VERBS, OBJECTS)]
    order = np.random.default_rng(seed).permutation(len(texts))[:count]
    return [texts[position] for position in order]


def write_corpus(folder: Path, texts: list[str], name: str = "collection.parquet") -> Path:
    path = folder / name
    pq.write_table(pa.table({"doc_id": [f"d{i}" for i in range(len(texts))], "text": texts}), path)
    return path


def with_copies(texts: list[str]) -> list[str]:
    """`texts` with one text copied 30 times and two more copied once, spread through."""
    mixed = list(texts)
    for position in range(30):
        mixed.insert(position * 3, COPIED)
    return mixed + [texts[0], texts[5]]


def mine_file(path: Path, encoder, **options) -> MiningResult:
    source = CorpusSource(path, id_column="doc_id", device="cpu")
    return mine_corpus(source, MiningOptions(**options), encoder=encoder)


def pair_set(result: MiningResult) -> set[tuple[str, str]]:
    table = result.to_table()
    return set(zip(table.column("id_a").to_pylist(), table.column("id_b").to_pylist()))


@pytest.fixture()
def collection(tmp_path) -> Path:
    return write_corpus(tmp_path, generated_texts(120))


def test_pairs_are_unique_ordered_and_sorted(collection, tiny_encoder) -> None:
    result = mine_file(collection, tiny_encoder, top_k=5)
    assert np.all(result.rows_a < result.rows_b)
    keys = set(zip(result.rows_a.tolist(), result.rows_b.tolist()))
    assert len(keys) == len(result) == result.pairs_found
    assert np.all(np.diff(result.scores) <= 0)
    # Every text has 5 neighbours; a pair found from both sides counts once.
    assert 120 * 5 / 2 <= len(result) <= 120 * 5
    table = result.to_table()
    assert table.column_names == list(PAIR_COLUMNS)
    assert table.column("id_a").to_pylist()[0] == f"d{result.rows_a[0]}"


def test_threshold_and_top_are_cuts_of_the_full_list(collection, tiny_encoder) -> None:
    full = mine_file(collection, tiny_encoder, top_k=4)
    threshold = float(np.median(full.scores))
    above = mine_file(collection, tiny_encoder, top_k=4, threshold=threshold)
    assert np.all(above.scores >= threshold) and above.pairs_found == len(above)
    assert pair_set(above) == {
        pair for pair, score in zip(zip(*_ids(full)), full.scores) if score >= threshold
    }
    best = mine_file(collection, tiny_encoder, top_k=4, top=7)
    assert len(best) == 7 and best.pairs_found == len(full)
    np.testing.assert_allclose(best.scores, full.scores[:7], rtol=1e-6)


def test_chunked_search_gives_the_same_pairs(collection, tiny_encoder) -> None:
    whole = mine_file(collection, tiny_encoder, top_k=3)
    chunked = mine_file(collection, tiny_encoder, top_k=3, query_chunk=7)
    assert pair_set(whole) == pair_set(chunked)


def test_pairs_match_a_brute_force_search(tmp_path, default_encoder) -> None:
    texts = generated_texts(60, seed=1)
    result = mine_file(write_corpus(tmp_path, texts), default_encoder, top_k=3)
    vectors = default_encoder.encode(texts)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -np.inf)
    expected = {
        (min(row, other), max(row, other))
        for row in range(len(texts))
        for other in np.argsort(-similarity[row])[:3].tolist()
    }
    assert set(zip(result.rows_a.tolist(), result.rows_b.tolist())) == expected
    np.testing.assert_allclose(result.scores, similarity[result.rows_a, result.rows_b], atol=1e-5)


def test_mined_recall_is_one_for_full_pairs_and_drops_when_pairs_are_cut(
    collection, tiny_encoder
) -> None:
    full = mine_file(collection, tiny_encoder, top_k=3)
    assert mined_recall(full, sample=40, k=3) == {"sampled_texts": 40, "k": 3, "recall": 1.0}
    cut = mine_file(collection, tiny_encoder, top_k=3, threshold=float(np.median(full.scores)))
    partial = mined_recall(cut, sample=40, k=3)["recall"]
    assert 0.0 < partial < 1.0
    assert mined_recall(full, sample=10_000, k=3)["sampled_texts"] == 120  # all, not more


def test_default_model_ranks_the_paraphrases_first(corpus_file, default_encoder) -> None:
    result = mine_file(corpus_file, default_encoder, top_k=1, top=6)
    assert pair_set(result) == {(f"d{i}", f"d{i + 1}") for i in range(0, 12, 2)}


def test_keep_mode_pairs_copies_like_any_other_texts(tmp_path, tiny_encoder) -> None:
    texts = with_copies(generated_texts(40))
    result = mine_file(write_corpus(tmp_path, texts), tiny_encoder, top_k=3)
    table = result.to_table()
    same = np.array(table.column("text_a").to_pylist()) == np.array(
        table.column("text_b").to_pylist()
    )
    assert same.sum() > 0 and result.duplicates is None
    np.testing.assert_allclose(result.scores[: same.sum()], 1.0, atol=1e-5)


def test_separate_mode_reports_groups_not_pairs(tmp_path, tiny_encoder) -> None:
    base = generated_texts(40)
    texts = with_copies(base)
    result = mine_file(
        write_corpus(tmp_path, texts), tiny_encoder, top_k=3, exact_duplicates="separate"
    )
    table = result.to_table()
    assert all(
        a != b
        for a, b in zip(table.column("text_a").to_pylist(), table.column("text_b").to_pylist())
    )
    groups = result.duplicates.table.to_pylist()
    assert [(group["text"], group["count"]) for group in groups] == [
        (COPIED, 30),
        (base[0], 2),
        (base[5], 2),
    ]
    copied_ids = [f"d{row}" for row, text in enumerate(texts) if text == COPIED]
    assert groups[0]["ids"] == copied_ids
    assert result.duplicates.rows == 34 and result.stats.searched_rows == len(texts) - 31
    # The first copy stands for its group in the pairs; the other copies never appear.
    ids = set(table.column("id_a").to_pylist()) | set(table.column("id_b").to_pylist())
    assert copied_ids[0] in ids and not ids & set(copied_ids[1:])


def test_drop_mode_gives_the_separate_pairs_without_groups(tmp_path, tiny_encoder) -> None:
    path = write_corpus(tmp_path, with_copies(generated_texts(40)))
    separate = mine_file(path, tiny_encoder, top_k=3, exact_duplicates="separate")
    dropped = mine_file(path, tiny_encoder, top_k=3, exact_duplicates="drop")
    assert pair_set(dropped) == pair_set(separate) and dropped.duplicates is None


def test_only_copies_leave_no_pairs_but_a_group(tmp_path, tiny_encoder) -> None:
    path = write_corpus(tmp_path, [COPIED] * 5)
    result = mine_file(path, tiny_encoder, exact_duplicates="separate")
    assert len(result) == 0 and result.duplicates.table.column("count").to_pylist() == [5]


@pytest.mark.parametrize("mode", ["keep", "separate", "drop"])
def test_index_input_gives_the_same_pairs_as_file_input(tmp_path, tiny_encoder, mode) -> None:
    path = write_corpus(tmp_path, with_copies(generated_texts(60)))
    from_file = mine_file(path, tiny_encoder, top_k=4, exact_duplicates=mode)
    build_index(_build_options(path, tmp_path), encoder=tiny_encoder)
    from_index = mine_index(
        "collection", tmp_path / "idx", MiningOptions(top_k=4, exact_duplicates=mode)
    )
    assert pair_set(from_index) == pair_set(from_file)
    np.testing.assert_allclose(from_index.scores, from_file.scores, atol=1e-5)
    assert from_index.to_table().column("text_a") == from_file.to_table().column("text_a")


def test_an_index_of_many_parts_with_deletions_mines_its_live_rows(tmp_path, tiny_encoder) -> None:
    texts = generated_texts(50)
    path = write_corpus(tmp_path, texts)
    folder = build_index(_build_options(path, tmp_path, part_rows=7), encoder=tiny_encoder)
    delete_rows(folder, ids=["d3", "d8", "d30"])
    kept = pa.table(
        {
            "doc_id": [f"d{i}" for i in range(50) if i not in (3, 8, 30)],
            "text": [t for i, t in enumerate(texts) if i not in (3, 8, 30)],
        }
    )
    pq.write_table(kept, tmp_path / "kept.parquet")
    from_file = mine_file(tmp_path / "kept.parquet", tiny_encoder, top_k=4)
    from_index = mine_index("collection", tmp_path / "idx", MiningOptions(top_k=4))
    assert pair_set(from_index) == pair_set(from_file)
    assert from_index.to_table().column("text_a") == from_file.to_table().column("text_a")


def test_large_collections_use_ivf_trained_on_the_spot(
    collection, tiny_encoder, monkeypatch
) -> None:
    exact = mine_file(collection, tiny_encoder, top_k=3)
    monkeypatch.setattr(neighbours_module, "AUTO_EXACT_LIMIT", 50)
    # 120 rows get 3 IVF lists; visiting all of them makes the search exhaustive, hence exact.
    approximate = mine_file(collection, tiny_encoder, top_k=3, nprobe=3)
    assert approximate.stats.structure == "IVF3,Flat (trained for mining)"
    assert pair_set(approximate) == pair_set(exact)


@pytest.mark.parametrize(
    ("mode", "structure"), [("keep", "the index's own centroids"), ("separate", "own centroids")]
)
def test_large_indexes_are_searched_with_their_own_structure(
    tmp_path, tiny_encoder, monkeypatch, mode, structure
) -> None:
    path = write_corpus(tmp_path, with_copies(generated_texts(100)))
    exact = mine_file(path, tiny_encoder, top_k=3, exact_duplicates=mode)
    build_index(_build_options(path, tmp_path, index="IVF4,Flat"), encoder=tiny_encoder)
    monkeypatch.setattr(neighbours_module, "AUTO_EXACT_LIMIT", 50)
    options = MiningOptions(top_k=3, exact_duplicates=mode, nprobe=4)
    from_index = mine_index("collection", tmp_path / "idx", options)
    assert (
        from_index.stats.structure.startswith("IVF4,Flat")
        and structure in from_index.stats.structure
    )
    assert pair_set(from_index) == pair_set(exact)


def test_large_flat_indexes_are_not_searched_by_brute_force(
    collection, tmp_path, tiny_encoder, monkeypatch
) -> None:
    build_index(_build_options(collection, tmp_path, index="flat"), encoder=tiny_encoder)
    monkeypatch.setattr(neighbours_module, "AUTO_EXACT_LIMIT", 50)
    result = mine_index("collection", tmp_path / "idx", MiningOptions(top_k=3))
    assert result.stats.structure.endswith("(trained for mining)")


def test_ids_default_to_source_rows_and_empty_texts_are_skipped(tmp_path, tiny_encoder) -> None:
    texts = generated_texts(10)
    path = tmp_path / "plain.csv"
    rows = ["text"] + texts[:3] + ['""'] + texts[3:]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = mine_corpus(
        CorpusSource(path, device="cpu"), MiningOptions(top_k=2), encoder=tiny_encoder
    )
    assert result.stats.rows == 10 and result.stats.rows_skipped == 1
    table = result.to_table()
    for row_id, text in zip(table.column("id_a").to_pylist(), table.column("text_a").to_pylist()):
        assert text == (texts[row_id] if row_id < 3 else texts[row_id - 1])


def test_written_parquet_has_the_pair_columns(collection, tiny_encoder, tmp_path) -> None:
    result = mine_file(collection, tiny_encoder, top=5)
    result.write(tmp_path / "pairs.parquet")
    table = pq.read_table(tmp_path / "pairs.parquet")
    assert table.column_names == list(PAIR_COLUMNS) and table.num_rows == 5


@pytest.mark.parametrize(
    ("texts", "options", "expected"),
    [
        (["only one text", "", "   "], {}, "mining needs at least two"),
        (None, {"threshold": 1.5}, "outside [-1, 1]"),
        (None, {"threshold": -1.01}, "outside [-1, 1]"),
        (None, {"top_k": 0}, "--top-k must be at least 1"),
        (None, {"top": 0}, "--top must be at least 1"),
        (None, {"exact_duplicates": "merge"}, "choose keep, separate, drop"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, tiny_encoder, texts, options, expected) -> None:
    path = write_corpus(tmp_path, texts or generated_texts(10))
    with pytest.raises(SemsearchError, match=expected.replace("[", r"\[")) as error:
        mine_file(path, tiny_encoder, **options)
    assert "\n" not in str(error.value)


def test_a_missing_index_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(SemsearchError, match="no index named 'nope'"):
        mine_index("nope", tmp_path)


def test_distance_indexes_are_refused(tmp_path, tiny_encoder) -> None:
    path = write_corpus(tmp_path, generated_texts(10))
    build_index(_build_options(path, tmp_path, metric="l2"), encoder=tiny_encoder)
    with pytest.raises(SemsearchError, match="uses the l2 distance"):
        mine_index("collection", tmp_path / "idx")


def _build_options(path: Path, folder: Path, **overrides) -> BuildOptions:
    return BuildOptions(
        corpus=path,
        text_column="text",
        id_column="doc_id",
        device="cpu",
        out_dir=folder / "idx",
        show_progress=False,
        **overrides,
    )


def _ids(result: MiningResult) -> tuple[list, list]:
    table = result.to_table()
    return table.column("id_a").to_pylist(), table.column("id_b").to_pylist()
