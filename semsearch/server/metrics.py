"""What `GET /metrics` reports, in Prometheus' text format (the `prometheus_client` library).

Each app gets its own registry, so two servers in one process (tests) count apart.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServerMetrics:
    """Requests, errors, latency, encoder batch sizes and each index's generation and rows."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "semsearch_requests",
            "HTTP requests answered",
            ["route", "status"],
            registry=self.registry,
        )
        self.errors = Counter(
            "semsearch_errors",
            "Requests answered with a 4xx or 5xx",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "semsearch_request_seconds",
            "Time to answer a request",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "semsearch_encoder_batch_texts",
            "Texts per encoder call",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.generation = Gauge(
            "semsearch_index_generation",
            "The generation each index answers from",
            ["index"],
            registry=self.registry,
        )
        self.rows = Gauge(
            "semsearch_index_rows", "Live rows of each index", ["index"], registry=self.registry
        )
        self.healthy = Gauge(
            "semsearch_index_healthy",
            "1 when the index answers, 0 when broken",
            ["index"],
            registry=self.registry,
        )

        self._recall_metrics()

    def _recall_metrics(self) -> None:
        """The live recall monitor's (server/recall_monitor.py): each index's rolling
        recall@10, the sampled queries behind it, its 95 % interval and target."""
        per_index = {
            "recall_at_10": "Rolling recall@10 of sampled served queries against exact search",
            "recall_sampled_queries": "Sampled queries behind semsearch_recall_at_10",
            "recall_at_10_low": "Lower end of the recall's 95 % Wilson interval",
            "recall_at_10_high": "Upper end of the recall's 95 % Wilson interval",
            "recall_target": "The recall@10 below which the monitor warns",
        }
        self.recall = {
            name: Gauge(f"semsearch_{name}", doc, ["index"], registry=self.registry)
            for name, doc in per_index.items()
        }
        self.recall_samples = Counter(
            "semsearch_recall_samples",
            "Queries sampled for the recall monitor, by outcome (measured, dropped)",
            ["index", "outcome"],
            registry=self.registry,
        )
        self.recall_cpu = Counter(
            "semsearch_recall_monitor_cpu_seconds",
            "CPU time the recall monitor's thread spent",
            registry=self.registry,
        )

    def observe_recall(
        self, index: str, recall: float, queries: int, low: float, high: float, target: float
    ) -> None:
        values = (recall, queries, low, high, target)
        for gauge, value in zip(self.recall.values(), values):
            gauge.labels(index).set(value)
        self.recall_samples.labels(index, "measured").inc()

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        if status >= 400:
            self.errors.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
