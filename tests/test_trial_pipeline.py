"""The one trial pipeline without Docker: every way a trial ends is one result with its folder, typed failures
keep their kind, bugs keep their traceback, and a resumed run refuses results graded against something else."""

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from local_backend import LocalHost, diff_of

from sweserve.agents.command import CommandAgent
from sweserve.agents.reference import NullAgent
from sweserve.agents.resolve import make_agent
from sweserve.config_search import ConfigSearch
from sweserve.dataset.project import Project
from sweserve.errors import InfraError, SweserveError
from sweserve.evaluation.context import Context
from sweserve.evaluation.evaluate import run_evaluation
from sweserve.evaluation.results import read_results
from sweserve.evaluation.trial import evaluate_task
from sweserve.models import (
    Resources,
    RunResult,
    Task,
    TaskBundle,
    TestSpec,
    ValidationRecord,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class NoDockerContext(Context):
    """A Context on the local test backend (tests/local_backend.py); nothing reaches Docker. With an image step,
    the image step is scripted; without one, task images are the clone at repo_path."""

    def __init__(self, tmp_path, image_step, host_gpus=(), search=None, repo_path=None):
        step = (lambda spec: image_step()) if image_step is not None else None
        project = Project(tmp_path / "state", search or ConfigSearch.for_project(tmp_path / "state"), repo_path)
        super().__init__(LocalHost("run1", list(host_gpus), step), project)


def bundle(task_id="o__r-1", validated=True, instruction="i"):
    task = Task(task_id=task_id, repo="o/r", profile="sglang", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at=T0, resources=Resources(),
                test=TestSpec(files=["test/test_a.py"]), FAIL_TO_PASS=["test/test_a.py::t"] if validated else [],
                validation=ValidationRecord(status="valid", runs=1) if validated else None)
    return TaskBundle(task=task, instruction=instruction, oracle_patch="o", tests_patch="t")


def raise_(exc):
    def step():
        raise exc
    return step


@pytest.mark.parametrize("exc, kind, reason", [
    (InfraError("image_build", "building sweserve-env:x failed: pip said no"), "image_build", "image_build: building"),
    (InfraError("docker", "creating a grade container: daemon gone"), "docker", "docker: creating"),
    (SweserveError("task image for o__r-1 is not built and no clone of o/r is known"), "task", "task image for o__r-1"),
])
def test_typed_failures_become_errors_with_their_kind(tmp_path, exc, kind, reason):
    ctx = NoDockerContext(tmp_path, raise_(exc))
    r = evaluate_task(ctx, bundle(), NullAgent(), results_path=tmp_path / "r.jsonl")
    assert (r.status, r.error_kind) == ("error", kind) and r.reason.startswith(reason)
    folder = Path(r.trial_dir)
    assert folder == tmp_path / "runs" / "run1" / "null" / "o__r-1" / "1"
    assert json.loads((folder / "result.json").read_text())["status"] == "error"


def test_a_bug_keeps_its_traceback_and_is_never_a_quiet_status(tmp_path, caplog):
    ctx = NoDockerContext(tmp_path, raise_(ZeroDivisionError("division by zero")))
    r = evaluate_task(ctx, bundle(), NullAgent(), results_path=tmp_path / "r.jsonl")
    assert (r.status, r.error_kind) == ("error", "internal")
    assert r.reason.startswith("internal error: ZeroDivisionError: division by zero (traceback: ")
    trace = (Path(r.trial_dir) / "traceback.txt").read_text()
    assert "ZeroDivisionError" in trace and "raise exc" in trace
    assert any("internal error in o__r-1" in rec.message for rec in caplog.records)


def test_keyboard_interrupt_is_not_swallowed(tmp_path):
    ctx = NoDockerContext(tmp_path, raise_(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        evaluate_task(ctx, bundle(), NullAgent(), results_path=tmp_path / "r.jsonl")


def test_manifest_and_resume_refuses_changed_tasks_or_configs(tmp_path):
    ctx = NoDockerContext(tmp_path, lambda: "img")
    out = tmp_path / "results" / "a.jsonl"
    tasks = [bundle("o__r-1", validated=False), bundle("o__r-2", validated=False)]
    first = run_evaluation(ctx, tasks, NullAgent(), out)
    assert sorted(r.status for r in first) == ["skipped", "skipped"]
    manifest = json.loads((tmp_path / "results" / "runs" / "run1" / "manifest.json").read_text())
    assert manifest["agent"] == "null" and set(manifest["tasks"]) == {"o__r-1", "o__r-2"}
    assert manifest["sweserve_version"]
    assert run_evaluation(ctx, tasks, NullAgent(), out) == []  # nothing changed: nothing to do

    changed = [bundle("o__r-1", validated=False, instruction="a different statement"), tasks[1]]
    with pytest.raises(SweserveError, match="task o__r-1 changed since run run1"):
        run_evaluation(ctx, changed, NullAgent(), out)
    assert run_evaluation(ctx, changed, NullAgent(), out, force=True) == []

    one = CommandAgent("echo one", name="cmd")
    run_evaluation(ctx, tasks, one, out)  # a second agent on the same context: a run (and manifest) of its own
    assert ctx.run_id != "run1" and {r.run_id for r in read_results(out) if r.agent == "cmd"} == {ctx.run_id}
    assert json.loads((out.parent / "runs" / ctx.run_id / "manifest.json").read_text())["agent"] == "cmd"
    assert json.loads((out.parent / "runs" / "run1" / "manifest.json").read_text())["agent"] == "null"
    with pytest.raises(SweserveError, match="agent cmd's config changed"):
        run_evaluation(ctx, tasks, CommandAgent("echo two", name="cmd"), out)
    assert len(read_results(out)) == 4


def test_agent_names_resolve_project_first_and_never_run_as_commands(tmp_path):
    search = ConfigSearch(tmp_path)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "mine.yaml").write_text("kind: command\nname: mine\ncommand: echo mine\n")
    (tmp_path / "agents" / "codex.yaml").write_text("kind: command\nname: codex\ncommand: echo shadowed\n")
    assert make_agent("mine", search=search).command == "echo mine"
    assert make_agent("codex", search=search).command == "echo shadowed"  # the project's wins over built-in
    assert make_agent("claude-code", search=search).name == "claude-code"  # built-in still found
    with pytest.raises(SweserveError, match="unknown agent: claud-code"):
        make_agent("claud-code", search=search)
    assert make_agent("./solve.sh --fast", search=search).name.startswith("cmd-")


def cli(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env)


def test_profile_given_by_path_mines_and_is_found_by_name_later(make_repo, tmp_path):
    repo = make_repo()
    repo.commit("init", {"lib/core/engine.py": "def f():\n    return 1\n", "checks/test_engine.py": "def test_f():\n    pass\n"})
    repo.commit("Fix engine (#7)", {"lib/core/engine.py": "def f():\n    return 2\n",
                                    "checks/test_engine.py": "from lib.core.engine import f\n\ndef test_f():\n    assert f() == 2\n"})
    profile = tmp_path / "elsewhere" / "myrepo.json"
    profile.parent.mkdir()
    profile.write_text(json.dumps({"repo": "acme/myrepo", "test_paths": ["checks/*"],
                                   "family_rules": [{"family": "scheduling-memory", "paths": ["lib/core/*"]}]}))
    proc = cli("mine", "--repo", str(repo.path), "--profile", str(profile), "--tasks", "tasks", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / ".sweserve" / "profiles" / "myrepo.json").read_text() == profile.read_text()
    task = json.loads((tmp_path / "tasks" / "acme__myrepo-7" / "task.json").read_text())
    assert task["profile"] == "myrepo" and task["family"] == "scheduling-memory"
    shown = cli("tasks", "show", "acme__myrepo-7", "--json", cwd=tmp_path)
    assert shown.returncode == 0 and json.loads(shown.stdout)["profile"] == "myrepo"
    # a different profile of the same name is refused, not silently swapped in
    profile.write_text(json.dumps({"repo": "acme/other", "test_paths": ["t/*"], "family_rules": []}))
    proc = cli("mine", "--repo", str(repo.path), "--profile", str(profile), "--tasks", "tasks", cwd=tmp_path)
    assert proc.returncode == 2 and "another profile named myrepo" in proc.stderr


def test_unknown_agent_name_is_one_line(tmp_path):
    proc = cli("run", "--agent", "claud-code", "--tasks", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_session_goes_through_the_run_pipeline_with_the_contexts_gpus(tmp_path, monkeypatch, capsys):
    """The GPUs are the Context's (not re-detected); the trial is run_trial_safely's, with a manifest."""
    from sweserve import cli
    from sweserve.cli import main, session
    from sweserve.dataset.taskstore import save_bundle

    gpu_task = bundle()
    gpu_task.task.resources.gpus = 1
    save_bundle(tmp_path / "tasks", gpu_task)
    contexts = [NoDockerContext(tmp_path, raise_(InfraError("docker", "daemon gone")), host_gpus=["0"]),
                NoDockerContext(tmp_path, lambda: "img")]  # the second session: a host without GPUs
    monkeypatch.setattr(session, "make_context", lambda args, console: contexts.pop(0))
    monkeypatch.setattr(cli, "setup_logging", lambda err: None)  # the process's logging stays pytest's
    out = tmp_path / "results" / "human.jsonl"
    argv = ["session", "o__r-1", "--candidate", "alice", "--tasks", str(tmp_path / "tasks"), "--output", str(out)]
    assert main(argv) == 0
    (r,) = read_results(out)
    assert (r.status, r.error_kind, r.attempt) == ("error", "docker", 1)
    assert json.loads((out.parent / "runs" / "run1" / "manifest.json").read_text())["agent"] == "human-alice"
    assert "error" in capsys.readouterr().out
    assert main(argv) == 2 and "cannot run here: needs 1 GPUs (host has 0)" in capsys.readouterr().err
    assert len(read_results(out)) == 1


def test_error_kinds_are_a_closed_set_holding_every_infra_kind():
    from typing import get_args

    from pydantic import ValidationError

    from sweserve.errors import ErrorKind, InfraKind

    assert set(get_args(InfraKind)) < set(get_args(ErrorKind)) and "node" in get_args(InfraKind)
    at = {"run_id": "r", "task_id": "o__r-1", "family": "decoding", "agent": "a", "status": "error",
          "started_at": T0, "finished_at": T0, "duration_s": 0}
    for kind in get_args(ErrorKind):
        RunResult(**at, error_kind=kind)
    with pytest.raises(ValidationError):
        RunResult(**at, error_kind="Docker hiccup")


# --- the whole trial on the second backend: the seam holds ---------------------------------------------------

CALC = "def add(a, b):\n    return a - b\n\n\ndef neg(a):\n    return -a\n"
FIXED = "def add(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n"
TESTS = ("from calc import add, neg\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
         "def test_neg():\n    assert neg(2) == -2\n")
LOCAL_PROFILE = {"repo": "o/calc", "test_paths": ["tests/*"], "env_packages": [],
                 "family_rules": [{"family": "decoding", "paths": ["*"]}]}


def _local(make_repo, tmp_path, code: str = CALC, fixed: str = FIXED, tests_py: str = TESTS,
           f2p: tuple[str, ...] = ("test_add",), p2p: tuple[str, ...] = ("test_neg",)) -> tuple[TaskBundle, Context]:
    """A task of a small repository (calc.py, tests/test_calc.py) with its profile, and a Context whose sandboxes
    are local processes."""
    repo = make_repo("calc")
    base = repo.commit("init", {"calc.py": code, "tests/__init__.py": "", "conftest.py": ""})
    oracle = diff_of(repo, base, "calc.py", fixed)
    tests = diff_of(repo, base, "tests/test_calc.py", tests_py)
    (tmp_path / "config" / "profiles").mkdir(parents=True)
    (tmp_path / "config" / "profiles" / "local.json").write_text(json.dumps(LOCAL_PROFILE))
    task = Task(task_id="o__calc-1", repo="o/calc", profile="local", pr_number=1, title="t", base_commit=base,
                merge_commit=base, family="decoding", created_at=T0, resources=Resources(test_timeout_s=120),
                test=TestSpec(files=["tests/test_calc.py"]),
                FAIL_TO_PASS=[f"tests/test_calc.py::{t}" for t in f2p],
                PASS_TO_PASS=[f"tests/test_calc.py::{t}" for t in p2p],
                validation=ValidationRecord(status="valid", runs=1))
    b = TaskBundle(task=task, instruction="make add add", oracle_patch=oracle, tests_patch=tests)
    return b, NoDockerContext(tmp_path, None, search=ConfigSearch(tmp_path / "config"), repo_path=repo.path)


@pytest.fixture
def local_task(make_repo, tmp_path):
    """A task of a small repository with its profile, and a Context whose sandboxes are local processes."""
    b, ctx = _local(make_repo, tmp_path)
    yield b, ctx
    ctx.close()


def test_a_whole_trial_runs_on_the_local_backend(local_task, tmp_path):
    """Candidate phase, submission (copied out, diffed in a fresh sandbox) and the verifier, all through the
    `Sandbox` protocol: the oracle resolves, null fails, and a candidate that rewrites the hidden tests is reset."""
    from sweserve.agents.reference import OracleAgent

    b, ctx = local_task
    oracle = evaluate_task(ctx, b, OracleAgent(), results_path=tmp_path / "r.jsonl")
    assert oracle.status == "resolved", oracle.reason
    assert oracle.tests.fail_to_pass == {"tests/test_calc.py::test_add": "passed"}
    assert "return a + b" in oracle.model_patch
    assert sorted(ctx.host.roles) == ["candidate", "grade"]  # the submission is diffed in the fresh grade sandbox
    assert all(not box.root.exists() for box in ctx.host.sandboxes)  # every one removed

    null = evaluate_task(ctx, b, NullAgent(), results_path=tmp_path / "r.jsonl")
    assert (null.status, null.reason) == ("failed", "empty patch")
    assert null.tests.fail_to_pass == {"tests/test_calc.py::test_add": "failed"}

    cheat = CommandAgent("mkdir -p tests && printf 'def test_add():\\n    pass\\n' > tests/test_calc.py",
                         name="cheat")
    r = evaluate_task(ctx, b, cheat, results_path=tmp_path / "r.jsonl")
    assert r.status == "failed" and "tests/test_calc.py" in r.model_patch
    assert any("tests/test_calc.py" in reset for reset in r.resets)


def test_validation_grades_on_the_local_backend(local_task, tmp_path):
    """Validation's null and oracle runs go through the same sandboxes: F2P and P2P come out of them."""
    from sweserve.evaluation.validation import ValidateRequest, validate_task

    b, ctx = local_task
    b.task.FAIL_TO_PASS, b.task.PASS_TO_PASS, b.task.validation = [], [], None
    outcome = validate_task(ctx, ValidateRequest(tmp_path / "tasks" / b.task.task_id, b, runs=1, record=False))
    assert (outcome.status, outcome.fail_to_pass, outcome.pass_to_pass) == ("valid", 1, 1), outcome.reason
    assert b.task.FAIL_TO_PASS == ["tests/test_calc.py::test_add"]


PAGES = "def pages(n):\n    return 0\n"
PAGES_FIXED = "def pages(n):\n    return -(-n // 8)\n"
COUNTED = ("from calc import pages\n\n_calls = {'n': 0}\n\n\ndef _pages(n):\n    _calls['n'] += 1\n"
           "    return pages(n)\n\n\ndef test_pages():\n    assert _pages(100) == 13\nCOUNT\n\n"
           "def test_no_pages():\n    assert pages(0) == 0\n")


@pytest.mark.parametrize("counted", [True, False], ids=["counter", "idempotent"])
def test_validation_keeps_no_group_for_a_test_that_is_not_idempotent_whatever_the_draw(make_repo, tmp_path, counted):
    """Red team 8, R8-8, through validation on the local backend: a test that reads a call counter passes only
    when it runs first of its group. Validation's oracle runs with every graded test first, and last, of its
    group, so the counter breaks in one of them on every draw and the task keeps no group (an honest solution is
    never failed by one); the same test without the counter keeps its group."""
    from sweserve.evaluation.validation import ValidateRequest, validate_task

    count = "    assert _calls['n'] == 1" if counted else "    assert _calls['n'] >= 1"
    b, ctx = _local(make_repo, tmp_path, PAGES, PAGES_FIXED, COUNTED.replace("COUNT", count), ("test_pages",),
                    ("test_no_pages",))
    try:
        b.task.FAIL_TO_PASS, b.task.PASS_TO_PASS, b.task.validation = [], [], None
        logs = tmp_path / "logs"
        outcome = validate_task(ctx, ValidateRequest(tmp_path / "tasks" / b.task.task_id, b, runs=1, record=True,
                                                     log_dir=logs))
    finally:
        ctx.close()
    assert (outcome.status, outcome.fail_to_pass) == ("valid", 1), outcome.reason
    assert {"twins-first-oracle-1.log", "twins-last-oracle-1.log"} <= {p.name for p in logs.iterdir()}
    # the record says so: readiness trusts a kept group only from both orders (`groups_one_order`)
    assert b.task.validation is not None and b.task.validation.twin_orders == ["first", "last"]
    assert "groups_one_order" not in [r.key for r in b.task.readiness.reasons]
    if counted:
        assert outcome.twins == 0 and "tests/test_calc.py::test_pages" in outcome.twinless, outcome
    else:
        assert outcome.twins > 0 and "tests/test_calc.py::test_pages" not in outcome.twinless, outcome


def test_a_trial_that_never_ran_is_recorded_like_every_other(tmp_path):
    """A Ray item whose node was lost (or that no node can run) gets its result from the one place results are
    built: redacted, and its reason one line capped as every reason is (it used to skip both, at 500 chars)."""
    from sweserve.agents.config import CommandAgentConfig
    from sweserve.evaluation.ray_executor import _unrun
    from sweserve.evaluation.trial import REASON_CHARS, TrialRequest, trial_folder

    ctx = NoDockerContext(tmp_path, lambda: "img")
    cfg = CommandAgentConfig(kind="command", name="leaky", command="true", env=["TOKEN"])
    agent = CommandAgent(cfg.command, cfg=cfg, env={"TOKEN": "s3cr3t-token-value"})
    b = bundle()
    req = TrialRequest(b, agent, 1, trial_folder(tmp_path / "r.jsonl", ctx.run_id, agent, b, 1))
    r = _unrun(ctx, req, "error", "lost on node s3cr3t-token-value\n" + "x" * 600)
    assert (r.status, r.error_kind) == ("error", "node")
    assert "s3cr3t-token-value" not in r.reason and "\n" not in r.reason and len(r.reason) <= REASON_CHARS
    assert json.loads((Path(r.trial_dir) / "result.json").read_text())["reason"] == r.reason
