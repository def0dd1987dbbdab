"""The int8 encoder on OpenVINO: the exported IR quantised by NNCF, run with the f32 hint.

Why: NNCF's post-training quantisation (static scales calibrated on fixed texts, so a text's
vector does not depend on its batch mates) is semsearch's one int8 path (`--quantize int8`,
checked by `check_quantization`); it replaced torch's hand-written `Int8Linear`, which the
default runtime beat on both speed and recall (issue 38, docs/encoder-and-runtimes.md). The
f32 hint keeps the layers NNCF left unquantised in fp32: with bf16 the model was both slower
and further from fp32 (measured 2026-11-26).

The quantised IR is cached beside the fp32 export, keyed by that export's key, NNCF's version
and the calibration texts' hash, with a hash record per file, and checked against torch fp32
before use. There is no fallback: where it cannot run, `attach` refuses in one line (fp32
vectors under an int8 index's name would be wrong).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.checksums import cache_file_problem
from semsearch.errors import SemsearchError, one_line
from semsearch.models.exported_query_encoder import export_path
from semsearch.models.openvino_runtime import (
    CHECK_TEXTS,
    OpenVinoEncoder,
    _exported,
    save_cached_ir,
)

if TYPE_CHECKING:
    from semsearch.models.bi_encoder import BiEncoder

log = logging.getLogger(__name__)

QUANTIZATION_MODES = ("int8",)
# Varied short and long texts, fixed, so the quantised model (and so every vector) is the
# same at every load: `BUILTIN_CALIBRATION` starts with them. Changing them
# changes every int8 vector: int8 indexes built before would then need rebuilding.
CALIBRATION_TEXTS = (
    "A man is playing a guitar.",
    "How do I compress a folder on Linux?",
    "Stock markets fell sharply on Monday.",
    "The cat sleeps on the sofa while it rains outside.",
    "Fast JSON decoding for Python programs",
    "A library for parsing command-line options",
    "Async HTTP client and server framework",
    "Utilities for reading and writing Parquet files with pandas",
    "python3 bindings for the GTK toolkit",
    "transitional dummy package",
    "Add your description here",
    "machine learning model deployment",
    "what is the capital of France",
    "Two men pushed carts through the woods.",
    "Ünïcödé text, emoji 🎉 and CJK 漢字 in one line.",
    "This package contains the documentation for the library, in HTML and PDF formats, "
    "with examples of every function and a tutorial for new users.",
    "GNU Make is a utility which controls the generation of executables and other "
    "target files of a program from the program's source files. It determines "
    "automatically which pieces of a program need to be (re)created.",
    "The recipe needs two eggs, some flour and a cup of milk; bake the cake for "
    "forty minutes, let it cool, then cover it with chocolate.",
    "Shares dropped steeply at the start of the week after the central bank raised "
    "interest rates by half a point, the largest rise in twenty years.",
    "This is a development package: it holds the header files and the static library "
    "needed to compile programs that use libfoo. Install it only to build software.",
)


QUANTIZED_FORMAT = 1
# The bar int8 vectors must reach against torch fp32 on CHECK_TEXTS. Measured on the default
# model (2026-11-26): on CHECK_TEXTS mean 0.9976, min 0.9934 (built-in calibration); on 600
# PyPI summaries / 120 Debian descriptions mean 0.9939 / 0.9937, lowest 0.961 / 0.966
# (the cpu_runtimes benchmark); calibrated on 300 PyPI summaries instead, mean 0.9972 /
# 0.9973, lowest 0.969 / 0.992. A broken model (wrong scales, a swapped entry) lands far below.
MIN_MEAN_COSINE = 0.99
MIN_COSINE = 0.95
# Texts calibrated on where no corpus is given (queries, `encode`): fixed, so the quantised
# model, and every vector, is the same at every load. Varied lengths and domains.
BUILTIN_CALIBRATION = (*CALIBRATION_TEXTS, *CHECK_TEXTS)
# What to do where this runtime cannot run, the end of each refusal's line.
WHAT_TO_DO = (
    "install the cpu-runtime extra (pip install -e '.[cpu-runtime]' in semsearch's folder) "
    "or drop --quantize"
)
# Calibration texts taken from a corpus at most (NNCF's default subset is 300 samples).
MAX_CALIBRATION_TEXTS = 300


class OpenVinoInt8Encoder(OpenVinoEncoder):
    """`OpenVinoEncoder` over the NNCF-quantised IR: one precision, int8, under the f32 hint."""

    bar = (MIN_MEAN_COSINE, MIN_COSINE)
    precisions = ("int8",)

    instead = "int8 cannot run"  # the end of the base class's warning lines

    @classmethod
    def attach(  # type: ignore[override]
        cls, encoder: BiEncoder, calibration: Sequence[str] | None = None
    ) -> OpenVinoInt8Encoder:
        """The int8 runtime for the fp32 `encoder`, quantised on `calibration` (default:
        `BUILTIN_CALIBRATION`) or taken from the cache, and checked; refused in one line
        where it cannot run."""
        if encoder.device.type != "cpu":
            raise SemsearchError("int8 quantisation runs on the CPU: add --device cpu")
        try:
            import nncf  # noqa: F401
            import openvino as ov
        except ImportError as exc:
            raise SemsearchError(
                f"int8 runs on OpenVINO and NNCF, and {exc.name} is missing: {WHAT_TO_DO}"
            ) from exc
        texts = calibration_sample(calibration)
        try:
            model = _quantized(encoder, ov, texts)
        except Exception as exc:
            raise SemsearchError(
                f"could not quantise the encoder with NNCF ({type(exc).__name__}: "
                f"{one_line(exc)}): drop --quantize"
            ) from exc
        runtime = cls(encoder, model, "int8")
        if runtime.forward_for("auto", encoder) is None:
            raise SemsearchError(
                "the int8 OpenVINO model did not pass its check against fp32 (the line above "
                "says how): drop --quantize"
            )
        return runtime

    def forward_for(self, precision: str, encoder: BiEncoder):
        """int8 for `auto` and `fp32` (an int8 encoder's only precision); None otherwise."""
        return super().forward_for("int8" if precision in ("auto", "fp32") else "none", encoder)


def calibration_sample(texts: Sequence[str] | None) -> list[str]:
    """The texts to calibrate on: `texts` (non-empty ones, the first `MAX_CALIBRATION_TEXTS`:
    deterministic) or the built-in set."""
    chosen = [t for t in (texts or ()) if t.strip()][:MAX_CALIBRATION_TEXTS]
    return chosen or list(BUILTIN_CALIBRATION)


def calibration_hash(texts: Sequence[str]) -> str:
    return hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest()


def quantized_path(encoder: BiEncoder, ov_version: str, texts: Sequence[str]) -> Path | None:
    """Where the int8 IR of `encoder` calibrated on `texts` is cached; None without a
    fingerprint (a model built in memory)."""
    import nncf

    fp32 = export_path(encoder.spec, ov_version)
    if fp32 is None:
        return None
    described = json.dumps([QUANTIZED_FORMAT, fp32.stem, nncf.__version__, calibration_hash(texts)])
    digest = hashlib.sha256(described.encode()).hexdigest()[:24]
    return fp32.parent.with_name("openvino-int8") / f"{digest}.xml"


def _quantized(encoder: BiEncoder, ov: Any, texts: list[str]) -> Any:
    """The cached int8 IR's path when a checked entry is there, else a fresh quantisation."""
    xml = quantized_path(encoder, ov.get_version(), texts)
    if xml is None:
        return _quantize(encoder, ov, _exported(encoder, ov), texts)
    weights = xml.with_suffix(".bin")
    if xml.is_file() and weights.is_file():
        problem = next(filter(None, (cache_file_problem(p) for p in (weights, xml))), None)
        if problem is None:
            return xml
        log.warning("not using the int8 OpenVINO model %s: %s; quantising again", xml, problem)
    save_cached_ir(ov, _quantize(encoder, ov, _exported(encoder, ov), texts), xml)
    log.info("quantised the encoder to int8 with NNCF on %d texts, in %s", len(texts), xml)
    return xml


def _quantize(encoder: BiEncoder, ov: Any, fp32: Any, texts: list[str]) -> Any:
    """NNCF's transformer preset over one text per sample (no padding in the ranges)."""
    import nncf

    model = ov.Core().read_model(fp32) if isinstance(fp32, (str, Path)) else fp32
    samples = []
    for ids in encoder.tokenize(texts):
        row = np.asarray([ids], dtype=np.int64)
        samples.append({"input_ids": row, "attention_mask": np.ones_like(row)})
    nncf_log = logging.getLogger("nncf")
    level = nncf_log.level
    nncf_log.setLevel(logging.WARNING)  # its notes, and (stdout) its progress bars: one line
    try:  # of ours says what happened
        with contextlib.redirect_stdout(io.StringIO()):
            return nncf.quantize(
                model,
                nncf.Dataset(samples),
                subset_size=len(samples),
                model_type=nncf.ModelType.TRANSFORMER,
            )
    finally:
        nncf_log.setLevel(level)


def check_quantization(mode: str | None) -> None:
    if mode is not None and mode not in QUANTIZATION_MODES:
        raise SemsearchError(
            f"unknown quantisation {mode!r}: choose {', '.join(QUANTIZATION_MODES)} or leave it out"
        )
