"""A simulated two-node cluster (`ray.cluster_utils.Cluster`): jobs joined by --address give the
local results (flat: the same rows and top-10; IVF filled as copies on both nodes: the same
recall; mining: the same pairs), and a node lost in the middle of a build costs a retry, not a row."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from distributed import conftest as support

from semsearch.ann.vector_index import prepare_vectors
from semsearch.distributed import RayOptions, build_index_on_ray, mine_index_on_ray
from semsearch.ingest.build import build_index
from semsearch.mining import MiningOptions, mine_index
from semsearch.store.folders import partial_folder

pytestmark = support.ray_tests


@pytest.fixture(scope="module")
def cluster() -> Iterator:
    """A head node and a worker node of one CPU each; tests join it through its address."""
    if not support.HAVE_RAY:
        pytest.skip("Ray is not installed")
    from ray.cluster_utils import Cluster

    # A lost node is noticed in about a second instead of Ray's default half a minute.
    health = {
        "health_check_initial_delay_ms": 0,
        "health_check_period_ms": 500,
        "health_check_failure_threshold": 2,
    }
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "_system_config": health},
    )
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()


def test_build_and_mine_on_two_nodes_give_the_local_results(
    cluster, tmp_path, tiny_model_dir, tiny_encoder
) -> None:
    corpus = support.write_corpus(tmp_path / "corpus.parquet", 400)
    settings = {"model": str(tiny_model_dir), "part_rows": 50, "index": "flat"}
    local = build_index(
        support.options(corpus, tmp_path, "local", **settings), encoder=tiny_encoder
    )
    on_ray = build_index_on_ray(
        support.options(corpus, tmp_path, "ray", **settings), RayOptions(cluster.address)
    )
    assert on_ray.manifest().operation["workers"] == 2  # one CPU actor on each node
    support.assert_same_rows(local, on_ray)
    assert support.top10(on_ray, tiny_encoder) == support.top10(local, tiny_encoder)
    ivf = {**settings, "index": "IVF4,Flat"}  # 8 parts: a copy filled on each node, then merged
    local_ivf = build_index(
        support.options(corpus, tmp_path, "local-ivf", **ivf), encoder=tiny_encoder
    )
    ray_ivf = build_index_on_ray(
        support.options(corpus, tmp_path, "ray-ivf", **ivf), RayOptions(cluster.address)
    )
    assert ray_ivf.manifest().index.factory == "IVF4,Flat"
    queries = prepare_vectors(tiny_encoder.encode(support.QUERIES * 5), "cosine")
    assert (
        abs(support.recall_at_10(ray_ivf, queries) - support.recall_at_10(local_ivf, queries))
        <= 0.005
    )
    mining = MiningOptions(top_k=3, query_chunk=32)
    ours = mine_index("local", tmp_path, mining).to_table()
    theirs = mine_index_on_ray("ray", tmp_path, mining, RayOptions(cluster.address)).to_table()
    assert theirs.drop(["score"]).equals(ours.drop(["score"]))
    np.testing.assert_array_equal(
        theirs.column("score").to_numpy(), ours.column("score").to_numpy()
    )


def test_a_node_lost_mid_build_costs_a_retry_not_a_row(cluster, tmp_path, tiny_model_dir) -> None:
    import ray

    corpus = support.write_corpus(tmp_path / "corpus.parquet", 3000)
    settings = {"model": str(tiny_model_dir), "part_rows": 20, "index": "flat"}
    parts = partial_folder(tmp_path, "big") / "segments" / "s000000"
    built: list = []
    # nodes are added from the main thread, so the job runs in another
    ray.init(address=cluster.address)
    try:
        job = threading.Thread(
            target=lambda: built.append(
                build_index_on_ray(
                    support.options(corpus, tmp_path, "big", **settings), RayOptions()
                )
            ),
            daemon=True,
        )
        job.start()
        deadline = time.monotonic() + 120
        while job.is_alive() and time.monotonic() < deadline:
            if (
                parts.is_dir()
                and len(list(parts.glob("part-*[0-9].npy"))) >= 2
                and len(support.encoder_actors()) == 2
            ):
                break  # both actors at work
            time.sleep(0.01)
        assert job.is_alive(), "the build ended before a node could be removed"
        (worker,) = [node for node in cluster.list_all_nodes() if not node.head]
        cluster.remove_node(worker)  # its raylet and the actor on it die
        cluster.add_node(num_cpus=1)  # as an autoscaler would replace it
        job.join(timeout=180)
    finally:
        ray.shutdown()
    (folder,) = built
    support.assert_every_row_once(folder, 3000)
