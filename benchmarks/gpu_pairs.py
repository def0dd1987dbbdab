"""The SBERT paper's headline on a GPU: `semsearch bench pairs` with BERT-base-size models.

`--shape base` times a random model of all-mpnet-base-v2's shape (random weights change the
scores, not the work), `--shape model` the given model; the cross-encoder's pairs/s is
extrapolated to all n(n-1)/2 pairs, the bi-encoder's encode-and-mine timed end to end.

    python3 benchmarks/gpu_pairs.py --device cuda --model /tmp/model --data-dir .gpu/data
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from common import (
    add_options,
    base_parser,
    command_line,
    device_label,
    random_base_model,
    record,
    reference_model_path,
    run_timed,
)
from results_table import markdown_table

SHAPES = ("base", "model")
SHAPE_LABELS = {"base": "random BERT-base shape (12 layers, 768 hidden)"}
# Pairs (and texts) per forward pass: a GPU is fed large batches, a CPU the CLI's default.
BATCH = {"cuda": 256, "cpu": 64}


def model_for(shape: str, reference: Path, scratch: Path) -> Path:
    """The model folder `shape` names: a random BERT-base one, or the reference itself."""
    if shape == "base":
        return random_base_model(reference, scratch / "base")
    return reference


def model_label(model: Path | None) -> str:
    """How the table names `--model`: the bundled default, or the folder's name."""
    return "all-MiniLM-L6-v2 (bundled default)" if model is None else model.name


def run_bench_pairs(model: Path, out_dir: Path, args) -> dict:
    """`semsearch bench pairs` on `model` in a fresh process; the JSON it printed."""
    command = [sys.executable, "-m", "semsearch", "bench", "pairs", "--n", str(args.n)]
    command += ["--also", "", "--model", str(model), "--device", args.device]
    command += ["--data-dir", str(args.data_dir), "--out-dir", str(out_dir), "--json"]
    command += ["--batch-size", str(args.batch_size or BATCH[args.device])]
    command += ["--min-pairs", str(args.min_pairs), "--min-seconds", str(args.min_seconds)]
    output = run_timed(command)["stdout"]
    return json.loads(output[output.index("{") :])


def figure_line(shape: str, model_label: str, report: dict, args) -> dict:
    """The recorded figures of one shape, with what they ran on and the command."""
    size = report["sizes"][0]
    cross, bi = size["cross_encoder"], size["bi_encoder"]
    return {
        "device": device_label(args.device),
        "command": command_line(),
        "shape": shape,
        "model": model_label,
        "n": size["n"],
        "all_pairs": size["all_pairs"],
        "cross_encoder_pairs_per_s": round(cross["pairs_per_second"], 1),
        "cross_encoder_pairs_scored": cross["pairs_scored"],
        "cross_encoder_hours": round(cross["all_pairs_seconds"] / 3600, 3),
        "cross_encoder_extrapolated": cross["extrapolated"],
        "bi_encoder_seconds": round(bi["seconds"], 3),
        "encode_seconds": round(bi["encode_seconds"], 3),
        "search_seconds": round(bi["search_seconds"], 3),
        "speedup": round(size["speedup"], 1),
        "batch_size": report["options"]["batch_size"],
    }


def table(lines: list[dict]) -> str:
    """The README's table: each measured shape beside the paper's V100 figures."""
    rows = [
        [
            line["model"],
            line["device"],
            f"{line['n']:,}",
            f"{line['cross_encoder_pairs_per_s']:,.0f}",
            f"{line['cross_encoder_hours']:.1f} h",
            f"{line['bi_encoder_seconds']:.1f} s",
            f"{line['speedup']:,.0f}x",
        ]
        for line in lines
    ]
    rows.append(["BERT-base (SBERT paper)", "V100", "10,000", "", "about 65 h", "about 5 s", ""])
    headers = [
        "model",
        "device",
        "n",
        "cross-encoder pairs/s",
        "cross-encoder, all pairs",
        "bi-encoder (encode + mine)",
        "speed-up",
    ]
    return markdown_table(headers, rows)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    model_help = (
        "reference model folder: its tokenizer for the base shape, itself for "
        "--shape model (default: the bundled model)"
    )
    add_options(parser, model=(Path, model_help))
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--n", type=int, default=10_000, help="sentences (the paper: 10,000)")
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        action="append",
        default=None,
        help="base (random BERT-base shape) and/or model (--model as is); default: both",
    )
    add_options(
        parser,
        batch_size=(int, f"pairs and texts per forward pass (default: {BATCH})"),
        min_pairs=(20_000, "cross-encoder pairs scored at least"),
        min_seconds=(30.0, "cross-encoder scoring time at least"),
    )
    args = parser.parse_args()
    reference = Path(args.model or reference_model_path())
    if not (args.data_dir / "stsb").is_dir() and not (args.data_dir / "pypi").is_dir():
        raise SystemExit(
            f"{args.data_dir} has neither stsb/ nor pypi/: pass --data-dir "
            "(on the GPU machine, .gpu/data after gpu_carry.py)"
        )
    scratch = Path(tempfile.mkdtemp(prefix="semsearch-gpu-pairs-"))
    lines = []
    try:
        for shape in args.shape or SHAPES:
            model = model_for(shape, reference, scratch)
            report = run_bench_pairs(model, args.out_dir / f"bench_pairs_{shape}", args)
            label = SHAPE_LABELS.get(shape, model_label(args.model))
            lines.append(figure_line(shape, label, report, args))
            print(json.dumps(lines[-1]), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    record(args, "gpu_pairs", lines)
    print(table(lines))


if __name__ == "__main__":
    main()
