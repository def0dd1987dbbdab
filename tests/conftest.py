"""Shared fixtures: a tiny random BERT (fast, for behaviour), small corpus files and a
small BEIR folder."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from training.tiny_data import PAIRS
from transformers import AutoTokenizer, BertConfig, BertModel

from semsearch.models import BiEncoder
from semsearch.models.model_folder import resolve_model

# Texts with related pairs, so that even small tests have something to find.
SENTENCES = [
    "A man is playing a guitar.",
    "A person plays an acoustic guitar on stage.",
    "The cat sleeps on the sofa.",
    "A kitten is napping on the couch.",
    "Stock markets fell sharply on Monday.",
    "Shares dropped steeply at the start of the week.",
    "How do I compress a folder on Linux?",
    "Create a tar.gz archive of a directory.",
    "The recipe needs two eggs and some flour.",
    "Bake the cake for forty minutes.",
    "A library for parsing JSON quickly.",
    "Fast JSON decoding for Python programs.",
]


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """One torch thread: on a busy 2-core machine two threads wait on each other, and
    results stay bit-for-bit repeatable."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True, scope="session")
def encoder_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """OpenVINO exports (the default runtime on a CPU) go to a temporary folder, not the
    user's cache; one per session, so each tiny model is exported once."""
    folder = tmp_path_factory.mktemp("semsearch-cache")
    previous = os.environ.get("SEMSEARCH_CACHE_DIR")
    os.environ["SEMSEARCH_CACHE_DIR"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("SEMSEARCH_CACHE_DIR", None)
    else:
        os.environ["SEMSEARCH_CACHE_DIR"] = previous


@pytest.fixture(autouse=True)
def torch_unless_about_the_runtime(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`runtime="auto"` (the default: OpenVINO on a CPU) means torch in tests that are not
    about the runtime: their references are torch's vectors to 1e-6 (OpenVINO's bf16 is
    within cosine 0.9999, not 1e-6), and each load would compile and check a model. Tests
    marked `default_runtime`, and the CLI run in a subprocess, get the real default."""
    if request.node.get_closest_marker("default_runtime") is None:
        from semsearch.ingest import build
        from semsearch.models import bi_encoder

        monkeypatch.setattr(
            bi_encoder,
            "resolve_runtime",
            lambda runtime, device: "torch" if runtime == "auto" else runtime,
        )
        # nor does a build take a checked export another test left in the session's cache
        monkeypatch.setattr(build, "open_model_export", lambda options: None)


@pytest.fixture()
def sentences() -> list[str]:
    return list(SENTENCES)


def reference_model() -> str:
    """The default model's folder, or the folder `SEMSEARCH_TEST_MODEL` names: the GPU suite
    carries the default model as fp16 weights widened back on the GPU machine, where the
    model package (and so its weights' hash) is absent."""
    return os.environ.get("SEMSEARCH_TEST_MODEL") or str(resolve_model("default").path)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide BERT with random weights and the default model's tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(reference_model())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# The prompts of an asymmetric model (e5's), in a tiny model folder's
# config_sentence_transformers.json.
PROMPTS = {"query": "query: ", "document": "passage: "}


@pytest.fixture(scope="session")
def prompted_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model in sentence-transformers' layout, naming e5's query and document
    prompts in its `config_sentence_transformers.json`."""
    folder = tmp_path_factory.mktemp("tiny-prompted")
    BiEncoder.load(str(tiny_model_dir), device="cpu", runtime="torch").save(folder)
    config = {"prompts": PROMPTS, "default_prompt_name": None}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(config))
    return folder


@pytest.fixture()
def tiny_encoder(tiny_model_dir: Path) -> BiEncoder:
    """The tiny model on torch: the reference the runtimes are compared with."""
    return BiEncoder.load(str(tiny_model_dir), device="cpu", runtime="torch")


@pytest.fixture(scope="session")
def openvino_tiny_model(tiny_model_dir: Path):
    """The tiny model converted to OpenVINO once per session (seconds: the PyTorch frontend
    traces it); tests return it from a patched `convert_model` to stay fast."""
    ov = pytest.importorskip("openvino", reason="openvino is not installed (cpu-runtime extra)")
    from semsearch.models.openvino_runtime import _convert

    return _convert(BiEncoder.load(str(tiny_model_dir), device="cpu", runtime="torch"), ov)


@pytest.fixture(scope="session")
def reference_model_dir() -> str:
    return reference_model()


@pytest.fixture(scope="session")
def default_encoder() -> BiEncoder:
    """The real embedded all-MiniLM-L6-v2 on torch (loads in about a second)."""
    return BiEncoder.load(reference_model(), device="cpu", runtime="torch")


def write_corpus(path: Path) -> Path:
    """Write the small Parquet corpus: ids, the sentences, and a topic per related pair."""
    topics = ["music", "pets", "finance", "linux", "food", "python"]
    table = pa.table(
        {
            "doc_id": [f"d{i}" for i in range(len(SENTENCES))],
            "text": SENTENCES,
            "topic": [topics[i // 2] for i in range(len(SENTENCES))],
        }
    )
    pq.write_table(table, path)
    return path


@pytest.fixture()
def corpus_file(tmp_path: Path) -> Path:
    """A small Parquet corpus with ids and an extra metadata column."""
    return write_corpus(tmp_path / "corpus.parquet")


@pytest.fixture()
def beir(tmp_path: Path) -> Path:
    """A BEIR folder: each pair's first sentence a query, its second the relevant document."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    documents = [{"_id": f"doc{i}", "title": "", "text": pair[1]} for i, pair in enumerate(PAIRS)]
    queries = [{"_id": f"q{i}", "text": pair[0]} for i, pair in enumerate(PAIRS[:6])]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in documents))
    with gzip.open(folder / "queries.jsonl.gz", "wt") as handle:
        handle.write("".join(json.dumps(q) + "\n" for q in queries))
    qrels = "".join(f"q{i}\tdoc{i}\t1\n" for i in range(6))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` run only where torch sees a CUDA GPU (those that also need GPU
    FAISS say so with `needs_gpu_faiss`)."""
    if torch.cuda.is_available():
        return
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
