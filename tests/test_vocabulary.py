"""The hidden tests' new vocabulary (dataset/vocabulary.py), on fixture repositories: every word the tests need that
only the oracle brings must be in the instruction, including the names the interface reader cannot resolve."""

import json
import subprocess
import sys

import pytest

from sweserve.dataset.lint import lint_task
from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_bundle, save_task
from sweserve.dataset.vocabulary import added_lines, defined_names, mentioned, used_tokens
from sweserve.models import SignalCheck, ValidationRecord

SRC = "python/sglang/srt/managers/scheduler.py"
ARGS = "python/sglang/srt/server_args.py"
TEST = "test/srt/test_scheduler_pd.py"
TASK = "sgl-project__sglang-60"

BASE_SRC = '''"""The scheduler."""
import os


class Scheduler:
    def __init__(self):
        self.queue = []

    def fetch(self, n):
        return n

    def gated(self):
        return True
'''

ORACLE_SRC = '''"""The scheduler."""
import os

import numpy as np
from jax.sharding import AxisType


class _PdInflight:
    """Requests sent to decode and not yet acknowledged."""

    def __init__(self):
        self.outstanding = 0


class Scheduler:
    def __init__(self):
        self.queue = []
        self._pd_inflight = _PdInflight()

    def fetch(self, n, **kwargs):
        assert np.isscalar(n) and AxisType.Explicit
        if kwargs.get("read_block"):
            pending = list(self.queue)
            return n + len(pending)
        return n

    def gated(self):
        return os.environ.get("SGLANG_NO_TOKEN_GATE") is None

    @staticmethod
    def wants(args):
        return args.chunk_slots > 1
'''

BASE_ARGS = '''"""Server arguments."""
import argparse


def parse_args(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=30000)
    return parser.parse_args(argv)
'''
ORACLE_ARGS = BASE_ARGS.replace("    return parser", '    parser.add_argument("--enable-chunk-transfer", '
                                'action="store_true")\n    return parser')

PR_TEST = '''import numpy as np
from types import SimpleNamespace

from jax.sharding import AxisType

from sglang.srt.managers.scheduler import Scheduler, _PdInflight
from sglang.srt.server_args import parse_args


def test_inflight_starts_empty():
    assert _PdInflight().outstanding == 0


def test_read_block():
    pending = [1, 2]
    scheduler = Scheduler()
    scheduler.queue.extend(pending)
    assert scheduler.fetch(3, read_block=True) == 5
    assert np.isscalar(3) and AxisType.Explicit
    assert Scheduler.wants(SimpleNamespace(chunk_slots=2))


def test_env_turns_the_gate_off(monkeypatch):
    monkeypatch.setenv("SGLANG_NO_TOKEN_GATE", "1")
    assert Scheduler().gated() is False


def test_flag():
    assert parse_args(["--enable-chunk-transfer"]).enable_chunk_transfer
'''

STATEMENT = ("Pipeline prefill and decode transfers (#60)\n\nPrefill should stream chunks to decode while it still "
             "computes, keep count of what decode has not acknowledged yet, let a blocking read be asked for, and "
             "let operators turn the token gate off from the environment or the command line.\n")

# `enable_chunk_transfer` (the flag's dest) is no token: argparse makes it, the oracle's lines never write it
# `chunk_slots`: a keyword of a call to another project's class, a word the repository's code must read
EXPECTED = ["--enable-chunk-transfer", "SGLANG_NO_TOKEN_GATE", "_PdInflight", "chunk_slots", "outstanding", "read_block",
            "wants"]


@pytest.fixture
def pd_task(make_repo, tmp_path):
    repo = make_repo()
    repo.commit("init", {SRC: BASE_SRC, ARGS: BASE_ARGS, "test/srt/test_args.py": "def test_nothing():\n    pass\n"})
    repo.commit(STATEMENT, {SRC: ORACLE_SRC, ARGS: ORACLE_ARGS, TEST: PR_TEST})
    tasks = tmp_path / "tasks"
    assert mine(open_repo(repo.path), load_profile("sglang"), tasks).written == [TASK]
    # the PR's text alone (mining's requirements would name the new flag)
    (tasks / TASK / "instruction.md").write_text("# " + STATEMENT.replace(" (#60)", ""))
    return repo, tasks / TASK


def say(task_dir, extra: str) -> None:
    path = task_dir / "instruction.md"
    path.write_text(path.read_text() + "\n" + extra + "\n")


def test_fires_for_a_private_class_attribute_keyword_env_var_and_flag_never_mentioned(pd_task):
    repo, d = pd_task
    report = lint_task(d, repo.path)
    assert report.quality.vocabulary == EXPECTED
    assert "tests need new names the instruction never gives: `--enable-chunk-transfer`, `SGLANG_NO_TOKEN_GATE`, " \
           "`_PdInflight`, `chunk_slots`, `outstanding`, `read_block` and 1 more" in report.quality.findings
    # at base already (queue, fetch, gated, parse_args), defined by the tests (pending, scheduler, monkeypatch),
    # never in the oracle's added lines (setenv, extend): not new vocabulary
    assert not {"queue", "fetch", "gated", "parse_args", "pending", "scheduler", "setenv"} & set(
        report.quality.vocabulary)
    # nor the vocabulary of other projects the repository does not hold, new to it as it is (numpy, jax)
    assert not {"isscalar", "AxisType", "Explicit", "numpy", "jax", "sharding"} & set(report.quality.vocabulary)


def test_mentions_in_statement_or_interface_section_satisfy_it(pd_task):
    repo, d = pd_task
    say(d, "Operators set `SGLANG_NO_TOKEN_GATE` or pass `--enable-chunk-transfer`; the count of unacknowledged "
           "requests is `outstanding`; `Scheduler.wants(args)` reads `args.chunk_slots`.")
    report = lint_task(d, repo.path)
    assert report.quality.vocabulary == ["_PdInflight", "read_block"]
    # a section that names them inside a dotted name and a signature
    say(d, "## New interfaces\n\n- class `sglang.srt.managers.scheduler._PdInflight`\n"
           "- keyword argument of `Scheduler.fetch`: `fetch(self, n, read_block=False)`")
    report = lint_task(d, repo.path)
    assert report.quality.vocabulary == [] and not any("new names" in f for f in report.quality.findings)


def test_names_at_base_or_defined_by_the_tests_are_not_new(pd_task, make_repo, tmp_path):
    repo, d = pd_task
    # the same PR on a base that already has the class, the variable and the flag somewhere (a doc, a script)
    other = make_repo("other")
    other.commit("init", {SRC: BASE_SRC, ARGS: BASE_ARGS, "test/srt/test_args.py": "def test_nothing():\n    pass\n",
                          "docs/notes.md": "_PdInflight counts outstanding requests; see --enable-chunk-transfer "
                                           "and SGLANG_NO_TOKEN_GATE.\n"})
    other.commit(STATEMENT, {SRC: ORACLE_SRC, ARGS: ORACLE_ARGS, TEST: PR_TEST})
    mine(open_repo(other.path), load_profile("sglang"), tmp_path / "other-tasks")
    report = lint_task(tmp_path / "other-tasks" / TASK, other.path)
    assert report.quality.vocabulary == ["chunk_slots", "read_block", "wants"]
    # tests that define the names themselves (their own class, parameter, attribute and variable) need nothing
    tree_text = '''import os


class _PdInflight:
    outstanding = 0


def helper(read_block=True):
    return read_block


def test_own(monkeypatch):
    box = _PdInflight()
    box.outstanding = 1
    helper(read_block=False)
    for enable_chunk_transfer in (True,):
        assert enable_chunk_transfer
    assert os.environ.get("SGLANG_NO_TOKEN_GATE") is None
'''
    import ast

    defined = defined_names(ast.parse(tree_text))
    assert {"_PdInflight", "outstanding", "helper", "read_block", "enable_chunk_transfer", "box"} <= defined
    assert "SGLANG_NO_TOKEN_GATE" in used_tokens(ast.parse(tree_text), range(1, 30))


def test_only_the_added_lines_count_and_flag_spelling_mentions():
    patch = ("diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1,2 +1,3 @@\n x = old_name\n"
             "+y = brand_new(read_block=1)\n z = 2\n")
    assert added_lines(patch) == {"t.py": {2: "y = brand_new(read_block=1)"}}
    import ast

    tree = ast.parse("x = old_name\ny = brand_new(read_block=1)\nz = 2\n")
    assert used_tokens(tree, [2]) == {"y", "brand_new", "read_block"}
    assert mentioned("enable_foo", "pass --enable-foo") and not mentioned("enable_foo", "pass --enable-foo-bar")
    assert mentioned("read_block", "`fetch(n, read_block=False)`") and mentioned("_X", "`a.b._X`")
    assert not mentioned("block", "read_block") and not mentioned("--foo", "--foo-bar")


def test_end_to_end_lint_makes_the_task_not_ready_with_the_finding(pd_task, tmp_path):
    repo, d = pd_task
    bundle = load_bundle(d)
    bundle.task.FAIL_TO_PASS = [f"{TEST}::test_flag"]  # one test, but its whole module is imported
    # a profile taking forgeable tasks knowingly: lint's rewrite of the instruction has the odds measured again
    bundle.task.validation = ValidationRecord(status="valid", runs=1, forge_odds=0.25, max_forge_odds=1.0, signals=[
        SignalCheck(name="relax_only_tests"), SignalCheck(name="cosmetic_oracle"), SignalCheck(name="structure_only")])
    bundle.task.family_override = "scheduling-memory"
    save_task(d, bundle.task)
    common = ["--tasks", str(d.parent), "--state-dir", str(tmp_path / "state"), "--repo-path", str(repo.path)]
    out = subprocess.run([sys.executable, "-m", "sweserve.cli", "tasks", "lint", *common, "--write", "--json"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1, out.stdout + out.stderr
    [row] = json.loads(out.stdout)
    assert row["quality"]["vocabulary"] == EXPECTED[1:]  # --write's section names the flag
    task = load_bundle(d).task
    assert task.readiness is not None and not task.readiness.ready
    # the tests also reach changed `Scheduler` methods the statement never points to (gaps.unstated_behaviour)
    assert [r.key for r in task.readiness.reasons] == ["lint:vocabulary", "lint:unstated"]
    assert "lint: tests need new names the instruction never gives: `SGLANG_NO_TOKEN_GATE`, `_PdInflight`" in \
        task.readiness.reasons[0].detail
    # named in the statement, the same run makes it ready
    say(d, "Track unacknowledged requests in a `_PdInflight` object whose `outstanding` counts them; "
           "`fetch(n, read_block=True)` reads blocking; `SGLANG_NO_TOKEN_GATE` and `--enable-chunk-transfer`; "
           "`wants(args)` reads `chunk_slots`.")
    again = subprocess.run([sys.executable, "-m", "sweserve.cli", "tasks", "lint", *common, "--write"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert load_bundle(d).task.readiness.ready


def test_a_base_git_cannot_search_is_an_error_not_a_pass(make_repo):
    from sweserve.dataset.vocabulary import VocabularyUnchecked, at_base

    repo = make_repo()
    repo.commit("init", {"a.py": "x = 1\n"})
    assert at_base(repo.path, "HEAD", ["x", "y"]) == {"x"}
    with pytest.raises(VocabularyUnchecked, match="git grep at"):
        at_base(repo.path, "0" * 40, ["x"])
