"""The training runner (benchmarks/train.py): its runs as data, against the registry and the CLI."""

from __future__ import annotations

import shlex
import sys
from argparse import Namespace
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the scripts import each other by bare name

import suite  # noqa: E402
import train  # noqa: E402


def test_every_run_records_into_a_registered_benchmark_with_known_evaluations() -> None:
    names = [run.name for run in train.RUNS]
    assert len(names) == len(set(names))
    registered = {benchmark.name for benchmark in suite.BENCHMARKS}
    for run in train.RUNS:
        assert run.benchmark in registered, run.name
        assert set(run.evals) <= set(train.EVALS), run.name


def test_a_run_becomes_one_semsearch_train_command(tmp_path: Path) -> None:
    args = Namespace(data_dir=Path("/data"), out_dir=tmp_path, max_steps=2)
    run = next(run for run in train.RUNS if run.name == "objective-bce")
    arguments = train.train_arguments(run, args)
    assert arguments[:2] == ["train", "stsb:/data/stsb/stsb_train.tsv.gz"]
    assert "--max-steps" in arguments and arguments[-4:] == [
        "-o",
        str(tmp_path / "models" / "objective-bce"),
        "--device",
        "cpu",
    ]
    assert "pos_weight=3.09" in arguments and "--model" in arguments
    text = shlex.join(arguments)
    assert "{" not in text


def test_the_mpnet_goal_run_keeps_its_model_name_for_the_registry(tmp_path: Path) -> None:
    """The registry's mpnet goals select lines whose model ends in stsb-cosent-mpnet."""
    args = Namespace(data_dir=Path("/data"), out_dir=tmp_path, max_steps=None)
    run = next(run for run in train.RUNS if run.name == "stsb-cosent-mpnet")
    arguments = train.train_arguments(run, args)
    assert arguments[arguments.index("-o") + 1].endswith("stsb-cosent-mpnet")
    assert arguments[arguments.index("--model") + 1] == "all-mpnet-base-v2"
