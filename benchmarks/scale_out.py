"""Wall time of the same work on one Docker host and on a Ray cluster, measured in one run.

Work: 12 trials (the 6 demo tasks x the oracle and the null agent) and the validation of the 6 demo tasks
(1 run per state). Each is timed three ways:

- local, 1 worker       (LocalExecutor, threads)
- local, N workers      (LocalExecutor, N threads; N = --workers, default 2)
- Ray, two nodes        (RayExecutor on a head and a second node started here, 2 logical CPUs each, so each
                         node runs one 2-CPU demo trial at a time: 2 at once in all, like local N=2)

Both Ray nodes run on this machine and share its Docker daemon and cores, so the Ray column measures the
executor's overhead (scheduling, worker start, shipping results back), not added hardware; on a real cluster
each node brings its own cores, GPUs and Docker. Images are built before timing starts.

Run: .venv/bin/python benchmarks/scale_out.py [--workers N]   (needs Docker and Ray; a few minutes)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

MB = 1_000_000


def outcome(statuses) -> str:
    """Status counts, so a fast column is seen to have done the same work."""
    counts = Counter(statuses)
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from sweserve.agents.reference import NullAgent, OracleAgent
    from sweserve.dataset.mining import mine, open_repo
    from sweserve.dataset.profiles import load_profile
    from sweserve.dataset.taskstore import load_all
    from sweserve.demo.fixture import PROFILE, build_demo_repo
    from sweserve.evaluation.context import Context
    from sweserve.evaluation.evaluate import run_evaluation
    from sweserve.evaluation.executor import LocalExecutor
    from sweserve.evaluation.ray_executor import RayExecutor
    from sweserve.evaluation.validation import validate_all

    with tempfile.TemporaryDirectory(prefix="sweserve-scale-") as tmp:
        root = Path(tmp)
        repo = build_demo_repo(root / "repo")
        tasks = root / "tasks"
        mine(open_repo(repo), load_profile(PROFILE), tasks)
        ctx = Context.create(root / "state", repo_path=repo)
        list(validate_all(ctx, tasks, load_all(tasks), runs=1))  # builds every image; records F2P/P2P
        bundles = load_all(tasks)
        ctx.close()

        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 2, "object_store_memory": 200 * MB, "include_dashboard": False})
        cluster.add_node(num_cpus=2, object_store_memory=200 * MB)
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)

        def executors(ctx):
            return [("local, 1 worker", LocalExecutor(ctx, 1)),
                    (f"local, {args.workers} workers", LocalExecutor(ctx, args.workers)),
                    ("Ray, 2 nodes", RayExecutor(ctx))]

        rows: dict[str, list[tuple[str, float, int]]] = {"run (12 trials)": [], "validate (6 tasks)": []}
        try:
            for i, (name, _) in enumerate(executors(None)):
                ctx = Context.create(root / "state", repo_path=repo)
                executor = executors(ctx)[i][1]
                t0 = time.monotonic()
                results = []
                for agent in (OracleAgent(), NullAgent()):
                    results += run_evaluation(ctx, bundles, agent, root / f"results-{i}.jsonl", executor=executor)
                rows["run (12 trials)"].append((name, time.monotonic() - t0, outcome(r.status for r in results)))
                t0 = time.monotonic()
                outcomes = list(validate_all(ctx, tasks, bundles, runs=1, record=False, executor=executor))
                rows["validate (6 tasks)"].append((name, time.monotonic() - t0, outcome(o.status for o in outcomes)))
                ctx.close()
        finally:
            ray.shutdown()
            cluster.shutdown()

    for work, measured in rows.items():
        base = measured[0][1]
        print(f"\n{work}")
        print(f"  {'executor':18} {'wall s':>8} {'vs 1 worker':>12}  outcomes")
        for name, seconds, outcomes in measured:
            print(f"  {name:18} {seconds:8.1f} {base / seconds:11.2f}x  {outcomes}")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f} (the machine is shared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
