"""The bi-encoder: one transformer with shared weights encodes each text on its own.

`BiEncoder` is an `nn.Module` (so training can back-propagate through `forward`) with an
`encode` method for inference: batches of texts of similar token length, prepared in a
background thread (`batching`), run under `torch.inference_mode`, on a GPU through a cached
bf16 copy of the weights.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from torch import nn
from tqdm.auto import tqdm
from transformers import AutoModel, PreTrainedModel, PreTrainedTokenizerBase

from semsearch.errors import SemsearchError
from semsearch.models.batching import Batch, BatchShape, in_background, pad, prepared_batches
from semsearch.models.compiled import FrozenCompiled
from semsearch.models.loading import load_pretrained, model_max_length
from semsearch.models.memory_fit import MemoryFit
from semsearch.models.model_folder import (
    DEFAULT_MODEL,
    ModelFolder,
    require_kind,
    resolve_model,
    weights_fingerprint,
)
from semsearch.models.openvino_int8 import OpenVinoInt8Encoder
from semsearch.models.openvino_runtime import OpenVinoEncoder
from semsearch.models.packing import (
    PackedAttention,
    PackedBatch,
    packed_batches,
    position_start,
    unpack,
)
from semsearch.models.pooling import POOLING_MODES, Pooling, PoolingMode
from semsearch.models.prompts import Prompts, check_include_prompt, with_prompt
from semsearch.models.quantize import CALIBRATION_TEXTS, check_quantization, quantize_int8
from semsearch.models.spec import EncoderSpec
from semsearch.models.st_layout import write_transformer_folder
from semsearch.models.tokenized import TokenizedTexts
from semsearch.models.torch_device import HALF_PRECISIONS, Precision, resolve_device
from semsearch.models.truncation import TruncationCount
from semsearch.models.word_encoder import WordNetwork
from semsearch.models.word_model import load_word_encoder, save_word_model
from semsearch.options import Runtime, check_runtime

# Vectors computed on a GPU wait there until this many are ready, then come back in one copy.
FLUSH_ROWS = 16_384
# Rows per batch and padded tokens per batch by default. On a CPU the count barely matters;
# on a GPU large batches hide Python's per-batch cost, and the token budget keeps batches of
# long texts within the same memory as batches of short ones.
CPU_BATCH = (64, None)
GPU_BATCH = (256, 65_536)
# Page-locked input batches on CUDA, so host-to-device copies can overlap the model.
PIN_MEMORY = True
# On CUDA, batch widths are rounded up to a multiple of this: fewer distinct shapes, each of
# which costs the GPU libraries a kernel choice the first time it is seen.
GPU_PAD_MULTIPLE = 8
# Packed batches hold `batch_size` texts' worth of tokens when no token budget is given.
PACKED_TOKENS_PER_TEXT = 64


class BiEncoder(nn.Module):
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
        """The encoder an index records (name, pooling, normalisation, length, quantisation,
        prompts).

        A hub model comes from the local cache only: opening an index never downloads.
        """
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

        `quantization="int8"` quantises the linear layers for CPU inference (not for training);
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
        transformer, tokenizer = load_pretrained(folder, AutoModel)
        model_limit = model_max_length(transformer, tokenizer)
        pooling_module = _load_pooling(folder, pooling, transformer.config.hidden_size)
        encoder = cls(
            transformer=transformer,
            tokenizer=tokenizer,
            pooling=pooling_module,
            normalize=normalize if normalize is not None else folder.normalize is not False,
            max_length=min(max_length or folder.max_length or model_limit, model_limit),
            name=name_or_path,
            do_lower_case=folder.do_lower_case,
            prompts=prompts,
        )
        scorer = (folder.pooling_weights,) if _uses_saved_scorer(folder, pooling_module) else ()
        encoder._fingerprint = weights_fingerprint(folder.path, extra=scorer)
        encoder.eval()
        encoder = encoder.to(resolve_device(device))
        if quantization == "int8":
            return encoder._quantize_int8(runtime, calibration)
        return encoder.use_runtime(runtime)

    def _quantize_int8(self, runtime: Runtime, calibration: Sequence[str] | None) -> BiEncoder:
        """int8 on OpenVINO (`openvino_int8`) where asked for by name and possible, else
        torch's `Int8Linear` (`auto` included: OpenVINO's int8 misses the recall bar)."""
        if runtime == "openvino":
            self._runtime = OpenVinoInt8Encoder.attach(self, calibration)
            self.quantization = "int8"
            if self._runtime is not None:
                return self  # else `attach` said why, in one line
        texts = list(CALIBRATION_TEXTS)  # one at a time: no padding in the ranges
        self.transformer = quantize_int8(
            self.transformer, lambda: self.encode(texts, batch_size=1), self.device
        )
        self.quantization = "int8"
        return self

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

        Inference only (see `semsearch.models.compiled`); returns the encoder itself.
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

        Batches hold texts of similar token length, at most `batch_size` of them and, with
        `max_batch_tokens`, at most that many padded tokens (short texts then share large
        batches); both default to what is fast on the device (`batch_settings`). Batches are
        prepared in a background thread while the model runs. `auto` precision is bf16
        weights on CUDA (vectors within cosine 0.9998 of fp32) and fp32 on CPU. `packing`
        puts several texts in each row, each attending only to itself (BERT and MPNet
        models, `semsearch.models.packing`): no compute on padding. A batch the GPU has no
        memory for runs in halves, and later batches are kept to what fitted. `progress` is
        called with the rows of each batch once it is encoded; `TokenizedTexts` are not
        tokenised again.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of texts; wrap a single text in a list")
        if isinstance(texts, TokenizedTexts):  # tokenised ahead, e.g. by a build's stage
            texts, tokenize = texts.token_ids, list
        else:
            tokenize = self.tokenize
        return self._encode(
            texts,
            tokenize,
            batch_size,
            show_progress,
            precision,
            max_batch_tokens,
            packing,
            progress,
        )

    def encode_query(self, texts: Sequence[str], **options) -> np.ndarray:
        """`encode` with the query prompt before each text (sentence-transformers'
        `encode_query`); `options` are `encode`'s."""
        return self.encode(with_prompt(texts, self.prompts.query), **options)

    def encode_document(self, texts: Sequence[str], **options) -> np.ndarray:
        """`encode` with the document prompt before each text (sentence-transformers'
        `encode_document`); `options` are `encode`'s."""
        return self.encode(with_prompt(texts, self.prompts.document), **options)

    def _encode(
        self,
        texts: Sequence,
        tokenize: Callable[[Sequence], list[list[int]]],
        batch_size: int | None,
        show_progress: bool,
        precision: Precision,
        max_batch_tokens: int | None,
        packing: bool,
        progress: Callable[[int], None] | None,
    ) -> np.ndarray:
        if batch_size is None:
            batch_size, default_tokens = batch_settings(self.device)
            max_batch_tokens = max_batch_tokens or default_tokens
        if batch_size < 1 or (max_batch_tokens is not None and max_batch_tokens < 1):
            raise SemsearchError(
                f"batch size ({batch_size}) and token budget ({max_batch_tokens}) must be at "
                "least 1: pass a positive --batch-size"
            )
        output = np.empty((len(texts), self.dimension), dtype=np.float32)
        on_gpu = self.device.type == "cuda"
        runtime = self._runtime
        exported = None if runtime is None or packing else runtime.forward_for(precision, self)
        transformer = self._inference_transformer(precision) if exported is None else None
        pending: list[tuple[np.ndarray, torch.Tensor]] = []

        def flush() -> None:
            # One device-to-host copy (and sync) per many batches instead of one per batch.
            if pending:
                rows = np.concatenate([rows for rows, _ in pending])
                output[rows] = torch.cat([vectors for _, vectors in pending]).cpu().numpy()
                pending.clear()

        if packing:
            batches, forward = self._packed(
                texts, tokenize, transformer, batch_size, max_batch_tokens
            )
        else:
            shape = BatchShape(
                batch_size,
                max_batch_tokens,
                pad_multiple=GPU_PAD_MULTIPLE if on_gpu else 1,
                pin_memory=on_gpu and PIN_MEMORY,
            )
            pad_id = self.tokenizer.pad_token_id or 0
            batches = prepared_batches(texts, tokenize, pad_id, shape)

            def forward(batch: Batch) -> torch.Tensor:
                if exported is not None:
                    return exported(batch.input_ids, batch.attention_mask)
                input_ids = batch.input_ids.to(self.device, non_blocking=on_gpu)
                mask = batch.attention_mask.to(self.device, non_blocking=on_gpu)
                hidden = transformer(input_ids=input_ids, attention_mask=mask).last_hidden_state
                return self._pool(hidden.float(), mask)

        fit = MemoryFit()
        with (
            torch.inference_mode(),
            tqdm(total=len(texts), desc="encoding", unit="text", disable=not show_progress) as bar,
        ):
            for batch in batches:
                for piece in fit.pieces(batch):
                    pending.append((piece.rows, fit.run(forward, piece)))
                if sum(len(rows) for rows, _ in pending) >= FLUSH_ROWS:
                    flush()
                bar.update(len(batch.rows))
                if progress is not None:
                    progress(len(batch.rows))
            flush()
        return output

    def _packed(
        self,
        texts: Sequence,
        tokenize: Callable[[Sequence], list[list[int]]],
        transformer: PreTrainedModel,
        batch_size: int,
        max_batch_tokens: int | None,
    ) -> tuple[Iterator[PackedBatch], Callable[[PackedBatch], torch.Tensor]]:
        """Packed batches of `texts` (made in the background) and how to run one."""
        if isinstance(transformer, FrozenCompiled):
            raise SemsearchError(
                "packing is for the plain encoder, not a compiled one: encode without packing"
            )
        start = position_start(transformer)
        width = -(-self.max_length // GPU_PAD_MULTIPLE) * GPU_PAD_MULTIPLE
        budget = max_batch_tokens or batch_size * PACKED_TOKENS_PER_TEXT
        pad_id = self.tokenizer.pad_token_id or 0
        on_gpu = self.device.type == "cuda"
        batches = in_background(
            lambda: packed_batches(
                texts, tokenize, pad_id, width, budget, start, pin_memory=on_gpu and PIN_MEMORY
            )
        )

        attention = PackedAttention(transformer, width, self.device)

        def forward(batch: PackedBatch) -> torch.Tensor:
            input_ids = batch.input_ids.to(self.device, non_blocking=on_gpu)
            positions = batch.position_ids.to(self.device, non_blocking=on_gpu)
            hidden = attention.run(batch, input_ids, positions)
            tokens, token_mask = unpack(hidden, batch)
            return self._pool(tokens.float(), token_mask)

        return batches, forward

    def _pool(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pooled = self.pooling(hidden, attention_mask).float()
        if self.normalize:
            pooled = nn.functional.normalize(pooled, p=2, dim=1)
        return pooled

    def _inference_transformer(self, precision: Precision) -> PreTrainedModel:
        """The transformer in `precision`: itself in fp32, else a cast copy kept for reuse.

        Casting the weights beats autocast for inference: no cast kernel before every matrix
        product, which is what bounds a small model's speed on a GPU. The copy is rebuilt
        whenever a weight has changed since (training bumps the tensors' version counters).
        """
        if precision == "auto":
            precision = "bf16" if self.device.type == "cuda" else "fp32"
        if precision == "fp32":
            return self.transformer
        if precision not in HALF_PRECISIONS:
            raise SemsearchError(f"unknown precision {precision!r}: use auto, fp32, bf16 or fp16")
        if self.quantization:
            raise SemsearchError(f"an {self.quantization} encoder runs in fp32: drop the precision")
        dtype = HALF_PRECISIONS[precision]
        params = list(self.transformer.parameters())
        key = (dtype, tuple((p.data_ptr(), p._version) for p in params))
        if self._cast_copy.get("key") != key:
            self._cast_copy.clear()  # free the old copy before making the new one
            self._cast_copy["model"] = copy.deepcopy(self.transformer).to(dtype).eval()
            self._cast_copy["key"] = key
        return self._cast_copy["model"]

    def features(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded `input_ids` and `attention_mask` for `texts`, on the model's device (for training)."""
        input_ids, mask = self.pad(self.tokenize(texts))
        return input_ids.to(self.device), mask.to(self.device)

    def pad(self, token_ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pad token id lists to the longest one: (input_ids, attention_mask)."""
        return pad(token_ids, self.tokenizer.pad_token_id or 0)

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


def batch_settings(device: torch.device) -> tuple[int, int | None]:
    """Default (rows per batch, padded tokens per batch) for encoding on `device`."""
    return GPU_BATCH if device.type == "cuda" else CPU_BATCH


def _load_pooling(folder: ModelFolder, mode: PoolingMode | None, dimension: int) -> Pooling:
    """The folder's pooling (with its trained scorer), unless the caller asks for another mode."""
    pooling = Pooling(mode or folder.pooling or "mean", dimension=dimension)
    if _uses_saved_scorer(folder, pooling):
        pooling.load_state_dict(load_file(folder.pooling_weights))
    return pooling


def _uses_saved_scorer(folder: ModelFolder, pooling: Pooling) -> bool:
    return pooling.scorer is not None and folder.pooling_weights is not None


def resolve_runtime(runtime: Runtime, device: torch.device) -> Runtime:
    """What `runtime` asks for on `device`: `auto` is OpenVINO on a CPU (the faster of the two
    there, checked against torch before use) and torch on a GPU."""
    if runtime == "auto":
        return "openvino" if device.type == "cpu" else "torch"
    return runtime
