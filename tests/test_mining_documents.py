"""Mining a chunked index: documents paired by default (passages pooled, boilerplate weighing
little), passage pairs with --passages, an index of sentences as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cli.support import CliRunner, error_line

from semsearch.cli.app import app
from semsearch.errors import SemsearchError
from semsearch.ingest.build import build_index
from semsearch.ingest.build_options import BuildOptions
from semsearch.mining import IndexedCollection, MiningOptions, mine_index, mine_paraphrases
from semsearch.mining.blocks import BlockJob, mine_block, plan_blocks
from semsearch.mining.documents import passage_weights
from semsearch.mining.neighbours import search_structure

BOILERPLATE = "This package contains the shared library. It is part of the project's releases."
TOPICS = {
    "violins": "Violins are string instruments played with a bow, tuned in fifths.",
    "gardens": "Gardens need water, sunlight and soil rich in compost to grow vegetables.",
    "engines": "Diesel engines compress air until it is hot enough to ignite the fuel.",
    "oceans": "Oceans cover most of the planet and their currents move heat around it.",
    "printers": "Laser printers fuse toner onto paper with a heated roller drum.",
    "mountains": "Mountains form where tectonic plates collide and push rock upwards.",
}
# About the same thing as violins.txt, in other words, and with the same boilerplate.
SAME_TOPIC = "Violins are string instruments played with a bow, and they are tuned in fifths."


def write_documents(folder: Path) -> Path:
    """Documents of one distinct paragraph each, all ending with the same stock paragraph."""
    folder.mkdir(parents=True)
    for topic, paragraph in {**TOPICS, "violins-again": SAME_TOPIC}.items():
        (folder / f"{topic}.txt").write_text(f"{paragraph}\n\n{BOILERPLATE}\n", encoding="utf-8")
    return folder


def build(corpus: Path, model: Path, out: Path, **options) -> None:
    build_index(
        BuildOptions(
            corpus=corpus,
            model=str(model),
            out_dir=out,
            show_progress=False,
            runtime="torch",
            target_recall=None,
            **{"chunking": "on", "chunk_tokens": 24, "chunk_overlap": 4, **options},
        )
    )


@pytest.fixture()
def indexes(tmp_path: Path, tiny_model_dir: Path) -> Path:
    build(write_documents(tmp_path / "docs"), tiny_model_dir, tmp_path / "indexes")
    return tmp_path / "indexes"


def pairs_of(result) -> list[tuple[str, str]]:
    table = result.to_table()
    return list(zip(table.column("id_a").to_pylist(), table.column("id_b").to_pylist()))


def test_the_default_pairs_documents_each_once_never_one_with_itself(indexes: Path) -> None:
    result = mine_index("docs", indexes, MiningOptions(top_k=10))
    pairs = pairs_of(result)
    assert result.stats.unit == "documents"
    assert (result.stats.rows, result.stats.documents) == (7, 7)
    assert result.stats.passages == 14  # a passage a paragraph
    assert len(pairs) == 21  # every pair of the 7 documents, once
    assert all(a != b for a, b in pairs)
    assert len({frozenset(pair) for pair in pairs}) == len(pairs)


def test_a_shared_boilerplate_passage_alone_does_not_put_a_pair_first(indexes: Path) -> None:
    result = mine_index("docs", indexes, MiningOptions(top_k=10))
    table = result.to_table()
    assert set(pairs_of(result)[0]) == {"violins.txt", "violins-again.txt"}
    # the passages that matched are the documents' own, not the stock paragraph
    assert table.column("text_a")[0].as_py() in (TOPICS["violins"], SAME_TOPIC)
    assert table.column("text_b")[0].as_py() in (TOPICS["violins"], SAME_TOPIC)
    scores = table.column("score").to_numpy()
    assert np.all(np.diff(scores) <= 0)


def test_passages_pair_passages_boilerplate_first(indexes: Path) -> None:
    result = mine_index("docs", indexes, MiningOptions(top_k=20, passages=True))
    table = result.to_table()
    assert result.stats.unit == "passages"
    assert (result.stats.rows, result.stats.documents) == (14, 7)
    assert table.column("text_a")[0].as_py() == BOILERPLATE
    assert table.column("score")[0].as_py() == pytest.approx(1.0, abs=1e-5)
    pairs = pairs_of(result)
    assert all(a != b for a, b in pairs)
    assert len({frozenset(pair) for pair in pairs}) == len(pairs)


def test_worker_blocks_never_pair_two_passages_of_one_document(indexes: Path) -> None:
    """What each `mine --engine ray` worker does (`mine_block`), in this process."""
    collection = IndexedCollection("docs", indexes)

    def search_in_blocks(collection, options, pairs) -> str:
        vectors = collection.vectors(pairs.rows)
        structure, about = search_structure(vectors, collection.metric)
        job = BlockJob(pairs.rows, pairs.row_count, options.top_k, 4, None, None, pairs.documents)
        for block in plan_blocks(len(pairs.rows), 4, workers=2):
            keys, scores, _ = mine_block(structure, vectors, job, block)
            pairs.add_candidates(keys, scores)
        return about

    options = MiningOptions(top_k=13, passages=True)  # each passage's every neighbour
    result = mine_paraphrases(collection, options, search_in_blocks)
    pairs = pairs_of(result)
    assert pairs and all(a != b for a, b in pairs)
    assert set(pairs) == set(pairs_of(mine_paraphrases(collection, options)))


def test_passage_weights_count_documents_not_rows() -> None:
    # text 0 twice in document 0 and once in document 1; text 1 in document 1 only
    weights = passage_weights(np.array([0, 0, 0, 1]), np.array([0, 0, 1, 1]))
    assert weights.tolist() == [0.5, 0.5, 0.5, 1.0]


def test_passages_on_an_index_of_sentences_is_a_one_line_error(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    corpus = tmp_path / "short"
    corpus.mkdir()
    for topic, paragraph in TOPICS.items():
        (corpus / f"{topic}.txt").write_text(paragraph, encoding="utf-8")
    build(corpus, tiny_model_dir, tmp_path / "indexes", chunking="off")
    result = mine_index("short", tmp_path / "indexes", MiningOptions(top_k=3))
    assert result.stats.unit == "texts" and result.stats.documents is None
    with pytest.raises(SemsearchError, match="--passages"):
        mine_index("short", tmp_path / "indexes", MiningOptions(passages=True))


def test_the_command_counts_documents_and_refuses_passages_of_a_corpus_file(
    indexes: Path, corpus_file: Path
) -> None:
    cli = CliRunner()
    shown = cli.invoke(app, ["mine", "--index", "docs", "--index-dir", str(indexes)])
    assert shown.exit_code == 0, shown.output
    assert "among 7 of 7 documents (14 passages)" in shown.stdout
    assert "chunk" not in shown.stdout
    passages = cli.invoke(
        app, ["mine", "--index", "docs", "--index-dir", str(indexes), "--passages"]
    )
    assert passages.exit_code == 0, passages.output
    assert "of 14 passages of 7 documents" in passages.stdout
    refused = cli.invoke(app, ["mine", str(corpus_file), "--passages"])
    assert "--passages" in error_line(refused)


def test_copies_of_a_document_are_grouped_as_documents(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    folder = write_documents(tmp_path / "docs")
    (folder / "violins-copy.txt").write_text((folder / "violins.txt").read_text())
    build(folder, tiny_model_dir, tmp_path / "indexes")
    options = MiningOptions(top_k=10, exact_duplicates="separate")
    result = mine_index("docs", tmp_path / "indexes", options)
    assert result.duplicates is not None
    groups = result.duplicates.table.to_pylist()
    assert [(g["count"], sorted(g["ids"])) for g in groups] == [
        (2, ["violins-copy.txt", "violins.txt"])
    ]
    assert result.stats.exact_duplicate_rows == 1  # one document repeats another
    assert ("violins-copy.txt", "violins.txt") not in {tuple(sorted(p)) for p in pairs_of(result)}


def test_documents_mined_with_the_ray_search_are_pooled_and_searched_on_the_driver(
    indexes: Path,
) -> None:
    from semsearch.distributed.mine import RayIndexPairSearch

    collection = IndexedCollection("docs", indexes)
    options = MiningOptions(top_k=10, device="cpu")
    result = mine_paraphrases(collection, options, RayIndexPairSearch(None))  # type: ignore[arg-type]
    assert "on the driver" in result.stats.structure
    assert pairs_of(result) == pairs_of(mine_paraphrases(collection, options))
