"""`open_for_queries`: the one place that chooses how an index's queries are encoded.

Why a module of its own: it picks between the checked OpenVINO export
(`exported_query_encoder`, no torch) and the torch encoder (`query_encoder`, which imports
torch), so it sits above both and imports the torch side only when it must.
"""

from __future__ import annotations

from typing import Any

from semsearch.models.exported_query_encoder import ExportedQueryEncoder
from semsearch.models.spec import EncoderSpec
from semsearch.options import check_runtime


def open_for_queries(spec: EncoderSpec, device: str = "auto", runtime: str = "auto") -> Any:
    """The encoder for an index's queries: the checked export without importing torch where
    there is one (`auto` or `openvino`, on the CPU or `auto` device), else
    `query_encoder.encoder_for_queries` (torch; it exports and checks for the next time)."""
    check_runtime(runtime)
    if runtime != "torch" and device in ("auto", "cpu"):
        exported = ExportedQueryEncoder.open(spec)
        if exported is not None:
            return exported
    from semsearch.models.query_encoder import encoder_for_queries  # torch: only here

    return encoder_for_queries(spec, device, runtime, export_tried=True)
