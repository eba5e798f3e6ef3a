"""Tasks as a SWE-bench dataset: one row per task with SWE-bench's columns, written as JSONL and Parquet.

SWE-bench's own loader (`swebench.harness.utils.load_swebench_dataset`) and the Hugging Face `datasets`
library read the files as they read `SWE-bench/SWE-bench`: the list columns FAIL_TO_PASS and PASS_TO_PASS
are JSON strings, as on the hub. Our own fields follow SWE-bench's columns; nested ones (resources,
quality, test spec) are JSON strings too, so every row has the same flat schema in Parquet.

Column mapping: `patch` is the oracle, `test_patch` the hidden tests, `problem_statement` the instruction,
`version` the repo profile (what fixes the environment, as a version does in SWE-bench) and
`environment_setup_commit` the base commit (env images are built from the requirements declared there).

The columns SWE-bench's evaluation harness (swebench >= 5) reads to grade a prediction are filled too:
`image` (the sweserve task image with its tree checked out in the image, which must exist locally:
`sweserve export --format swebench --build-images` builds it), `eval_script` (sweserve's own verifier, run
inside the container: resets, test_patch, the hidden tests with their mutation twins and canaries under names
drawn in the container at run time, the tests as an unprivileged user, the verdict decided by
a root process from the outcome stream and printed as pytest's `-rA` summary does), `log_parser` =
parse_log_pytest
and `eval_type` = pass_and_fail. So `python -m swebench.harness.run_evaluation -d DIR/test.jsonl -p
PREDICTIONS` grades predictions against sweserve tasks with SWE-bench's own harness.
"""

from __future__ import annotations

import base64
import json
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from sweserve.dataset.in_image import HARNESS, VERIFY_COMMAND, harness_files
from sweserve.dataset.profiles import RepoProfile
from sweserve.errors import SweserveError
from sweserve.harness.sweserve_protocol import log_name
from sweserve.models import TaskBundle

SWEBENCH_COLUMNS = (
    "instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
    "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit",
)
HARNESS_COLUMNS = ("image", "eval_script", "log_parser", "eval_type")  # what swebench's harness grades with
SWESERVE_COLUMNS = (
    "family", "profile", "title", "pr_number", "merge_commit", "resources", "test", "quality", "validation_status",
)
SWEBENCH_PATCH = "/tmp/patch.diff"  # where swebench's harness copies the prediction before applying it
SWEBENCH_EVAL = "/eval.sh"  # where it copies this eval script (world-readable): the verifier makes it root's alone


def _write_file(text: str, target: str) -> str:
    """One line that writes `text` to `target`: base64, because swebench's harness edits the eval script line by
    line (it drops `#!/bin/bash` and `set -uxo pipefail` lines, and adds lines around its end marker)."""
    return f"echo {base64.b64encode(text.encode('utf-8')).decode('ascii')} | base64 -d > {target}"


def eval_script(bundle: TaskBundle, profile: RepoProfile, plan: str | None = None) -> str:
    """SWE-bench's eval.sh shape, run after the prediction is applied in /testbed of the task image: the harness
    written to /tmp/sweserve/harness, then sweserve's verifier (see in_image.py), which prints the graded
    outcomes between SWE-bench's markers as pytest's `-rA` summary does (all FAILED unless the run was clean)."""
    files = harness_files(bundle, profile, "swebench", SWEBENCH_PATCH, plan, private_files=[SWEBENCH_EVAL])
    lines = [
        "#!/bin/bash",
        "set -uo pipefail",
        f"rm -rf {shlex.quote(str(PurePosixPath(HARNESS).parent))} && mkdir -p {HARNESS}",
        *(_write_file(text, f"{HARNESS}/{name}") for name, text in files.items()),
        VERIFY_COMMAND,
    ]
    return "\n".join(lines) + "\n"

DATASET_NAME = "sweserve"


def _log_names(f2p: list[str], p2p: list[str]) -> tuple[list[str], list[str]]:
    """The graded ids as SWE-bench's log parser reads them (`log_name`: whitespace percent-encoded), as the
    eval script prints them; SweserveError where two would print alike."""
    names = [log_name(t) for t in f2p + p2p]
    if len(set(names)) < len(set(f2p + p2p)):
        raise SweserveError("two graded test ids print alike in SWE-bench's log (an id with whitespace, "
                            "percent-encoded, equals another): this task cannot be graded by SWE-bench's parser")
    return names[:len(f2p)], names[len(f2p):]


def swebench_row(bundle: TaskBundle, profile: RepoProfile, image_tag: str = "", plan: str | None = None) -> dict:
    """One task as a SWE-bench instance plus sweserve's own columns (all strings but pr_number); `plan`: the
    grading plan its verifier plants (evaluation/export_plan.py)."""
    task = bundle.task
    f2p, p2p = _log_names(task.FAIL_TO_PASS, task.PASS_TO_PASS)
    return {
        "instance_id": task.task_id,
        "repo": task.repo,
        "base_commit": task.base_commit,
        "patch": bundle.oracle_patch,
        "test_patch": bundle.tests_patch,
        "problem_statement": bundle.instruction,
        "hints_text": "",
        "created_at": task.created_at.isoformat().replace("+00:00", "Z"),
        "version": task.profile,
        "FAIL_TO_PASS": json.dumps(f2p),
        "PASS_TO_PASS": json.dumps(p2p),
        "environment_setup_commit": task.base_commit,
        "image": image_tag,
        "eval_script": eval_script(bundle, profile, plan),
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "family": task.family,
        "profile": task.profile,
        "title": task.title,
        "pr_number": task.pr_number,
        "merge_commit": task.merge_commit,
        "resources": task.resources.model_dump_json(),
        "test": task.test.model_dump_json(),
        "quality": task.quality.model_dump_json() if task.quality else "",
        "validation_status": task.validation.status if task.validation else "",
    }


def export_swebench(bundles: Iterable[TaskBundle], profiles: Mapping[str, RepoProfile], out_dir: Path,
                    image_tags: Mapping[str, str] | None = None, split: str = "test",
                    plans: Mapping[str, str | None] | None = None) -> dict[str, Path]:
    """Write <out_dir>/<split>.jsonl and <out_dir>/<split>.parquet; returns the paths by format.
    `plans`: each task's grading plan by task id (evaluation/export_plan.py); a task without one is graded
    with plain canaries.

    `<split>.parquet` is the layout `load_swebench_dataset(out_dir, split)` looks for in a folder.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    image_tags, plans = image_tags or {}, plans or {}
    rows = [swebench_row(b, profiles[b.task.profile], image_tags.get(b.task.task_id, ""), plans.get(b.task.task_id))
            for b in bundles]
    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = out_dir / f"{split}.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    columns = SWEBENCH_COLUMNS + HARNESS_COLUMNS + SWESERVE_COLUMNS
    schema = pa.schema([(c, pa.int64() if c == "pr_number" else pa.string()) for c in columns])
    table = pa.Table.from_pylist(rows, schema=schema)
    parquet = out_dir / f"{split}.parquet"
    pq.write_table(table, parquet)
    return {"jsonl": jsonl, "parquet": parquet}
