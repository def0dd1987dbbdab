"""What an index records about the model that built it; importable without torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class EncoderSpec:
    """The model's name, the sha256 of its weights and the settings that shape its vectors."""

    name: str
    fingerprint: str
    pooling: str
    normalize: bool
    max_length: int
    dimension: int
    quantization: str | None = None  # "int8": the index was built by a quantised encoder
    # The prompts put before each query and each document (`semsearch.models.prompts`);
    # "" for none, and for an index built before prompts were recorded.
    query_prompt: str = ""
    document_prompt: str = ""

    def to_dict(self) -> dict:
        return asdict(self)
