"""The server's write endpoints on a full disk (507) and a read-only folder (403): one
line, the index as it was and still served, nothing left behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from server.conftest import API_KEY, serve

from semsearch import disk
from semsearch.index import Index

ROW = {"doc_id": "n1", "text": "A violin concert tonight.", "topic": "music"}


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.name != ".lock"}


def _still_served(client, folder: Path, files: set[str]) -> None:
    assert client.get("/ready").json()["indexes"]["docs"]["generation"] == 1
    assert client.get("/search", params={"q": "guitar", "k": 3}).status_code == 200
    assert _files(folder) == files
    assert Index.open("docs", folder.parent).manifest.generation == 1


@pytest.mark.parametrize(
    ("method", "body"), [("POST", {"rows": [ROW]}), ("DELETE", {"ids": ["d1", "d2"]})]
)
def test_a_full_disk_answers_507_and_keeps_serving(index_dir, monkeypatch, method, body) -> None:
    folder = index_dir / "docs"
    files = _files(folder)
    with serve(index_dir, api_key=API_KEY) as client:
        client.headers["Authorization"] = f"Bearer {API_KEY}"
        monkeypatch.setenv(disk.FULL_AFTER_ENV, "0")
        disk.reset_fault_seam()
        answer = client.request(method, "/indexes/docs/documents", json=body)
        monkeypatch.delenv(disk.FULL_AFTER_ENV)
        assert answer.status_code == 507, answer.text
        error = answer.json()["error"]
        assert error.startswith("no space") and str(folder) in error and "\n" not in error
        _still_served(client, folder, files)


def test_a_read_only_folder_answers_403_to_writes_and_serves_reads(index_dir) -> None:
    folder = index_dir / "docs"
    files = _files(folder)
    if subprocess.run(["mount", "--bind", str(folder), str(folder)]).returncode != 0:
        pytest.skip("cannot make a bind mount here (needs root)")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)]).returncode != 0:
            pytest.skip("cannot remount read-only here")
        with serve(index_dir, api_key=API_KEY) as client:
            client.headers["Authorization"] = f"Bearer {API_KEY}"
            answer = client.post("/indexes/docs/documents", json={"rows": [ROW]})
            assert answer.status_code == 403, answer.text
            assert "read-only file system" in answer.json()["error"]
            _still_served(client, folder, files)
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)
