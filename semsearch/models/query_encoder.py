"""The encoder for an index's queries where no checked OpenVINO export is cached yet, or where
torch must run (`--runtime torch`, a GPU, no OpenVINO).

Why: a cold query is fastest on the checked export (`exported_query_encoder`), which needs
neither torch nor transformers. Where there is none, this loads the full torch encoder and,
where the query may run on OpenVINO, exports and checks it for this query and the next ones;
otherwise the full torch encoder answers (slower to start, the same vectors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from semsearch.models.exported_query_encoder import (
    ExportedQueryEncoder,
    openvino_installed,
)
from semsearch.models.spec import EncoderSpec
from semsearch.options import check_runtime

if TYPE_CHECKING:
    from semsearch.models.bi_encoder import BiEncoder


def encoder_for_queries(
    spec: EncoderSpec, device: str = "auto", runtime: str = "torch", export_tried: bool = False
) -> ExportedQueryEncoder | BiEncoder:
    """The encoder an index records, as fast to start as it can be.

    `auto` (and `openvino`) on a CPU: the checked OpenVINO export, which needs no torch
    (`open_for_queries` finds it without importing this module); where there is none, the
    full encoder is loaded, exported and checked, for this query and the next ones. `torch`,
    or an export that cannot be made: the full torch encoder.
    """
    from semsearch.models.bi_encoder import BiEncoder

    check_runtime(runtime)
    if runtime == "openvino" and not _on_cpu(device):
        return BiEncoder.for_index(spec, device, "openvino")  # says it runs on the CPU only
    if runtime == "torch" or not _on_cpu(device) or not openvino_installed():
        return BiEncoder.for_index(spec, device, "torch")
    exported = None if export_tried else ExportedQueryEncoder.open(spec)
    if exported is not None:
        return exported
    encoder = BiEncoder.for_index(spec, device, "torch")
    if encoder.fingerprint != spec.fingerprint:
        return encoder  # another model than the index's: the Searcher says so
    from semsearch.models.openvino_runtime import export_for_queries

    if export_for_queries(encoder):
        exported = ExportedQueryEncoder.open(spec)
    return exported if exported is not None else encoder


def _on_cpu(device: str) -> bool:
    return device == "cpu" or (device == "auto" and not torch.cuda.is_available())
