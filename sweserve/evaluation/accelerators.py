"""Tests that cannot run for want of a GPU or TPU: found from skip reasons and failure messages."""

from __future__ import annotations

import re

from sweserve.evaluation.grading import TestRun

ACCELERATOR = re.compile(r"\b(tpu|libtpu|gpu|cuda|nvidia|rocm|accelerator|pallas|mosaic|triton)\b", re.IGNORECASE)


def accelerator_tests(runs: list[TestRun]) -> dict[str, str]:
    """Tests that skipped or failed for want of a GPU/TPU, with the reason or error that says so."""
    found: dict[str, str] = {}
    for run in runs:
        for test_id, outcome in run.outcomes.items():
            why = run.skips.get(test_id, "") if outcome == "skipped" else run.messages.get(test_id, "")
            if outcome != "passed" and ACCELERATOR.search(why):
                found[test_id] = why.strip().splitlines()[-1][:200]
    return found


def accelerator_kind(found: dict[str, str]) -> str | None:
    if not found:
        return None
    return "tpu" if any(re.search(r"tpu|pallas|mosaic", w, re.IGNORECASE) for w in found.values()) else "gpu"
