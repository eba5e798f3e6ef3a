"""A fifteenth red team's (15d) attacks on the newest defences of what a candidate's own attempt can steer: the
status it ends in (a redone `error`, a result that does not count), what the host reads of its records, and the
endpoint probe. Each test asserts the defended behaviour: it FAILS while the attack wins.

Findings and leads: see the report in the commit message of the commit that added this file, and the docstrings
of each test below.
"""

from __future__ import annotations

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.agents.config import CommandAgentConfig
from sweserve.demo import files
from sweserve.evaluation.evaluate import pending, run_evaluation
from sweserve.evaluation.results import read_results

DIST = "sweserve-demo__sglang-mini-103"
PATH = "python/sglang/srt/distributed/parallel_state.py"
FIX = f"cat > {PATH} <<'EOF'\n{files.PR_DISTRIBUTED[PATH]}EOF\n"


# --- R15d-1: token counts the host sums past what its own results reader takes back -----------------------------

# two Codex `turn.completed` events, each with an input_tokens of 4,300 nines: json.loads takes each (Python's
# int_max_str_digits is 4,300), `parse_codex` sums them to 4,301 digits, the result line is written with it, and
# pydantic's JSON reader refuses it ("number out of range"): `read_results` raises for the whole results file
NINES = "$(head -c 4300 /dev/zero | tr '\\0' 9)"
HUGE_TOKENS = (f"n={NINES}; for i in 1 2; do "
               "printf '{\"type\": \"turn.completed\", \"usage\": {\"input_tokens\": %s, \"output_tokens\": 1}}\\n' "
               "\"$n\"; done")


@pytest.mark.docker
def test_token_counts_in_the_agents_record_do_not_poison_the_results_file(demo, tmp_path):
    """R15d-1: a command agent with `trajectory: codex` prints two usage events; the trial's result line is
    written, and then no reader of the file (report, resume, --retry-errors) can read any result in it."""
    bundle = demo.bundle(DIST)
    out = tmp_path / "counter.jsonl"
    cfg = CommandAgentConfig(kind="command", name="counter", command=FIX + HUGE_TOKENS, trajectory="codex")
    agent = CommandAgent(cfg.command, cfg=cfg)
    run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)  # raised SweserveError: "field ... Invalid JSON: number out of range"
    assert r.status == "resolved", (r.status, r.reason)
    assert pending([bundle], agent, 1, out, retry_errors=True) == []


def _command_run(demo, tmp_path, command, name="doubter", **cfg):
    cfg = CommandAgentConfig(kind="command", name=name, command=command, **cfg)
    agent = CommandAgent(cfg.command, cfg=cfg)
    bundle = demo.bundle(DIST)
    out = tmp_path / f"{name}.jsonl"
    run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)
    return r, pending([bundle], agent, 1, out, retry_errors=True)


# --- R15d-2: the candidate takes /testbed away: the backend's copy of the tree fails as Docker's error ------------

@pytest.mark.docker
@pytest.mark.parametrize("command", ["cd / && mv /testbed /testbed.gone", "cd / && rm -rf /testbed"],
                         ids=["moved", "removed"])
def test_a_tree_the_candidate_took_away_is_graded_not_a_redone_error(demo, tmp_path, command):
    """R15d-2: `export_tree` asks dockerd for /testbed's archive; with no /testbed dockerd answers 404, which
    `docker_errors` makes `InfraError("docker")`: `error`, kind `docker`, redone by --retry-errors. The sandbox
    is there (the host reached it): an absent tree is the attempt's own doing, an empty submission."""
    r, redo = _command_run(demo, tmp_path, FIX + command)
    assert r.status in ("failed", "patch_failed"), (r.status, r.error_kind, r.reason)
    assert redo == []


# --- R15d-3: a file git can add but not diff in the grade sandbox's memory --------------------------------------

def _with_memory(bundle, memory_gb: float):
    resources = bundle.task.resources.model_copy(update={"memory_gb": memory_gb})
    return bundle.model_copy(update={"task": bundle.task.model_copy(update={"resources": resources})})


def _bundle_run(demo, tmp_path, bundle, command, name):
    cfg = CommandAgentConfig(kind="command", name=name, command=command)
    agent = CommandAgent(cfg.command, cfg=cfg)
    out = tmp_path / f"{name}.jsonl"
    run_evaluation(demo.ctx, [bundle], agent, out)
    (r,) = read_results(out)
    return r, pending([bundle], agent, 1, out, retry_errors=True)


# incompressible data: `git add -A` streams it into a loose object (its input a file mapping), `git diff --binary`
# holds the whole blob inflated and its deflated copy on the heap: twice the file, past the sandbox's memory
BIG_RANDOM = "head -c 250M /dev/urandom > python/sglang/weights.bin"


@pytest.mark.docker
def test_a_file_too_large_for_gits_diff_is_not_a_redone_error(demo, tmp_path):
    """R15d-3: the grade sandbox's diff exec exits NO_DIFF when `git diff --cached --binary` dies (OOM-killed:
    exit 137), and `diff_then` makes that `InfraError("sandbox", "could not diff the candidate's tree")`: `error`,
    kind `sandbox`, redone. The same file a little smaller is diffed, and its patch is over the submission limit:
    `error`, kind `limit`, never redone. So a candidate turns a not-redone outcome into a redone one by the size of
    one file it writes (scaled down here: a 300 MB sandbox and 250 MB; a 4 GB sandbox and a file under the 2 GiB
    tree limit is the same door)."""
    bundle = _with_memory(demo.bundle(DIST), 0.3)
    r, redo = _bundle_run(demo, tmp_path, bundle, FIX + BIG_RANDOM, "hoarder")
    print("R15d-3:", r.status, r.error_kind, r.reason)
    assert not (r.status == "error" and r.error_kind != "limit"), (r.status, r.error_kind, r.reason)
    assert redo == []


# --- R15d-4: the exports' verifier unlinks a nested repository's folder ------------------------------------------

def _git(cwd, *args):
    import subprocess

    return subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def test_a_nested_repository_in_the_tree_does_not_crash_the_export_verifier(tmp_path, monkeypatch):
    """R15d-4: the in-box verifier (`sweserve_verify.to_base`, the Harbor and SWE-bench exports) removes every
    untracked path `git ls-files --others` lists once the tree is back at base, with `os.unlink`. A folder holding
    a `.git` folder (HEAD, objects/, refs/: three text files) is a nested repository, which git lists as one entry,
    `vendor/`, and `git clean -qfd` keeps (it takes -ff); a `.gitignore` naming it keeps `git add -A` from refusing
    it. `os.unlink("/testbed/vendor/")` raises IsADirectoryError, which no handler of `main` catches: the verifier
    dies before it writes anything (no SWE-bench markers: an `error` instance; no Harbor reward.txt: an exception,
    which a job's retry config redoes). In a Harbor task the agent leaves the tree as it likes; in SWE-bench's
    harness `patch --fuzz`'s fallback writes `vendor/.git/...` (R12b-1's route)."""
    from tests.test_attacks_redteam11 import _verify_module

    verify = _verify_module()
    tree = tmp_path / "testbed"
    tree.mkdir()
    _git(tree, "init", "-q")
    (tree / "mod.py").write_text("x = 1\n")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-qm", "base")
    base = _git(tree, "rev-parse", "HEAD").strip()
    # what the candidate leaves: a change, and a nested repository its .gitignore hides from `git add -A`
    (tree / "mod.py").write_text("x = 2\n")
    (tree / ".gitignore").write_text("vendor/\n")
    for path, text in {"vendor/.git/HEAD": "ref: refs/heads/main\n", "vendor/.git/objects/info/x": "x\n",
                       "vendor/.git/refs/heads/x": "x\n", "vendor/lib.py": "y = 1\n"}.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    monkeypatch.setattr(verify, "HERE", str(tmp_path))
    monkeypatch.delenv("GIT_DIR", raising=False)
    try:
        patch = verify.to_base({"base_commit": base, "format": "harbor"})
    except verify.Verdict:
        return  # a verdict is reported (markers, reward.txt): the defended outcome
    except OSError as exc:
        pytest.fail(f"the export's verifier died of {exc.__class__.__name__}: {exc}")
    assert "x = 2" in open(patch).read()


# --- R15d-6: the first command's exit status read as the checkout's ----------------------------------------------

# the tree's checkout runs in the same exec before a command agent's command (`DockerSandbox.exec`: `restore ||
# exit 203; COMMAND`); an exit of 203 (TREE_FAILED), or a time-out, makes the host check the checkout again
# (`_check_out_tree`): the done marker asked of dockerd, else `sweserve-tree restore` run again, whose failure is
# `InfraError("sandbox")`. The command is root: it deletes the marker and replaces the script, then exits 203
BREAK_CHECKOUT = ("printf '#!/bin/sh\\nexit 1\\n' > /usr/local/bin/sweserve-tree; "
                  "rm -f /run/sweserve-tree.done; exit 203")


@pytest.mark.docker
def test_a_command_exiting_as_a_failed_checkout_is_graded_not_a_redone_error(demo, tmp_path):
    """R15d-6: a command agent's run ends `error`, kind `sandbox` ("checking out /testbed in ... failed"), redone
    by --retry-errors, though its checkout had succeeded (the fix is in the tree) and its own command exited 203."""
    r, redo = _command_run(demo, tmp_path, FIX + BREAK_CHECKOUT)
    assert r.status == "resolved", (r.status, r.error_kind, r.reason)
    assert redo == []
