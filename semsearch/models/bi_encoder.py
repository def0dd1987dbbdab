"""The bi-encoder: one transformer with shared weights encodes each text on its own.

`BiEncoder` is an `nn.Module` (so training can back-propagate through `forward`) with an
`encode` method for inference: batches of texts of similar token length, prepared in a
background thread (`batching`), run under `torch.inference_mode`, on a GPU through a cached
bf16 copy of the weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from semsearch.errors import SemsearchError
from semsearch.models.batch_runner import run_batches
from semsearch.models.batching import Batch, BatchShape, batch_limits, pad, prepared_batches
from semsearch.models.encoder import TokenizedTexts
from semsearch.models.loading import load_transformer_encoder
from semsearch.models.model_folder import DEFAULT_MODEL, require_kind, resolve_model
from semsearch.models.openvino_int8 import OpenVinoInt8Encoder, check_quantization
from semsearch.models.openvino_runtime import OpenVinoEncoder
from semsearch.models.packing import packed_run
from semsearch.models.pooling import POOLING_MODES, Pooling, PoolingMode
from semsearch.models.prompts import PromptedEncoding, Prompts, check_include_prompt
from semsearch.models.spec import EncoderSpec
from semsearch.models.st_layout import write_transformer_folder
from semsearch.models.torch_device import HALF_PRECISIONS, Precision, half_copy
from semsearch.models.truncation import TruncationCount
from semsearch.models.word_encoder import WordNetwork
from semsearch.models.word_model import load_word_encoder, save_word_model
from semsearch.options import Runtime, check_runtime

# Page-locked input batches on CUDA, so host-to-device copies can overlap the model.
PIN_MEMORY = True
# On CUDA, batch widths are rounded up to a multiple of this: fewer distinct shapes, each of
# which costs the GPU libraries a kernel choice the first time it is seen.
GPU_PAD_MULTIPLE = 8
# Packed batches hold `batch_size` texts' worth of tokens when no token budget is given.
PACKED_TOKENS_PER_TEXT = 64


class FrozenCompiled(nn.Module):
    """`transformer` behind torch.compile, every call compiled with `freezing` on.

    Why: one short query on CPU spends most of its time streaming the weights through small
    matrix products, plus Python's cost per layer; inductor with frozen weights prepacks them
    for oneDNN and removes the Python (11.6 -> 9.3 ms per query on one core, 9.9 -> 6.8 ms on
    two, docs/results-history.md; same vectors to ~1e-6). It costs 15-30 s of compilation on
    the first query and turns the weights into constants: for serving, never for training,
    and no faster on large batches.
    """

    def __init__(self, transformer: PreTrainedModel) -> None:
        super().__init__()
        self.compiled = torch.compile(transformer, dynamic=True)
        self.config = transformer.config

    def forward(self, **inputs: torch.Tensor):
        # The inductor option is read when a graph is compiled (the first call, and any new
        # input shape): so every call runs under it.
        from torch._inductor import config as inductor

        with inductor.patch(freezing=True):
            return self.compiled(**inputs)


class BiEncoder(nn.Module, PromptedEncoding):
    """Transformer + pooling (+ L2 normalisation): a text in, one vector out."""

    def __init__(
        self,
        transformer: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        pooling: Pooling,
        normalize: bool,
        max_length: int,
        name: str = "",
        do_lower_case: bool = False,
        prompts: Prompts | None = None,
    ) -> None:
        super().__init__()
        self.transformer = transformer
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.normalize = normalize
        self.max_length = max_length
        self.name = name
        self.do_lower_case = do_lower_case
        # Put before texts by `encode_query` and `encode_document`; `encode` adds none.
        self.prompts = prompts or Prompts()
        self.quantization: str | None = None
        self.truncation = TruncationCount()  # texts tokenised and cut, for a build's report
        self._fingerprint: str | None = None
        # A plain dict, so the copy is not registered as a submodule (nor saved, nor trained).
        self._cast_copy: dict = {}
        self._runtime = None  # an OpenVinoEncoder that runs `encode`'s batches, or torch

    @classmethod
    def for_index(
        cls, spec: EncoderSpec, device: str = "auto", runtime: Runtime = "auto"
    ) -> BiEncoder:
        """The encoder an index records; a hub model comes from the local cache only: opening
        an index never downloads."""
        return cls.load(
            spec.name,
            pooling=spec.pooling,
            normalize=spec.normalize,
            max_length=spec.max_length,
            device=device,
            runtime=runtime,
            quantization=spec.quantization,
            local_files_only=True,
            query_prompt=spec.query_prompt,
            document_prompt=spec.document_prompt,
        )

    @classmethod
    def load(
        cls,
        name_or_path: str = DEFAULT_MODEL,
        *,
        pooling: PoolingMode | None = None,
        normalize: bool | None = None,
        max_length: int | None = None,
        device: str = "auto",
        quantization: str | None = None,
        local_files_only: bool = False,
        runtime: Runtime = "auto",
        calibration: Sequence[str] | None = None,
        query_prompt: str | None = None,
        document_prompt: str | None = None,
    ) -> BiEncoder:
        """Load `default`, a model folder or a hub name; explicit arguments win over its config.

        `quantization="int8"` runs the OpenVINO export quantised by NNCF (CPU inference only);
        `local_files_only` takes a hub model from the local cache, never from the network;
        `runtime` is what `encode` runs on (`use_runtime`; `auto`: OpenVINO on a CPU, checked
        against torch, else torch); `calibration`: sample texts an int8 encoder on OpenVINO is
        calibrated on (`openvino_int8`; default a fixed set); `query_prompt` and
        `document_prompt` replace the folder's prompts ("" for none; `prompts`).
        """
        check_quantization(quantization)
        check_runtime(runtime)
        folder = resolve_model(name_or_path, local_files_only)
        require_kind(folder, "bi-encoder")
        if pooling is not None and pooling not in POOLING_MODES:
            raise SemsearchError(
                f"unknown pooling {pooling!r}: choose one of {', '.join(POOLING_MODES)}"
            )
        prompts = folder.prompts.override(query_prompt, document_prompt)
        check_include_prompt(folder.include_prompt, prompts, name_or_path)
        if folder.word_model:
            word_runtime = "torch" if runtime == "auto" else runtime  # no export to make
            word_encoder = load_word_encoder(
                cls, folder, pooling, normalize, max_length, device, quantization
            )
            word_encoder.prompts = prompts
            return word_encoder.use_runtime(word_runtime)
        encoder = load_transformer_encoder(
            cls, folder, name_or_path, pooling, normalize, max_length, device, prompts
        )
        if quantization != "int8":
            return encoder.use_runtime(runtime)
        # int8 runs on the NNCF-quantised export (`openvino_int8`), the one int8 path, whatever
        # `runtime` says (`torch` too: what callers ask for to get the full encoder).
        encoder._runtime = OpenVinoInt8Encoder.attach(encoder, calibration)
        encoder.quantization = "int8"
        return encoder

    def use_runtime(self, runtime: Runtime) -> BiEncoder:
        """Run `encode`'s padded batches on `runtime`: `openvino` is an exported copy, checked
        against torch first (`semsearch.models.openvino_runtime`); torch where it cannot run,
        with one log line. `auto` is `openvino` on a CPU, torch on a GPU. Training and packed
        batches always run on torch. Returns the encoder itself."""
        check_runtime(runtime)
        self._runtime = None
        if resolve_runtime(runtime, self.device) == "openvino":
            self._runtime = OpenVinoEncoder.attach(self)
        return self

    @property
    def runtime(self) -> str:
        """What `encode` runs on by default: `torch`, or e.g. `openvino-bf16`."""
        return self._runtime.name if self._runtime is not None else "torch"

    def compile_for_queries(self) -> BiEncoder:
        """Compile the transformer with frozen weights for faster warm queries on CPU.

        Inference only (see `FrozenCompiled`); returns the encoder itself.
        """
        if self.device.type != "cpu" or self.quantization:
            raise SemsearchError(
                "compiling is for the fp32 encoder on CPU: use --device cpu without --quantize"
            )
        if not isinstance(self.transformer, FrozenCompiled):
            self.transformer = FrozenCompiled(self.transformer)
        return self

    @property
    def device(self) -> torch.device:
        return next(self.transformer.parameters()).device

    @property
    def dimension(self) -> int:
        return int(self.transformer.config.hidden_size)

    @property
    def fingerprint(self) -> str:
        """sha256 of the weights it was loaded from (empty for a model built in memory)."""
        return self._fingerprint or ""

    @property
    def spec(self) -> EncoderSpec:
        return EncoderSpec(
            name=self.name,
            fingerprint=self.fingerprint,
            pooling=self.pooling.mode,
            normalize=self.normalize,
            max_length=self.max_length,
            dimension=self.dimension,
            quantization=self.quantization,
            query_prompt=self.prompts.query,
            document_prompt=self.prompts.document,
        )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Sentence vectors for a padded batch; differentiable, for training."""
        tokens = self.transformer(input_ids=input_ids, attention_mask=attention_mask)
        return self._pool(tokens.last_hidden_state, attention_mask)

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, truncated at `max_length` (counted in `truncation`), unpadded."""
        if self.do_lower_case:
            texts = [text.lower() for text in texts]
        encoded = self.tokenizer(
            list(texts),
            truncation=True,
            max_length=self.max_length,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=False,
        )
        self.truncation.add(encoded)
        return encoded["input_ids"]

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        show_progress: bool = False,
        precision: Precision = "auto",
        max_batch_tokens: int | None = None,
        packing: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Embed `texts` as a float32 array [len(texts), dimension], in input order.

        Batches hold texts of similar token length, at most `batch_size` rows and
        `max_batch_tokens` padded tokens, by default what is fast on the device
        (`batch_settings`). `auto` precision is bf16 weights on CUDA (vectors within cosine
        0.9998 of fp32) and fp32 on CPU. `packing` puts several texts in each row (BERT and
        MPNet, `packing`): no compute on padding. A batch the GPU has no memory for runs in
        halves. `progress` hears of each batch; `TokenizedTexts` are not tokenised again.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts; wrap a single text in a list")
        tokenize = self.tokenize
        if isinstance(texts, TokenizedTexts):  # tokenised ahead, e.g. by a build's stage
            texts, tokenize = texts.token_ids, list
        batch_size, max_batch_tokens = batch_limits(self.device, batch_size, max_batch_tokens)
        on_gpu = self.device.type == "cuda"
        runtime = self._runtime
        exported = None if runtime is None or packing else runtime.forward_for(precision, self)
        transformer = self._inference_transformer(precision) if exported is None else None
        if self.quantization and exported is None:
            raise SemsearchError(
                "an int8 encoder runs only on its OpenVINO model: encode without packing"
            )
        if packing:
            if isinstance(transformer, FrozenCompiled):
                raise SemsearchError(
                    "packing is for the plain encoder, not a compiled one: encode without packing"
                )
            width = -(-self.max_length // GPU_PAD_MULTIPLE) * GPU_PAD_MULTIPLE
            budget = max_batch_tokens or batch_size * PACKED_TOKENS_PER_TEXT
            batches, forward = packed_run(
                texts,
                tokenize,
                transformer,
                self.device,
                self.tokenizer.pad_token_id or 0,
                width,
                budget,
                PIN_MEMORY,
                self._pool,
            )
        else:
            shape = BatchShape(
                batch_size,
                max_batch_tokens,
                pad_multiple=GPU_PAD_MULTIPLE if on_gpu else 1,
                pin_memory=on_gpu and PIN_MEMORY,
            )
            batches = prepared_batches(texts, tokenize, self.tokenizer.pad_token_id or 0, shape)
            forward = self._padded_forward(transformer, exported)
        return run_batches(batches, forward, (len(texts), self.dimension), show_progress, progress)

    def _padded_forward(
        self, transformer: PreTrainedModel | None, exported: Callable | None
    ) -> Callable[[Batch], torch.Tensor]:
        """A padded batch's vectors: from the runtime's `exported` model, else `transformer`'s."""
        on_gpu = self.device.type == "cuda"

        def forward(batch: Batch) -> torch.Tensor:
            if exported is not None:
                return exported(batch.input_ids, batch.attention_mask)
            input_ids = batch.input_ids.to(self.device, non_blocking=on_gpu)
            mask = batch.attention_mask.to(self.device, non_blocking=on_gpu)
            hidden = transformer(input_ids=input_ids, attention_mask=mask).last_hidden_state
            return self._pool(hidden.float(), mask)

        return forward

    def _pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pooled = self.pooling(hidden, attention_mask).float()
        if self.normalize:
            pooled = nn.functional.normalize(pooled, p=2, dim=1)
        return pooled

    def _inference_transformer(self, precision: Precision) -> PreTrainedModel:
        """The transformer in `precision`: itself in fp32, else a cast copy kept for reuse
        while the weights stand (`torch_device.half_copy`)."""
        if precision == "auto":
            precision = "bf16" if self.device.type == "cuda" else "fp32"
        if precision == "fp32":
            return self.transformer
        if precision not in HALF_PRECISIONS:
            raise SemsearchError(f"unknown precision {precision!r}: use auto, fp32, bf16 or fp16")
        if self.quantization:
            raise SemsearchError(f"an {self.quantization} encoder runs in fp32: drop the precision")
        return half_copy(self.transformer, HALF_PRECISIONS[precision], self._cast_copy)

    def features(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded `input_ids` and `attention_mask` for `texts`, on the model's device (for training)."""
        input_ids, mask = pad(self.tokenize(texts), self.tokenizer.pad_token_id or 0)
        return input_ids.to(self.device), mask.to(self.device)

    def save(self, folder: str | Path) -> None:
        """Write a folder that both semsearch and sentence-transformers load."""
        if self.quantization or isinstance(self.transformer, FrozenCompiled):
            raise SemsearchError(
                "a quantised or compiled encoder cannot be saved as a model folder: save the "
                "fp32 model it was loaded from"
            )
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if isinstance(self.transformer, WordNetwork):
            return save_word_model(self, folder)
        write_transformer_folder(self, folder)


def resolve_runtime(runtime: Runtime, device: torch.device) -> Runtime:
    """What `runtime` asks for on `device`: `auto` is OpenVINO on a CPU (the faster of the two
    there, checked against torch before use) and torch on a GPU."""
    if runtime == "auto":
        return "openvino" if device.type == "cpu" else "torch"
    return runtime
