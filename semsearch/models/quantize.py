"""int8 linear layers for CPU inference, with vectors that do not depend on the batch.

Why: on a CPU an int8 matrix product (`torch._int_mm`) is several times faster than fp32,
and a single query reads a quarter of the weights. torch's dynamic quantisation took one
activation scale over the whole padded batch, so a text's vector changed with its batch
mates (cosine 0.92-0.97 between a query alone and in a batch; recall@10 0.75 against fp32).
Here every token gets its own scale, so a text's vector is the same alone or in any batch,
and three things keep the vectors close to fp32 (docs/results-history.md):

- weights: one scale per output channel;
- SmoothQuant (Xiao et al., 2023): a few input channels carry most of the activations'
  range; dividing them by a per-channel factor, and multiplying the weights by it, spreads
  the range between the two before rounding. The factors come from the fp32 model's
  activations on `CALIBRATION_TEXTS`, at load time;
- the FFN's second layer, whose input (after GELU) is the hardest to round, gets a second
  int8 digit: the rounding residual, quantised again and multiplied in the same product.

An index records the quantisation so that its queries use the same encoder.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from semsearch.errors import SemsearchError

QUANTIZATION_MODES = ("int8",)
SMOOTHING = 0.5  # SmoothQuant's alpha: the share of the activation range moved to the weights
LEVELS = 127  # symmetric int8
RESIDUAL_LEVELS = 254  # the second digit: steps of 1/254 of the first digit's step
# Varied short and long texts whose activations set the smoothing factors; fixed, so the
# quantised model (and so every vector) is the same at every load. Changing them changes
# every int8 vector: int8 indexes built before would then need rebuilding.
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
# Layers that get the second digit: BERT's FFN output ("layer.N.output.dense"), not the
# attention output ("layer.N.attention.output.dense").
SECOND_DIGIT = ("output.dense",)


def check_quantization(mode: str | None) -> None:
    if mode is not None and mode not in QUANTIZATION_MODES:
        raise SemsearchError(
            f"unknown quantisation {mode!r}: choose {', '.join(QUANTIZATION_MODES)} or leave it out"
        )


class Int8Linear(nn.Module):
    """`nn.Linear` as an int8 product: weights per output channel, activations per token.

    `input_range` is the calibrated max |x| of each input channel (for the smoothing);
    `second_digit` adds the rounding residual as a second int8 row block.
    """

    def __init__(self, linear: nn.Linear, input_range: torch.Tensor, second_digit: bool) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        smooth = input_range.clamp(min=1e-5) ** SMOOTHING
        smooth = (smooth / weight.abs().amax(dim=0).clamp(min=1e-5) ** (1 - SMOOTHING)).clamp(
            min=1e-5
        )
        weight = weight * smooth
        scale = weight.abs().amax(dim=1).clamp(min=1e-12) / LEVELS
        quantised = torch.round(weight / scale[:, None]).to(torch.int8)
        self.register_buffer("weight_t", quantised.t().contiguous())  # [in, out] for _int_mm
        self.register_buffer("weight_scale", scale)
        self.register_buffer("inverse_smooth", 1 / smooth)
        bias = linear.bias if linear.bias is not None else torch.zeros(linear.out_features)
        self.register_buffer("bias", bias.detach().float().clone())
        self.out_features = linear.out_features
        self.second_digit = second_digit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.reshape(-1, x.shape[-1]) * self.inverse_smooth
        rows = tokens.shape[0]
        scale = torch.linalg.vector_norm(tokens, ord=float("inf"), dim=1, keepdim=True)
        scaled = tokens.div_(scale.clamp_(min=1e-12).div_(LEVELS))
        if not self.second_digit:
            out = torch._int_mm(scaled.round_().to(torch.int8), self.weight_t).float()
        else:
            digits = torch.empty((2 * rows, tokens.shape[1]), dtype=torch.int8)
            first = torch.round(scaled)
            digits[:rows].copy_(first)
            digits[rows:].copy_(scaled.sub_(first).mul_(RESIDUAL_LEVELS).round_())
            both = torch._int_mm(digits, self.weight_t)
            out = both[:rows].float().add_(both[rows:].float(), alpha=1 / RESIDUAL_LEVELS)
        out = out.mul_(scale).mul_(self.weight_scale).add_(self.bias)
        return out.reshape(*x.shape[:-1], self.out_features)


def quantize_int8(
    transformer: nn.Module, calibrate: Callable[[], object], device: torch.device
) -> nn.Module:
    """`transformer` with every `nn.Linear` replaced by an `Int8Linear` (CPU only).

    `calibrate` runs the fp32 model on `CALIBRATION_TEXTS`; the input range of each linear
    layer is recorded meanwhile.
    """
    if device.type != "cpu":
        raise SemsearchError(
            "int8 quantisation runs on CPU only: pass --device cpu, or drop --quantize on a GPU"
        )
    _check_int_mm()
    ranges: dict[str, torch.Tensor] = {}

    def recorder(name: str) -> Callable:
        def record(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
            seen = inputs[0].detach().reshape(-1, inputs[0].shape[-1]).abs().amax(dim=0)
            ranges[name] = torch.maximum(ranges[name], seen) if name in ranges else seen

        return record

    linears = {name: m for name, m in transformer.named_modules() if isinstance(m, nn.Linear)}
    hooks = [module.register_forward_pre_hook(recorder(name)) for name, module in linears.items()]
    try:
        calibrate()
    finally:
        for hook in hooks:
            hook.remove()
    for name, linear in linears.items():
        parent_name, _, attribute = name.rpartition(".")
        parent = transformer.get_submodule(parent_name) if parent_name else transformer
        second = name.endswith(SECOND_DIGIT) and "attention" not in name
        ranges.setdefault(name, torch.ones(linear.in_features))  # a layer calibration missed
        setattr(parent, attribute, Int8Linear(linear, ranges[name], second))
    return transformer


def _check_int_mm() -> None:
    """torch's int8 matrix product on CPU arrived after the oldest torch semsearch allows."""
    try:
        torch._int_mm(torch.ones((17, 8), dtype=torch.int8), torch.ones((8, 8), dtype=torch.int8))
    except (AttributeError, RuntimeError, NotImplementedError) as exc:
        raise SemsearchError(
            f"int8 needs torch's int8 matrix product on CPU, which torch {torch.__version__} "
            "lacks: upgrade torch (pip install -U torch) or drop --quantize"
        ) from exc
