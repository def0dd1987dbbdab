"""One-thread FAISS search time of an IVF index's lists as full vectors (Flat) or fp16 codes.

Why: in `semsearch serve` on the 841,708 PyPI summaries the IVF scan is about a third of a
request's CPU; `IVF4096,SQfp16` reads half the bytes. Both are filled from the index's own
stored vectors and share its trained centroids, so only the list format differs. Recall@10
is each one's overlap with exact search at the index's tuned nprobe.

    python benchmarks/ivf_code_search.py --index-dir benchmarks/out/indexes --index pypi
"""

from __future__ import annotations

import sys
import time

import faiss
import numpy as np
from common import (
    add_index_options,
    base_parser,
    environment,
    markdown_table,
    record,
)

QUERIES = 500


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    add_index_options(parser)
    args = parser.parse_args()
    from semsearch.ann.exact import ExactSearch
    from semsearch.ann.tune import recall_at_k
    from semsearch.store.folders import IndexFolder
    from semsearch.store.segment import Segment

    folder = IndexFolder(args.index_dir / args.index)
    manifest = folder.manifest()
    segment = folder.path / "segments" / manifest.segments[0].name
    flat = faiss.read_index(str(segment / manifest.segments[0].index_file))
    ivf = faiss.extract_index_ivf(flat)
    ids, vectors = (
        np.concatenate(side) for side in zip(*Segment(segment, manifest.segments[0]).iter_parts())
    )
    vectors = vectors.astype(np.float32, copy=False)
    rng = np.random.default_rng(0)
    queries = vectors[rng.choice(len(vectors), QUERIES, replace=False)]
    queries += rng.normal(0, 0.02, queries.shape).astype(np.float32)  # near, not equal, to rows
    faiss.normalize_L2(queries)
    truth = ids[ExactSearch(vectors, "dot").search(queries, 10)[1]]
    nprobe = manifest.index.search_params["nprobe"]
    fp16 = faiss.IndexIVFScalarQuantizer(
        ivf.quantizer, ivf.d, ivf.nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
    )
    fp16.train(vectors[:1000])  # fp16 codes need no statistics; the centroids are shared
    fp16.add_with_ids(vectors, ids)
    faiss.omp_set_num_threads(1)
    rows, figures = (
        [],
        {
            "benchmark": "ivf_code_search",
            "index": args.index,
            "rows": len(vectors),
            "nprobe": nprobe,
            "queries": QUERIES,
            "structures": {},
            "command": "python benchmarks/ivf_code_search.py " + " ".join(sys.argv[1:]),
        },
    )
    for name, index in ((f"IVF{ivf.nlist},Flat", ivf), (f"IVF{ivf.nlist},SQfp16", fp16)):
        index.nprobe = nprobe
        index.search(queries[:20], 10)
        started = time.thread_time()
        found = np.concatenate([index.search(queries[i : i + 1], 10)[1] for i in range(QUERIES)])
        ms = 1000 * (time.thread_time() - started) / QUERIES
        recall = recall_at_k(found, truth, 10)
        size_mib = (index.ntotal * (index.code_size + 8)) / 2**20
        figures["structures"][name] = {
            "ms_per_query": round(ms, 3),
            "recall_at_10": round(recall, 4),
            "lists_mib": round(size_mib, 1),
        }
        rows.append([name, f"{ms:.2f}", f"{recall:.4f}", f"{size_mib:.0f}"])
    figures["environment"] = environment()
    record(args, "ivf_code_search", figures)
    print(markdown_table(["structure", "ms per query (1 thread)", "recall@10", "lists MiB"], rows))


if __name__ == "__main__":
    main()
