"""Trials and validations on a Ray cluster: one Ray task per work item, sized by what the task needs.

`RayExecutor.map_unordered(fn, items)` is `LocalExecutor`'s contract spread over nodes. Each item (a
`TrialRequest` or `ValidateRequest`) becomes a Ray task asking for the task's CPUs, GPUs and memory, plus a
custom resource named after its hardware class when it has one (``h100``), so a GPU task lands only on a node
that declared such GPUs. The worker rebuilds the Context from `ctx.spec()` with the GPU ids Ray assigned it
(`ray.get_gpu_ids()`), and those ids, never the node's own pool, go into Docker's device request; it owns that
Context (its host) and closes it, which removes the sandboxes it started and never another worker's.

What only the driver may do stays on the driver: the worker writes its trial folder (or task.json) into a
scratch directory and ships the files back; the driver writes them where they belong and is the only writer
of the results file, so resuming works from any machine that holds it. A task whose worker or node is lost
is submitted once more; lost again, it is recorded as an error (kind `node`) naming the node. A task no live
node could ever run (more GPUs than any node has, a hardware class none declares) is never submitted, where
Ray would keep it pending forever: it is `skipped` with the reason, as the local executor skips a task needing
more GPUs than the host has. On Ctrl-C the remote tasks are cancelled and a reaper task on every node removes
the run's containers (they carry the run id).

Ray is imported lazily: sweserve works without it unless `--executor ray` is asked for.
"""

from __future__ import annotations

import dataclasses
import socket
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar

from sweserve.environment.host import reap_run
from sweserve.errors import ErrorKind, InfraError, SweserveError
from sweserve.evaluation.context import Context, ContextSpec
from sweserve.evaluation.trial import TRACEBACK_FILE, TrialRequest, record_result
from sweserve.evaluation.trial_folder import TrialFolder
from sweserve.evaluation.validation import ValidateOutcome, ValidateRequest
from sweserve.models import Resources, RunResult

Item = TypeVar("Item")
Out = TypeVar("Out")
SUBMISSIONS = 2  # a task whose node is lost runs once more, then is recorded as an error
TASK_FILE = "task.json"


def import_ray():
    try:
        import ray
    except ImportError:
        raise SweserveError("--executor ray needs Ray: pip install 'sweserve[ray]'") from None
    return ray


def ray_options(resources: Resources) -> dict[str, Any]:
    """The Ray resource request of one trial: CPUs, GPUs, memory, and its hardware class as a custom resource."""
    opts: dict[str, Any] = {
        "num_cpus": resources.cpus,
        "num_gpus": resources.gpus,
        "memory": int(resources.memory_gb * 2**30),
        "max_retries": 0,  # node loss is retried here, where the node it happened on can be named
    }
    if resources.hardware:
        opts["resources"] = {resources.hardware: resources.gpus or 0.01}
    return opts


# --- what runs on a worker, and how its files come back -----------------------------------------------------

def _stage(item: Any, scratch: Path) -> Any:
    """The item with its output location moved into scratch (the driver writes the real one)."""
    if isinstance(item, TrialRequest):
        return dataclasses.replace(item, folder=TrialFolder(scratch))
    if isinstance(item, ValidateRequest):
        return dataclasses.replace(item, task_dir=scratch, log_dir=scratch)
    return item


def _harvest(scratch: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(scratch.iterdir()) if p.is_file() and not p.name.startswith(".")}


def _land(item: Any, out: Any, files: dict[str, str], scratch: str) -> Any:
    """Write what the worker produced where it belongs; the result then names the real folder."""
    if isinstance(item, TrialRequest):
        for name, text in files.items():
            item.folder.write(name, text.replace(scratch, str(item.folder.path)))
        if isinstance(out, RunResult):
            out = out.model_copy(update={
                "trial_dir": str(item.folder.path),
                "reason": out.reason.replace(scratch, str(item.folder.path)) if out.reason else out.reason,
            })
            item.folder.write_result(out)
    elif isinstance(item, ValidateRequest):
        if TASK_FILE in files:
            item.task_dir.mkdir(parents=True, exist_ok=True)
            TrialFolder(item.task_dir).write(TASK_FILE, files[TASK_FILE])
        if TRACEBACK_FILE in files and item.log_dir is not None:  # a bug on the worker: its traceback
            TrialFolder(item.log_dir).write(TRACEBACK_FILE, files[TRACEBACK_FILE])
            if isinstance(out, ValidateOutcome) and out.reason:
                out = out.model_copy(update={"reason": out.reason.replace(scratch, str(item.log_dir))})
    return out


def _lost(ctx: Context, item: Any, why: str) -> Any:
    """The result of an item whose node was lost on every submission: an error of kind `node`."""
    return _unrun(ctx, item, "error", why)


def _unrun(ctx: Context, item: Any, status: Literal["error", "skipped"], why: str) -> Any:
    """The result of an item that never ran to its end: `error` (its node was lost) or `skipped` (no node can)."""
    kind: ErrorKind | None = "node" if status == "error" else None
    if isinstance(item, TrialRequest):  # built where every result is: redacted and capped the same way
        return record_result(ctx.run_id, item, {"status": status, "error_kind": kind, "reason": why})
    if isinstance(item, ValidateRequest):
        task = item.bundle.task
        return ValidateOutcome(task_id=task.task_id, family=task.family, status=status, error_kind=kind, reason=why)
    raise InfraError("node", why)


def unschedulable(resources: Resources, nodes: list[dict[str, float]]) -> str | None:
    """Why no node of the cluster (each node's total resources, as `ray.nodes()` gives them) can ever run a task
    asking for `resources`, worded as the local executor's skip (`needs 2 GPUs (host has 0)`); None if one can.

    Ray would keep such a task pending forever; it is skipped instead, as on a host without the GPUs."""
    ask = ray_options(resources)
    need = {"CPU": ask["num_cpus"], "GPU": ask["num_gpus"], "memory": ask["memory"], **ask.get("resources", {})}
    if any(all(node.get(name, 0) >= amount for name, amount in need.items() if amount) for node in nodes):
        return None
    most = {name: max((node.get(name, 0) for node in nodes), default=0) for name in need}
    if resources.hardware and not most[resources.hardware]:
        return f"needs {resources.hardware} hardware (no node of the cluster declares it)"
    if resources.gpus > most["GPU"]:
        return f"needs {resources.gpus} GPUs (the cluster's largest node has {most['GPU']:g})"
    if resources.hardware and need[resources.hardware] > most[resources.hardware]:
        return f"needs {resources.gpus} GPUs of {resources.hardware} (no node has that many)"
    if resources.cpus > most["CPU"]:
        return f"needs {resources.cpus:g} CPUs (the cluster's largest node has {most['CPU']:g})"
    if need["memory"] > most["memory"]:
        return f"needs {resources.memory_gb:g} GB of memory (the largest node has {most['memory'] / 2**30:.1f})"
    return (f"needs {resources.gpus} GPUs, {resources.cpus:g} CPUs and {resources.memory_gb:g} GB on one node "
            "(none has all)")


def node_totals(ray) -> list[dict[str, float]]:
    """Each live node's total resources."""
    return [dict(n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive")]


def run_on_worker(fn: Callable, item: Any, spec: ContextSpec, key: int, tracker) -> tuple[Any, dict[str, str], str]:
    """The body of every Ray task: report where it runs, rebuild the Context with Ray's GPUs, run fn."""
    import ray

    # sent, not awaited: a task blocked in ray.get gives its CPUs back to Ray, which then starts another
    # trial on them (a node ran three 2-CPU trials on 4 CPUs while the tracker actor was starting)
    tracker.started.remote(key, ray.get_runtime_context().get_node_id(), socket.gethostname())
    # a fresh Context per task: nothing (a cancelled flag, a cache) outlives the task; each sandbox makes its own
    # network (docker_sandbox.sandbox_network), so workers on one node share none
    gpus = [str(g) for g in ray.get_gpu_ids()]
    spec = spec.model_copy(update={"host": spec.host.model_copy(update={"assigned_gpus": gpus})})
    with Context.from_spec(spec) as ctx, tempfile.TemporaryDirectory(prefix="sweserve-ray-") as scratch:
        out = fn(ctx, _stage(item, Path(scratch)))
        return out, _harvest(Path(scratch)), scratch


def reap_node(run_id: str) -> list[str]:
    """Remove every container and network of the run on this node (a reaper task runs this on each node)."""
    return reap_run(run_id)


class Tracker:
    """Which node each submitted item started on, so a lost one can be named (a Ray actor on the driver's node)."""

    def __init__(self):
        self.where: dict[int, tuple[str, str]] = {}

    def started(self, key: int, node_id: str, host: str) -> None:
        self.where[key] = (node_id, host)

    def node_of(self, key: int) -> tuple[str, str] | None:
        return self.where.get(key)


# --- the driver ---------------------------------------------------------------------------------------------

class RayExecutor:
    """Runs fn(ctx, item) as Ray tasks on the cluster at `address` (None: RAY_ADDRESS, or a local one)."""

    def __init__(self, ctx: Context, address: str | None = None):
        self.ctx = ctx
        self.address = address

    def _connect(self):
        ray = import_ray()
        if not ray.is_initialized():
            try:
                ray.init(address=self.address, ignore_reinit_error=True, logging_level="WARNING",
                         log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise SweserveError(f"cannot reach the Ray cluster at {self.address or 'RAY_ADDRESS'}: {exc}") from None
        return ray

    def map_unordered(self, fn: Callable[[Context, Item], Out], items: Iterable[Item]) -> Iterator[Out]:
        ray = self._connect()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        # pinned to the driver's node, never placed elsewhere: a tracker on a worker node dies with it, and the
        # driver could then name no lost node at all
        tracker = ray.remote(num_cpus=0, max_restarts=0)(Tracker).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)).remote()
        remote = ray.remote(run_on_worker)
        spec = self.ctx.spec()
        items = list(items)
        tries = [0] * len(items)
        refs: dict[Any, int] = {}

        def submit(key: int) -> None:
            tries[key] += 1
            resources = _resources_of(items[key])
            opts = ray_options(resources) if resources else {"num_cpus": 1, "max_retries": 0}
            refs[remote.options(**opts).remote(fn, items[key], spec, key, tracker)] = key

        try:
            nodes = node_totals(ray)
            for key in range(len(items)):
                resources = _resources_of(items[key])
                if resources and (why := unschedulable(resources, nodes)):
                    yield _unrun(self.ctx, items[key], "skipped", why)  # Ray would wait for it forever
                    continue
                submit(key)
            while refs:
                (ref,), _ = ray.wait(list(refs), num_returns=1)
                key = refs.pop(ref)
                try:
                    out, files, scratch = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:  # fn itself raised: as LocalExecutor, it propagates
                    raise exc.as_instanceof_cause() from None
                except ray.exceptions.RayError as exc:  # the worker or its node died under it
                    where = _node_of(ray, tracker, key)
                    if tries[key] < SUBMISSIONS:
                        submit(key)
                        continue
                    node = f"node {where[1]} ({where[0][:12]})" if where else "an unknown node"
                    yield _lost(self.ctx, items[key], f"lost on {node} after {tries[key]} submissions: "
                                                      f"{exc.__class__.__name__}")
                    continue
                yield _land(items[key], out, files, scratch)
        except BaseException:
            self.ctx.cancel()
            for ref in list(refs):
                ray.cancel(ref, force=True)
            raise
        finally:
            self._reap_everywhere(ray)
            ray.kill(tracker)

    def _reap_everywhere(self, ray) -> None:
        """A reaper task pinned to each live node removes the run's containers there."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        reap = ray.remote(num_cpus=0, max_retries=0)(reap_node)
        refs = [reap.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(self.ctx.run_id) for n in ray.nodes() if n.get("Alive")]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=120)
        for ref in ready:
            try:
                ray.get(ref)
            except ray.exceptions.RayError:
                pass


def _node_of(ray, tracker, key: int) -> tuple[str, str] | None:
    """Where item `key` started, as the tracker heard it; None when the tracker cannot say (a busy or lost actor).

    Naming the node is a courtesy to the reader of the error: it must never turn one lost task into a lost run.
    """
    for _ in range(3):
        try:
            return ray.get(tracker.node_of.remote(key), timeout=30)
        except ray.exceptions.ActorUnavailableError:
            time.sleep(1)
        except (ray.exceptions.RayError, TimeoutError):
            return None
    return None


def _resources_of(item: Any) -> Resources | None:
    bundle = getattr(item, "bundle", None)
    return bundle.task.resources if bundle is not None else None
