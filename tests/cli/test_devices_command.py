"""`semsearch devices` says where --device auto runs the model and FAISS, as the code that
chooses does."""

from __future__ import annotations

import json

import torch

from semsearch.ann.devices import faiss_device, gpu_count


def test_devices_reports_what_auto_chooses(cli) -> None:
    result = cli("devices", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["model_auto"] == ("cuda:0" if torch.cuda.is_available() else "cpu")
    assert report["faiss_auto"] == str(faiss_device("auto"))
    assert report["faiss_gpus"] == gpu_count() and len(report["gpus"]) == torch.cuda.device_count()
    text = cli("devices").stdout
    assert f"FAISS on {report['faiss_auto']}" in text and report["faiss"] in text
