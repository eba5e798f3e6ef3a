"""What a trial costs, and what a hostile candidate can make the harness hold, measured in one run.

    python benchmarks/trial_overhead.py [--tasks N] [--baseline GIT_REV] [--rounds R]

1. Per-task cost of a null-agent trial (candidate sandbox; the grade sandbox, started meanwhile, takes the
   submission and runs the hidden tests) against the floor of `docker run --rm IMAGE true`, as a ratio, every
   defence on (the target of issue #18: at most 3.5x). A trial is timed to its result (the verdict recorded);
   the grade sandbox's removal, which the verdict does not wait for, is waited for after it (`Context.settle`,
   untimed for the ratio, before the next floor is timed) and also shown added to the trial. `benchmarks/trial_profile.py` says where the time goes. With --baseline, the same measurement is run on
   that revision's code (a `git archive` of it, in a subprocess) and both ratios are printed.
2. Peak RSS of the sweserve process (a fresh subprocess per flood, `ru_maxrss`) while a candidate floods it:
   1.2 GB on stdout, a 60 MB submission, and, at grading, 300 MB written to the test process's real stdout at
   exit as one line (past pytest's capture, into the stream the verifier reads).

Uses the demo tasks committed in tasks/ (the demo repository is rebuilt in a temporary folder). A tree with
mutation twins (`sweserve/evaluation/twins.py`) first validates a copy of them (not timed), so that each
trial grades its twins and randomized names: against a --baseline from before them, the ratio is the cost
of twins and randomized names per trial.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK = "sweserve-demo__sglang-mini-103"
SRC = "python/sglang/srt/distributed/parallel_state.py"


def setup(tmp: Path):
    import shutil

    from sweserve.dataset.taskstore import load_all
    from sweserve.demo.fixture import build_demo_repo
    from sweserve.evaluation.context import Context

    repo = build_demo_repo(tmp / "repo")
    ctx = Context.create(tmp / "state", repo_path=repo)
    tasks = tmp / "tasks"
    shutil.copytree(ROOT / "tasks", tasks)
    bundles = [b for b in load_all(tasks) if b.task.validated]
    # the distributed task first: its checks compare literals, so it keeps twins (several demo tasks get none)
    return ctx, sorted(bundles, key=lambda b: b.task.task_id != TASK)


def with_twins(ctx, bundles: list) -> list:
    """The bundles with their twins recorded, on a tree that has them (validated once more, not timed)."""
    import importlib.util

    if not importlib.util.find_spec("sweserve.evaluation.twins") or any(b.task.twins for b in bundles):
        return bundles
    from sweserve.dataset.taskstore import load_bundle
    from sweserve.evaluation.validation import validate_all

    dirs = {b.task.task_id: b for b in bundles}
    tasks = ctx.state_dir.parent / "tasks"
    list(validate_all(ctx, tasks, bundles, runs=1))  # records each task's twins
    return [load_bundle(tasks / task_id) for task_id in dirs]


def to_result(ctx, bundle, agent, results: Path) -> tuple[object, float, float]:
    """One trial: its result, the seconds to it (the verdict recorded), and the seconds after it until the
    sandboxes it removes in the background are gone (`Context.settle`; 0 on a tree without it)."""
    from sweserve.evaluation.trial import TrialRequest, run_trial, trial_folder

    t0 = time.monotonic()
    r = run_trial(ctx, TrialRequest(bundle, agent, 1, trial_folder(results, ctx.run_id, agent, bundle, 1)))
    t1 = time.monotonic()
    settle = getattr(ctx, "settle", None)
    if settle is not None:
        settle()
    return r, t1 - t0, time.monotonic() - t1


def measure_overhead(n: int) -> dict:
    from sweserve.agents.reference import NullAgent
    from sweserve.evaluation.trial import evaluate_task

    with tempfile.TemporaryDirectory() as d:
        ctx, bundles = setup(Path(d))
        try:
            bundles = with_twins(ctx, bundles[:n])
            images = [ctx.task_image(b) for b in bundles]  # built (or found) before timing
            evaluate_task(ctx, bundles[0], NullAgent(), results_path=Path(d) / "warm.jsonl")
            floor, trial, settled = [], [], []
            for b, image in zip(bundles, images):
                for _ in range(FLOOR_SAMPLES):  # the floor moves most with the machine's load: sampled more
                    t0 = time.monotonic()
                    subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
                    floor.append(time.monotonic() - t0)
                r, to_verdict, settle = to_result(ctx, b, NullAgent(), Path(d) / "r.jsonl")
                trial.append(to_verdict)
                settled.append(settle)
                assert r.status == "failed", (r.status, r.reason)  # type: ignore[attr-defined]
        finally:
            ctx.close()
    f, t = statistics.median(floor), statistics.median(trial)
    twins = sum(len(getattr(b.task, "twins", [])) for b in bundles)
    return {"floor_s": round(f, 3), "trial_s": round(t, 3), "ratio": round(t / f, 2), "tasks": len(trial),
            "twins": twins, "floors": floor, "trials": trial, "settles": settled}


def merged(parts: list[dict]) -> dict:
    """Rounds of one tree's measurement as one: medians over every sample."""
    floor = [x for m in parts for x in m["floors"]]
    trial = [x for m in parts for x in m["trials"]]
    whole = [x + y for m in parts for x, y in zip(m["trials"], m.get("settles") or [0.0] * len(m["trials"]))]
    f, t, w = statistics.median(floor), statistics.median(trial), statistics.median(whole)
    return {"floor_s": round(f, 3), "trial_s": round(t, 3), "ratio": round(t / f, 2), "tasks": len(trial),
            "twins": parts[0]["twins"], "settled_s": round(w, 3), "settled_ratio": round(w / f, 2)}


FLOOR_SAMPLES = 3

FLOODS = {
    "stdout 1.2 GB": "head -c 1200000000 /dev/zero | tr '\\0' a",
    "submission 60 MB": "head -c 60000000 /dev/urandom > blob.bin",
    "grading: 300 MB on stdout at exit, one line": None,  # built in flood_agent
}


def flood_agent(name: str):
    import base64

    from sweserve.agents.command import CommandAgent
    from sweserve.demo import files

    command = FLOODS[name]
    if command is None:
        # at exit pytest has given fd 1 back: the flood reaches the exec stream the verifier parses
        evil = ("\nimport atexit, os\ndef _flood():\n    for _ in range(300):\n        os.write(1, b'x' * 2**20)\n"
                "atexit.register(_flood)\n")
        data = base64.b64encode((files.PR_DISTRIBUTED[SRC] + evil).encode()).decode()
        command = f"echo {data} | base64 -d > {SRC}"
    return CommandAgent(command, name="flood")


def measure_flood(name: str) -> dict:
    from sweserve.evaluation.trial import evaluate_task

    with tempfile.TemporaryDirectory() as d:
        ctx, bundles = setup(Path(d))
        try:
            (bundle,) = [b for b in bundles if b.task.task_id == TASK]
            ctx.task_image(bundle)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            t0 = time.monotonic()
            r = evaluate_task(ctx, bundle, flood_agent(name), results_path=Path(d) / "r.jsonl")
            line = len(r.model_dump_json())
        finally:
            ctx.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"flood": name, "status": r.status, "reason": (r.reason or "")[:80], "peak_rss_mb": round(peak, 1),
            "rss_before_mb": round(before, 1), "result_line_bytes": line, "wall_s": round(time.monotonic() - t0, 1)}


def in_subprocess(args: list[str], pythonpath: str | None = None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def baseline_tree(rev: str, dest: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=4, help="tasks timed for the overhead (default: 4)")
    p.add_argument("--baseline", default=None, help="a git revision to measure the same overhead on")
    p.add_argument("--rounds", type=int, default=1, help="measurements of each tree, alternated (default: 1)")
    p.add_argument("--no-floods", action="store_true", help="skip the memory floods")
    p.add_argument("--_overhead", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_flood", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._overhead:
        print(json.dumps(measure_overhead(args.tasks)))
        return 0
    if args._flood:
        print(json.dumps(measure_flood(args._flood)))
        return 0

    rows = []
    overhead = ["--_overhead", "--tasks", str(args.tasks)]
    with tempfile.TemporaryDirectory() as d:
        # rounds alternate the two trees, so a change in the machine's load falls on both
        base = baseline_tree(args.baseline, Path(d)) if args.baseline else None
        runs: dict[str, list[dict]] = {}
        for _ in range(args.rounds):
            if base is not None:
                runs.setdefault(f"baseline {args.baseline}", []).append(in_subprocess(overhead, str(base)))
            runs.setdefault("this tree", []).append(in_subprocess(overhead, str(ROOT)))
        rows = [(label, merged(parts)) for label, parts in runs.items()]
    load = os.getloadavg()
    print(f"null-agent trial vs `docker run --rm IMAGE true` (median per task; load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; target: at most 3.5x)")
    for label, m in rows:
        print(f"  {label:<28} floor {m['floor_s']:.2f}s  trial {m['trial_s']:.2f}s  ratio {m['ratio']:.2f}x "
              f"({m['tasks']} tasks, {m.get('twins', 0)} twins); with the background removals waited for: "
              f"{m['settled_s']:.2f}s, {m['settled_ratio']:.2f}x")
    if len(rows) == 2:
        print(f"  overhead of this tree vs baseline: {rows[1][1]['ratio'] / rows[0][1]['ratio']:.2f}x")
    if not args.no_floods:
        print("peak RSS of the sweserve process under a candidate's floods (fresh process each)")
        for name in FLOODS:
            m = in_subprocess(["--_flood", name], str(ROOT))
            print(f"  {name:<48} peak {m['peak_rss_mb']:6.1f} MB  result line {m['result_line_bytes']:>7} B  "
                  f"{m['status']}: {m['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
