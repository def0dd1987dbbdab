"""Kept for imports: device choice lives in `semsearch.ann.devices`, GPU FAISS in
`semsearch.ann.faiss_gpu` (this module goes once nothing imports it)."""

from __future__ import annotations

from semsearch.ann.devices import (
    CPU,
    INSTALL_HINT,
    FaissDevice,
    device_report,
    faiss_device,
    faiss_reason,
    gpu_count,
)
from semsearch.ann.faiss_gpu import GPU_MAX_K, is_gpu_index, resources, to_cpu, to_gpu

__all__ = ["CPU", "GPU_MAX_K", "INSTALL_HINT", "FaissDevice", "device_report", "faiss_device",
           "faiss_reason", "gpu_count", "is_gpu_index", "resources", "to_cpu", "to_gpu"]  # fmt: skip
