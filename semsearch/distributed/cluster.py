"""Connecting to Ray and sizing the encoder pool: the one place that decides where work runs.

`ray` is imported only through `require_ray`, so `--engine ray` without the extra is one
clear line, and nothing else in semsearch ever imports it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from types import ModuleType

from semsearch.errors import SemsearchError, one_line

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install -e '.[ray]' in semsearch's folder"
# Seconds to wait for a cluster's address to answer before saying it cannot be reached.
CONNECT_TIMEOUT = 5.0
# CPUs (torch threads) of a CPU encoder actor by default, where a node has that many.
CPU_THREADS = 4


@dataclass(frozen=True)
class RayOptions:
    """Where a job runs: `address` None starts Ray on this machine for the job, "auto" joins
    the cluster `ray start` runs here, HOST:PORT a head node; `workers` is the number of
    encoder actors (default: one per GPU, or one per 4 CPUs where there is none)."""

    address: str | None = None
    workers: int | None = None
    show_progress: bool = True


def require_ray() -> ModuleType:
    """The `ray` module with Ray Data, or a one-line error saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise SemsearchError(
            f"--engine ray needs Ray Data, which is not installed ({exc.name or exc}): {INSTALL_HINT}"
        ) from None
    return ray


@dataclass(frozen=True)
class Workers:
    """The encoder actors of a job and what each reserves: one GPU each where the cluster
    has GPUs (two readers per GPU then get a CPU each), else `threads` CPUs each (as many
    readers, reserving none: they are light next to the encoder, and would wait for a CPU
    the actors hold)."""

    count: int
    device: str  # "cuda" or "cpu", for the actors' encoders
    num_cpus: float
    num_gpus: float
    threads: int = 1  # torch and FAISS threads of a CPU actor

    def reader_args(self) -> dict:
        """`map_batches` arguments for the readers: one per CPU actor reserving no CPU, or
        two per GPU actor with a CPU each."""
        ray = require_ray()
        if self.num_gpus:
            return {"compute": ray.data.ActorPoolStrategy(size=2 * self.count), "num_cpus": 1.0}
        return {"compute": ray.data.ActorPoolStrategy(size=self.count), "num_cpus": 0.0}

    def actor_args(self) -> dict:
        """`map_batches` arguments for a pool of these actors."""
        ray = require_ray()
        return {
            "compute": ray.data.ActorPoolStrategy(size=self.count),
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
        }

    def at_most(self, tasks: int) -> Workers:
        """No more actors than a job has tasks for (an idle actor still loads the model)."""
        return replace(self, count=max(1, min(self.count, tasks)))

    def describe(self) -> str:
        kind = "GPU" if self.num_gpus else "CPU"
        threads = f" of {self.threads} threads" if self.threads > 1 else ""
        return f"{self.count} {kind} actor{'s' if self.count != 1 else ''}{threads}"


def plan_workers(options: RayOptions, device: str = "auto") -> Workers:
    """One actor per GPU (or `options.workers`, at most the GPUs); else N CPU actors, by
    default one per CPU_THREADS CPUs of the smallest node, each with that many threads (on
    2 cores, 100,000 texts built in 283 s with one actor of two threads, 320 s with two of one)."""
    ray = require_ray()
    resources = ray.cluster_resources()
    gpus = int(resources.get("GPU", 0))
    cpus = max(1, int(resources.get("CPU", 1)))
    if options.workers is not None and options.workers < 1:
        raise SemsearchError(f"--workers must be at least 1, not {options.workers}")
    if device.startswith("cuda") and gpus == 0:
        raise SemsearchError(
            f"--device {device} but the Ray cluster has no GPU: use --device auto or cpu"
        )
    if gpus and device != "cpu":
        count = min(options.workers or gpus, gpus)
        return Workers(count, "cuda", 1.0, 1.0)
    node_cpus = _smallest_node_cpus(ray)
    count = options.workers or max(1, cpus // min(CPU_THREADS, node_cpus))
    if count > cpus:
        log.warning("%d workers on %d CPUs: each gets a share of a CPU", count, cpus)
        return Workers(count, "cpu", cpus / count, 0.0)
    threads = max(1, min(cpus // count, node_cpus))  # an actor's CPUs fit on one node
    return Workers(count, "cpu", float(threads), 0.0, threads)


def _smallest_node_cpus(ray: ModuleType) -> int:
    cpus = [int(node["Resources"].get("CPU", 0)) for node in ray.nodes() if node.get("Alive")]
    return min((count for count in cpus if count > 0), default=1)


@contextlib.contextmanager
def ray_session(options: RayOptions) -> Iterator[ModuleType]:
    """Ray, connected for the block: to the running instance if this process has one, else to
    `options.address` (or a new local instance), which is shut down again on leaving."""
    ray = require_ray()
    started = False
    if not ray.is_initialized():
        _check_reachable(options.address)
        verbose = logging.getLogger().getEffectiveLevel() <= logging.INFO
        if not verbose:
            _quiet_ray_start()
        try:
            ray.init(
                address=options.address,
                include_dashboard=False,
                log_to_driver=verbose,
                logging_level=logging.INFO if verbose else logging.WARNING,
            )
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            where = options.address or "this machine"
            raise SemsearchError(
                f"cannot connect to the Ray cluster at {where} ({one_line(exc)}): start one "
                "with 'ray start --head', or check --address"
            ) from None
        started = True
    _quiet_ray_data(options.show_progress)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


class RayConnection(contextlib.ExitStack):
    """Ray, joined on first use (after every check that needs no cluster) and left when the
    `with` block ends; `workers()` sizes the encoder pool for `device`."""

    def __init__(self, options: RayOptions, device: str = "auto") -> None:
        super().__init__()
        self.options = options
        self.device = device
        self._connected = False
        self._workers: dict[str, Workers] = {}

    def workers(self, device: str | None = None) -> Workers:
        """The encoder pool for `device` (default: the connection's)."""
        device = device or self.device
        if not self._connected:
            self.enter_context(ray_session(self.options))
            self._connected = True
        if device not in self._workers:
            self._workers[device] = plan_workers(self.options, device)
            log.info("Ray: %s", self._workers[device].describe())
        return self._workers[device]


def _check_reachable(address: str | None) -> None:
    """A HOST:PORT that does not answer is refused in seconds (Ray itself retries for minutes)."""
    if address in (None, "auto", "local") or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise SemsearchError(f"--address {address!r} is not HOST:PORT, 'auto' or ray://HOST:PORT")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        raise SemsearchError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or type(exc).__name__}): "
            "check --address, or start the head node with 'ray start --head'"
        ) from None


def _quiet_ray_start() -> None:
    """Ray's note that token authentication is on (as it should be) only with -v."""
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR
    )


def _quiet_ray_data(show_progress: bool) -> None:
    """Ray Data's progress bars only where ours would show, and its notes and hints only with -v."""
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = show_progress
    if logging.getLogger().getEffectiveLevel() > logging.INFO:  # its tuning hints too
        logging.getLogger("ray.data").setLevel(logging.ERROR)
