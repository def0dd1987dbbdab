"""The encoder on OpenVINO's CPU runtime: an exported copy that `BiEncoder.encode` runs
instead of torch for its padded batches (`runtime="auto"`, the default, on a CPU, or
`runtime="openvino"`).

Why: on a CPU the fp32 torch path is near the machine's fp32 peak, so more speed needs
lower-precision kernels and a runtime that fuses the graph; OpenVINO is what
sentence-transformers' `backend="openvino"` uses. It runs bf16 where the CPU has it natively
(AVX512-BF16, AMX; OpenVINO's own default there), else f32. The export is cached in
`SEMSEARCH_CACHE_DIR` (keyed by `exported_query_encoder.export_path`) with a hash record per
file, and each compiled model is checked against torch (cosine mean >= 0.9999, min >= 0.999)
before use: anything that fails leaves the encoder on torch with one log line, slower, never
a wrong vector.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from semsearch.checksums import cache_file_problem, write_cache_record
from semsearch.errors import SemsearchError, one_line
from semsearch.models.exported_query_encoder import (
    OV_PRECISIONS,
    QUERY_PRECISION,
    export_path,
    forget_compile_cache,
    native_bf16,
    record_checked,
)

if TYPE_CHECKING:
    from semsearch.models.bi_encoder import BiEncoder

log = logging.getLogger(__name__)

# The faithfulness bar of issue 29: how close the runtime's vectors must be to torch's.
MIN_MEAN_COSINE = 0.9999
MIN_COSINE = 0.999
# The check batch: lengths from one word to past a sentence, so it holds padding.
CHECK_TEXTS = (
    "how do I read a parquet file in python",
    "plot",
    "A man is playing a guitar on the stage while the crowd sings along.",
    "fast approximate nearest neighbour search over dense vectors, on disk or in memory, "
    "with filters on metadata columns and updates while it serves",
    "ÉCOLE, café and naïve résumé",
    "数据库 查询 很快",
    "unit testing framework",
    "encrypt my backups before uploading them to the cloud",
)


class OpenVinoEncoder:
    """Padded token batches in, the encoder's vectors out, through a compiled OpenVINO model.

    Compiled per precision on first use, each checked against `reference` (the torch
    encoder's vectors for `CHECK_TEXTS`) before it answers; one inference request per thread.
    """

    bar = (MIN_MEAN_COSINE, MIN_COSINE)  # (mean, min) cosine to torch fp32 a model must reach
    precisions: tuple[str, ...] = tuple(OV_PRECISIONS)  # what it compiles
    instead = "encoding with torch"  # what happens where a compiled model cannot be used

    def __init__(self, encoder: BiEncoder, model: Any, default: str) -> None:
        self.model = model  # a path to cached IR, or an `ov.Model` (nothing to cache it by)
        self.default = default  # "bf16" or "fp32"
        self._check_ids, self._check_mask = encoder.features(list(CHECK_TEXTS))
        self._reference = encoder.encode(list(CHECK_TEXTS), precision="fp32")
        self._weights = _weights_key(encoder)
        self._spec = encoder.spec
        self._tokenizer = getattr(encoder.tokenizer, "backend_tokenizer", None)  # a fast one
        self._pad_id = encoder.tokenizer.pad_token_id or 0
        self._lower = encoder.do_lower_case
        self._compiled: dict[str, Any] = {}  # precision -> compiled model, or None: refused
        self._local = threading.local()
        self._lock = threading.Lock()
        self.stale = False

    @property
    def name(self) -> str:
        return f"openvino-{self.default}"

    @classmethod
    def attach(cls, encoder: BiEncoder, precision: str = "auto") -> OpenVinoEncoder | None:
        """The runtime for `encoder`, exported (or taken from the cache) and checked in
        `precision` (`auto`: its default); None, with one log line, where torch must run."""
        if encoder.device.type != "cpu":
            raise SemsearchError("the openvino runtime runs on the CPU: add --device cpu")
        from semsearch.models.word_encoder import WordNetwork

        if isinstance(encoder.transformer, WordNetwork):
            log.warning("a word-vector model has no OpenVINO export: encoding with torch")
            return None
        try:
            import openvino as ov
        except ImportError:
            log.warning(
                "openvino is not installed (pip install -e '.[cpu-runtime]' in semsearch's folder): "
                "encoding with torch"
            )
            return None
        try:
            model = _exported(encoder, ov)
        except Exception as exc:
            log.warning(
                "could not export the encoder to OpenVINO (%s: %s): encoding with torch",
                type(exc).__name__,
                one_line(exc),
            )
            return None
        runtime = cls(encoder, model, "bf16" if native_bf16(ov) else "fp32")
        return runtime if runtime.forward_for(precision, encoder) is not None else None

    def forward_for(self, precision: str, encoder: BiEncoder):
        """What runs a padded batch in `precision` (`auto`: the runtime's default), or None
        where torch must: fp16, a model that failed its check, or weights changed since
        the export (training)."""
        if self.stale:
            return None
        if _weights_key(encoder) != self._weights:
            log.warning(
                "the encoder's weights changed since the OpenVINO export: encoding "
                "with torch from now on"
            )
            self.stale = True
            return None
        precision = self.default if precision == "auto" else precision
        if precision not in self.precisions:
            return None
        with self._lock:
            if precision not in self._compiled:
                self._compiled[precision] = self._compile_checked(precision)
        compiled = self._compiled[precision]
        if compiled is None:
            return None
        return lambda input_ids, attention_mask: self._run(compiled, input_ids, attention_mask)

    def _compile_checked(self, precision: str) -> Any:
        import openvino as ov

        threads = torch.get_num_threads()
        try:
            compiled = ov.Core().compile_model(
                self.model,
                "CPU",
                {
                    "INFERENCE_PRECISION_HINT": OV_PRECISIONS.get(precision, "f32"),
                    "INFERENCE_NUM_THREADS": threads,
                    "PERFORMANCE_HINT": "LATENCY",
                },
            )
            got = self._run(compiled, self._check_ids, self._check_mask).numpy()
        except Exception as exc:
            log.warning("the OpenVINO model failed to run (%s): %s", exc, self.instead)
            return None
        mean, least = cosine_agreement(got, self._reference)
        if not (mean >= self.bar[0] and least >= self.bar[1]):
            log.warning(
                "the OpenVINO %s model disagrees with torch (cosine mean %.6f, min %.6f): %s",
                precision,
                mean,
                least,
                self.instead,
            )
            return None
        log.info(
            "encoding with OpenVINO %s on %d thread(s); checked against torch: cosine mean "
            "%.6f, min %.6f",
            precision,
            threads,
            mean,
            least,
        )
        if isinstance(self.model, Path) and self._tokenizer:
            self._record_for_queries(precision, mean, least)
        return compiled

    def _record_for_queries(self, precision: str, mean: float, least: float) -> None:
        """Let torch-free queries use this export in `precision` (`exported_query_encoder`):
        it passed its check."""
        try:
            record_checked(
                self.model,
                self._spec,
                self._tokenizer,
                {
                    "pad_id": self._pad_id,
                    "do_lower_case": self._lower,
                    "check": {"cosine_mean": mean, "cosine_min": least},
                },
                precision,
            )
        except Exception as exc:  # queries stay on torch: slower, never wrong
            log.warning("could not record the OpenVINO check for queries: %s", exc)

    def _run(self, compiled: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        requests = getattr(self._local, "requests", None)
        if requests is None:
            requests = self._local.requests = {}
        request = requests.get(id(compiled))
        if request is None:
            request = requests[id(compiled)] = compiled.create_infer_request()
        return torch.from_numpy(_infer(request, input_ids.numpy(), attention_mask.numpy()))


def export_for_queries(encoder: BiEncoder) -> bool:
    """Export `encoder` and check it in fp32 (and in bf16 where the CPU runs it natively,
    for `serve`), so that later queries of its indexes run without torch
    (`exported_query_encoder`); True when fp32 passed. Never raises."""
    if encoder.quantization or encoder.device.type != "cpu":
        return False
    try:
        runtime = OpenVinoEncoder.attach(encoder, QUERY_PRECISION)
        if runtime is not None and runtime.default == "bf16":
            runtime.forward_for("bf16", encoder)
        return runtime is not None
    except Exception as exc:  # queries stay on torch: slower, never wrong
        log.warning("could not export the encoder for queries: %s", exc)
        return False


def _infer(request: Any, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """One batch through an inference request; a copy, since the request reuses its output."""
    result = request.infer({"input_ids": input_ids, "attention_mask": attention_mask})
    return np.array(result[0], dtype=np.float32, copy=True)


def cosine_agreement(got: np.ndarray, expected: np.ndarray) -> tuple[float, float]:
    """(mean, min) cosine between matching rows; NaN where a row is not finite."""
    norms = np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.sum(got * expected, axis=1) / norms
    if got.shape != expected.shape or not np.all(np.isfinite(cosine)):
        return float("nan"), float("nan")
    return float(cosine.mean()), float(cosine.min())


def _exported(encoder: BiEncoder, ov: Any) -> Any:
    """The cached IR's path when a checked entry is there, else a fresh export (cached)."""
    xml = export_path(encoder.spec, ov.get_version())
    if xml is None:
        return _convert(encoder, ov)
    weights = xml.with_suffix(".bin")
    if xml.is_file() and weights.is_file():
        problem = next(filter(None, (cache_file_problem(p) for p in (weights, xml))), None)
        if problem is None:
            return xml
        log.warning("not using the OpenVINO export %s: %s; exporting it again", xml, problem)
    save_cached_ir(ov, _convert(encoder, ov), xml)
    log.info("exported the encoder to OpenVINO IR in %s", xml)
    return xml


def save_cached_ir(ov: Any, model: Any, xml: Path) -> None:
    """Write `model` as IR at `xml` (and its .bin) with hash records, under temporary names
    renamed into place, the graph last: a cache entry is whole or absent. Compiled copies of
    an earlier export at `xml` are deleted first (`forget_compile_cache`)."""
    xml.parent.mkdir(parents=True, exist_ok=True)
    forget_compile_cache(xml)
    partial = xml.with_name(f".{xml.stem}.{os.getpid()}.partial.xml")
    ov.save_model(model, str(partial), compress_to_fp16=False)
    partial_weights = partial.with_suffix(".bin")
    write_cache_record(partial_weights, recorded_as=xml.with_suffix(".bin"))
    write_cache_record(partial, recorded_as=xml)
    os.replace(partial_weights, xml.with_suffix(".bin"))
    os.replace(partial, xml)  # the graph last: it marks the entry complete


def _convert(encoder: BiEncoder, ov: Any) -> Any:
    input_ids, mask = encoder.features(["a sentence to export the encoder with", "two"])
    shape = [-1, -1]
    with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on the model's Python branches
        return ov.convert_model(
            encoder,
            example_input=(input_ids, mask),
            input=[("input_ids", shape, ov.Type.i64), ("attention_mask", shape, ov.Type.i64)],
        )


def _weights_key(encoder: BiEncoder) -> tuple:
    return tuple((p.data_ptr(), p._version) for p in encoder.parameters())
