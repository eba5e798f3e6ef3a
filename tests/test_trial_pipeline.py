"""The one trial pipeline without Docker: every way a trial ends is one result with its folder, typed failures
keep their kind, bugs keep their traceback, and a resumed run refuses results graded against something else."""

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.agents.reference import NullAgent
from sweserve.agents.resolve import make_agent
from sweserve.config_search import ConfigSearch
from sweserve.environment.context import Context
from sweserve.errors import InfraError, SweserveError
from sweserve.evaluation.evaluate import run_evaluation
from sweserve.evaluation.results import read_results
from sweserve.evaluation.trial import evaluate_task
from sweserve.models import Resources, RunResult, Task, TaskBundle, TestSpec, ValidationRecord

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class NoDockerContext(Context):
    """A Context whose image step is scripted; nothing reaches Docker."""

    def __init__(self, tmp_path, image_step, host_gpus=()):
        super().__init__(client=None, builder=None, state_dir=tmp_path / "state", run_id="run1",
                         host_gpus=list(host_gpus))
        self._image_step = image_step

    def task_image(self, bundle):
        return self._image_step()

    def close(self):
        pass


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
