"""Family accuracy on hand-labelled real PRs: how often the classifier's family is the labelled one.

The labels (tests/data/family_labels.json: PR numbers and families only) were made by reading each PR's
title, changed files and diff before the multi-signal rules existed. The clones are not in this repository:
fetch sgl-project/sglang-jax and sgl-project/sglang-omni and pass their paths. Each clone is mined offline
(no lock, no GitHub) with its built-in profile into a temporary folder, and each labelled PR's task is
compared with its label, with the signals (`all`) and with changed lines under the profile's globs alone
(`paths`, today's rule before the change, with the new globs).

Run: .venv/bin/python benchmarks/family_accuracy.py --jax CLONE --omni CLONE
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_all

LABELS = Path(__file__).resolve().parent.parent / "tests" / "data" / "family_labels.json"
PROFILES = {"sgl-project/sglang-jax": "sglang-jax", "sgl-project/sglang-omni": "sglang-omni"}


def measure(repo: str, clone: Path, labels: dict[str, str], weights: dict[str, float] | None) -> dict:
    profile = load_profile(PROFILES[repo]).model_copy(update={"lock": False})
    if weights is not None:
        profile = profile.model_copy(update={"family_weights": weights})
    with tempfile.TemporaryDirectory() as tmp:
        mine(open_repo(clone), profile, Path(tmp))
        tasks = {str(b.task.pr_number): b.task for b in load_all(Path(tmp))}
    right = confident = confident_right = 0
    wrong = []
    for number, label in labels.items():
        task = tasks.get(number)
        family = task.family if task else None
        ok = family == label
        right += ok
        if task and task.family_confident:
            confident += 1
            confident_right += ok
        if not ok:
            wrong.append(f"#{number} {label} -> {family}" + (" (confident)" if task and task.family_confident else ""))
    return {"labelled": len(labels), "right": right, "confident": confident, "confident_right": confident_right,
            "wrong": wrong}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jax", type=Path)
    ap.add_argument("--omni", type=Path)
    args = ap.parse_args()
    data = json.loads(LABELS.read_text())
    clones = {"sgl-project/sglang-jax": args.jax, "sgl-project/sglang-omni": args.omni}
    paths_only = {"paths": 1.0, "roles": 0.0, "tests": 0.0, "tags": 0.0, "title": 0.0, "labels": 0.0}
    for repo, clone in clones.items():
        if clone is None:
            continue
        for name, weights in (("paths", paths_only), ("all", None)):
            r = measure(repo, clone, data[repo], weights)
            print(f"{repo} [{name}]: {r['right']}/{r['labelled']} right ({r['right'] / r['labelled']:.0%}); "
                  f"confident {r['confident']}/{r['labelled']}, of which right {r['confident_right']}")
            for line in r["wrong"]:
                print(f"   {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
