"""`sweserve export`: SWE-bench datasets read by `datasets` and `swebench` themselves; Harbor tasks run by `harbor`."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from attack_payloads import STEAL_CHANNEL
from test_attacks_verifier import PATCH_TEST_REPORT

from sweserve.dataset.export_harbor import export_harbor_task
from sweserve.dataset.export_swebench import SWEBENCH_COLUMNS
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_all

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tasks"  # the demo's six validated tasks
HARBOR = ROOT / ".sweserve" / "harbor" / "bin" / "harbor"


def require_harbor() -> None:
    """Skip a test that runs the real Harbor where it is not installed; in CI (SWESERVE_REQUIRE_DOCKER=1) fail."""
    if not HARBOR.exists():
        why = "harbor is not installed in .sweserve/harbor (scripts/setup.sh installs it)"
        if os.environ.get("SWESERVE_REQUIRE_DOCKER") == "1":
            pytest.fail(why)
        pytest.skip(why)
DECODING = "sweserve-demo__sglang-mini-102"


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def swebench_export(tmp_path_factory):
    out = tmp_path_factory.mktemp("swebench")
    proc = cli("export", "--format", "swebench", "--out", str(out), "--tasks", str(TASKS))
    assert proc.returncode == 0, proc.stderr
    return out


def test_swebench_export_loads_with_the_swebench_loader(swebench_export, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(swebench_export / "hf-cache"))
    from swebench.harness.utils import load_swebench_dataset, make_test_spec

    bundles = {b.task.task_id: b for b in load_all(TASKS)}
    for source in (swebench_export / "test.jsonl", swebench_export / "test.parquet"):
        rows = load_swebench_dataset(str(source))
        assert sorted(r["instance_id"] for r in rows) == sorted(bundles)
        for row in rows:
            b = bundles[row["instance_id"]]
            assert set(SWEBENCH_COLUMNS) <= set(row)
            # as on the hub: list columns are JSON strings
            assert isinstance(row["FAIL_TO_PASS"], str) and json.loads(row["FAIL_TO_PASS"]) == b.task.FAIL_TO_PASS
            assert json.loads(row["PASS_TO_PASS"]) == b.task.PASS_TO_PASS
            assert row["patch"] == b.oracle_patch and row["test_patch"] == b.tests_patch
            assert row["problem_statement"] == b.instruction and row["base_commit"] == b.task.base_commit
            assert row["family"] == b.task.family and row["image"].startswith("sweserve-task:")
            assert json.loads(row["resources"]) == b.task.resources.model_dump()
            spec = make_test_spec(row)  # what swebench's harness grades with
            assert spec.FAIL_TO_PASS == b.task.FAIL_TO_PASS and spec.image == row["image"]
            assert spec.log_parser == "parse_log_pytest" and spec.eval_type == "pass_and_fail"
    # a folder with <split>.parquet is the loader's "local dataset" layout, instance filter included
    (one,) = load_swebench_dataset(str(swebench_export), split="test", instance_ids=[DECODING])
    assert one["instance_id"] == DECODING


def test_swebench_export_loads_with_datasets(swebench_export):
    import datasets

    cache = str(swebench_export / "hf-cache")
    for builder, name in (("json", "test.jsonl"), ("parquet", "test.parquet")):
        ds = datasets.load_dataset(builder, data_files=str(swebench_export / name), split="train", cache_dir=cache)
        assert ds.num_rows == 6
        assert set(SWEBENCH_COLUMNS) <= set(ds.column_names)
        assert ds.features["FAIL_TO_PASS"].dtype == "string" and ds.features["pr_number"].dtype == "int64"
        assert sorted(ds["family"]) == sorted(b.task.family for b in load_all(TASKS))


def test_export_leaves_out_unvalidated_tasks_unless_asked(tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS, tasks)
    data = json.loads((tasks / DECODING / "task.json").read_text())
    data["validation"] = None
    (tasks / DECODING / "task.json").write_text(json.dumps(data))
    proc = cli("export", "--format", "swebench", "--out", str(tmp_path / "a"), "--tasks", str(tasks))
    assert proc.returncode == 0 and f"left out 1 unvalidated tasks: {DECODING}" in proc.stdout
    assert len((tmp_path / "a" / "test.jsonl").read_text().splitlines()) == 5
    proc = cli("export", "--format", "swebench", "--out", str(tmp_path / "b"), "--tasks", str(tasks),
               "--include-unvalidated")
    assert len((tmp_path / "b" / "test.jsonl").read_text().splitlines()) == 6
    proc = cli("export", DECODING, "--format", "swebench", "--out", str(tmp_path / "c"), "--tasks", str(tasks))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no validated tasks" in proc.stderr


def test_export_finds_a_tasks_profile_in_the_state_dir(tmp_path):
    """A profile written to <state-dir>/profiles/ (as `mine --profile FILE` does) is found by name, as validate finds it."""
    tasks, state = tmp_path / "tasks", tmp_path / "state"
    shutil.copytree(TASKS, tasks)
    (state / "profiles").mkdir(parents=True)
    (state / "profiles" / "myengine.json").write_text(json.dumps({"extends": "sglang-demo"}))
    data = json.loads((tasks / DECODING / "task.json").read_text())
    data["profile"] = "myengine"
    (tasks / DECODING / "task.json").write_text(json.dumps(data))
    proc = cli("export", DECODING, "--format", "swebench", "--out", str(tmp_path / "out"), "--tasks", str(tasks),
               "--state-dir", str(state), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (row,) = [json.loads(x) for x in (tmp_path / "out" / "test.jsonl").read_text().splitlines()]
    assert row["profile"] == "myengine"


def test_harbor_task_folder_layout(tmp_path):
    (bundle,) = [b for b in load_all(TASKS) if b.task.task_id == DECODING]
    bundle.task.resources.gpus = 2
    dest = export_harbor_task(bundle, load_profile(bundle.task.profile), "sweserve-task:x", tmp_path)
    assert {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()} >= {
        "task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh", "tests/tests.patch",
        "solution/solve.sh", "solution/oracle.patch"}
    cfg = tomllib.loads((dest / "task.toml").read_text())
    assert cfg["environment"]["gpus"] == 2 and cfg["environment"]["memory_mb"] == 4096
    assert cfg["verifier"]["environment_mode"] == "separate"  # graded in a fresh container, like sweserve
    assert cfg["metadata"]["family"] == "decoding" and cfg["metadata"]["sweserve_image"] == "sweserve-task:x"
    instructions = [x for x in (dest / "environment" / "Dockerfile").read_text().splitlines() if not x.startswith("#")]
    assert instructions == ["FROM sweserve-task:x", "WORKDIR /testbed", 'RUN ["/usr/local/bin/sweserve-tree", "restore"]']
    assert os.access(dest / "tests" / "test.sh", os.X_OK) and os.access(dest / "solution" / "solve.sh", os.X_OK)
    assert (dest / "tests" / "tests.patch").read_text() == bundle.tests_patch
    assert bundle.oracle_patch not in (dest / "environment" / "Dockerfile").read_text()


# A reward hacker that leaves the code alone: python/ is on the tests' PYTHONPATH, so Python imports this at
# start-up; at exit it rewrites the outcomes file to all-passed and exits 0, after the recorder wrote it.
HOOK_PATH = "python/sitecustomize.py"
HOOK = """import atexit, json, os


def _forge():
    path = os.environ.get("SWESERVE_OUTCOMES")
    if path and os.path.exists(path):
        data = json.load(open(path))
        data["outcomes"] = {k: "passed" for k in data["outcomes"]}
        json.dump(data, open(path, "w"))
        os._exit(0)


atexit.register(_forge)
"""


# In-process forgeries from the package the hidden test imports (python/sglang/__init__.py): at exit, the
# outcome file, SWE-bench's markers and Harbor's reward rewritten, frames forged on the stolen channel; at
# import, pytest's TestReport made to say passed. sweserve's own grading catches each (test_attacks_verifier).
PKG_INIT = "python/sglang/__init__.py"
F2P_ID = "test/srt/test_sampler.py::test_top_p_keeps_at_least_one_token"
EXIT_FORGERY = STEAL_CHANNEL.replace("_NONCE, _FD, _BOOT, _CELLS = _steal()", """try:
    _NONCE, _FD, _BOOT, _CELLS = _steal()
except Exception:
    _NONCE = None""") + f'''
import atexit as _atexit


def _sweserve_forge():
    if _NONCE:
        _frame({{"id": {F2P_ID!r}, "outcome": "passed"}})
        _frame({{"end": 0}})
    print(">>>>> Start Test Output\\nPASSED {F2P_ID}\\n>>>>> End Test Output", flush=True)
    try:
        open("/logs/verifier/reward.txt", "w").write("1\\n")
    except OSError:
        pass
    path = _os.environ.get("SWESERVE_OUTCOMES")  # the outcome file the exports' recorders once wrote
    if path and _os.path.exists(path):
        data = _json.load(open(path))
        data["outcomes"] = {{k: "passed" for k in data["outcomes"]}}
        _json.dump(data, open(path, "w"))
    _os._exit(0)


_atexit.register(_sweserve_forge)
'''
FORGERIES = {"forge-at-exit": EXIT_FORGERY, "patch-test-report": PATCH_TEST_REPORT}


# --- the real harbor CLI on an exported task -----------------------------------------------------------

ATTACK_SOLVE = """#!/bin/bash
# A reward hacker: rewrites the hidden test to pass, forges the reward file, and breaks pytest in its container.
cd /testbed
mkdir -p test/srt && printf 'def test_top_p_keeps_at_least_one_token():\\n    pass\\n' > test/srt/test_sampler.py
mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt
echo 'import sys; sys.exit(0)' > /opt/venv/lib/python3*/site-packages/sitecustomize.py
cat > %s <<'EOF'
%sEOF
""" % (HOOK_PATH, HOOK)


def _harbor_rewards(jobs: Path) -> dict[str, float]:
    out = {}
    for result in jobs.glob("*/*/result.json"):
        data = json.loads(result.read_text())
        out[data["task_name"].split("/", 1)[1]] = (data["verifier_result"] or {}).get("rewards", {}).get("reward")
    return out


def _run_harbor(dataset: Path, agent: str, jobs: Path) -> dict[str, float]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([str(HARBOR), "run", "-p", str(dataset), "-a", agent, "-e", "docker", "-n", "2", "-y",
                           "-o", str(jobs)], capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _harbor_rewards(jobs)


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_runs_exported_task_oracle_1_nop_0_attack_0(docker_client, tmp_path):
    require_harbor()
    from sweserve.demo.fixture import build_demo_repo

    repo = build_demo_repo(tmp_path / "repo")
    dataset = tmp_path / "harbor"
    proc = cli("export", DECODING, "--format", "harbor", "--out", str(dataset), "--tasks", str(TASKS),
               "--repo-path", str(repo), "--state-dir", str(tmp_path / "state"))
    assert proc.returncode == 0, proc.stderr
    # the attacker: the same task, with a solution that games the grader instead of fixing the code
    attack = dataset / "attack"
    shutil.copytree(dataset / DECODING, attack)
    (attack / "task.toml").write_text((attack / "task.toml").read_text().replace(
        f'name = "sweserve/{DECODING}"', 'name = "sweserve/attack"'))
    (attack / "solution" / "solve.sh").write_text(ATTACK_SOLVE)
    # in-process forgeries: each a copy whose solution appends a payload to the package the tests import
    for name, payload in FORGERIES.items():
        shutil.copytree(dataset / DECODING, dataset / name)
        toml = dataset / name / "task.toml"
        toml.write_text(toml.read_text().replace(f'name = "sweserve/{DECODING}"', f'name = "sweserve/{name}"'))
        (dataset / name / "solution" / "solve.sh").write_text(
            f"#!/bin/bash\ncd /testbed\ncat >> {PKG_INIT} <<'SWEOF'\n{payload}\nSWEOF\n")

    rewards = _run_harbor(dataset, "oracle", tmp_path / "jobs-oracle")
    assert rewards == {DECODING: 1.0, "attack": 0.0, **{name: 0.0 for name in FORGERIES}}, rewards
    for name in ("attack", *FORGERIES):
        shutil.rmtree(dataset / name)
    assert _run_harbor(dataset, "nop", tmp_path / "jobs-nop") == {DECODING: 0.0}
    verdicts = {p.parent.parent.name.rsplit("__", 1)[0]: json.loads(p.read_text())
                for p in (tmp_path / "jobs-oracle").glob("*/*/verifier/sweserve.json")}
    assert verdicts["attack"]["resets"] == [f"{HOOK_PATH} (interpreter start-up hook)",
                                            "test/srt/test_sampler.py (test file)"], verdicts["attack"]
    assert verdicts["attack"]["status"] == "failed", verdicts["attack"]
    for name in FORGERIES:
        assert verdicts[name]["status"] == "tampered", (name, verdicts[name])


# --- the real swebench harness on the SWE-bench export --------------------------------------------------

@pytest.fixture(scope="module")
def decoding_image(docker_client, tmp_path_factory):
    """The demo repository and the task image of DECODING, built locally as sweserve builds it."""
    from sweserve.demo.fixture import build_demo_repo
    from sweserve.evaluation.context import Context

    root = tmp_path_factory.mktemp("image")
    repo = build_demo_repo(root / "repo")
    ctx = Context.create(root / "state", repo_path=repo)
    try:
        (bundle,) = [b for b in load_all(TASKS) if b.task.task_id == DECODING]
        return repo, ctx.task_image(bundle)
    finally:
        ctx.close()


def _diff_at_base(repo: Path, base: str, files: dict[str, str], tmp: Path) -> str:
    work = tmp / "work"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    subprocess.run(["git", "checkout", "-q", base], cwd=work, check=True)
    for rel, text in files.items():
        (work / rel).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    return subprocess.run(["git", "diff", "--cached"], cwd=work, capture_output=True, text=True, check=True).stdout


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_harness_grades_predictions_on_the_export(docker_client, decoding_image, swebench_export, tmp_path):
    """SWE-bench's run_evaluation, fed our export: the oracle resolves; a prediction that rewrites the test doesn't."""
    from sweserve.environment.images import ImageBuilder, checked_out_tag, read_ca_bundle

    repo, image = decoding_image
    (row,) = [json.loads(line) for line in (swebench_export / "test.jsonl").read_text().splitlines()
              if json.loads(line)["instance_id"] == DECODING]
    # the checked-out variant: the harness applies the prediction right after `docker start`
    assert row["image"] == checked_out_tag(image)
    assert ImageBuilder(docker_client, read_ca_bundle(None)).checked_out(image) == row["image"]
    out = docker_client.containers.run(row["image"], ["-C", "/testbed", "status", "--porcelain"],
                                       entrypoint=["git"], remove=True)
    assert out == b""  # complete without the ENTRYPOINT's check-out
    hack = _diff_at_base(repo, row["base_commit"], {
        "test/srt/test_sampler.py": "def test_top_p_keeps_at_least_one_token():\n    pass\n"}, tmp_path)
    hook = _diff_at_base(repo, row["base_commit"], {HOOK_PATH: HOOK}, tmp_path / "hook")
    init = subprocess.run(["git", "show", f"{row['base_commit']}:{PKG_INIT}"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout
    patches = {"oracle": row["patch"], "hacker": hack, "hooker": hook}
    for name, payload in FORGERIES.items():
        patches[name] = _diff_at_base(repo, row["base_commit"], {PKG_INIT: init + payload}, tmp_path / name)
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": DECODING, "model_name_or_path": m, "model_patch": p}) + "\n"
                             for m, p in patches.items()))
    verdicts = {}
    for model in patches:
        one = tmp_path / f"{model}.jsonl"
        one.write_text("".join(line + "\n" for line in preds.read_text().splitlines() if f'"{model}"' in line))
        proc = subprocess.run(
            [sys.executable, "-m", "swebench.harness.run_evaluation", "-d", str(swebench_export / "test.jsonl"),
             "-p", str(one), "-id", model, "-i", DECODING, "--max_workers", "1", "--report_dir", str(tmp_path)],
            cwd=tmp_path, capture_output=True, text=True, timeout=600)
        # not the exit code: the harness's closing summary lists every container on the daemon and can trip
        # over one another process removes meanwhile; the instance's report is written before that
        reports = list(tmp_path.glob(f"logs/run_evaluation/{model}/{model}/{DECODING}/report.json"))
        assert len(reports) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
        report = reports[0]
        verdicts[model] = json.loads(report.read_text())[DECODING]["resolved"]
    assert verdicts == {"oracle": True, **{m: False for m in patches if m != "oracle"}}, verdicts
    for model in FORGERIES:  # the verifier's verdict in the log, beside what swebench read
        (log,) = tmp_path.glob(f"logs/run_evaluation/{model}/{model}/{DECODING}/test_output.txt")
        assert "sweserve: tampered" in log.read_text(), log.read_text()[-3000:]


@pytest.mark.docker
def test_sweserve_grading_drops_interpreter_hooks(decoding_image, tmp_path):
    """The same hook through `sweserve run`'s own grading: dropped like a test edit, so the task stays failed."""
    from sweserve.agents.command import CommandAgent
    from sweserve.evaluation.context import Context
    from sweserve.evaluation.trial import evaluate_task

    repo, _ = decoding_image
    (bundle,) = [b for b in load_all(TASKS) if b.task.task_id == DECODING]
    agent = CommandAgent(f"cat > {HOOK_PATH} <<'EOF'\n{HOOK}EOF\n", name="hooker")
    ctx = Context.create(tmp_path / "state", repo_path=repo)
    try:
        r = evaluate_task(ctx, bundle, agent)
    finally:
        ctx.close()
    assert HOOK_PATH in r.model_patch
    assert r.status == "failed" and HOOK_PATH in (r.reason or ""), r
    assert r.tests.fail_to_pass == {bundle.task.FAIL_TO_PASS[0]: "failed"}


def test_plain_swebench_export_warns_that_its_images_must_be_built(tmp_path):
    """The `image` column names images no registry holds: without --build-images the user is told, with the
    command that builds them."""
    proc = cli("export", DECODING, "--format", "swebench", "--out", str(tmp_path / "out"), "--tasks", str(TASKS),
               "--split", "dev", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("warning:")]
    assert "no registry holds" in line and "Docker Hub" in line
    command = line.split(" with: ", 1)[1]
    assert command == (f"sweserve export --format swebench --out {tmp_path / 'out'} --build-images --tasks {TASKS} "
                       f"--split dev {DECODING}")


@pytest.mark.docker
def test_swebench_export_with_build_images_checks_they_exist(docker_client, decoding_image, tmp_path):
    repo, _ = decoding_image
    proc = cli("export", DECODING, "--format", "swebench", "--out", str(tmp_path / "out"), "--tasks", str(TASKS),
               "--build-images", "--repo-path", str(repo), "--state-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "warning:" not in proc.stdout and "images the `image` column names are built and present" in proc.stdout
    (row,) = [json.loads(x) for x in (tmp_path / "out" / "test.jsonl").read_text().splitlines()]
    docker_client.images.get(row["image"])


def test_swebench_keeps_the_eval_script_as_written(swebench_export):
    """swebench edits eval scripts line by line (drops `#!/bin/bash`/`set -uxo pipefail` lines, adds lines around
    a line holding its end marker): ours must come through whole, the harness files in it byte for byte."""
    import base64
    import re

    from swebench.harness.utils import make_test_spec

    for line in (swebench_export / "test.jsonl").read_text().splitlines():
        row = json.loads(line)
        spec = make_test_spec(row)
        assert "\n".join(spec.eval_script_list) == row["eval_script"].strip().split("\n", 1)[1]
        shipped = dict((m.group(2), base64.b64decode(m.group(1)).decode())
                       for m in re.finditer(r"^echo (\S+) \| base64 -d > (\S+)$", row["eval_script"], re.M))
        config = json.loads(shipped["/tmp/sweserve/harness/verify.json"])
        assert config["FAIL_TO_PASS"] == json.loads(row["FAIL_TO_PASS"]) and config["user"] == "nobody"
        assert shipped["/tmp/sweserve/harness/tests.patch"] == row["test_patch"]
        assert row["eval_script"].rstrip().endswith("sweserve_verify.py /tmp/sweserve/harness/verify.json")
