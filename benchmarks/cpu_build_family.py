"""The CPU build family: `semsearch build` beside a sentence-transformers + FAISS script.

`side_by_side` (`cpu_build`, issue 47) times two whole processes on the same model folder
and the first `rows` PyPI summaries, rounds alternating: `semsearch build` (its `--json`
carries the phase table) and the script a user would write with sentence-transformers on its
OpenVINO backend (batch `peer_batch_size`, texts sorted by length as `encode` sorts them),
normalised vectors into the FAISS index semsearch chooses at that size, written to disk with
the rows as Parquet. Each side's OpenVINO export is made before any clock starts (semsearch's
in its cache, the peer's `save_pretrained` into a copy of the model folder), as a second run
finds it. Then, untimed, the cosine of each side's vectors to sentence-transformers' torch
fp32 vectors on a sample.

optimum-intel pins another transformers than semsearch's, so the peer runs on its own
interpreter (`peer_python`): a virtualenv over the project's, made as

    python -m venv --system-site-packages /work/cache/stov-venv
    /work/cache/stov-venv/bin/pip install --no-deps optimum-intel==2.2.0 optimum==2.3.0 \\
        openvino-tokenizers==2026.4.1.0 transformers==5.5.4 tokenizers==0.22.2 \\
        huggingface-hub==1.21.0
    echo "import site; site.addsitedir('$VIRTUAL_ENV/lib/python3.11/site-packages')" \\
        > /work/cache/stov-venv/lib/python3.11/site-packages/zz_project.pth

(the last line: the project's packages after the venv's own, when the project's venv is not
the system Python). Without it the run measures semsearch alone and says why.

    flock /work/cache/bench.lock python benchmarks/runner.py run cpu_build
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
from pathlib import Path

import numpy as np
from common import cosine_stats, reference_model_path, run_timed, sample_rows

INDEX_NAME = "pypi-cpu-build"

# The peer: the user's script. Marks between its steps; its first mark is the first line
# run, so the interpreter's own start is the process' wall time less their sum.
PEER = r"""
import json, sys, time
marks = [("started", time.perf_counter())]
def mark(name): marks.append((name, time.perf_counter()))
import faiss, pyarrow.parquet as pq
from sentence_transformers import SentenceTransformer
mark("import")
corpus, model, out, batch, threads, factory = sys.argv[1:7]
table = pq.read_table(corpus, columns=["name", "summary"])
texts = table.column("summary").to_pylist()
mark("read")
config = {"INFERENCE_NUM_THREADS": int(threads), "PERFORMANCE_HINT": "LATENCY"}
st = SentenceTransformer(model, device="cpu", backend="openvino", model_kwargs={"ov_config": config})
mark("load")
vectors = st.encode(texts, batch_size=int(batch), normalize_embeddings=True, show_progress_bar=False)
mark("encode")
index = faiss.index_factory(vectors.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
index.train(vectors)
index.add(vectors)
mark("index")
faiss.write_index(index, out + "/index.faiss")
pq.write_table(table, out + "/rows.parquet")
mark("write")
print(json.dumps({b[0]: round(b[1] - a[1], 3) for a, b in zip(marks, marks[1:])}))
"""

PEER_CHECK = "import optimum.intel.openvino, sentence_transformers, faiss"

# The peer's model folder: the same weights with sentence-transformers' OpenVINO export saved
# beside them, as its docs show for a model loaded more than once.
PEER_EXPORT = """
import sys
from sentence_transformers import SentenceTransformer
SentenceTransformer(sys.argv[1], device="cpu", backend="openvino").save_pretrained(sys.argv[1])
"""


def side_by_side(context) -> dict:
    """`cpu_build`: both builds as whole processes, `rounds` each, alternating; the best
    round of each, the ratio, semsearch's phases, the peer's split and the cosines."""
    p = context.params
    model = Path(p["model"] or reference_model_path())
    corpus = context.cache.corpus_file("pypi", p["rows"], ["name", "summary"])
    scratch = context.out_dir / "cpu_build"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    env = _environment(scratch)
    threads = p["threads"] or len(os.sched_getaffinity(0))
    peer_missing = _peer_missing(p["peer_python"], env)
    peer_model = None if peer_missing else _peer_model(p["peer_python"], model, scratch, env)
    (scratch / "peer.py").write_text(PEER, encoding="utf-8")
    # Untimed: semsearch's OpenVINO export made into its cache, as a second build finds it.
    warm = context.cache.corpus_file("pypi", 64, ["name", "summary"])
    _semsearch(p, warm, scratch / "warm", env, warm_up=True)
    runs: dict[str, list[dict]] = {"semsearch": [], "peer": []}
    for number in range(p["rounds"]):
        sides = ["semsearch", "peer"] if number % 2 == 0 else ["peer", "semsearch"]
        for side in sides:
            out = scratch / f"{side}-{number}"
            if side == "semsearch":
                runs[side].append(_semsearch(p, corpus, out, env))
            elif peer_model is not None:
                factory = runs["semsearch"][-1]["factory"] if runs["semsearch"] else "Flat"
                runs[side].append(_peer(p, peer_model, corpus, out, env, threads, factory))
    line = _summary(p, runs, threads, peer_missing)
    line["cosine_to_st_fp32"] = _cosines(p, model, corpus, scratch, runs)
    shutil.rmtree(scratch, ignore_errors=True)  # 2 x 60 MB a round
    _print(line)
    return line


def _environment(scratch: Path) -> dict[str, str]:
    """Both children's environment: bytecode cached as an installed package has it (this
    machine sets PYTHONDONTWRITEBYTECODE), semsearch's exports in a cache of the run's own."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["SEMSEARCH_CACHE_DIR"] = str(scratch / "semsearch-cache")
    return env


def _peer_missing(python: str, env: dict[str, str]) -> str | None:
    """Why the peer cannot run (None: it can)."""
    if not Path(python).is_file():
        return f"no interpreter at {python} (see this module's docstring)"
    ran = run_timed([python, "-c", PEER_CHECK], quiet=True, check=False, env=env)
    return f"{python}: {ran['error']}" if "error" in ran else None


def _peer_model(python: str, model: Path, scratch: Path, env: dict[str, str]) -> Path:
    """A copy of `model` with sentence-transformers' OpenVINO export saved in it (untimed)."""
    folder = scratch / "peer-model"
    shutil.copytree(model, folder)
    run_timed([python, "-c", PEER_EXPORT, str(folder)], quiet=True, env=env)
    return folder


def _semsearch(p: dict, corpus: Path, out: Path, env: dict, warm_up: bool = False) -> dict:
    """One `semsearch build` process: its wall seconds, the phases its `--json` printed."""
    command = [sys.executable, "-m", "semsearch", "build", str(corpus), "--name", INDEX_NAME]
    name = str(p["model"] or "default")  # as a user names it: the bundled folder, `model`
    command += ["--text-column", "summary", "--id-column", "name", "--model", name]
    command += ["--out-dir", str(out), "--json"]
    command += ["--lexical" if p["lexical"] else "--no-lexical"]
    ran = run_timed(command, quiet=True, env=env)
    if warm_up:
        return {}
    manifest = json.loads(ran["stdout"][ran["stdout"].index("{") :])
    timed = manifest["operation"]["phases"]
    return {
        "wall_s": round(ran["seconds"], 3),
        # the interpreter's start, imports and exit: the process outside the build's timer
        "outside_timer_s": round(ran["seconds"] - timed["wall_s"], 3),
        "phases": timed,
        "runtime": manifest["operation"].get("runtime"),
        "factory": manifest["index"]["factory"],
        "rows": manifest["rows"],
        "index": str(out / INDEX_NAME),
    }


def _peer(
    p: dict, model: Path, corpus: Path, out: Path, env: dict, threads: int, factory: str
) -> dict:
    """One run of the peer script: its wall seconds and the split it printed."""
    out.mkdir(parents=True)
    arguments = [str(corpus), str(model), str(out), str(p["peer_batch_size"]), str(threads)]
    script = str(out.parent / "peer.py")
    ran = run_timed([p["peer_python"], script, *arguments, factory], quiet=True, env=env)
    split = json.loads(ran["stdout"].strip().splitlines()[-1])
    split = {"start": round(ran["seconds"] - sum(split.values()), 3), **split}
    return {"wall_s": round(ran["seconds"], 3), "split": split, "index": str(out / "index.faiss")}


def _summary(p: dict, runs: dict, threads: int, peer_missing: str | None) -> dict:
    """The best round of each side (interference on a shared machine only adds time)."""
    best = {side: min(r, key=lambda run: run["wall_s"]) for side, r in runs.items() if r}
    ours = best["semsearch"]
    phases = ours["phases"]["phases"]
    line = {
        "rows": ours["rows"],
        "threads": threads,
        "factory": ours["factory"],
        "runtime": ours["runtime"],
        "lexical": p["lexical"],
        "semsearch_s": ours["wall_s"],
        "semsearch_rounds_s": [run["wall_s"] for run in runs["semsearch"]],
        "semsearch_phases": ours["phases"],
        "semsearch_outside_timer_s": ours["outside_timer_s"],
        "semsearch_not_encoding_s": round(ours["wall_s"] - phases.get("encode", 0.0), 3),
    }
    if "peer" in best:
        peer = best["peer"]
        line.update(
            peer_s=peer["wall_s"],
            peer_rounds_s=[run["wall_s"] for run in runs["peer"]],
            peer_split=peer["split"],
            peer_batch_size=p["peer_batch_size"],
            peer_not_encoding_s=round(peer["wall_s"] - peer["split"]["encode"], 3),
            ratio=round(peer["wall_s"] / ours["wall_s"], 3),
            median_ratio=round(
                statistics.median(r["wall_s"] for r in runs["peer"])
                / statistics.median(r["wall_s"] for r in runs["semsearch"]),
                3,
            ),
        )
    else:
        line["peer_missing"] = peer_missing
    return line


def _cosines(p: dict, model: Path, corpus: Path, scratch: Path, runs: dict) -> dict:
    """(mean, min) cosine of each side's stored vectors to sentence-transformers' torch fp32
    vectors of the same `sample` rows."""
    import faiss
    import pyarrow.parquet as pq
    from sentence_transformers import SentenceTransformer

    from semsearch.store.folders import IndexFolder
    from semsearch.training.vectors import index_vectors

    texts = pq.read_table(corpus, columns=["summary"]).column("summary").to_pylist()
    rows = np.sort(sample_rows(len(texts), p["sample"]))
    anchor = SentenceTransformer(str(model), device="cpu")
    wanted = anchor.encode([texts[i] for i in rows], batch_size=64, normalize_embeddings=True)
    cosines = {"sample": len(rows), "max_seq_length": anchor.max_seq_length}
    ours = index_vectors(IndexFolder(Path(runs["semsearch"][0]["index"])))
    if len(ours) == len(texts):  # every row has a summary: stored in corpus order
        cosines["semsearch"] = cosine_stats(ours[rows], wanted)
    if runs["peer"]:
        index = faiss.read_index(runs["peer"][0]["index"])
        cosines["peer"] = cosine_stats(np.stack([index.reconstruct(int(i)) for i in rows]), wanted)
    return cosines


def _print(line: dict) -> None:
    """The two sides, the ratio and semsearch's phases, as a person reads them."""
    print(f"semsearch build: {line['semsearch_s']:.2f} s (rounds {line['semsearch_rounds_s']})")
    phases = line["semsearch_phases"]["phases"]
    print("  outside the timer (start, imports, exit):", line["semsearch_outside_timer_s"])
    for name, seconds in phases.items():
        print(f"  {name}: {seconds:.3f}")
    if "peer_s" in line:
        print(f"peer script: {line['peer_s']:.2f} s (rounds {line['peer_rounds_s']})")
        print("  " + ", ".join(f"{k} {v:.2f}" for k, v in line["peer_split"].items()))
        print(f"ratio (peer / semsearch): {line['ratio']:.2f}x")
    else:
        print("no peer:", line["peer_missing"])
    print("cosine to sentence-transformers fp32:", line["cosine_to_st_fp32"])
