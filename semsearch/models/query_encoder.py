"""A traced copy of an index's encoder, so that a cold `semsearch query` skips transformers.

Why: importing transformers' modelling code takes about 2 s on a 2-core machine, more than
everything else a one-off query does. A TorchScript trace of the whole encoder (transformer,
pooling, normalisation) loads in about 0.1 s with nothing but torch, and the tokenizer comes
from the model's `tokenizer.json` through the `tokenizers` library, the same Rust code that
transformers' fast tokenizer runs.

The trace is written to a cache (`SEMSEARCH_CACHE_DIR`, default `~/.cache/semsearch`) the
first time the full encoder loads for queries, keyed by the model folder, the size and
modification time of its weight files, the pooling settings and the torch version, so a
changed model is traced again instead of being trusted. Before it is kept, the trace is run
on a batch of another shape and compared with the full encoder; any difference, or any
failure to trace (TorchScript is deprecated in PyTorch, though it still ships), leaves
queries on the full encoder. `SEMSEARCH_NO_TRACE=1` turns the cache off.

The cache is an input like any other: each file of an entry (the module, its facts) has a
record of its size and hash written beside it (`checksums.write_cache_record`), checked
before it is loaded; an entry that does not match (another model's trace copied over it,
a stale or half-written one) is logged in one line and traced again, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from semsearch.index.checksums import cache_file_problem, write_cache_record
from semsearch.models.batching import BatchShape, prepared_batches
from semsearch.models.exported_query_encoder import (
    ExportedQueryEncoder,
    SpecTokenizer,
    check_query_runtime,
    openvino_installed,
)
from semsearch.models.model_folder import (
    DEFAULT_MODEL,
    ModelFolder,
    cache_dir,
    resolve_model,
    weight_files,
)
from semsearch.models.packaged_model import PACKAGED_MODELS
from semsearch.models.spec import EncoderSpec

if TYPE_CHECKING:
    from semsearch.models.bi_encoder import BiEncoder

log = logging.getLogger(__name__)

TRACE_FORMAT = 1
QUERY_BATCH = 64
# How close the trace's vectors must be to the full encoder's on the check batch.
CHECK_TOLERANCE = 1e-5
CHECK_TEXTS = (
    "a check sentence of a different length from the one traced",
    "short",
    "three words here",
)


def encoder_for_queries(
    spec: EncoderSpec, device: str = "auto", runtime: str = "torch", export_tried: bool = False
) -> ExportedQueryEncoder | QueryEncoder | BiEncoder:
    """The encoder an index records, as fast to start as it can be.

    `auto` (and `openvino`) on a CPU: the checked OpenVINO export, which needs no torch
    (`open_for_queries` finds it without importing this module); where there is none, the
    full encoder is loaded, exported and checked, for this query and the next ones. `torch`,
    or an export that cannot be made: the traced copy when one is cached, else the full
    encoder (tracing it for the next time).
    """
    check_query_runtime(runtime)
    encoder = None
    if runtime == "openvino" and not _on_cpu(device):
        from semsearch.models.bi_encoder import BiEncoder

        return BiEncoder.for_index(spec, device, "openvino")  # says it runs on the CPU only
    if runtime != "torch" and _on_cpu(device) and openvino_installed():
        exported = None if export_tried else ExportedQueryEncoder.open(spec)
        if exported is not None:
            return exported
        from semsearch.models.bi_encoder import BiEncoder
        from semsearch.models.openvino_runtime import export_for_queries

        encoder = BiEncoder.for_index(spec, device)
        if encoder.fingerprint != spec.fingerprint:
            return encoder  # another model than the index's: the Searcher says so
        if export_for_queries(encoder):
            exported = ExportedQueryEncoder.open(spec)
            if exported is not None:
                return exported
    key = _trace_key(spec, device)
    if key is not None and encoder is None:
        traced = QueryEncoder.open(key)
        if traced is not None:
            return traced
    if encoder is None:
        from semsearch.models.bi_encoder import BiEncoder

        encoder = BiEncoder.for_index(spec, device)
    if key is not None:
        save_trace(encoder, key)
    return encoder


def _on_cpu(device: str) -> bool:
    return device == "cpu" or (device == "auto" and not torch.cuda.is_available())


class QueryEncoder(SpecTokenizer):
    """Texts in, vectors out, through a traced encoder; what a `Searcher` needs and no more."""

    def __init__(self, module: torch.jit.ScriptModule, tokenizer, facts: dict) -> None:
        self.module = module
        self.tokenizer = tokenizer
        self.spec = EncoderSpec(**facts["spec"])
        self.pad_id: int = facts["pad_id"]
        self.do_lower_case: bool = facts["do_lower_case"]
        self.device = torch.device("cpu")

    @classmethod
    def open(cls, key: TraceKey) -> QueryEncoder | None:
        """The cached trace for `key`, or None when there is none (or it cannot be read)."""
        if not (key.module_path.is_file() and key.facts_path.is_file()):
            return None
        for path in (key.facts_path, key.module_path):
            problem = cache_file_problem(path)
            if problem is not None:
                log.warning("not using the traced encoder %s: %s; tracing it again", path, problem)
                return None
        try:
            from tokenizers import Tokenizer

            facts = json.loads(key.facts_path.read_text(encoding="utf-8"))
            tokenizer = Tokenizer.from_file(str(key.tokenizer_file))
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=facts["spec"]["max_length"])
            module = torch.jit.load(str(key.module_path), map_location="cpu")
        except Exception as exc:  # a damaged cache entry costs speed, never an answer
            log.debug("cannot use the traced encoder in %s: %s", key.module_path, exc)
            return None
        return cls(module, tokenizer, facts)

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        """Vectors for `texts` [len(texts), dimension], float32, in input order."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts; wrap a single text in a list")
        output = np.empty((len(texts), self.dimension), dtype=np.float32)
        shape = BatchShape(batch_size or QUERY_BATCH)
        # The graph executor's optimising passes cost more on the first call than a query
        # takes; a plain run of the traced graph is what a one-off query wants.
        with torch.inference_mode(), torch.jit.optimized_execution(False):
            for batch in prepared_batches(texts, self.tokenize, self.pad_id, shape):
                output[batch.rows] = self.module(batch.input_ids, batch.attention_mask).numpy()
        return output


class TraceKey:
    """Where the trace of one model folder, with one set of encoder settings, is kept."""

    def __init__(self, folder: ModelFolder, spec: EncoderSpec) -> None:
        # The weights beside the model's config (what `weights_fingerprint` reads) and the
        # transformer's own, where a sentence-transformers folder keeps it in a subfolder.
        weights = [*weight_files(folder.path), *weight_files(folder.transformer_path)]
        if folder.pooling_weights is not None:
            weights.append(folder.pooling_weights)
        stamps = sorted({(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in weights})
        described = json.dumps([TRACE_FORMAT, torch.__version__, str(folder.path), stamps,
                                spec.pooling, spec.normalize, spec.max_length])  # fmt: skip
        digest = hashlib.sha256(described.encode()).hexdigest()[:24]
        self.tokenizer_file = folder.transformer_path / "tokenizer.json"
        self.module_path = cache_dir() / "traced" / f"{digest}.pt"
        self.facts_path = self.module_path.with_suffix(".json")


def _trace_key(spec: EncoderSpec, device: str) -> TraceKey | None:
    """The cache key for `spec`, or None where the traced path does not apply: off by
    request, a GPU, a quantised encoder, a hub model (resolving it may need the network),
    or a tokenizer without a tokenizer.json. A packaged model resolves from the cache."""
    if os.environ.get("SEMSEARCH_NO_TRACE") == "1" or spec.quantization is not None:
        return None
    if device not in ("auto", "cpu") or (device == "auto" and torch.cuda.is_available()):
        return None
    local = spec.name == DEFAULT_MODEL or spec.name in PACKAGED_MODELS
    if not local and not Path(spec.name).expanduser().is_dir():
        return None
    try:
        key = TraceKey(resolve_model(spec.name), spec)
    except Exception as exc:  # the full encoder will say what is wrong with the folder
        log.debug("no traced encoder for %s: %s", spec.name, exc)
        return None
    return key if key.tokenizer_file.is_file() else None


def save_trace(encoder: BiEncoder, key: TraceKey) -> bool:
    """Trace `encoder` into the cache for `key` if the trace reproduces its vectors; True
    when it was kept. Never raises: without a trace, queries are only slower."""
    try:
        input_ids, mask = encoder.features(["a sentence to trace the encoder with", "two"])
        check_ids, check_mask = encoder.features(list(CHECK_TEXTS))
        with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript's deprecation and tracer notes
            module = torch.jit.trace(encoder, (input_ids, mask), check_trace=False)
            expected = encoder(check_ids, check_mask)
            with torch.jit.optimized_execution(False):
                got = module(check_ids, check_mask)
        difference = float((expected - got).abs().max())
        if difference > CHECK_TOLERANCE:
            log.debug("the traced encoder differs by %.2g: not kept", difference)
            return False
        facts = {"format": TRACE_FORMAT, "spec": encoder.spec.to_dict(),
                 "pad_id": encoder.tokenizer.pad_token_id or 0,
                 "do_lower_case": encoder.do_lower_case}  # fmt: skip
        key.module_path.parent.mkdir(parents=True, exist_ok=True)
        partial = key.module_path.with_name(f".{key.module_path.name}.{os.getpid()}.partial")
        torch.jit.save(module, str(partial))
        _write_atomically(key.facts_path, json.dumps(facts))
        write_cache_record(key.facts_path)
        write_cache_record(partial, recorded_as=key.module_path)
        os.replace(partial, key.module_path)  # the module last: it marks the entry complete
    except Exception as exc:
        log.debug("could not trace the encoder for fast start-up: %s", exc)
        return False
    log.info("traced the encoder into %s: the next queries start faster", key.module_path)
    return True


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
