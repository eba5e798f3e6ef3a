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
`sweserve export --format swebench --build-images` builds it), `eval_script` (restore the hidden test files,
apply test_patch, run the tests with sweserve's outcome recorder and print each outcome as pytest's `-rA`
summary does), `log_parser` = parse_log_pytest
and `eval_type` = pass_and_fail. So `python -m swebench.harness.run_evaluation -d DIR/test.jsonl -p
PREDICTIONS` grades predictions against sweserve tasks with SWE-bench's own harness.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

from sweserve.dataset.in_image import PYTEST_WORDS, harness_sources, hidden_test_command, test_env
from sweserve.dataset.patches import INTERPRETER_HOOKS, apply_command, touched_paths
from sweserve.models import TaskBundle

SWEBENCH_COLUMNS = (
    "instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
    "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit",
)
HARNESS_COLUMNS = ("image", "eval_script", "log_parser", "eval_type")  # what swebench's harness grades with
SWESERVE_COLUMNS = (
    "family", "profile", "title", "pr_number", "merge_commit", "resources", "test", "quality", "validation_status",
)
IN_BOX = "/tmp/sweserve"
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"  # swebench.harness.constants


def _heredoc(text: str, target: str, tag: str) -> str:
    while tag in text:
        tag += "_"
    body = text if text.endswith("\n") else text + "\n"
    return f"cat > {target} <<'{tag}'\n{body}{tag}"


def eval_script(bundle: TaskBundle) -> str:
    """SWE-bench's eval.sh shape: run after the prediction is applied in /testbed of the task image."""
    task = bundle.task
    hidden = sorted(touched_paths(bundle.tests_patch))
    quoted = " ".join(shlex.quote(p) for p in hidden)
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in test_env(task, IN_BOX, f"{IN_BOX}/outcomes.json").items())
    printer = ("import json,sys; o=json.load(open(sys.argv[1]))['outcomes']; w=" + json.dumps(PYTEST_WORDS)
               + "; [print(w.get(v, 'FAILED'), k) for k, v in sorted(o.items())]; sys.exit(int(sys.argv[2]))")
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        "cd /testbed",
        "# the hidden test files as the task defines them: the prediction's edits to them are undone",
        f"for f in {quoted}; do if git cat-file -e {task.base_commit}:\"$f\" 2>/dev/null; "
        f"then git checkout {task.base_commit} -- \"$f\"; else rm -f \"$f\"; fi; done",
        "# interpreter hooks the prediction added or changed (sitecustomize.py, conftest.py, ...) are undone too",
        f"while IFS= read -r f; do case \"${{f##*/}}\" in {'|'.join(INTERPRETER_HOOKS)}) "
        f"if git cat-file -e {task.base_commit}:\"$f\" 2>/dev/null; then git checkout {task.base_commit} -- \"$f\"; "
        f"else rm -f \"$f\"; fi;; esac; done < <(git -c core.quotepath=off diff --name-only {task.base_commit}; "
        "git -c core.quotepath=off ls-files --others --exclude-standard)",
        f"mkdir -p {IN_BOX}",
        _heredoc(bundle.tests_patch, f"{IN_BOX}/tests.patch", "SWESERVE_TESTS_PATCH"),
        apply_command(f"{IN_BOX}/tests.patch"),
        *(_heredoc(src, f"{IN_BOX}/{name}", "SWESERVE_HARNESS") for name, src in harness_sources().items()),
        f"cd {shlex.quote(str(Path('/testbed') / task.test.workdir))}",
        f"rm -f {IN_BOX}/outcomes.json",
        f"env {env} {hidden_test_command(task, IN_BOX)} > {IN_BOX}/test-output.txt 2>&1",
        "rc=$?",
        f": '{START}'",
        f"/usr/bin/python3 -c {shlex.quote(printer)} {IN_BOX}/outcomes.json $rc",
        f": '{END}'",
        f"cat {IN_BOX}/test-output.txt",
        "cd /testbed",
        f"for f in {quoted}; do if git cat-file -e {task.base_commit}:\"$f\" 2>/dev/null; "
        f"then git checkout {task.base_commit} -- \"$f\"; else rm -f \"$f\"; fi; done",
    ]
    return "\n".join(lines) + "\n"

DATASET_NAME = "sweserve"


def swebench_row(bundle: TaskBundle, image_tag: str = "") -> dict:
    """One task as a SWE-bench instance plus sweserve's own columns (all strings but pr_number)."""
    task = bundle.task
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
        "FAIL_TO_PASS": json.dumps(task.FAIL_TO_PASS),
        "PASS_TO_PASS": json.dumps(task.PASS_TO_PASS),
        "environment_setup_commit": task.base_commit,
        "image": image_tag,
        "eval_script": eval_script(bundle),
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


def export_swebench(bundles: Iterable[TaskBundle], out_dir: Path, image_tags: Mapping[str, str] | None = None,
                    split: str = "test") -> dict[str, Path]:
    """Write <out_dir>/<split>.jsonl and <out_dir>/<split>.parquet; returns the paths by format.

    `<split>.parquet` is the layout `load_swebench_dataset(out_dir, split)` looks for in a folder.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    image_tags = image_tags or {}
    rows = [swebench_row(b, image_tags.get(b.task.task_id, "")) for b in bundles]
    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = out_dir / f"{split}.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    columns = SWEBENCH_COLUMNS + HARNESS_COLUMNS + SWESERVE_COLUMNS
    schema = pa.schema([(c, pa.int64() if c == "pr_number" else pa.string()) for c in columns])
    table = pa.Table.from_pylist(rows, schema=schema)
    parquet = out_dir / f"{split}.parquet"
    pq.write_table(table, parquet)
    return {"jsonl": jsonl, "parquet": parquet}
