"""End to end on a GPU: `semsearch build` of all PyPI summaries against a hand-written
sentence-transformers + FAISS script (`--peer`) doing the same job, in one run.

Both run as fresh processes timed to exit (imports, model load and CUDA start included);
then, untimed, recall@10 of semsearch's index against exact search (issue 15's goals).

    python benchmarks/gpu_build.py --device cuda --data-dir .gpu/data --model /tmp/model
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from common import (
    add_options,
    base_parser,
    corpus_head,
    last_json_line,
    record,
    reference_model_path,
    run_timed,
    sample_rows,
    st_encode,
)

from semsearch.ann.tune import rescored_recall
from semsearch.training.vectors import load_vectors

INDEX_NAME = "pypi-gpu-build"
K = 10
GPU_TOLERANCE = 1e-4  # exact scores from torch on a GPU round differently from FAISS's
PEER_BATCH = {"cuda": 1024, "cpu": 64}


def corpus_file(data_dir: Path, rows: int, work: Path) -> tuple[Path, int]:
    """The first `rows` PyPI summaries (0: all) as a Parquet file of the `summary` column."""
    path = corpus_head(data_dir, "pypi", rows, work, columns=["summary"])
    return path, pq.ParquetFile(path).metadata.num_rows


def semsearch_build(corpus: Path, args) -> tuple[float, dict]:
    """Wall seconds of `semsearch build` and the manifest it printed."""
    command = [sys.executable, "-m", "semsearch", "build", str(corpus), "--name", INDEX_NAME]
    command += ["--text-column", "summary", "--model", str(args.model), "--device", args.device]
    command += ["--index-type", args.index_type, "--out-dir", str(args.out_dir / "indexes")]
    command += ["--overwrite", "--lexical" if args.lexical else "--no-lexical", "--json"]
    ran = run_timed(command)
    return ran["seconds"], json.loads(ran["stdout"][ran["stdout"].index("{") :])


def peer_build(corpus: Path, model: Path, factory: str, device: str, out: Path) -> dict:
    """The peer's whole job, as a user would write it with sentence-transformers and FAISS."""
    import faiss
    import torch
    from sentence_transformers import SentenceTransformer

    from semsearch.ann.exact import ExactSearch

    started = time.perf_counter()
    texts = pq.read_table(corpus, columns=["summary"]).column("summary").to_pylist()
    encoder = SentenceTransformer(str(model), device=device)
    if device == "cuda":
        encoder = encoder.to(torch.bfloat16)  # its fastest documented setting: 16-bit weights
    vectors = st_encode(encoder, texts, PEER_BATCH[device])
    encoded = time.perf_counter()
    phase(f"peer: encoded {len(texts):,} texts", encoded - started)
    index = faiss.index_factory(vectors.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.try_extract_index_ivf(index)
    training_rows = len(vectors) if ivf is None else 64 * ivf.nlist
    sample = vectors[np.sort(sample_rows(len(vectors), training_rows))]
    on_gpu = device == "cuda" and hasattr(faiss, "StandardGpuResources")
    if on_gpu:
        resources = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(resources, 0, index)
    index.train(sample)
    phase(f"peer: trained on {len(sample):,} rows", time.perf_counter() - encoded)
    index.add(vectors)
    filled = time.perf_counter()
    phase("peer: trained and added", filled - encoded)
    queries = vectors[sample_rows(len(vectors), 1000, seed=1)]
    exact_scores = ExactSearch(vectors, "dot", device).search(queries, K)[0]  # untimed
    nprobe, recall = None, 1.0
    if "IVF" in factory:
        space = faiss.GpuParameterSpace() if on_gpu else faiss.ParameterSpace()
        lists = index.nlist if on_gpu else faiss.extract_index_ivf(index).nlist
        ceiling = min(lists, 2048) if on_gpu else lists  # GPU FAISS probes at most 2048 lists
        nprobe = 1
        while True:  # double nprobe until the target recall
            space.set_index_parameter(index, "nprobe", nprobe)
            found = index.search(queries, K)[1]
            recall = rescored_recall(
                found, queries, vectors, exact_scores[:, -1], "dot", GPU_TOLERANCE
            )
            if recall >= 0.95 or nprobe >= ceiling:
                break
            nprobe = min(2 * nprobe, ceiling)
    tuned = time.perf_counter()
    phase(f"peer: tuned to nprobe {nprobe} (recall@10 {recall:.3f})", tuned - filled)
    cpu_index = faiss.index_gpu_to_cpu(index) if on_gpu else index
    if nprobe is not None:
        faiss.ParameterSpace().set_index_parameter(cpu_index, "nprobe", nprobe)
    faiss.write_index(cpu_index, str(out))
    written = time.perf_counter()
    return {
        "seconds_inside": round(written - started, 2),
        "encode_s": round(encoded - started, 2),
        "train_add_s": round(filled - encoded, 2),
        "tune_s": round(tuned - filled, 2),
        "write_s": round(written - tuned, 2),
        "faiss_on_gpu": on_gpu,
        "nprobe": nprobe,
        "training_rows": len(sample),
        "recall_at_10": round(recall, 4),
        "batch_size": PEER_BATCH[device],
        "weights": "bf16" if device == "cuda" else "fp32",
    }


def phase(what: str, seconds: float) -> None:
    """One phase's seconds on stderr as it ends (stdout carries the figures' JSON line)."""
    print(f"{what}: {seconds:.1f} s", file=sys.stderr, flush=True)


def run_peer(corpus: Path, factory: str, args) -> tuple[float, dict]:
    """The peer in a fresh process (this file with `--peer`): its wall seconds and figures."""
    out = args.out_dir / "peer"
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--peer", str(corpus)]
    command += ["--model", str(args.model), "--device", args.device, "--factory", factory]
    command += ["--out-dir", str(out)]
    ran = run_timed(command)
    return ran["seconds"], last_json_line(ran["stdout"])


def index_recall(manifest: dict, args, queries: int) -> tuple[float, int]:
    """Recall@10 of the built index at its tuned search parameters against exact search over
    its stored vectors, for `queries` rows drawn from the corpus; and the rows drawn."""
    import faiss

    from semsearch.ann.exact import ExactSearch
    from semsearch.store.folders import find_index
    from semsearch.store.segment import Segment

    folder = find_index(INDEX_NAME, args.out_dir / "indexes")
    (record,) = folder.manifest().segments
    segment = Segment(folder.segment_dir(record.name), record)
    vectors = load_vectors(index=INDEX_NAME, index_dir=args.out_dir / "indexes")
    sample = vectors[sample_rows(len(vectors), queries)]
    exact_scores = ExactSearch(vectors, "dot", args.device).search(sample, K)[0]
    index = segment.read_index(manifest["index"]["metric"]).faiss
    for name, value in manifest["index"]["search_params"].items():
        faiss.ParameterSpace().set_index_parameter(index, name, value)
    labels = index.search(sample, K)[1]
    found = segment.positions_of(labels.ravel()).reshape(labels.shape)
    found[labels < 0] = -1
    recall = rescored_recall(found, sample, vectors, exact_scores[:, -1], "dot", GPU_TOLERANCE)
    return recall, len(sample)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="both sides' device (cpu: a smoke run with faiss-cpu)",
    )
    add_options(
        parser,
        rows=(0, "first N summaries (0: all 841,708)"),
        model=(
            Path,
            "model folder for both (default: the bundled model; on the GPU machine "
            "the folder `gpu_carry.py --widen` writes)",
        ),
        index_type=("auto", "semsearch build's --index-type"),
        lexical=(False, "let semsearch also build its BM25 index (the peer builds none)"),
        queries=(1000, "sampled queries for recall@10"),
        skip_peer=(False, "time semsearch alone"),
    )
    add_options(parser, hidden=True, peer=Path, factory=str)
    args = parser.parse_args()
    args.model = args.model or reference_model_path()
    if args.peer is not None:  # the peer's own process: its figures as the last line
        figures = peer_build(
            args.peer, args.model, args.factory, args.device, args.out_dir / "peer.faiss"
        )
        print(json.dumps(figures))
        return

    corpus, rows = corpus_file(args.data_dir, args.rows, args.out_dir / "corpus")
    seconds, manifest = semsearch_build(corpus, args)
    factory = manifest["index"]["factory"]
    print(
        f"semsearch build: {seconds:.1f} s, {manifest['rows']} rows, {factory} "
        f"{manifest['index']['search_params']}",
        flush=True,
    )
    peer_seconds, peer = (None, {}) if args.skip_peer else run_peer(corpus, factory, args)
    recall, queries = index_recall(manifest, args, args.queries)
    line = {
        "rows": rows,
        "seconds": round(seconds, 2),
        "recall_at_10": round(recall, 4),
        "queries": queries,
        "peer_seconds": round(peer_seconds, 2) if peer_seconds else None,
        "ratio": round(peer_seconds / seconds, 3) if peer_seconds else None,
        "factory": factory,
        "search_params": manifest["index"]["search_params"],
        "lexical": args.lexical,
        "model": str(args.model),
        "peer": peer,
        "semsearch_build_seconds": manifest.get("build_seconds"),
        # where the build's time went, phase by phase (semsearch.phases), as its manifest says
        "phases": manifest.get("operation", {}).get("phases"),
    }
    print({key: line[key] for key in ("rows", "seconds", "recall_at_10", "peer_seconds", "ratio")})
    record(args, "gpu_build", line, args.device)


if __name__ == "__main__":
    main()
