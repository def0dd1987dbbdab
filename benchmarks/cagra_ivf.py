"""NVIDIA cuVS CAGRA against GPU IVF on the 841k PyPI vectors: build time, recall@10, queries/s.

Why: issue 15 asks whether CAGRA (a GPU graph index) beats the IVF index semsearch builds on
a GPU, so that semsearch offers it only if it wins. The vectors are an index folder's stored
ones (`--index-dir`/`--index`, e.g. the folder gpu_build.py leaves), a `.npy` file
(`--vectors`), or, with `--encode`, the PyPI summaries encoded once by semsearch on the GPU
and kept as `OUT_DIR/pypi_vectors.npy`. `--queries` rows are held out of the indexed rows and
searched; the truth is exact inner-product search on the GPU (torch), recall@10 tie-aware
(a row that scores as well as the exact 10th counts). For each configuration, the build time
and, at each batch size, queries/s (results copied back to the host included):

- CAGRA through `cuvs.neighbors.cagra` (torch CUDA tensors in, via __cuda_array_interface__)
  or FAISS's `GpuIndexCagra` when this FAISS has cuVS, at several `itopk_size`;
- FAISS IVF on the GPU (`index_cpu_to_gpu` of each `--ivf-factory`) at several nprobe.

One JSON line per configuration goes to `results/cagra_ivf.jsonl`. Without a GPU the script
stops with one line; `--device cpu` is a smoke run of the IVF half on faiss-cpu.

    python benchmarks/cagra_ivf.py --index-dir /tmp/gpu_build/indexes --index pypi-gpu-build
    python benchmarks/cagra_ivf.py --encode --data-dir .gpu/data --model /tmp/model
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from common import (
    add_results_option,
    base_parser,
    command_line,
    device_label,
    markdown_table,
    record,
)

from semsearch.ann.tune import rescored_recall
from semsearch.training.vectors import load_vectors as stored

K = 10
GPU_TOLERANCE = 1e-4  # exact scores from torch on a GPU round differently from FAISS's
Search = Callable[[np.ndarray], np.ndarray]  # queries -> [queries, K] row numbers (-1: none)


def load_vectors(args) -> np.ndarray:
    """The base vectors, float32 [rows, dimension], from the source the options name."""
    if args.vectors is not None or args.index is not None:
        return stored(args.vectors, args.index, args.index_dir)
    cache = args.out_dir / "pypi_vectors.npy"
    if not cache.is_file():
        import pyarrow.parquet as pq

        from semsearch.models import BiEncoder

        texts = pq.read_table(
            args.data_dir / "pypi" / "pypi_summaries.parquet", columns=["summary"]
        )
        encoder = BiEncoder.load(str(args.model), device=args.device)
        started = time.perf_counter()
        vectors = encoder.encode(texts.column("summary").to_pylist())
        print(
            f"encoded {len(vectors)} summaries in {time.perf_counter() - started:.1f} s", flush=True
        )
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache, vectors)
    return np.load(cache)


def exact_scores(base: np.ndarray, queries: np.ndarray, device: str) -> np.ndarray:
    """The exact top-K inner products of each query, best first (the library's exact k-NN)."""
    from semsearch.ann.exact import ExactSearch

    return ExactSearch(base, "dot", device).search(queries, K)[0]


def timed_searches(
    search: Search, queries: np.ndarray, batch: int, device: str
) -> tuple[np.ndarray, float]:
    """All queries searched `batch` at a time: the rows found, and queries/s."""
    search(queries[: min(batch, 100)])  # untimed: kernels and workspaces are set up
    if device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    found = np.concatenate(
        [search(queries[start : start + batch]) for start in range(0, len(queries), batch)]
    )
    return found, len(queries) / (time.perf_counter() - started)


def ivf_configs(base: np.ndarray, factory: str, nprobes: list[int], device: str):
    """(build seconds, [(params, search)]) of a FAISS IVF index trained and filled on the GPU."""
    import faiss

    started = time.perf_counter()
    index = faiss.index_factory(base.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    space = faiss.ParameterSpace()
    if device == "cuda":
        resources = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(resources, 0, index)
        space = faiss.GpuParameterSpace()
    index.train(base)
    index.add(base)
    build = time.perf_counter() - started
    nlist = index.nlist if device == "cuda" else faiss.extract_index_ivf(index).nlist

    def searcher(nprobe: int) -> Search:
        def search(queries: np.ndarray) -> np.ndarray:
            space.set_index_parameter(index, "nprobe", nprobe)
            return index.search(queries, K)[1]

        return search

    usable = [n for n in nprobes if n <= min(nlist, 2048)]  # GPU FAISS probes at most 2048 lists
    return build, [({"nprobe": n}, searcher(n)) for n in usable]


def cagra_configs(base: np.ndarray, backend: str, graph_degree: int, itopks: list[int]):
    """(build seconds, [(params, search)]) of a CAGRA graph built on the GPU."""
    if backend == "cuvs":
        from cuvs.neighbors import cagra

        dataset = torch.as_tensor(base, device="cuda")
        started = time.perf_counter()
        params = cagra.IndexParams(
            metric="inner_product",
            graph_degree=graph_degree,
            intermediate_graph_degree=2 * graph_degree,
        )
        index = cagra.build(params, dataset)
        torch.cuda.synchronize()
        build = time.perf_counter() - started

        def searcher(itopk: int) -> Search:
            search_params = cagra.SearchParams(itopk_size=itopk)

            def search(queries: np.ndarray) -> np.ndarray:
                _, neighbours = cagra.search(
                    search_params, index, torch.as_tensor(queries, device="cuda"), K
                )
                return to_host(neighbours).astype(np.int64)

            return search

        return build, [
            ({"itopk_size": n, "graph_degree": graph_degree}, searcher(n)) for n in itopks
        ]
    import faiss

    resources = faiss.StandardGpuResources()
    config = faiss.GpuIndexCagraConfig()
    config.graph_degree, config.intermediate_graph_degree = graph_degree, 2 * graph_degree
    started = time.perf_counter()
    index = faiss.GpuIndexCagra(resources, base.shape[1], faiss.METRIC_INNER_PRODUCT, config)
    index.train(base)
    build = time.perf_counter() - started

    def faiss_searcher(itopk: int) -> Search:
        search_params = faiss.SearchParametersCagra()
        search_params.itopk_size = itopk
        return lambda queries: index.search(queries, K, params=search_params)[1]

    return build, [
        ({"itopk_size": n, "graph_degree": graph_degree}, faiss_searcher(n)) for n in itopks
    ]


def to_host(array) -> np.ndarray:
    """A cuVS output (pylibraft device_ndarray, or anything with __cuda_array_interface__)."""
    if hasattr(array, "copy_to_host"):
        return np.asarray(array.copy_to_host())
    import cupy

    return cupy.asnumpy(cupy.asarray(array))


def cagra_backend(asked: str) -> str | None:
    """`cuvs` or `faiss` (GpuIndexCagra), the first present of those asked; None if neither."""
    if asked in ("auto", "cuvs"):
        try:
            import cuvs.neighbors.cagra  # noqa: F401

            return "cuvs"
        except ImportError:
            if asked == "cuvs":
                return None
    try:
        import faiss
    except ImportError:
        return None
    return "faiss" if hasattr(faiss, "GpuIndexCagra") else None


def faiss_on(device: str) -> bool:
    try:
        import faiss
    except ImportError:
        return False
    return device == "cpu" or (hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0)


def measure(method: str, backend: str, built, base, queries, truth, args) -> list[dict]:
    """One figure line per (search parameters, batch size) of a built index."""
    build_seconds, configs = built
    lines = []
    for params, search in configs:
        for batch in args.batch:
            searched = queries if batch >= len(queries) else queries[: args.small_batch_queries]
            found, qps = timed_searches(search, searched, batch, args.device)
            kth = truth[: len(searched), -1]
            recall = rescored_recall(found, searched, base, kth, "dot", GPU_TOLERANCE)
            lines.append(
                {
                    "method": method,
                    "backend": backend,
                    "params": params,
                    "batch": min(batch, len(queries)),
                    "queries": len(searched),
                    "rows": len(base),
                    "dimension": base.shape[1],
                    "build_seconds": round(build_seconds, 2),
                    "recall_at_10": round(recall, 4),
                    "queries_per_s": round(qps, 1),
                }
            )
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--index-dir", type=Path, default=None, help="folder of index folders")
    parser.add_argument("--index", default=None, help="read this index folder's stored vectors")
    parser.add_argument("--vectors", type=Path, default=None, help="or a .npy file of vectors")
    parser.add_argument(
        "--encode",
        action="store_true",
        help="or encode the PyPI summaries with semsearch (kept in OUT_DIR)",
    )
    parser.add_argument("--model", type=Path, default=None, help="model folder for --encode")
    parser.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="cpu: a smoke run of the IVF half on faiss-cpu",
    )
    parser.add_argument("--queries", type=int, default=10_000, help="rows held out as queries")
    parser.add_argument(
        "--batch", type=int, nargs="+", default=[10_000, 1], help="queries per search call"
    )
    parser.add_argument(
        "--small-batch-queries",
        type=int,
        default=1000,
        help="queries timed at batch sizes below --queries",
    )
    parser.add_argument(
        "--ivf-factory",
        action="append",
        default=None,
        help="FAISS IVF factory strings (default IVF4096,Flat; repeatable)",
    )
    parser.add_argument("--nprobe", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument(
        "--cagra-backend", choices=["auto", "cuvs", "faiss", "none"], default="auto"
    )
    parser.add_argument("--graph-degree", type=int, default=64)
    parser.add_argument("--itopk", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    add_results_option(parser)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "cagra_ivf.py needs a CUDA GPU and torch sees none: run it on the GPU machine"
        )
    if args.index is None and args.vectors is None and not args.encode:
        raise SystemExit(
            "name the vectors: --index NAME --index-dir DIR, --vectors FILE.npy or --encode"
        )
    if args.encode and args.model is None:
        from common import reference_model_path

        args.model = reference_model_path()
    backend = (
        None
        if args.device == "cpu" or args.cagra_backend == "none"
        else cagra_backend(args.cagra_backend)
    )
    ivf = faiss_on(args.device)
    if backend is None and not ivf:
        raise SystemExit(
            "neither cuVS nor FAISS with GPU support is importable here: carry the wheels"
        )
    print(
        f"CAGRA: {backend or 'not measured (no cuVS, no FAISS GpuIndexCagra)'}; "
        f"IVF: {'FAISS' if ivf else 'not measured (no GPU FAISS)'}",
        flush=True,
    )

    vectors = load_vectors(args)
    held_out = np.zeros(len(vectors), dtype=bool)
    held_out[np.random.default_rng(0).choice(len(vectors), args.queries, replace=False)] = True
    base, queries = (
        np.ascontiguousarray(vectors[~held_out]),
        np.ascontiguousarray(vectors[held_out]),
    )
    del vectors
    truth = exact_scores(base, queries, args.device)
    lines = []
    factories = (args.ivf_factory or ["IVF4096,Flat"]) if ivf else []
    for factory in factories:
        built = ivf_configs(base, factory, args.nprobe, args.device)
        lines += measure(f"ivf {factory}", "faiss", built, base, queries, truth, args)
    if backend is not None:
        built = cagra_configs(base, backend, args.graph_degree, args.itopk)
        lines += measure("cagra", backend, built, base, queries, truth, args)
    stamp = {"device": device_label(args.device), "command": command_line()}
    record(args, "cagra_ivf", [{**stamp, **line} for line in lines])
    print(
        markdown_table(
            ["method", "params", "batch", "build s", "recall@10", "queries/s"],
            [
                [
                    line["method"],
                    line["params"],
                    line["batch"],
                    line["build_seconds"],
                    line["recall_at_10"],
                    line["queries_per_s"],
                ]
                for line in lines
            ],
        )
    )


if __name__ == "__main__":
    main()
