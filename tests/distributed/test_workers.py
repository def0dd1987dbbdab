"""Sizing the encoder pool (`plan_workers`) for what a cluster reports, without Ray: one actor
per GPU with two CPU readers each; else CPU actors of up to 4 threads that fit on a node."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from semsearch.distributed import cluster
from semsearch.distributed.cluster import RayOptions, Workers, plan_workers
from semsearch.errors import SemsearchError


def _cluster(monkeypatch, *node_resources: dict) -> None:
    """Ray as `plan_workers` sees it: nodes with these resources."""
    total: dict[str, float] = {}
    for resources in node_resources:
        for name, amount in resources.items():
            total[name] = total.get(name, 0) + amount
    fake = SimpleNamespace(
        cluster_resources=lambda: total,
        nodes=lambda: [{"Alive": True, "Resources": resources} for resources in node_resources],
        data=SimpleNamespace(ActorPoolStrategy=lambda size: ("pool", size)),
    )
    monkeypatch.setattr(cluster, "require_ray", lambda: fake)


def test_one_actor_per_gpu_with_two_readers_each(monkeypatch) -> None:
    _cluster(monkeypatch, {"CPU": 16, "GPU": 2}, {"CPU": 16, "GPU": 1})
    workers = plan_workers(RayOptions())
    assert workers == Workers(3, "cuda", 1.0, 1.0)
    assert workers.actor_args() == {"compute": ("pool", 3), "num_cpus": 1.0, "num_gpus": 1.0}
    assert workers.reader_args() == {"compute": ("pool", 6), "num_cpus": 1.0}
    assert plan_workers(RayOptions(workers=8)).count == 3  # never more actors than GPUs
    assert plan_workers(RayOptions(workers=2)).count == 2
    assert plan_workers(RayOptions(), device="cpu").device == "cpu"


def test_cpu_actors_of_up_to_four_threads_that_fit_on_a_node(monkeypatch) -> None:
    _cluster(monkeypatch, {"CPU": 8}, {"CPU": 8})
    assert plan_workers(RayOptions()) == Workers(4, "cpu", 4.0, 0.0, 4)
    assert plan_workers(RayOptions(workers=2)) == Workers(2, "cpu", 8.0, 0.0, 8)
    _cluster(monkeypatch, {"CPU": 1}, {"CPU": 1})  # the simulated cluster of the tests
    assert plan_workers(RayOptions()) == Workers(2, "cpu", 1.0, 0.0, 1)
    assert plan_workers(RayOptions()).reader_args() == {"compute": ("pool", 2), "num_cpus": 0.0}
    with pytest.raises(SemsearchError, match="--device cuda but the Ray cluster has no GPU"):
        plan_workers(RayOptions(), device="cuda")
    assert Workers(4, "cpu", 2.0, 0.0, 2).at_most(3).count == 3
