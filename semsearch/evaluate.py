"""The `semsearch eval` tasks as functions: read the data, load the model, measure, time it.

    from semsearch.evaluate import ModelOptions, evaluate_sts
    result = evaluate_sts("stsb:sts-test.csv.gz", ModelOptions(model="models/stsb"))
    result.metrics["spearman_cosine"]

Labelled files are read as training reads its dev data (`stsb:` / `sick:` readers, column
mapping), so a file that works as `--dev` works here too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from semsearch import __version__
from semsearch.ann.devices import device_words
from semsearch.errors import SemsearchError
from semsearch.evaluation.base import Evaluator
from semsearch.evaluation.beir import RetrievalData, read_beir
from semsearch.evaluation.heatmap import similarity_heatmap
from semsearch.evaluation.hybrid import exact_modes, index_modes, index_rankings, tuned_convex
from semsearch.evaluation.ir import DEPTH, ir_metrics
from semsearch.evaluation.pairs import LabelledPairs, PairClassificationEvaluator
from semsearch.evaluation.self_check import check_self_checkable, self_check
from semsearch.evaluation.sts import STSEvaluator
from semsearch.io.inputs import read_lines
from semsearch.models import BiEncoder
from semsearch.models.cross_encoder import CrossEncoder
from semsearch.models.model_folder import DEFAULT_MODEL, require_kind, resolve_model
from semsearch.options import DEFAULT_RERANK_TOP
from semsearch.rerank import Reranker, rerank_verdicts
from semsearch.search.hybrid import Fusion
from semsearch.search.searcher import Searcher
from semsearch.store.folders import DEFAULT_INDEX_DIR, find_index
from semsearch.training.data import DataOptions, TrainingData, choose_task, read_eval_data

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelOptions:
    """Which model to measure and how to run it.

    Args:
        model: a model folder, hub name or `default` (None: the default model).
        index: or the index (name or folder) whose recorded model to measure.
        index_dir: where index names are looked up.
        device: `auto`, `cpu`, `cuda`...
        quantization: a quantised encoder (with `model` only: an index keeps its encoder).
        batch_size: texts per forward pass.
        show_progress: a line naming the model before it loads, and a bar of the texts
            encoded (sts and pairs).
        query_prompt, document_prompt: replace the model folder's (or the index's) prompts;
            None keeps them, "" is none. sts and pairs put the query prompt before both
            sides (the e5/bge convention for symmetric tasks).
    """

    model: str | None = None
    index: str | None = None
    index_dir: Path = DEFAULT_INDEX_DIR
    device: str = "auto"
    quantization: str | None = None
    batch_size: int = 64
    show_progress: bool = False
    query_prompt: str | None = None
    document_prompt: str | None = None


@dataclass(frozen=True)
class LoadedModel:
    """The encoder to measure, how reports name it, and the index's searcher if one was named."""

    encoder: BiEncoder
    described: str
    searcher: Searcher | None = None


@dataclass(frozen=True)
class EvaluationResult:
    """What one task measured: `metrics`, and the facts (data, rows...) to report them with."""

    task: str
    model: str
    facts: dict[str, Any]
    metrics: dict[str, float]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON record `semsearch eval --json` prints and `--out` writes."""
        return {
            "task": self.task,
            "model": self.model,
            **self.facts,
            "metrics": self.metrics,
            "seconds": round(self.seconds, 2),
            "semsearch_version": __version__,
        }


@dataclass(frozen=True)
class HeatmapResult:
    """The sentences, their cosine similarity matrix and the PNG it was drawn to."""

    model: str
    png: Path
    sentences: list[str]
    matrix: np.ndarray = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": "heatmap",
            "model": self.model,
            "png": str(self.png),
            "sentences": self.sentences,
            "matrix": self.matrix.round(6).tolist(),
        }


def load_model(options: ModelOptions) -> LoadedModel:
    """The encoder `options` name: a model, or the model an index records (checked against
    its fingerprint when the index opens)."""
    if options.model is not None and options.index is not None:
        raise SemsearchError("give either --model or --index, not both")
    if options.index is None:
        name, quantization = options.model or DEFAULT_MODEL, options.quantization
        if options.show_progress:  # seconds of silence otherwise; a missing model stays one line
            require_kind(resolve_model(name), "bi-encoder")
            log.warning("loading model %s on %s", name, device_words(options.device))
        # torch: a model's published figures are torch's (OpenVINO's bf16 moves the 5th digit).
        encoder = BiEncoder.load(
            name,
            device=options.device,
            quantization=quantization,
            runtime="torch",
            query_prompt=options.query_prompt,
            document_prompt=options.document_prompt,
        )
        return LoadedModel(encoder, name + (f" ({quantization})" if quantization else ""))
    if options.quantization is not None:
        raise SemsearchError(
            "--quantize goes with --model: an index uses the encoder it was built with"
        )
    folder = find_index(options.index, options.index_dir)
    if options.show_progress:
        log.warning(
            "loading the model of index %s on %s", folder.name, device_words(options.device)
        )
    searcher = Searcher(folder, device=options.device, query_prompt=options.query_prompt)
    if searcher.encoder is not None:  # the index's prompts, or those given
        prompts = searcher.encoder.prompts.override(options.query_prompt, options.document_prompt)
        searcher.encoder.prompts = prompts
    described = f"index {searcher.folder.name} (model {searcher.manifest.model.name})"
    return LoadedModel(searcher.encoder, described, searcher)


def evaluate_sts(
    data: str,
    model: ModelOptions,
    columns: Mapping[str, str] | None = None,
    score_max: float | None = None,
) -> EvaluationResult:
    """Spearman and Pearson correlation of four similarities with the graded pairs in `data`
    (`stsb:PATH`, `sick:PATH` or a file with sentence1, sentence2, score)."""
    pairs = read_labelled(data, "sts", columns, score_max)
    loaded = load_model(model)
    evaluator = STSEvaluator.from_columns(pairs.columns, name=data)
    evaluator.batch_size, evaluator.show_progress = model.batch_size, model.show_progress
    return _measure("sts", evaluator, loaded, {"data": data, "rows": len(pairs)})


def evaluate_pairs(
    dev: str,
    model: ModelOptions,
    test: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> EvaluationResult:
    """Duplicate or not: accuracy, F1, precision and recall at thresholds chosen on `dev`
    and applied to `test` (default: dev itself), and average precision."""
    dev_pairs = labelled_pairs(read_labelled(dev, "pairs", columns))
    test_pairs = labelled_pairs(read_labelled(test, "pairs", columns)) if test else None
    loaded = load_model(model)
    evaluator = PairClassificationEvaluator(
        dev_pairs, test_pairs, name=test or dev, batch_size=model.batch_size
    )
    evaluator.show_progress = model.show_progress
    facts = {"dev": dev, "test": test, "dev_rows": len(dev_pairs.labels)}
    return _measure("pairs", evaluator, loaded, facts)


def evaluate_ir(
    folder: Path,
    model: ModelOptions,
    split: str = "test",
    search_index: bool = False,
    rerank: str | None = None,
    rerank_top: int = DEFAULT_RERANK_TOP,
    fusion: Fusion | None = None,
    tune: bool = False,
) -> EvaluationResult:
    """nDCG@10, MRR@10, recall@1/10/100 and MAP@100 on a BEIR folder, ranked by exact search
    or, with `search_index`, by the index `model.index` itself; with `rerank` (a cross-encoder
    folder) each query's first `rerank_top` documents are re-ordered, and the figures before
    it are in `facts["before_rerank"]`.

    Without `rerank`, `metrics` are the dense figures and `facts["modes"]` holds dense,
    lexical (BM25) and hybrid (as `fusion` says; default RRF) side by side; `tune` adds
    "hybrid convex tuned", convex fusion with alpha tuned on a dev split (2-fold: each half
    ranked with the alpha of the other), and the alpha tuned on every query in
    `facts["tuned_alpha"]`."""
    data = read_beir(folder, split)
    # The re-ranker is checked before the bi-encoder loads: a wrong folder fails at once.
    reranker = None
    if rerank is not None:
        reranker = Reranker(CrossEncoder.load(rerank, device=model.device), top=rerank_top)
    loaded = load_model(model)
    searcher = loaded.searcher
    if search_index and searcher is None:
        raise SemsearchError("--search-index needs --index NAME: the index to rank with")
    facts: dict[str, Any] = {"data": str(folder), "split": split, "documents": len(data.corpus)}
    started = time.monotonic()
    fusion, depth = fusion or Fusion(), max(DEPTH, reranker.top) if reranker else DEPTH
    sides = None
    if not (search_index and searcher is not None):
        sides = exact_modes(loaded.encoder, data, batch_size=model.batch_size, depth=depth)
    elif searcher.manifest.lexical is not None:
        sides = index_modes(searcher, data)
    if sides is not None:
        rankings = sides.rankings(fusion, depth)
    else:  # an index without a lexical part
        assert searcher is not None
        if reranker is None:
            log.warning(
                "index %r has no lexical part: dense figures only ('semsearch reindex %s "
                "--lexical' adds one)",
                searcher.folder.name,
                searcher.folder.name,
            )
        rankings = {"dense": index_rankings(searcher, data.queries, data.qrels)}
    modes = {mode: ir_metrics(ranking, data.qrels) for mode, ranking in rankings.items()}
    if reranker is not None:
        facts["ranking"] = "the index" if search_index else "exact search"
        return _reranked(data, loaded, facts, reranker, str(rerank), rankings, modes, started)
    facts["ranking"] = "exact search"
    if search_index and searcher is not None:
        facts["ranking"] = f"the index ({searcher.manifest.index.factory})"
    if sides is not None:
        facts["fusion"] = asdict(fusion)
    facts["modes"] = modes
    if sides is not None and tune:
        tuned, facts["tuned_alpha"] = tuned_convex(sides, data.qrels, fusion)
        modes.update(tuned)
    return EvaluationResult(
        "ir", loaded.described, facts, modes["dense"], time.monotonic() - started
    )


def evaluate_self(model: ModelOptions, sample: int = 500, seed: int = 0) -> EvaluationResult:
    """Recall@10 and MRR@10 by document of sentences sampled from the index `model.index`'s
    own documents, each occurring in one document only: a check of the model and chunking
    that needs no labelled query (`semsearch.evaluation.self_check`)."""
    if model.index is None:
        raise SemsearchError("eval self needs an index: semsearch eval self NAME")
    folder = find_index(model.index, model.index_dir)
    check_self_checkable(Searcher(folder, vectors_only=True))  # before the model loads
    loaded = load_model(model)
    started = time.monotonic()
    metrics, facts = self_check(loaded.searcher, sample, seed)
    facts = {"data": f"sentences of index {folder.name}'s own documents", **facts}
    return EvaluationResult("self", loaded.described, facts, metrics, time.monotonic() - started)


def evaluate_heatmap(
    sentences: Path, png: Path, model: ModelOptions, title: str = ""
) -> HeatmapResult:
    """Write a PNG of the cosine similarity of every pair of the sentences in a text file
    (one a line, two or more); return the matrix."""
    if png.suffix.lower() != ".png" or png.is_dir():
        raise SemsearchError(
            f"--png {png} must name a .png file, e.g. {png / 'heatmap.png' if png.is_dir() else png.with_suffix('.png')}"
        )
    texts = read_lines(sentences)
    if len(texts) < 2:
        raise SemsearchError(
            f"{sentences} holds {len(texts)} sentence: a heat-map needs two or more"
        )
    loaded = load_model(model)
    matrix = similarity_heatmap(loaded.encoder, texts, png, title)
    return HeatmapResult(loaded.described, png, texts, matrix)


def read_labelled(
    source: str,
    task: str,
    columns: Mapping[str, str] | None = None,
    score_max: float | None = None,
) -> TrainingData:
    """A labelled file read as training reads dev data, checked to have `task`'s columns."""
    options = DataOptions(train=source, columns=dict(columns or {}), score_max=score_max)
    data = read_eval_data(source, options)
    choose_task(data, task)  # names the missing columns, if any
    return data


def labelled_pairs(data: TrainingData) -> LabelledPairs:
    """The pairs of `data` with their `label` column checked to hold 0 or 1."""
    try:
        labels = [int(float(value)) for value in data.columns["label"]]
    except (TypeError, ValueError):
        raise SemsearchError(f"{data.source}: column 'label' must hold 0 or 1") from None
    if not set(labels) <= {0, 1}:
        raise SemsearchError(
            f"{data.source}: column 'label' must hold 0 or 1, not {sorted(set(labels))[:5]}"
        )
    return LabelledPairs(data.columns["sentence1"], data.columns["sentence2"], labels)


def _reranked(
    data: RetrievalData,
    loaded: LoadedModel,
    facts: dict[str, Any],
    reranker: Reranker,
    rerank: str,
    rankings: dict[str, dict[str, list[str]]],
    retrieved: dict[str, dict[str, float]],
    started: float,
) -> EvaluationResult:
    """Each retrieval mode before and after the cross-encoder re-orders its rankings' heads.

    `metrics` are dense re-ranked, `facts["before_rerank"]` dense as retrieved;
    `facts["modes"]` has every mode and `MODE + rerank`, and `facts["rerank_verdicts"]`
    says in words, per mode, whether re-ranking raised or lowered nDCG@10.
    """
    reranked = reranker.rerank_many(rankings, data.queries, data.corpus)
    modes: dict[str, dict[str, float]] = {}
    for mode in rankings:
        modes[mode] = retrieved[mode]
        modes[f"{mode} + rerank"] = ir_metrics(reranked[mode], data.qrels)
    facts = {
        **facts,
        "rerank": rerank,
        "rerank_top": reranker.top,
        "before_rerank": modes["dense"],
        "modes": modes,
        "rerank_verdicts": rerank_verdicts(modes),
    }
    return EvaluationResult(
        "ir",
        f"{loaded.described} re-ranked by {rerank}",
        facts,
        modes["dense + rerank"],
        time.monotonic() - started,
    )


def _measure(
    task: str, evaluator: Evaluator, loaded: LoadedModel, facts: dict[str, Any]
) -> EvaluationResult:
    started = time.monotonic()
    metrics = evaluator(loaded.encoder)
    return EvaluationResult(task, loaded.described, facts, metrics, time.monotonic() - started)
