"""CPU encoding runtimes side by side (issue 29), each candidate in a process of its own.

`per_process` (`cpu_runtimes`) is `encode_family.in_process` with each candidate pinned to as
many cores as threads. The peers' optimum releases pin other transformers, so each runs from
its own folder first on its path (`peer_path`, `onnx_peer_path`: see benchmarks/README.md).

    flock /tmp/cpu.lock python benchmarks/runner.py run cpu_runtimes
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from common import cosine_stats, reference_model_path, run_timed
from encode_family import Encode, corpora

REFERENCE = "st-torch-fp32"  # sentence-transformers' default backend: the vectors to match
PEERS = ("st-openvino", "st-onnx-int8")  # its fast CPU backends: the faster is the peer
CANDIDATES = (
    REFERENCE,
    *PEERS,
    "semsearch-torch-fp32",
    "semsearch-openvino-fp32",
    "semsearch-openvino-bf16",
    "semsearch-openvino-int8",
)
ONNX_INT8_FILE = "onnx/model_qint8_avx512_vnni.onnx"  # sentence-transformers' export for VNNI
FAITHFUL = (0.9999, 0.999)  # mean, min cosine to the reference
WARMUP = 64  # texts a worker encodes before its clock starts
QUERIES = 200  # texts of each corpus whose 10 nearest neighbours are compared


def per_process(context) -> list[dict]:
    """`cpu_runtimes`: every candidate at every thread count in its own processes."""
    p = context.params
    p["model"] = Path(p["model"] or reference_model_path())
    texts = corpora(context)
    scratch = context.out_dir / "cpu_runtimes"
    scratch.mkdir(parents=True, exist_ok=True)
    texts_file = scratch / "texts.json"
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    peers = available_peers(p, scratch)
    candidates = [
        c
        for c in CANDIDATES
        if (c not in PEERS or c in peers)
        and (not p["candidates"] or c == REFERENCE or c in p["candidates"].split(","))
    ]
    runs = []
    for threads in p["threads"]:
        seconds: dict[str, list[dict]] = {c: [] for c in candidates}
        for number in range(p["rounds"]):
            for candidate in candidates if number % 2 == 0 else candidates[::-1]:
                folder = scratch / f"{candidate}-t{threads}"
                timings = _child(p, candidate, threads, texts_file, folder)
                if timings is not None:
                    seconds[candidate].append(timings)
        runs += [
            {"candidate": c, "threads": threads, "runs": s, "vectors": scratch / f"{c}-t{threads}"}
            for c, s in seconds.items()
            if s
        ]
    lines = summarise(runs, texts)
    for line in lines:
        print(*(line.get(key) for key in ("corpus", "threads", "candidate", "texts_per_s")))
    return lines


def worker(options: str) -> None:
    """In a child process: load one candidate, encode each corpus once, write seconds and vectors."""
    import torch

    o = json.loads(options)
    torch.set_num_threads(o["threads"])
    texts = json.loads(Path(o["texts"]).read_text(encoding="utf-8"))
    encode = _encoder(o["candidate"], o["threads"], o["batch_size"], Path(o["model"]))
    out, timings = Path(o["out"]), {}
    for name, corpus in texts.items():
        encode(corpus[:WARMUP])
        started = time.perf_counter()
        vectors = encode(corpus)
        timings[name] = time.perf_counter() - started
        np.save(out / f"{name}.npy", np.asarray(vectors, dtype=np.float32))
    (out / "timings.json").write_text(json.dumps(timings))


def _encoder(candidate: str, threads: int, batch_size: int, model: Path) -> Encode:
    if candidate.startswith("st-"):
        from sentence_transformers import SentenceTransformer

        options: dict = {"device": "cpu"}
        if candidate == "st-openvino":
            config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
            options.update(backend="openvino", model_kwargs={"ov_config": config})
        elif candidate == "st-onnx-int8":  # the folder `available_peers` prepared
            import onnxruntime

            # Without it ONNX Runtime ran Debian texts no faster on 2 cores than on 1 here.
            session = onnxruntime.SessionOptions()
            session.intra_op_num_threads = threads
            kwargs = {"file_name": ONNX_INT8_FILE, "session_options": session}
            options.update(backend="onnx", model_kwargs=kwargs)
        st = SentenceTransformer(str(model), **options)
        return lambda texts: st.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
        )
    from semsearch.models import BiEncoder

    _, runtime, precision = candidate.split("-")
    quantization = "int8" if precision == "int8" else None
    precision = "fp32" if quantization else precision
    encoder = BiEncoder.load(
        str(model),
        device="cpu",
        runtime=runtime,  # type: ignore[arg-type]
        quantization=quantization,
    )
    if encoder.runtime.split("-")[0] != runtime:
        raise SystemExit(f"{candidate}: the encoder fell back to {encoder.runtime}")
    return lambda texts: encoder.encode(texts, batch_size=batch_size, precision=precision)


def _child(p: dict, candidate: str, threads: int, texts_file: Path, folder: Path) -> dict | None:
    folder.mkdir(parents=True, exist_ok=True)
    model = p["onnx_model"] if candidate == "st-onnx-int8" else p["model"]
    options = {"candidate": candidate, "threads": threads, "texts": str(texts_file)}
    options.update(out=str(folder), batch_size=p["batch_size"], model=str(model))
    runner = Path(__file__).with_name("runner.py")
    command = [sys.executable, str(runner), "worker", "runtimes.worker", json.dumps(options)]
    if shutil.which("taskset") and (os.cpu_count() or 1) >= threads:
        command = ["taskset", "-c", ",".join(map(str, range(threads))), *command]
    ran = run_timed(command, quiet=True, first=_peer_path(p, candidate), check=False)
    if "error" in ran:
        print(f"{candidate} ({threads} thread(s)) failed: {ran['error']}", flush=True)
        return None
    return json.loads((folder / "timings.json").read_text())


def _peer_path(p: dict, candidate: str) -> Path | None:
    folder = {"st-openvino": p["peer_path"], "st-onnx-int8": p["onnx_peer_path"]}.get(candidate)
    return Path(folder) if folder else None


EXPORT_ONNX_INT8 = """
import sys
from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model
model = SentenceTransformer(sys.argv[1], device="cpu", backend="onnx")
model.save_pretrained(sys.argv[1])
export_dynamic_quantized_onnx_model(model, "avx512_vnni", sys.argv[1])
"""


def available_peers(p: dict, scratch: Path) -> set[str]:
    """The peers that run here; each one that cannot says why in one line. The ONNX int8 peer's
    model folder is exported once (sentence-transformers' own export, offline, from a copy of
    the model folder) before any clock starts."""
    probes = {
        "st-openvino": "import optimum.intel.openvino, sentence_transformers",
        "st-onnx-int8": EXPORT_ONNX_INT8,
    }
    p["onnx_model"] = scratch / "onnx-model"
    shutil.rmtree(p["onnx_model"], ignore_errors=True)
    shutil.copytree(p["model"], p["onnx_model"])
    peers = set()
    for peer, probe in probes.items():
        command = [sys.executable, "-c", probe, str(p["onnx_model"])]
        ran = run_timed(command, quiet=True, first=_peer_path(p, peer), check=False)
        if "error" not in ran:
            peers.add(peer)
        else:
            where = _peer_path(p, peer)
            print(f"the peer {peer} cannot run from {where}: {ran['error']}; measuring the rest")
    return peers


def summarise(runs: list[dict], texts: dict[str, list[str]]) -> list[dict]:
    """Per corpus and candidate: texts/s (median), ratio to the peer, cosine and recall@10."""
    lines = []
    for corpus, corpus_texts_ in texts.items():
        for threads in sorted({run["threads"] for run in runs}):
            here = [run for run in runs if run["threads"] == threads]
            rates = {
                r["candidate"]: len(corpus_texts_) / statistics.median(t[corpus] for t in r["runs"])
                for r in here
            }
            peer = max((c for c in PEERS if c in rates), key=rates.get, default=None)
            reference = next((r for r in here if r["candidate"] == REFERENCE), None)
            wanted = np.load(reference["vectors"] / f"{corpus}.npy") if reference else None
            for run in here:
                rate = rates[run["candidate"]]
                line = {
                    "corpus": corpus,
                    "texts": len(corpus_texts_),
                    "threads": threads,
                    "candidate": run["candidate"],
                    "rounds": len(run["runs"]),
                    "texts_per_s": round(rate, 1),
                    "peer": peer,
                    "ratio_to_peer": round(rate / rates[peer], 2) if peer else None,
                }
                if wanted is not None:
                    vectors = np.load(run["vectors"] / f"{corpus}.npy")
                    mean, least = cosine_stats(vectors, wanted)
                    line.update(
                        cosine_mean=round(mean, 6),
                        cosine_min=round(least, 6),
                        faithful=mean >= FAITHFUL[0] and least >= FAITHFUL[1],
                        recall_at_10=round(neighbour_recall(vectors, wanted), 4),
                    )
                lines.append(line)
    return lines


def neighbour_recall(vectors: np.ndarray, wanted: np.ndarray, k: int = 10) -> float:
    """Share of the first texts' k nearest neighbours (inner product) found with `vectors`
    that are also found with `wanted`; the text itself is left out."""
    from semsearch.ann.exact import ExactSearch
    from semsearch.ann.tune import recall_at_k

    queries = min(QUERIES, len(vectors) - k - 1)

    def top(matrix: np.ndarray) -> list[list[int]]:
        _, rows = ExactSearch(matrix, "dot").search(matrix[:queries], k + 1)
        return [[row for row in found if row != own][:k] for own, found in enumerate(rows)]

    return recall_at_k(top(vectors), top(wanted), k)
