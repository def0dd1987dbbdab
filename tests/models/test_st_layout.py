"""The sentence-transformers folder layout both encoders write."""

from __future__ import annotations

import json

from semsearch.models import BiEncoder
from semsearch.models.st_layout import module_entry, pooling_config


def test_modules_are_numbered_in_order_and_written_without_temporary_files(
    tiny_model_dir, tmp_path
) -> None:
    BiEncoder.load(str(tiny_model_dir), device="cpu").save(tmp_path)
    modules = json.loads((tmp_path / "modules.json").read_text())
    assert [(m["idx"], m["path"], m["type"].rsplit(".", 1)[1]) for m in modules] == [
        (0, "", "Transformer"),
        (1, "1_Pooling", "Pooling"),
        (2, "2_Normalize", "Normalize"),
    ]
    assert (tmp_path / "2_Normalize").is_dir()
    assert not list(tmp_path.rglob("*.tmp"))
    bert_config = json.loads((tmp_path / "sentence_bert_config.json").read_text())
    assert bert_config["max_seq_length"] == 128


def test_pooling_config_marks_exactly_one_mode() -> None:
    for mode in ("mean", "max", "cls"):
        config = pooling_config(32, mode)
        assert [key for key, value in config.items() if value is True] == [
            f"pooling_mode_{'cls_token' if mode == 'cls' else mode + '_tokens'}"
        ]
    assert pooling_config(32, "attention")["pooling_mode_attention"] is True
    assert module_entry(3, "3_Dense", "Dense")["type"] == "sentence_transformers.models.Dense"
