"""An index's encoder for queries without torch or transformers: the checked OpenVINO export.

Why: importing torch is about a second of a cold `semsearch query`, more than everything else
it does. Once the encoder's export has passed its check against torch (`openvino_runtime`),
the check is recorded in the cache entry with the tokenizer it was checked with, so a later
query needs only OpenVINO, `tokenizers` and numpy. The entry is found from the index's
manifest alone (fingerprint, pooling, normalisation, length limit, OpenVINO version); a file
that fails its hash record, or an entry not checked in the precision asked for, is logged in
one line and the torch path runs (which exports and checks it again), never a wrong vector.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.checksums import (
    CACHE_RECORD_SUFFIX,
    cache_file_problem,
    cache_record_path,
    write_cache_record,
)
from semsearch.models.model_folder import cache_dir
from semsearch.models.prompts import PromptedEncoding
from semsearch.models.spec import EncoderSpec
from semsearch.models.truncation import TruncationCount

log = logging.getLogger(__name__)

EXPORT_FORMAT = 1
QUERY_FORMAT = 2
# A one-off query runs in fp32: the same vectors as torch's within float rounding (no
# precision mismatch with an fp32 index), and one query is too short for bf16 to matter.
# A server runs bf16 where the CPU has it natively and it passed its check (1.6x fp32's
# queries/s on this project's CPU, cosine to torch fp32 >= 0.99997 on the probe queries).
QUERY_PRECISION = "fp32"
# semsearch's precision names and OpenVINO's.
OV_PRECISIONS = {"bf16": "bf16", "fp32": "f32"}
QUERY_BATCH = 64
WARM_UP_TOKENS = 8


def openvino_installed() -> bool:
    """Whether OpenVINO can be imported, without importing it."""
    import importlib.util

    return importlib.util.find_spec("openvino") is not None


_CONVERTER = "openvino.tools.ovc"
_importing = threading.Lock()


def import_openvino() -> Any:
    """`openvino` without its model converter, which its `__init__` imports: 0.2 s of CPU,
    a third of a cold query's, for a query that converts nothing. `ov.convert_model` still
    works: the converter is imported on first use. Raises ImportError without OpenVINO."""
    with _importing:
        loaded = sys.modules.get("openvino")
        if loaded is not None:
            return loaded
        blocked = _CONVERTER not in sys.modules
        if blocked:  # its `try: from openvino.tools.ovc import convert_model` then fails
            sys.modules[_CONVERTER] = None  # type: ignore[assignment]
        try:
            import openvino as ov
        finally:
            if blocked and sys.modules.get(_CONVERTER, False) is None:
                del sys.modules[_CONVERTER]
        if "convert_model" not in vars(ov):
            ov.__getattr__ = _converter_on_first_use  # PEP 562: asked for a missing name only
        return ov


def _converter_on_first_use(name: str) -> Any:
    """`openvino.convert_model`, imported when first asked for (`import_openvino`)."""
    if name != "convert_model":
        raise AttributeError(f"module 'openvino' has no attribute {name!r}")
    import openvino as ov
    from openvino.tools.ovc import convert_model

    ov.convert_model = convert_model
    return convert_model


def export_path(spec: EncoderSpec, version: str) -> Path | None:
    """Where the OpenVINO export of the encoder `spec` describes is cached (its `.xml`);
    None for a model without a fingerprint (nothing to key it by)."""
    if not spec.fingerprint:
        return None
    described = json.dumps(
        [EXPORT_FORMAT, version, spec.fingerprint, spec.pooling, spec.normalize, spec.max_length]
    )
    digest = hashlib.sha256(described.encode()).hexdigest()[:24]
    return cache_dir() / "openvino" / f"{digest}.xml"


def query_files(xml: Path) -> tuple[Path, Path]:
    """The entry's query facts (what was checked) and the tokenizer it was checked with."""
    return xml.with_suffix(".query.json"), xml.with_suffix(".tokenizer.json")


def record_checked(
    xml: Path, spec: EncoderSpec, tokenizer: Any, facts: dict, precision: str
) -> None:
    """Record beside the export at `xml` that it passed its check in `precision`, with the
    tokenizer and the facts a torch-free query needs (the facts last: they mark the entry
    usable). No prompts: the export serves every index of its model, whatever its prompts."""
    spec = replace(spec, query_prompt="", document_prompt="")
    facts_path, tokenizer_path = query_files(xml)
    checked = {}
    earlier = _read_facts(facts_path) if tokenizer_path.is_file() else None
    if earlier is not None and earlier.get("spec") == spec.to_dict():
        checked = earlier.get("checked", {})
    checked[precision] = facts.pop("check")
    facts = {"format": QUERY_FORMAT, "spec": spec.to_dict(), **facts, "checked": checked}
    for path, text in ((tokenizer_path, tokenizer.to_str()), (facts_path, json.dumps(facts))):
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_text(text, encoding="utf-8")
        write_cache_record(partial, recorded_as=path)
        os.replace(partial, path)


def _read_facts(path: Path) -> dict | None:
    """The entry's facts when they pass their hash check and are of this format."""
    if not path.is_file() or cache_file_problem(path) is not None:
        return None
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) and facts.get("format") == QUERY_FORMAT else None


def native_bf16(ov: Any) -> bool:
    """Whether OpenVINO's CPU plugin runs bf16 natively here (its default precision is bf16
    only there: AVX512-BF16, AMX)."""
    try:
        hint = ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
    except Exception:  # an older plugin without the property: the safe answer
        return False
    return "bf" in str(hint).lower()


def checked_compile_cache(xml: Path) -> Path:
    """The folder of OpenVINO's compiled copies of the export at `xml` (its `CACHE_DIR`:
    compiling from it takes about half the time), with every file that fails its hash
    record deleted first, so OpenVINO compiles it afresh instead of loading it."""
    folder = xml.with_suffix(".compiled")
    for blob in _blobs(folder):
        problem = cache_file_problem(blob)
        if problem is not None:
            log.warning("not using the compiled model %s: %s; compiling it again", blob, problem)
            blob.unlink(missing_ok=True)
            cache_record_path(blob).unlink(missing_ok=True)
    return folder


def record_compile_cache(xml: Path) -> None:
    """Hash records for the compiled copies OpenVINO has just written, new or rewritten in
    place (`checked_compile_cache` deleted every copy unlike its record before, so one unlike
    it now is the compile's own); only a copy newer than its record is hashed again."""
    for blob in _blobs(xml.with_suffix(".compiled")):
        try:
            rewritten = blob.stat().st_mtime_ns >= cache_record_path(blob).stat().st_mtime_ns
        except FileNotFoundError:
            rewritten = True
        if rewritten and cache_file_problem(blob) is not None:
            write_cache_record(blob)


def forget_compile_cache(xml: Path) -> None:
    """Delete the compiled copies of the export at `xml` and their records: the export is
    being written again, and copies of the old one must not be loaded."""
    for blob in _blobs(xml.with_suffix(".compiled")):
        blob.unlink(missing_ok=True)
        cache_record_path(blob).unlink(missing_ok=True)


def _blobs(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return [
        path
        for path in folder.iterdir()
        if path.is_file() and not path.name.endswith(CACHE_RECORD_SUFFIX)
    ]


def _intact_entry(spec: EncoderSpec, version: str) -> Path | None:
    """The export's `.xml` for `spec` when all four files of its entry are there and pass
    their hash records; None (one log line) otherwise."""
    xml = export_path(spec, version)
    if xml is None:  # a model without a fingerprint: nothing to key an entry by
        return None
    facts_path, tokenizer_path = query_files(xml)
    files = (facts_path, tokenizer_path, xml, xml.with_suffix(".bin"))
    if not all(path.is_file() for path in files):
        log.info("no checked OpenVINO export of %s yet: the query encoder runs on torch", spec.name)
        return None
    problem = next(((p, why) for p in files if (why := cache_file_problem(p))), None)
    if problem is not None:
        log.warning(
            "not using the OpenVINO export %s: %s; the query encoder runs on torch "
            "and checks it again",
            problem[0],
            problem[1],
        )
        return None
    return xml


class ExportedQueryEncoder(PromptedEncoding):
    """Texts in, the index's vectors out, through the checked OpenVINO export; what a
    `Searcher` needs of an encoder and no more."""

    def __init__(self, compiled: Any, tokenizer: Any, facts: dict) -> None:
        self.compiled = compiled
        self.tokenizer = tokenizer
        known = EncoderSpec.__dataclass_fields__
        self.spec = EncoderSpec(**{k: v for k, v in facts["spec"].items() if k in known})
        self.pad_id: int = facts["pad_id"]
        self.do_lower_case: bool = facts["do_lower_case"]
        self.precision: str = facts.get("precision", QUERY_PRECISION)
        self.runtime = f"openvino-{self.precision}"
        self.truncation = TruncationCount()  # texts cut at the window, for a build's report
        self._local = threading.local()  # one inference request per thread

    @classmethod
    def open(
        cls,
        spec: EncoderSpec,
        threads: int | None = None,
        precision: str = QUERY_PRECISION,
        throughput: bool = False,
    ) -> ExportedQueryEncoder | None:
        """The export for `spec` checked in `precision`, compiled; None (one log line) where
        the torch path must run: no OpenVINO, no entry checked in that precision, or one that
        fails its hash check. `throughput` compiles it for many batches at once (a build:
        OpenVINO's streams, about one a core, each batch on one; `encode` keeps them all
        busy) instead of one batch on every core (a query's latency)."""
        return cls.start_open(spec, threads, precision, throughput)()

    @classmethod
    def start_open(
        cls,
        spec: EncoderSpec,
        threads: int | None = None,
        precision: str = QUERY_PRECISION,
        throughput: bool = False,
    ) -> Callable[[], ExportedQueryEncoder | None]:
        """`open`, begun: the entry is checked and OpenVINO compiles it in a thread of its own
        (it lets go of the GIL: a tenth of a second a cold query spends importing FAISS and
        pyarrow meanwhile); the function returned waits for it and gives `open`'s answer."""
        if spec.quantization or not spec.fingerprint:
            return _none
        try:
            ov = import_openvino()
        except ImportError:
            log.info("openvino is not installed: the query encoder runs on torch")
            return _none
        xml = _intact_entry(spec, ov.get_version())
        if xml is None:
            return _none
        try:
            compiling = _Compiling(cls, spec, ov, xml, threads, precision, throughput)
        except Exception as exc:  # a damaged entry costs speed, never an answer
            log.warning(
                "cannot run the OpenVINO export %s (%s): the query encoder runs on torch", xml, exc
            )
            return _none
        return compiling.result

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def fingerprint(self) -> str:
        return self.spec.fingerprint

    @property
    def max_length(self) -> int:
        return self.spec.max_length

    @property
    def dimension(self) -> int:
        return self.spec.dimension

    @property
    def quantization(self) -> str | None:
        return self.spec.quantization

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        if self.do_lower_case:
            texts = [text.lower() for text in texts]
        encodings = self.tokenizer.encode_batch(list(texts))
        self.truncation.count(encodings)
        return [encoding.ids for encoding in encodings]

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        show_progress: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Vectors for `texts` [len(texts), dimension], float32, in input order; batches of
        similar lengths, right-padded as the encoder pads them. `TokenizedTexts` (a server's
        added rows) are not tokenised again; `progress` hears of each batch."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts; wrap a single text in a list")
        output = np.empty((len(texts), self.dimension), dtype=np.float32)
        ids = getattr(texts, "token_ids", None) or self.tokenize(texts)
        batches = self._batches(ids, batch_size or QUERY_BATCH)
        if len(ids) > (batch_size or QUERY_BATCH) and self._streams() > 1:
            self._run_overlapped(batches, output, progress)
            return output
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self.compiled.create_infer_request()
        for rows, inputs in batches:
            output[rows] = np.asarray(request.infer(inputs)[0], dtype=np.float32)
            if progress is not None:
                progress(len(rows))
        return output

    def _batches(self, ids: list[list[int]], size: int) -> Iterator[tuple[np.ndarray, dict]]:
        """Rows of similar lengths, `size` at a time, right-padded as the encoder pads them."""
        order = np.argsort([len(row) for row in ids], kind="stable")
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            width = max(len(ids[row]) for row in rows)
            input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for line, row in enumerate(rows):
                input_ids[line, : len(ids[row])] = ids[row]
                mask[line, : len(ids[row])] = 1
            yield rows, {"input_ids": input_ids, "attention_mask": mask}

    def _streams(self) -> int:
        """Batches the compiled model runs at once (1: a query's latency compile)."""
        try:
            return int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        except Exception:  # a plugin without the property: one at a time
            return 1

    def _run_overlapped(
        self,
        batches: Iterator[tuple[np.ndarray, dict]],
        output: np.ndarray,
        progress: Callable[[int], None] | None,
    ) -> None:
        """Every batch through a queue of inference requests, one per stream, so each core
        runs a batch of its own; each batch's vectors land at its rows as it finishes."""
        import openvino as ov

        def finished(request: Any, rows: np.ndarray) -> None:
            output[rows] = request.get_output_tensor(0).data

        queue = ov.AsyncInferQueue(self.compiled, self._streams())
        queue.set_callback(finished)
        for rows, inputs in batches:
            queue.start_async(inputs, rows)  # waits while every request is busy
            if progress is not None:
                progress(len(rows))
        queue.wait_all()


def _none() -> None:
    return None


class _Compiling:
    """One `ExportedQueryEncoder.start_open`: the entry's facts and tokenizer read here, its
    compile under way in a thread until `result` is asked for."""

    def __init__(
        self,
        cls: type,
        spec: EncoderSpec,
        ov: Any,
        xml: Path,
        threads: int | None,
        precision: str,
        throughput: bool = False,
    ) -> None:
        from tokenizers import Tokenizer

        self.cls, self.spec, self.xml, self.precision = cls, spec, xml, precision
        facts_path, tokenizer_path = query_files(xml)
        self.facts = json.loads(facts_path.read_text(encoding="utf-8"))
        self.compiled: Any = None
        self.error: Exception | None = None
        if self.facts.get("format") != QUERY_FORMAT or precision not in self.facts.get(
            "checked", {}
        ):
            self.facts = None  # not checked in this precision: nothing to compile
            return
        config: dict[str, Any] = {
            "INFERENCE_PRECISION_HINT": OV_PRECISIONS[precision],
            "PERFORMANCE_HINT": "THROUGHPUT" if throughput else "LATENCY",
        }
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        config["CACHE_DIR"] = str(checked_compile_cache(xml))
        self.thread = threading.Thread(
            target=self._compile, args=(ov, config), name="semsearch-compile"
        )
        self.thread.start()  # not a daemon: a process that ends meanwhile lets it finish
        try:
            self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
            self.tokenizer.no_padding()
            self.tokenizer.enable_truncation(max_length=spec.max_length)
        except Exception:
            self.thread.join()
            raise

    def _compile(self, ov: Any, config: dict[str, Any]) -> None:
        """Compile, then run one short batch: the CPU plugin makes its kernels on the first
        inference (20-40 ms, whatever the length), here rather than in the first query."""
        try:
            compiled = ov.Core().compile_model(str(self.xml), "CPU", config)
            ids = np.full((1, WARM_UP_TOKENS), self.facts["pad_id"], dtype=np.int64)
            compiled.create_infer_request().infer({"input_ids": ids, "attention_mask": ids * 0 + 1})
            self.compiled = compiled
        except Exception as exc:  # told by `result`, in the thread that asked
            self.error = exc

    def result(self) -> ExportedQueryEncoder | None:
        """The compiled encoder; None (one log line) where the torch path must run."""
        if self.facts is None:
            log.info(
                "the OpenVINO export %s is not checked in %s: the query encoder runs on torch",
                self.xml,
                self.precision,
            )
            return None
        self.thread.join()
        if self.error is not None:  # a damaged entry costs speed, never an answer
            log.warning(
                "cannot run the OpenVINO export %s (%s): the query encoder runs on torch",
                self.xml,
                self.error,
            )
            return None
        record_compile_cache(self.xml)
        encoder = self.cls(
            self.compiled, self.tokenizer, {**self.facts, "precision": self.precision}
        )
        spec = self.spec
        if (encoder.spec.fingerprint, encoder.spec.dimension) != (spec.fingerprint, spec.dimension):
            log.warning(
                "the OpenVINO export %s is another model's: the query encoder runs on torch",
                self.xml,
            )
            return None
        # The prompts are the index's: the entry records none (`record_checked`).
        encoder.spec = replace(
            encoder.spec, query_prompt=spec.query_prompt, document_prompt=spec.document_prompt
        )
        log.info("query encoder: the checked OpenVINO export (%s)", self.precision)
        return encoder
