"""Model prompts: chosen as sentence-transformers chooses them, and the vectors of
`encode_query` / `encode_document`, on torch and on the default runtime (OpenVINO)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import PROMPTS

from semsearch.errors import SemsearchError
from semsearch.models.bi_encoder import BiEncoder
from semsearch.models.prompts import (
    Prompts,
    encode_documents,
    encode_queries,
    read_prompts,
    with_prompt,
)
from semsearch.models.spec import EncoderSpec

TEXTS = ["A man is playing a guitar.", "The cat sleeps on the sofa.", "How do I zip a folder?"]


@pytest.fixture(scope="module")
def st_model(prompted_model_dir: Path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    return sentence_transformers.SentenceTransformer(str(prompted_model_dir), device="cpu")


def test_with_prompt_prepends_and_leaves_texts_alone_without_one() -> None:
    assert with_prompt(["a", "b"], "query: ") == ["query: a", "query: b"]
    texts = ["a"]
    assert with_prompt(texts, "") is texts
    with pytest.raises(TypeError):
        with_prompt("a", "q: ")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"prompts": {"query": "query: ", "document": "passage: "}},
            Prompts("query: ", "passage: "),
        ),
        ({}, Prompts()),
        ({"prompts": {"query": None, "document": None}}, Prompts()),
        # sentence-transformers 6: `document` always exists (empty), so it wins over these.
        ({"prompts": {"passage": "passage: ", "corpus": "c: "}}, Prompts()),
        # and default_prompt_name is not used by encode_query / encode_document.
        (
            {"prompts": {"classification": "c: "}, "default_prompt_name": "classification"},
            Prompts(),
        ),
    ],
)
def test_the_prompts_of_a_config(config: dict, expected: Prompts) -> None:
    assert Prompts.from_config(config) == expected


@pytest.mark.parametrize(
    "prompts",
    [
        {"query": "query: ", "passage": "passage: "},
        {"document": "doc: ", "corpus": "corpus: "},
        {"classification": "c: "},
    ],
)
def test_the_chosen_prompts_are_those_sentence_transformers_applies(
    prompted_model_dir: Path, tmp_path: Path, prompts: dict
) -> None:
    """Not our reading of its rules: its own `encode_query` / `encode_document` vectors."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = tmp_path / "model"
    shutil.copytree(prompted_model_dir, folder)
    config = {"prompts": prompts, "default_prompt_name": next(iter(prompts))}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    reference = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    encoder = BiEncoder.load(str(folder), device="cpu", runtime="torch")
    np.testing.assert_allclose(
        encoder.encode_query(TEXTS), reference.encode_query(TEXTS), atol=1e-5
    )
    np.testing.assert_allclose(
        encoder.encode_document(TEXTS), reference.encode_document(TEXTS), atol=1e-5
    )


def test_torch_vectors_equal_sentence_transformers(prompted_model_dir: Path, st_model) -> None:
    encoder = BiEncoder.load(str(prompted_model_dir), device="cpu", runtime="torch")
    assert encoder.prompts == Prompts(PROMPTS["query"], PROMPTS["document"])
    assert (encoder.spec.query_prompt, encoder.spec.document_prompt) == ("query: ", "passage: ")
    queries, documents = encoder.encode_query(TEXTS), encoder.encode_document(TEXTS)
    np.testing.assert_allclose(queries, st_model.encode_query(TEXTS), atol=1e-5)
    np.testing.assert_allclose(documents, st_model.encode_document(TEXTS), atol=1e-5)
    assert not np.allclose(queries, documents, atol=1e-3)  # the prompts made a difference
    np.testing.assert_allclose(encode_queries(encoder, TEXTS), queries, atol=0)
    np.testing.assert_allclose(encode_documents(encoder, TEXTS), documents, atol=0)


def test_an_index_spec_brings_its_own_prompts(prompted_model_dir: Path, st_model) -> None:
    spec = BiEncoder.load(str(prompted_model_dir), device="cpu", runtime="torch").spec
    recorded = EncoderSpec(**{**spec.to_dict(), "query_prompt": "", "document_prompt": "d: "})
    encoder = BiEncoder.for_index(recorded, "cpu", "torch")
    assert encoder.prompts == Prompts("", "d: ")
    np.testing.assert_allclose(encoder.encode_query(TEXTS), st_model.encode(TEXTS), atol=1e-5)
    expected = st_model.encode(TEXTS, prompt="d: ")
    np.testing.assert_allclose(encoder.encode_document(TEXTS), expected, atol=1e-5)


def test_overrides_replace_the_folders_prompts(prompted_model_dir: Path, st_model) -> None:
    encoder = BiEncoder.load(
        str(prompted_model_dir),
        device="cpu",
        runtime="torch",
        query_prompt="",
        document_prompt="x: ",
    )
    assert encoder.prompts == Prompts("", "x: ")
    np.testing.assert_allclose(encoder.encode_query(TEXTS), st_model.encode(TEXTS), atol=1e-5)


def test_the_prompt_counts_towards_max_length(prompted_model_dir: Path, st_model) -> None:
    """A text that fits alone is cut once the prompt is before it, as sentence-transformers
    cuts it, and the cut is counted."""
    encoder = BiEncoder.load(str(prompted_model_dir), device="cpu", runtime="torch")
    fits = " ".join(["guitar"] * (encoder.max_length - 2))  # [CLS] and [SEP] besides
    assert len(encoder.tokenize([fits])[0]) == encoder.max_length
    assert encoder.truncation.cut == 0
    vectors = encoder.encode_query([fits])
    assert encoder.truncation.cut == 1
    np.testing.assert_allclose(vectors, st_model.encode_query([fits]), atol=1e-5)


def test_a_pooling_without_the_prompt_is_refused_unless_no_prompt(
    prompted_model_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "instructor-like"
    shutil.copytree(prompted_model_dir, folder)
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({**json.loads(pooling.read_text()), "include_prompt": False}))
    with pytest.raises(SemsearchError, match="include_prompt false"):
        BiEncoder.load(str(folder), device="cpu", runtime="torch")
    encoder = BiEncoder.load(
        str(folder), device="cpu", runtime="torch", query_prompt="", document_prompt=""
    )
    assert encoder.prompts == Prompts()


def test_a_saved_encoder_keeps_its_prompts(prompted_model_dir: Path, tmp_path: Path) -> None:
    BiEncoder.load(str(prompted_model_dir), device="cpu", runtime="torch").save(tmp_path / "m")
    assert read_prompts(tmp_path / "m") == Prompts("query: ", "passage: ")


def test_prompts_that_are_not_strings_are_refused_in_one_line() -> None:
    with pytest.raises(SemsearchError, match="must be strings"):
        Prompts.from_config({"prompts": {"query": 3}})


def test_a_spec_without_prompts_reads_as_none() -> None:
    """Indexes built before prompts were recorded: their manifests have no such fields."""
    from semsearch.store.manifest_fields import validate_model

    spec = EncoderSpec(
        name="m", fingerprint="", pooling="mean", normalize=True, max_length=8, dimension=4
    )
    assert (spec.query_prompt, spec.document_prompt) == ("", "")
    validate_model(spec)
    with pytest.raises(ValueError, match="model.query_prompt"):
        validate_model(EncoderSpec(**{**spec.to_dict(), "query_prompt": None}))


@pytest.mark.default_runtime
def test_the_default_runtime_gives_sentence_transformers_vectors(
    prompted_model_dir: Path, st_model
) -> None:
    """OpenVINO: the query path (the checked export, fp32) to 1e-5; documents in fp32 to
    1e-5, and in the runtime's own precision (bf16 where native) within its bar."""
    pytest.importorskip("openvino", reason="openvino is not installed (the cpu-runtime extra)")
    from semsearch.models.exported_query_encoder import ExportedQueryEncoder
    from semsearch.models.openvino_runtime import MIN_COSINE, cosine_agreement
    from semsearch.models.query_loader import open_for_queries, open_for_rows

    encoder = BiEncoder.load(str(prompted_model_dir), device="cpu")  # runtime auto
    assert encoder.runtime.startswith("openvino-")
    expected_queries, expected_documents = (
        st_model.encode_query(TEXTS),
        st_model.encode_document(TEXTS),
    )
    documents = encoder.encode_document(TEXTS, precision="fp32")
    np.testing.assert_allclose(documents, expected_documents, atol=1e-5)
    assert cosine_agreement(encoder.encode_document(TEXTS), expected_documents)[1] >= MIN_COSINE
    spec = encoder.spec
    encoder_for_queries = open_for_queries(spec, "cpu")  # exports and checks, or finds the export
    queries = open_for_queries(spec, "cpu")
    assert isinstance(queries, ExportedQueryEncoder), type(encoder_for_queries)
    assert (queries.spec.query_prompt, queries.spec.document_prompt) == ("query: ", "passage: ")
    np.testing.assert_allclose(queries.encode_query(TEXTS), expected_queries, atol=1e-5)
    rows = open_for_rows(spec, "cpu")
    assert cosine_agreement(encode_documents(rows, TEXTS), expected_documents)[1] >= MIN_COSINE


class RecordingEncoder:
    """Records the texts each `encode` call gets; its spec names e5's prompts."""

    spec = EncoderSpec("m", "", "mean", True, 16, 2, None, "query: ", "passage: ")
    dimension = 2

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts, **options) -> np.ndarray:
        self.calls.append(list(texts))
        return np.ones((len(texts), 2), dtype=np.float32)


def test_eval_ir_prompts_queries_and_documents_and_sts_both_sides_as_queries() -> None:
    from semsearch.evaluation.base import encode_pairs
    from semsearch.evaluation.beir import RetrievalData
    from semsearch.evaluation.ir import InformationRetrievalEvaluator

    encoder = RecordingEncoder()
    data = RetrievalData(
        corpus={"d1": "a doc"}, queries={"q1": "a question"}, qrels={"q1": {"d1": 1}}
    )
    InformationRetrievalEvaluator(data).evaluate(encoder)
    assert encoder.calls == [["passage: a doc"], ["query: a question"]]
    encoder.calls.clear()
    encode_pairs(encoder, ["one"], ["two"], batch_size=8)
    assert encoder.calls == [["query: one", "query: two"]]


def test_mining_a_corpus_encodes_every_text_as_a_query(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from semsearch.mining.collection import CorpusSource, EncodedCollection

    pq.write_table(pa.table({"text": ["first", "second"]}), tmp_path / "c.parquet")
    encoder = RecordingEncoder()
    collection = EncodedCollection(CorpusSource(tmp_path / "c.parquet"), encoder)  # type: ignore[arg-type]
    collection.vectors(np.arange(2))
    assert encoder.calls == [["query: first", "query: second"]]


def test_eval_overrides_reach_the_loaded_model(prompted_model_dir: Path) -> None:
    from semsearch.evaluate import ModelOptions, load_model

    options = ModelOptions(model=str(prompted_model_dir), device="cpu", query_prompt="q2: ")
    assert load_model(options).encoder.prompts == Prompts("q2: ", "passage: ")
