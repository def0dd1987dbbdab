"""Training plans: read from YAML or JSON, paths taken from the plan's folder, every mistake
one `SemsearchError` naming the dataset and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semsearch.errors import SemsearchError
from semsearch.training.plan import TrainingPlan, read_plan

PLAN_YAML = """
mixing: proportional
datasets:
  - name: sts
    source: stsb:sts.tsv.gz
    objective: cosent
  - source: pairs.parquet
    objective: mnr
    columns: {anchor: question, positive: answer}
    options: {scale: 10}
    weight: 0.5
dev:
  - {name: sts-dev, source: "stsb:sts.tsv.gz", task: sts}
"""


def test_a_yaml_plan_reads_with_paths_from_its_folder(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(PLAN_YAML)
    plan = read_plan(tmp_path / "plan.yaml")
    assert plan.mixing == "proportional" and plan.objective == "cosent+mnr"
    sts, pairs = plan.datasets
    assert sts.source == f"stsb:{tmp_path / 'sts.tsv.gz'}"
    assert (pairs.name, pairs.source) == ("dataset2", str(tmp_path / "pairs.parquet"))
    assert pairs.columns == {"anchor": "question", "positive": "answer"}
    assert (pairs.options, pairs.weight) == ({"scale": 10}, 0.5)
    assert plan.dev[0].task == "sts" and plan.test == []


def test_a_json_plan_gives_the_same_plan_and_survives_a_round_trip(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "plan.yaml").write_text(PLAN_YAML)
    (tmp_path / "plan.json").write_text(json.dumps(yaml.safe_load(PLAN_YAML)))
    from_yaml, from_json = read_plan(tmp_path / "plan.yaml"), read_plan(tmp_path / "plan.json")
    assert from_yaml == from_json
    assert TrainingPlan.from_dict(from_json.to_dict()) == from_json


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "datasets: [{source: a.parquet, objective: cosine-ish}]",
            "dataset 'dataset1': unknown objective 'cosine-ish': choose one of softmax",
        ),
        ("datasets: [{source: a.parquet, objective: mnr, colums: {}}]", "unknown key(s) colums"),
        ("datasets: [{objective: mnr}]", "lacks 'source'"),
        ("datasets: [{source: a.parquet}]", "lacks 'objective'"),
        ("datasets: []", "needs at least one dataset"),
        (
            "datasets: [{source: a.parquet, objective: mnr}]\nmixing: zigzag",
            "unknown mixing 'zigzag'",
        ),
        (
            "datasets: [{source: a, objective: mnr, name: x}, {source: b, objective: mnr, name: x}]",
            "x repeats",
        ),
        ("datasets: [{source: a, objective: mnr, weight: -1}]", "weight must be a positive number"),
        (
            "datasets: [{source: a, objective: mnr}]\ndev: [{source: b, task: ranking}]",
            "unknown task 'ranking'",
        ),
        (
            "datasets: [{source: a, objective: mnr, columns: [anchor]}]",
            "'columns' must be a mapping",
        ),
        ("datasets: {source: a}", "'datasets' must be a list"),
        ("- just\n- a list", "a training plan is a mapping"),
        ("datasets: [{source: a, objective: mnr}", "is not valid YAML"),
    ],
)
def test_plan_mistakes_are_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(SemsearchError) as error:
        read_plan(path)
    assert message in str(error.value) and str(error.value).startswith(str(path))
    assert "\n" not in str(error.value)


def test_a_missing_plan_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(SemsearchError, match="cannot read the training plan"):
        read_plan(tmp_path / "nope.yaml")
