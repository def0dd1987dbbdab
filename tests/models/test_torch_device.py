"""Device and precision choice: `auto` follows the hardware, anything unknown is one clear error."""

from __future__ import annotations

import contextlib

import pytest
import torch

from semsearch.errors import SemsearchError
from semsearch.models.torch_device import autocast_for, resolve_device


def test_auto_takes_cuda_only_when_torch_sees_a_gpu() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")


def test_an_unknown_device_names_the_choices() -> None:
    with pytest.raises(SemsearchError, match="unknown device 'gpu0': use auto, cpu or cuda"):
        resolve_device("gpu0")


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)
def test_cuda_without_a_gpu_is_refused() -> None:
    with pytest.raises(SemsearchError, match="no CUDA GPU is visible: use cpu"):
        resolve_device("cuda")


def test_auto_precision_is_full_fp32_on_a_cpu_and_half_on_request() -> None:
    cpu = torch.device("cpu")
    assert isinstance(autocast_for(cpu, "auto"), contextlib.nullcontext)
    with autocast_for(cpu, "bf16"):
        product = torch.ones(4, 4) @ torch.ones(4, 4)
    assert product.dtype == torch.bfloat16
