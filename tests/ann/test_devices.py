"""Device choice (`--device` to a `FaissDevice`), its fallbacks and its one-line errors, what
counts as out of memory, and releasing torch's cache (a no-op without CUDA)."""

from __future__ import annotations

import logging

import pytest
import torch

from semsearch.ann import devices
from semsearch.ann.devices import CPU, faiss_device, gpu_count, is_out_of_memory
from semsearch.errors import SemsearchError

no_gpu = pytest.mark.skipif(gpu_count() > 0 or torch.cuda.is_available(), reason="a GPU is visible")


@pytest.fixture()
def fresh_fallback_log():
    devices._log_fallback.cache_clear()
    yield
    devices._log_fallback.cache_clear()


def test_cpu_is_the_cpu_and_unknown_devices_are_refused() -> None:
    assert faiss_device("cpu") == CPU and not CPU.is_gpu and str(CPU) == "cpu"
    for wrong in ("tpu", "cuda:first", "gpu"):
        with pytest.raises(SemsearchError, match="unknown device"):
            faiss_device(wrong)


@no_gpu
def test_auto_falls_back_to_the_cpu_with_one_log_line(caplog, fresh_fallback_log) -> None:
    with caplog.at_level(logging.INFO, logger="semsearch.ann.devices"):
        assert faiss_device("auto") == CPU
        assert faiss_device("auto") == CPU
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("FAISS runs on the CPU")


@no_gpu
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_without_a_gpu_is_one_clear_error(device) -> None:
    with pytest.raises(SemsearchError) as caught:
        faiss_device(device)
    message = str(caught.value)
    assert "\n" not in message and "--device cpu" in message
    assert "GPU" in message


def test_other_faiss_errors_are_not_taken_for_out_of_memory() -> None:
    assert not is_out_of_memory(RuntimeError("Error: 'n >= nlist' failed: too few points"))
    assert is_out_of_memory(MemoryError("std::bad_alloc: cudaMalloc failed, out of memory"))


def test_releasing_torch_s_cache_is_a_no_op_without_cuda(monkeypatch) -> None:
    from semsearch.ann.devices import release_torch_cache

    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: pytest.fail("no CUDA to release"))
    release_torch_cache()  # torch.cuda.is_available() is False here
