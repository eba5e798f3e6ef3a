"""Where a null trial's time goes, container by container and step by step, measured in one run.

    python benchmarks/trial_profile.py [--tasks N]

Times every trial of the null agent on the demo tasks (as benchmarks/trial_overhead.py does, every defence
on) and, inside each, every step the Docker backend takes: image checks, container create/start (network,
create, start, the tree's checkout), each exec round trip, each tar copy in and out, file reads, teardown,
and the host-side disk watchdog's polls (a thread beside the trial: its count and time, not on the path).
A trial is timed to its result; the grade sandbox's removal in the background (~ steps
after the result) is waited for apart and shown apart. Steps are timed by wrapping the backend's methods; nested steps are shown under their parent and only
top-level steps add up to a trial. Prints the median trial's timeline, the median per step across trials,
the floor (`docker run --rm IMAGE true`, timed next to each trial), the ratio and the load average.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


class Recorder:
    """Steps as (depth, role, step, seconds, start), per trial; watchdog polls counted apart."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.steps: list[tuple[int, str, str, float, float]] = []
        self.polls = [0, 0.0]
        self.lock = threading.Lock()
        self.main = threading.get_ident()

    def wrap(self, cls, name: str, step: str, role_of=None) -> None:
        original = getattr(cls, name)
        rec = self

        @functools.wraps(original)
        def timed(*args, **kwargs):
            depth_holder = rec.local  # per thread: a helper thread's steps (a start in the background) nest apart
            depth = getattr(depth_holder, "depth", 0)
            depth_holder.depth = depth + 1
            t0 = time.monotonic()
            try:
                return original(*args, **kwargs)
            finally:
                dt = time.monotonic() - t0
                depth_holder.depth = depth
                role = role_of(args, kwargs) if role_of else ""
                thread = "" if threading.get_ident() == rec.main else "~"
                with rec.lock:
                    rec.steps.append((depth, thread + role, step, dt, t0))

        setattr(cls, name, timed)

    def take(self) -> list[tuple[int, str, str, float, float]]:
        with self.lock:
            steps, self.steps = sorted(self.steps, key=lambda s: s[4]), []
        return steps


def box_role(args, kwargs) -> str:
    box = args[0]
    container = getattr(box, "container", None)
    labels = getattr(container, "labels", None) or {}
    return labels.get("sweserve.role", "?")


def instrument() -> Recorder:
    from sweserve.environment import docker_sandbox, images, transfer
    from sweserve.evaluation import prerequisites, trial

    rec = Recorder()
    DS = docker_sandbox.DockerSandbox

    def start_role(args, kwargs) -> str:
        return kwargs.get("role", "?")

    rec.wrap(DS, "start", "sandbox start (network+create+start+checkout)", start_role)
    rec.wrap(DS, "_check_out_tree", "checkout of /testbed (exec)", box_role)
    rec.wrap(DS, "exec", "exec round trip", box_role)
    rec.wrap(DS, "read_file", "read_file", box_role)
    rec.wrap(DS, "put_file", "put_file", box_role)
    rec.wrap(DS, "kill", "kill", box_role)
    rec.wrap(DS, "remove", "teardown (remove container+network)", box_role)
    rec.wrap(transfer, "export_tree", "tar copy out", box_role)
    rec.wrap(transfer, "put_tree", "tar copy in", box_role)
    # copy_tree_out/in import transfer's functions at call time: the wrapped module attributes are used
    rec.wrap(docker_sandbox, "sandbox_network", "network create", lambda a, k: a[3] if len(a) > 3 else "?")
    rec.wrap(images.ImageBuilder, "task", "image check (task image present?)")
    rec.wrap(images.ImageBuilder, "_present", "image inspect")
    rec.wrap(prerequisites, "check_prerequisites", "prerequisites (export, task files)")
    trial.check_prerequisites = prerequisites.check_prerequisites
    for name, step in [("candidate_phase", "candidate phase"), ("grade_submission", "grading phase"),
                       ("solve_and_grade_submission", "submission + grading phase")]:
        if hasattr(trial, name):
            rec.wrap(trial, name, step)
    from sweserve.evaluation import submission
    for name in ("take_submission", "diff_tree", "diff_then"):
        if hasattr(submission, name):
            rec.wrap(submission, name, f"submission: {name}")
            if hasattr(trial, name):  # imported by name: the trial calls the wrapped one
                setattr(trial, name, getattr(submission, name))
    from sweserve.evaluation import verifier
    if hasattr(verifier, "prepare"):
        rec.wrap(verifier, "prepare", "grading: prepare (harness in)", lambda a, k: a[0].container
                 .labels.get("sweserve.role", "?") if hasattr(a[0], "container") else "?")
        trial.prepare = verifier.prepare
    rec.wrap(verifier, "first_look", "grading: first look (harness in, apply, list)")
    for name, step in [("reset_and_read", "grading: resets, tests.patch, read hidden files"),
                       ("reset_steps", "grading: resets planned (run in the tests' exec)")]:
        if hasattr(verifier, name):
            rec.wrap(verifier, name, step)
    if hasattr(verifier, "stage"):
        rec.wrap(verifier, "stage", "grading: plan made, first run staged")
        trial.stage = verifier.stage
    from sweserve.evaluation import grading
    rec.wrap(grading, "run_tests", "grading: hidden tests run (resets, tests.patch, plant, exec)")
    verifier.run_tests = grading.run_tests

    used = docker_sandbox.DiskWatchdog.used

    def counted(self):
        t0 = time.monotonic()
        try:
            return used(self)
        finally:
            with rec.lock:
                rec.polls[0] += 1
                rec.polls[1] += time.monotonic() - t0

    docker_sandbox.DiskWatchdog.used = counted  # type: ignore[method-assign]
    return rec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=4, help="tasks timed (default: 4)")
    p.add_argument("--rounds", type=int, default=2, help="trials per task (default: 2)")
    args = p.parse_args()
    rec = instrument()
    from trial_overhead import setup, to_result, with_twins

    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.trial import evaluate_task

    load_before = os.getloadavg()
    trials: list[tuple[float, float, list, tuple[int, float]]] = []
    settles: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        ctx, bundles = setup(Path(d))
        try:
            bundles = with_twins(ctx, bundles[:args.tasks])
            images = [ctx.task_image(b) for b in bundles]
            evaluate_task(ctx, bundles[0], NullAgent(), results_path=Path(d) / "warm.jsonl")
            rec.take()
            for _ in range(args.rounds):
                for b, image in zip(bundles, images):
                    floors = []
                    for _ in range(3):  # the floor moves most with the machine's load: sampled more
                        t0 = time.monotonic()
                        subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
                        floors.append(time.monotonic() - t0)
                    floor = statistics.median(floors)
                    rec.polls = [0, 0.0]
                    r, total, settle = to_result(ctx, b, NullAgent(), Path(d) / "r.jsonl")
                    assert r.status == "failed", (r.status, r.reason)  # type: ignore[attr-defined]
                    settles.append(settle)
                    trials.append((floor, total, rec.take(), (int(rec.polls[0]), rec.polls[1])))
        finally:
            ctx.close()
    load_after = os.getloadavg()
    floor = statistics.median(t[0] for t in trials)
    total = statistics.median(t[1] for t in trials)
    ordered = sorted(trials, key=lambda t: t[1])
    _, mid_total, mid_steps, (polls, poll_s) = ordered[len(ordered) // 2]
    print(f"null-agent trial profile: {len(trials)} trials ({args.tasks} tasks x {args.rounds})")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f} ({os.cpu_count()} cores)")
    print(f"\nthe median trial ({mid_total:.3f}s), step by step (~: in a helper thread):")
    t_first = mid_steps[0][4] if mid_steps else 0.0
    top = 0.0
    for depth, role, step, dt, t0 in mid_steps:
        if depth == 0 and not role.startswith("~"):
            top += dt
        print(f"  +{t0 - t_first:6.3f}s {'  ' * depth}{step:<52} {role:<11} {dt:6.3f}s")
    print(f"  the rest (agent, results, folders, Python; ~ steps overlap the others): {mid_total - top:.3f}s")
    print(f"  disk watchdog: {polls} polls, {poll_s:.3f}s of dockerd size queries (beside the trial)")
    per: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    for _, _, steps, _ in trials:
        seen: dict[tuple[int, str, str], float] = defaultdict(float)
        for depth, role, step, dt, _ in steps:
            seen[(depth, role.lstrip("~"), step)] += dt
        for key, dt in seen.items():
            per[key].append(dt)
    print("\nmedian per trial, summed per step and container:")
    for (depth, role, step), values in sorted(per.items(), key=lambda kv: (kv[0][0], -statistics.median(kv[1]))):
        print(f"  {'  ' * depth}{step:<52} {role:<11} {statistics.median(values):6.3f}s x{len(values)}")
    settle = statistics.median(settles)
    print(f"\nfloor (docker run --rm IMAGE true) {floor:.3f}s  trial {total:.3f}s (to its result)  "
          f"ratio {total / floor:.2f}x")
    print(f"background removals waited for after the result: {settle:.3f}s (with them: "
          f"{(total + settle) / floor:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
