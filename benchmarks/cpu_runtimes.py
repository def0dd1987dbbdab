"""CPU encoding runtimes side by side (issue 29): semsearch on torch (fp32) and on OpenVINO
(f32, bf16, int8) against sentence-transformers' fast CPU backends, `backend="openvino"` and its
ONNX int8 export (`export_dynamic_quantized_onnx_model(..., "avx512_vnni")` on ONNX Runtime);
the faster of those two at each corpus and thread count is the peer each ratio is taken to.

Why one run: on a shared or throttled machine only figures taken in the same minutes compare.
Every candidate runs in its own process, pinned to as many cores as it has threads (1, then
2), on the same texts (PyPI summaries and Debian long descriptions), in interleaved rounds
whose order alternates; figures are medians. Vectors are compared with sentence-transformers'
fp32 torch vectors (the faithfulness bar: mean cosine >= 0.9999, min >= 0.999), and each
candidate's 10 nearest neighbours (exact, within the corpus) with those of the fp32 vectors.

The peer needs optimum-intel, whose releases pin an older transformers than semsearch's; it
runs from its own folder put first on its process' path (`--peer-path`; torch, numpy and
sentence-transformers come from semsearch's environment). What was tested (2026-11-26):
`pip install --no-deps --target /tmp/stov optimum-intel==2.2.0 optimum==2.3.0
openvino-tokenizers==2026.4.1.0 transformers==5.5.4 tokenizers==0.22.2 huggingface-hub==1.21.0`.
The ONNX peer's optimum-onnx wants transformers < 4.58 (`--onnx-peer-path`): `pip install
--no-deps --target /tmp/stonnx optimum-onnx==0.1.0 optimum==2.1.0 transformers==4.57.3 onnx
onnxruntime tokenizers==0.22.1 "huggingface-hub<1.0" ml_dtypes protobuf coloredlogs
humanfriendly flatbuffers`. Where a peer cannot run, the script says so in one line and
measures the rest.

    flock /tmp/cpu.lock python benchmarks/cpu_runtimes.py --pypi-rows 3000 --debian-rows 600 \
        --threads 1,2 --rounds 2 --peer-path /tmp/stov --onnx-peer-path /tmp/stonnx
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from common import (
    add_encode_options,
    add_options,
    add_results_option,
    base_parser,
    cosine_stats,
    encode_corpora,
    environment,
    record,
    reference_model_path,
    run_timed,
)

from semsearch.ann.exact import ExactSearch
from semsearch.ann.tune import recall_at_k

REFERENCE = "st-torch-fp32"  # sentence-transformers' default backend: the vectors to match
# Its fast CPU backends; the faster of them at each corpus and thread count is the peer to beat.
PEERS = ("st-openvino", "st-onnx-int8")
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
WARMUP = 64  # texts encoded before the clock starts (kernel choice, first-call costs)
NEIGHBOURS = 10
QUERIES = 200  # texts of each corpus whose neighbours are compared


def run_worker(args: argparse.Namespace) -> None:
    """In a child process: load one candidate, encode each corpus once, write seconds and vectors."""
    import torch

    torch.set_num_threads(args.threads)
    corpora = json.loads(Path(args.texts).read_text(encoding="utf-8"))
    encode = _encoder(args.worker, args.threads, args.batch_size, Path(args.model))
    out = Path(args.vectors_out)
    timings = {}
    for name, texts in corpora.items():
        encode(texts[:WARMUP])
        started = time.perf_counter()
        vectors = encode(texts)
        timings[name] = time.perf_counter() - started
        np.save(out / f"{name}.npy", np.asarray(vectors, dtype=np.float32))
    (out / "timings.json").write_text(json.dumps(timings))


def _encoder(candidate: str, threads: int, batch_size: int, model: Path):
    if candidate.startswith("st-"):
        from sentence_transformers import SentenceTransformer

        if candidate == "st-openvino":
            config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
            st = SentenceTransformer(
                str(model), device="cpu", backend="openvino", model_kwargs={"ov_config": config}
            )
        elif candidate == "st-onnx-int8":  # the folder `available_peers` prepared
            import onnxruntime

            # Without it ONNX Runtime ran Debian texts no faster on 2 cores than on 1 here.
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            st = SentenceTransformer(
                str(model),
                device="cpu",
                backend="onnx",
                model_kwargs={"file_name": ONNX_INT8_FILE, "session_options": options},
            )
        else:
            st = SentenceTransformer(str(model), device="cpu")
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


def measure(
    args: argparse.Namespace, texts_file: Path, scratch: Path, peers: set[str]
) -> list[dict]:
    """Every candidate at every thread count, `--rounds` interleaved rounds each."""
    candidates = [
        c
        for c in CANDIDATES
        if (c not in PEERS or c in peers)
        and (not args.candidates or c == REFERENCE or c in args.candidates)
    ]
    rows = []
    for threads in args.threads:
        seconds: dict[str, list[dict]] = {c: [] for c in candidates}
        for round_number in range(args.rounds):
            order = candidates if round_number % 2 == 0 else candidates[::-1]
            for candidate in order:
                folder = scratch / f"{candidate}-t{threads}"
                timings = _child(args, candidate, threads, texts_file, folder)
                if timings is not None:
                    seconds[candidate].append(timings)
        for candidate, runs in seconds.items():
            if runs:
                rows.append(
                    {
                        "candidate": candidate,
                        "threads": threads,
                        "runs": runs,
                        "vectors": scratch / f"{candidate}-t{threads}",
                    }
                )
    return rows


def _child(args, candidate: str, threads: int, texts_file: Path, folder: Path) -> dict | None:
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, __file__, "--worker", candidate, "--worker-threads", str(threads)]
    command += ["--texts", str(texts_file), "--vectors-out", str(folder)]
    command += ["--batch-size", str(args.batch_size), "--model", str(_model_for(args, candidate))]
    if shutil.which("taskset") and (os.cpu_count() or 1) >= threads:
        command = ["taskset", "-c", ",".join(map(str, range(threads))), *command]
    ran = run_timed(command, quiet=True, first=_peer_path(args, candidate), check=False)
    if "error" in ran:
        print(f"{candidate} ({threads} thread(s)) failed: {ran['error']}", flush=True)
        return None
    return json.loads((folder / "timings.json").read_text())


def _peer_path(args: argparse.Namespace, candidate: str) -> Path | None:
    return {"st-openvino": args.peer_path, "st-onnx-int8": args.onnx_peer_path}.get(candidate)


def _model_for(args: argparse.Namespace, candidate: str) -> Path:
    return args.onnx_model if candidate == "st-onnx-int8" else args.model


def available_peers(args: argparse.Namespace, scratch: Path) -> set[str]:
    """The peers that run here; each one that cannot says why in one line. The ONNX int8 peer's
    model folder is exported once (sentence-transformers' own export, offline, from a copy of
    the model folder) before any clock starts."""
    probes = {
        "st-openvino": "import optimum.intel.openvino, sentence_transformers",
        "st-onnx-int8": EXPORT_ONNX_INT8,
    }
    args.onnx_model = scratch / "onnx-model"
    shutil.rmtree(args.onnx_model, ignore_errors=True)
    shutil.copytree(args.model, args.onnx_model)
    peers = set()
    for peer, probe in probes.items():
        command = [sys.executable, "-c", probe, str(args.onnx_model)]
        ran = run_timed(command, quiet=True, first=_peer_path(args, peer), check=False)
        if "error" not in ran:
            peers.add(peer)
        else:
            where = _peer_path(args, peer)
            print(f"the peer {peer} cannot run from {where}: {ran['error']}; measuring the rest")
    return peers


EXPORT_ONNX_INT8 = """
import sys
from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model
model = SentenceTransformer(sys.argv[1], device="cpu", backend="onnx")
model.save_pretrained(sys.argv[1])
export_dynamic_quantized_onnx_model(model, "avx512_vnni", sys.argv[1])
"""


def summarise(rows: list[dict], corpora: dict[str, list[str]]) -> list[dict]:
    """Per corpus and candidate: texts/s (median), ratio to the peer, cosine and recall@10."""
    lines = []
    for corpus, texts in corpora.items():
        for threads in sorted({row["threads"] for row in rows}):
            here = [row for row in rows if row["threads"] == threads]
            rates = {
                row["candidate"]: len(texts) / statistics.median(run[corpus] for run in row["runs"])
                for row in here
            }
            peer = max((c for c in PEERS if c in rates), key=rates.get, default=None)
            reference = next((r for r in here if r["candidate"] == REFERENCE), None)
            wanted = np.load(reference["vectors"] / f"{corpus}.npy") if reference else None
            for row in here:
                vectors = np.load(row["vectors"] / f"{corpus}.npy")
                line = {
                    "corpus": corpus,
                    "texts": len(texts),
                    "threads": threads,
                    "candidate": row["candidate"],
                    "rounds": len(row["runs"]),
                    "texts_per_s": round(rates[row["candidate"]], 1),
                    "peer": peer,
                    "ratio_to_peer": round(rates[row["candidate"]] / rates[peer], 2)
                    if peer
                    else None,
                }
                if wanted is not None:
                    mean, least = cosine_stats(vectors, wanted)
                    line.update(
                        cosine_mean=round(mean, 6),
                        cosine_min=round(least, 6),
                        faithful=mean >= FAITHFUL[0] and least >= FAITHFUL[1],
                        recall_at_10=round(neighbour_recall(vectors, wanted), 4),
                    )
                lines.append(line)
    return lines


def neighbour_recall(vectors: np.ndarray, wanted: np.ndarray) -> float:
    """Share of the first texts' 10 nearest neighbours (inner product) found with `vectors`
    that are also found with `wanted`; the text itself is left out."""
    queries = min(QUERIES, len(vectors) - NEIGHBOURS - 1)

    def top(matrix: np.ndarray) -> list[list[int]]:
        _, rows = ExactSearch(matrix, "dot").search(matrix[:queries], NEIGHBOURS + 1)
        return [[row for row in found if row != own][:NEIGHBOURS] for own, found in enumerate(rows)]

    return recall_at_k(top(vectors), top(wanted), NEIGHBOURS)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_results_option(parser)
    add_encode_options(parser, pypi_rows=3000, debian_rows=600)
    parser.add_argument(
        "--threads",
        type=lambda s: [int(t) for t in s.split(",")],
        default=[1, 2],
        help="thread counts, e.g. 1,2 (one process each)",
    )
    add_options(parser, rounds=2)
    parser.add_argument(
        "--candidates",
        type=lambda s: s.split(","),
        default=None,
        help="only these (comma-separated; the reference always runs)",
    )
    add_options(
        parser,
        peer_path=(
            Path("/tmp/stov"),
            "folder with optimum-intel and its transformers, first on the peer's path",
        ),
        onnx_peer_path=(
            Path("/tmp/stonnx"),
            "folder with optimum-onnx, onnxruntime and the transformers they "
            "accept, first on the ONNX int8 peer's path",
        ),
    )
    add_options(parser, hidden=True, worker=str, worker_threads=int, texts=str, vectors_out=str)
    args = parser.parse_args()
    if args.worker:
        args.threads = args.worker_threads
        return run_worker(args)
    args.model = args.model or reference_model_path()
    corpora = encode_corpora(args)
    scratch = args.out_dir / "cpu_runtimes"
    scratch.mkdir(parents=True, exist_ok=True)
    texts_file = scratch / "texts.json"
    texts_file.write_text(json.dumps(corpora), encoding="utf-8")
    rows = measure(args, texts_file, scratch, available_peers(args, scratch))
    lines = summarise(rows, corpora)
    for line in lines:
        print(
            line["corpus"],
            line["threads"],
            line["candidate"],
            line["texts_per_s"],
            line["ratio_to_peer"],
            line.get("cosine_min"),
            line.get("recall_at_10"),
        )
    env = environment()
    record(args, "cpu_runtimes", [{**line, "environment": env} for line in lines])


if __name__ == "__main__":
    main()
