"""`open_for_queries` and `open_for_rows`: the one place that chooses how an index's queries
(and the rows an `add` encodes) are encoded.

Why: a cold query is fastest on the checked OpenVINO export (`exported_query_encoder`), which
needs neither torch nor transformers; so torch is imported only where no export serves. There
the full torch encoder is loaded and, where the query may run on OpenVINO, exported and
checked for this query and the next ones. `start_open_for_queries` lets a command go on
while the export compiles.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from semsearch.models.exported_query_encoder import (
    ExportedQueryEncoder,
    import_openvino,
    native_bf16,
    openvino_installed,
)
from semsearch.models.model_folder import folder_spec, require_kind, resolve_model
from semsearch.models.prompts import check_include_prompt
from semsearch.models.spec import EncoderSpec
from semsearch.options import check_runtime

log = logging.getLogger(__name__)


def open_for_queries(spec: EncoderSpec, device: str = "auto", runtime: str = "auto") -> Any:
    """The encoder for an index's queries: the checked export without importing torch where
    there is one (`auto` or `openvino`, on a CPU); else the torch encoder, which `auto` and
    `openvino` on a CPU export and check for the next time. `torch`, or an export that
    cannot be made: the full torch encoder."""
    return start_open_for_queries(spec, device, runtime)()


def start_open_for_queries(
    spec: EncoderSpec, device: str = "auto", runtime: str = "auto"
) -> Callable[[], Any]:
    """`open_for_queries`, begun: where the checked export serves, OpenVINO compiles it in a
    thread while the caller goes on (a cold query imports FAISS and pyarrow meanwhile); the
    function returned gives `open_for_queries`' answer."""
    check_runtime(runtime)
    if runtime != "torch" and device in ("auto", "cpu"):
        exported = ExportedQueryEncoder.start_open(spec)
        return lambda: exported() or _torch_or_new_export(spec, device, runtime)
    return lambda: _torch_or_new_export(spec, device, runtime)


def _torch_or_new_export(spec: EncoderSpec, device: str, runtime: str) -> Any:
    """The encoder where no checked export serves: torch's, exported and checked first (and
    that export returned) where the query may run on OpenVINO."""
    import torch

    from semsearch.models.bi_encoder import BiEncoder  # torch: only where no export serves

    on_cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    if runtime == "openvino" and not on_cpu:
        return BiEncoder.for_index(spec, device, "openvino")  # says it runs on the CPU only
    encoder = BiEncoder.for_index(spec, device, "torch")
    if runtime == "torch" or not on_cpu or not openvino_installed():
        return encoder
    if encoder.fingerprint != spec.fingerprint:
        return encoder  # another model than the index's: the Searcher says so
    from semsearch.models.openvino_runtime import export_for_queries

    exported = ExportedQueryEncoder.open(spec) if export_for_queries(encoder) else None
    return exported if exported is not None else encoder


def open_for_rows(spec: EncoderSpec, device: str = "auto", runtime: str = "auto") -> Any:
    """The encoder for rows an `add` encodes: the checked export where it serves (`auto` or
    `openvino` on a CPU; bf16 where the CPU runs it natively and it passed its check there,
    as a build on this CPU encodes, else fp32), which needs no torch; else the torch
    encoder (`BiEncoder.for_index`, on `runtime`)."""
    exported = open_checked_export(spec, device, runtime)
    if exported is not None:
        return exported
    from semsearch.models.bi_encoder import BiEncoder  # torch: only where no export serves

    return BiEncoder.for_index(spec, device, runtime)  # type: ignore[arg-type]


def open_checked_export(
    spec: EncoderSpec,
    device: str = "auto",
    runtime: str = "auto",
    throughput: bool = False,
    fallback: bool = True,
) -> ExportedQueryEncoder | None:
    """The checked export that encodes rows where the torch encoder would run OpenVINO
    anyway (`auto` or `openvino`, on a CPU, no int8): bf16 where the CPU runs it natively,
    else fp32, as `BiEncoder.use_runtime` chooses; with `fallback`, fp32 where bf16 was
    not checked. None where no export serves (the caller loads the torch encoder, which
    exports and checks it for the next time). `throughput`: compiled for many batches at
    once (a build)."""
    from semsearch.ann.devices import cuda_may_be_visible  # FAISS: only for rows to encode

    check_runtime(runtime)
    on_cpu = device == "cpu" or (device == "auto" and not cuda_may_be_visible())
    if runtime == "torch" or spec.quantization or not on_cpu or not openvino_installed():
        return None
    ov = import_openvino()
    precisions = ("bf16", "fp32") if native_bf16(ov) else ("fp32",)
    for precision in precisions if fallback else precisions[:1]:
        exported = ExportedQueryEncoder.open(spec, precision=precision, throughput=throughput)
        if exported is not None:
            return exported
    return None


def open_model_export(options: Any) -> ExportedQueryEncoder | None:
    """A build's encoder without torch: the model's checked export, found from its folder's
    files (`folder_spec`), where the torch encoder would encode on it anyway; the same
    vectors without seconds of imports, loading and checking again. `options` are a
    build's (model, prompts, device, runtime, quantization). None where no export serves:
    the first build of a model loads torch, which exports and checks it for the next ones."""
    if options.quantization is not None or options.runtime == "torch":
        return None
    folder = resolve_model(options.model)
    require_kind(folder, "bi-encoder")
    prompts = folder.prompts.override(options.query_prompt, options.document_prompt)
    check_include_prompt(folder.include_prompt, prompts, options.model)
    spec = folder_spec(folder, options.model, prompts)
    if spec is None:
        return None
    # Only the precision the torch encoder's runtime would run (no fp32 where bf16 failed).
    exported = open_checked_export(
        spec, options.device, options.runtime, throughput=True, fallback=False
    )
    if exported is not None and exported.spec != spec:  # this very model, window and pooling
        log.info("the OpenVINO export found describes another encoder: loading torch")
        return None
    return exported
