"""A run's final report in SWE-bench's shape: `<model>.<run_id>.json`, as swebench's `make_run_report` writes it.

The keys and their meaning follow swebench 5 (`swebench.harness.reporting.make_run_report`, schema_version 2):
each selected task is in exactly one of `resolved_ids`, `unresolved_ids`, `empty_patch_ids`, `error_ids`
or `incomplete_ids`, read from the first attempt's latest record:

- resolved → resolved; failed or tampered with a patch → unresolved (graded, not resolved);
- an empty submission → empty_patch (swebench never grades those);
- error, or a patch that did not apply (swebench has no report for it) → error; an error of the
  machinery (docker, image build, sandbox, network, node, git) is also an `infra_failure_ids` entry, with
  its reason in `failure_reasons`;
- skipped, or no record yet → incomplete.
"""

from __future__ import annotations

from sweserve.evaluation.results import latest
from sweserve.models import RunResult

INFRA_KINDS = {"docker", "image_build", "sandbox", "network", "node", "git"}


def swebench_model_name(model_name_or_path: str) -> str:
    """The report file's model part, as swebench spells it."""
    return model_name_or_path.replace("/", "__")


def run_report(results: list[RunResult], agent: str, selected: list[str], submitted: list[str] | None = None) -> dict:
    """The report of `agent` over the `selected` task ids (`submitted`: those it had something for; default all)."""
    first = {r.task_id: r for r in latest(results).values() if r.agent == agent and r.attempt == 1}
    ids: dict[str, set[str]] = {k: set() for k in ("completed", "resolved", "unresolved", "empty_patch", "error",
                                                   "incomplete", "infra_failure")}
    reasons: dict[str, str] = {}
    for task_id in selected:
        r = first.get(task_id)
        if r is None or r.status == "skipped":
            ids["incomplete"].add(task_id)
        elif r.status in ("error", "patch_failed"):
            ids["error"].add(task_id)
            if r.error_kind in INFRA_KINDS:
                ids["infra_failure"].add(task_id)
                reasons[task_id] = r.reason or r.error_kind
        elif not r.model_patch.strip():
            ids["empty_patch"].add(task_id)
        else:
            ids["completed"].add(task_id)
            ids["resolved" if r.status == "resolved" else "unresolved"].add(task_id)
    submitted = sorted(submitted if submitted is not None else selected)
    return {
        "total_instances": len(selected),
        "submitted_instances": len(submitted),
        "completed_instances": len(ids["completed"]),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "infra_failure_instances": len(ids["infra_failure"]),
        "ambiguous_failure_instances": 0,
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": sorted(ids["completed"]),
        "incomplete_ids": sorted(ids["incomplete"]),
        "empty_patch_ids": sorted(ids["empty_patch"]),
        "submitted_ids": submitted,
        "resolved_ids": sorted(ids["resolved"]),
        "unresolved_ids": sorted(ids["unresolved"]),
        "infra_failure_ids": sorted(ids["infra_failure"]),
        "ambiguous_failure_ids": [],
        "failure_reasons": dict(sorted(reasons.items())),
        "error_ids": sorted(ids["error"]),
        "schema_version": 2,
    }
