"""`manifest.json`: written once when an index is built, read by everything that uses it."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from semsearch.errors import SemsearchError
from semsearch.models.bi_encoder import EncoderSpec

MANIFEST_FILE = "manifest.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class IndexSpec:
    """The FAISS structure: the user's choice, the factory string it became, its search knobs."""

    requested: str
    factory: str
    metric: str
    search_params: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceSpec:
    """Where the rows came from, so a reader can trace and verify them."""

    path: str
    format: str
    sha256: str
    rows_read: int
    rows_skipped: int
    text_column: str
    id_column: str | None


@dataclass(frozen=True)
class Manifest:
    """How an index was made; the single source of truth about an index folder."""

    name: str
    rows: int
    model: EncoderSpec
    index: IndexSpec
    source: SourceSpec
    index_file_bytes: int
    semsearch_version: str
    created_at: str
    build_seconds: float
    tuning: dict | None = None  # how the search parameter was chosen, when it was tuned
    format_version: int = FORMAT_VERSION

    def to_dict(self) -> dict:
        return asdict(self)

    def write(self, folder: Path) -> None:
        """Write atomically: a reader sees the old manifest or the new one, never half of one."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
        temporary = folder / f".{MANIFEST_FILE}.tmp"
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, folder / MANIFEST_FILE)

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        path = folder / MANIFEST_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format_version") != FORMAT_VERSION:
                raise SemsearchError(
                    f"{path} has format version {data.get('format_version')}, this semsearch reads "
                    f"{FORMAT_VERSION}: rebuild the index with --overwrite"
                )
            return cls(
                **{
                    **data,
                    "model": EncoderSpec(**data["model"]),
                    "index": IndexSpec(**data["index"]),
                    "source": SourceSpec(**data["source"]),
                }
            )
        except FileNotFoundError as exc:
            raise SemsearchError(
                f"{folder} has no {MANIFEST_FILE}: it is not a semsearch index"
            ) from exc
        except (OSError, json.JSONDecodeError, TypeError, KeyError) as exc:
            raise SemsearchError(
                f"{path} is damaged ({type(exc).__name__}: {exc}): rebuild the index with --overwrite"
            ) from exc
