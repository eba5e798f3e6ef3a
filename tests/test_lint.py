"""Lint on fixture repositories: the interface section, leaks, unfair tests, statement length, the CLI."""

import json
import subprocess
import sys

import pytest

from sweserve.dataset.interface import CLOSE_MARK, OPEN_MARK, statement_of, with_interface
from sweserve.dataset.leaks import leak_findings
from sweserve.dataset.lint import lint_task
from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_bundle, save_task
from sweserve.models import QualityRecord, ValidationRecord

SRC = "python/sglang/srt/layers/sampler.py"
TEST = "test/srt/test_sampler.py"
TASK = "sgl-project__sglang-50"

BASE_SRC = '''"""Sampling from logits."""


def top_k(logits, k):
    """Keep the k largest logits."""
    return sorted(logits, reverse=True)[:k]


class Sampler:
    def __init__(self, vocab_size):
        self.vocab_size = vocab_size

    def sample(self, logits):
        return max(range(len(logits)), key=logits.__getitem__)
'''

ORACLE_SRC = '''"""Sampling from logits."""


class InvalidProbability(ValueError):
    """Raised when a probability threshold is outside [0, 1]."""


def min_p_filter(probs: list[float], min_p: float, *, renormalize: bool = True) -> list[float]:
    """Zero every probability below min_p times the largest one."""
    if not 0 <= min_p <= 1:
        raise InvalidProbability(min_p)
    cut = max(probs) * min_p
    kept = [p if p >= cut else 0.0 for p in probs]
    total = sum(kept) if renormalize else 1.0
    return [p / total for p in kept]


def top_k(logits, k, largest=True):
    """Keep the k largest logits."""
    return sorted(logits, reverse=largest)[:k]


def _with_aliases(cls):
    for name in ("greedy",):
        setattr(cls, f"sample_{name}", cls.sample)
    return cls


@_with_aliases
class Sampler:
    def __init__(self, vocab_size):
        self.vocab_size = vocab_size

    def sample(self, logits, temperature=1.0):
        return max(range(len(logits)), key=logits.__getitem__)
'''

BASE_TEST = '''from sglang.srt.layers.sampler import top_k


def test_top_k():
    assert top_k([1, 3, 2], 1) == [3]
'''

PR_TEST = '''import pytest

from sglang.srt.layers.sampler import InvalidProbability, Sampler, min_p_filter, top_k


def test_top_k():
    assert top_k([1, 3, 2], 1) == [3]


def test_top_k_smallest():
    assert top_k([1, 3, 2], 1, largest=False) == [1]


def test_min_p_rejects_out_of_range():
    assert min_p_filter([0.5, 0.05], 0.2) == [1.0, 0.0]
    with pytest.raises(InvalidProbability):
        min_p_filter([0.5], 2.0)


class TestSampler:
    def setup_method(self):
        self.sampler = Sampler(vocab_size=3)

    def test_temperature(self):
        assert self.sampler.sample([1, 3, 2], temperature=0.5) == 1

    def test_greedy_alias(self):
        assert self.sampler.sample_greedy([1, 3, 2]) == 1


class TestSamplerAgain(TestSampler):
    pass
'''

STATEMENT = ("Add min-p sampling (#50)\n\nSampling should support min-p filtering: drop every token whose "
             "probability is below a fraction of the most likely token's, and report thresholds outside the unit "
             "interval as an error. Greedy sampling should also be easier to call.\n")


@pytest.fixture
def task_repo(make_repo, tmp_path):
    """A repo with one mined task (#50) whose hidden tests use a new function, exception and keywords."""
    repo = make_repo()
    repo.commit("init", {SRC: BASE_SRC, TEST: BASE_TEST})
    repo.commit(STATEMENT, {SRC: ORACLE_SRC, TEST: PR_TEST})
    tasks = tmp_path / "tasks"
    report = mine(open_repo(repo.path), load_profile("sglang"), tasks)
    assert report.written == [TASK]
    return repo, tasks


def set_fail_to_pass(task_dir, ids):
    bundle = load_bundle(task_dir)
    bundle.task.FAIL_TO_PASS = ids
    bundle.task.validation = ValidationRecord(status="valid", runs=1)
    save_task(task_dir, bundle.task)


def name_the_module_imports(task_dir):
    """The statement names the new function and exception test_sampler.py imports at module level (which the
    section of a FAIL_TO_PASS that does not call them leaves out)."""
    instruction = task_dir / "instruction.md"
    instruction.write_text(instruction.read_text().replace(
        "as an error.", "as an error (`min_p_filter`, raising `InvalidProbability`)."))


def test_interface_lists_new_function_keyword_and_exception_with_signatures(task_repo):
    repo, tasks = task_repo
    report = lint_task(tasks / TASK, repo.path)
    items = {(i.kind, i.name, i.keyword): i for i in report.quality.interface}
    mod = "sglang.srt.layers.sampler"
    fn = items[("function", f"{mod}.min_p_filter", None)]
    assert fn.signature == "min_p_filter(probs: list[float], min_p: float, *, renormalize: bool=True) -> list[float]"
    assert fn.doc == "Zero every probability below min_p times the largest one." and fn.path == SRC
    exc = items[("exception", f"{mod}.InvalidProbability", None)]
    assert exc.signature == "class InvalidProbability(ValueError)"
    assert exc.doc == "Raised when a probability threshold is outside [0, 1]."
    kw = items[("keyword", f"{mod}.top_k", "largest")]
    assert kw.signature == "top_k(logits, k, largest=True)" and kw.doc == "Keep the k largest logits."
    assert ("keyword", f"{mod}.Sampler.sample", "temperature") in items  # through an instance made in setup
    assert len(items) == 4, items.keys()
    assert report.quality.interface_from == "tests_patch"  # not validated yet: every test of tests.patch


def test_unfair_until_the_section_is_written_then_only_the_unknown_name(task_repo):
    repo, tasks = task_repo
    d = tasks / TASK
    greedy, smallest = f"{TEST}::TestSampler::test_greedy_alias", f"{TEST}::test_top_k_smallest"
    set_fail_to_pass(d, [greedy, smallest, f"{TEST}::test_min_p_rejects_out_of_range"])

    before = lint_task(d, repo.path)  # the statement's requirements announce `largest`, not the new function
    assert set(before.quality.unfair) == {f"{TEST}::test_min_p_rejects_out_of_range"}
    assert "`top_k` takes a new parameter `largest` (after `k`, default `True`)." in (d / "instruction.md").read_text()
    assert not before.passed and any("lint --write" in n for n in before.quality.notes)
    assert OPEN_MARK not in (d / "instruction.md").read_text()  # without write nothing changes

    after = lint_task(d, repo.path, write=True)
    text = (d / "instruction.md").read_text()
    assert text.count(OPEN_MARK) == 1 and text.count(CLOSE_MARK) == 1 and "## New interfaces" in text
    assert "`sglang.srt.layers.sampler.min_p_filter`" in text and "`largest`" in text
    assert after.quality.interface_from == "fail_to_pass"
    # sample_greedy is made by a class decorator: not at base, not visibly added by anyone. No section can
    # announce it, so it is no fault of the instruction: a note, not an unfair finding
    assert after.quality.unfair == {} and not [f for f in after.quality.findings if f.startswith("unfair")]
    assert any("`sglang.srt.layers.sampler.Sampler.sample_greedy`" in n and "not judged unfair" in n
               for n in after.quality.notes)
    saved = load_bundle(d).task
    assert saved.quality == after.quality and saved.family == "decoding"  # layers/sampler.py is decoding

    again = lint_task(d, repo.path, write=True)  # idempotent
    assert (d / "instruction.md").read_text() == text and again.quality == after.quality


def test_fail_to_pass_ids_relative_to_pytest_rootdir(task_repo):
    repo, tasks = task_repo
    d = tasks / TASK
    set_fail_to_pass(d, ["srt/test_sampler.py::test_top_k_smallest",  # rootdir test/ (an ini file there)
                         "srt/test_sampler.py::TestSamplerAgain::test_temperature"])  # inherited
    report = lint_task(d, repo.path)
    assert [(i.kind, i.keyword) for i in report.quality.interface] == [("keyword", "temperature"),  # Sampler.
                                                                        ("keyword", "largest")]  # top_k
    assert not any("not found" in n for n in report.quality.notes)


def test_reject_marks_a_validated_task_rejected(task_repo):
    repo, tasks = task_repo
    d = tasks / TASK
    set_fail_to_pass(d, [f"{TEST}::test_min_p_rejects_out_of_range"])
    report = lint_task(d, repo.path, reject=True)  # no section written: min_p_filter is not announced
    task = load_bundle(d).task
    assert report.rejected and task.validation.status == "rejected" and not task.validated
    assert task.validation.reason.startswith("lint: unfair:")


def test_section_is_replaced_not_appended():
    from sweserve.models import InterfaceItem

    one = [InterfaceItem(kind="function", name="m.f", signature="f(x)")]
    two = [InterfaceItem(kind="function", name="m.g", signature="g(y)")]
    text = with_interface("# Title\n\nBody.\n", one)
    assert with_interface(text, one) == text
    replaced = with_interface(text, two)
    assert "m.g" in replaced and "m.f" not in replaced and replaced.count(OPEN_MARK) == 1
    assert with_interface(replaced, []) == "# Title\n\nBody.\n" == statement_of(replaced)
    # a stray marker in a PR body neither hides text nor survives
    stray = f"# Title\n\n{OPEN_MARK} Body.\n"
    assert statement_of(with_interface(stray, one)) == "# Title\n\n Body.\n"
    assert with_interface(with_interface(stray, one), one).count(OPEN_MARK) == 1


def test_leaks_oracle_lines_and_test_names(task_repo):
    repo, tasks = task_repo
    b = load_bundle(tasks / TASK)
    assert leak_findings(b.instruction, b.oracle_patch, b.tests_patch) == []
    copied = b.instruction + "\n```python\n    kept = [p if p >= cut else 0.0 for p in probs]\n```\n"
    assert leak_findings(copied, b.oracle_patch, b.tests_patch) == [
        "statement repeats 1 line the oracle adds, e.g. `kept = [p if p >= cut else 0.0 for p in probs]`"]
    named = b.instruction + "\nMake test_min_p_rejects_out_of_range and TestSampler pass.\n"
    assert leak_findings(named, b.oracle_patch, b.tests_patch) == [
        "statement names hidden tests: TestSampler, test_min_p_rejects_out_of_range"]
    asserted = b.instruction + "\nFor example `assert top_k([1, 3, 2], 1, largest=False) == [1]`.\n"
    assert leak_findings(asserted, b.oracle_patch, b.tests_patch)[0].startswith(
        "statement repeats 1 line of the hidden tests")
    # a line the oracle only moves is no leak, nor a short one
    moved = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-    return sorted(logits, reverse=True)[:k]\n" \
            "+    return sorted(logits, reverse=True)[:k]\n+    return x\n"
    assert leak_findings("    return sorted(logits, reverse=True)[:k]\n return x", moved, "") == []


def test_short_statement_fails_lint(make_repo, tmp_path):
    repo = make_repo()
    repo.commit("init", {SRC: BASE_SRC, TEST: BASE_TEST})
    repo.commit("Fix top-k (#51)", {SRC: BASE_SRC.replace("reverse=True", "reverse=True, key=float"),
                                    TEST: BASE_TEST + "\n\ndef test_floats():\n    assert top_k([1.5], 1) == [1.5]\n"})
    mine(open_repo(repo.path), load_profile("sglang"), tmp_path / "tasks")
    d = tmp_path / "tasks" / "sgl-project__sglang-51"
    report = lint_task(d, repo.path)
    assert report.quality.statement_source == "title_only" and report.quality.statement_chars == len("# Fix top-k")
    assert report.quality.findings == [
        "statement is the PR title only (source title_only; at least 150 characters wanted)"]
    # what mining recorded stays; lint's own notes are replaced on each run
    task = load_bundle(d).task
    task.quality = QualityRecord(statement_source="commit_message", notes=["no linked issue"])
    save_task(d, task)
    for _ in range(2):
        report = lint_task(d, repo.path, write=True)
    assert report.quality.statement_source == "commit_message" and report.quality.notes == ["no linked issue"]


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True)


def test_lint_cli_exit_codes(task_repo, tmp_path):
    repo, tasks = task_repo
    common = ["--tasks", str(tasks), "--state-dir", str(tmp_path / "state")]
    failing = run_cli("tasks", "lint", *common, "--repo-path", str(repo.path), "--json", cwd=tmp_path)
    assert failing.returncode == 1, failing.stderr
    assert json.loads(failing.stdout)[0]["task_id"] == TASK
    fixed = run_cli("tasks", "lint", TASK, *common, "--repo-path", str(repo.path), "--write", cwd=tmp_path)
    # every test of tests.patch: the decorator-made name of test_greedy_alias is a note, not a failure
    assert fixed.returncode == 0 and "passed, 0 failed" in fixed.stdout, fixed.stdout
    set_fail_to_pass(tasks / TASK, [f"{TEST}::test_top_k_smallest"])
    # the section now lists only `largest`, but the module-level import of test_top_k_smallest's file needs the
    # new function and exception too: the new-vocabulary check fails the task until the statement names them
    narrowed = run_cli("tasks", "lint", *common, "--repo-path", str(repo.path), "--write", cwd=tmp_path)
    assert narrowed.returncode == 1 and "`InvalidProbability`, `min_p_filter`" in narrowed.stdout, narrowed.stdout
    name_the_module_imports(tasks / TASK)
    ok = run_cli("tasks", "lint", *common, "--repo-path", str(repo.path), "--write", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    shown = run_cli("tasks", "show", TASK, *common, cwd=tmp_path)
    assert shown.returncode == 0 and "lint: passed" in shown.stdout
    for bad in (["nope__x-1"], ["--repo-path", str(tmp_path / "missing")]):
        out = run_cli("tasks", "lint", *common, *bad, cwd=tmp_path)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    no_clone = run_cli("tasks", "lint", *common, cwd=tmp_path)  # mined by a function, no clone recorded
    assert no_clone.returncode == 2 and "--repo-path" in no_clone.stderr


def test_family_override_in_task_json_wins_and_lint_relabels(task_repo):
    repo, tasks = task_repo
    d = tasks / TASK
    bundle = load_bundle(d)
    bundle.task.family = "kernels-quant"  # as mined with the old rules (layers/* was kernels-quant)
    save_task(d, bundle.task)
    report = lint_task(d, repo.path)
    assert report.family == "decoding" and any("family: recorded kernels-quant, now decoding" in n
                                               for n in report.quality.notes)
    bundle.task.family_override = "serving-api"
    save_task(d, bundle.task)
    lint_task(d, repo.path, write=True)
    task = load_bundle(d).task
    assert (task.family, task.family_confidence) == ("serving-api", 0.0)
    # mining again keeps the task (and its override) as it is
    report = mine(open_repo(repo.path), load_profile("sglang"), tasks)
    assert report.existing == [TASK] and load_bundle(d).task.family == "serving-api"


ARGS = "python/sglang/srt/server_args.py"
PENALTY = "python/sglang/srt/layers/penalty.py"
BASE_ARGS = '''"""Server command-line arguments."""
import argparse


def parse_args(argv):
    """Parse the server's command line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=30000, help="Port to listen on.")
    return parser.parse_args(argv)
'''
ORACLE_ARGS = BASE_ARGS.replace(
    '    return parser', '    parser.add_argument("--enable-foo", action="store_true", help="Sample with foo.")\n'
    '    return parser')
ORACLE_PENALTY = '''"""Penalties applied to logits before sampling."""


class RepetitionPenalty:
    """Scale down the logits of tokens already generated."""

    def __init__(self, factor: float = 1.2):
        self.factor = factor

    def apply(self, logits: list[float], seen: set[int]) -> list[float]:
        """Divide the logit of every seen token by the factor.

        Logits of unseen tokens are left alone.
        """
        return [x / self.factor if i in seen else x for i, x in enumerate(logits)]
'''
ORACLE_SAMPLER = BASE_SRC + '''
    def sample_top_p(self, logits, p: float = 0.9) -> int:
        """Sample from the smallest set of tokens whose probability reaches p."""
        return max(range(len(logits)), key=logits.__getitem__)
'''
NEW_NAMES_TEST = '''from sglang.srt.layers.penalty import RepetitionPenalty
from sglang.srt.layers.sampler import Sampler
from sglang.srt.server_args import parse_args


def test_penalty():
    penalty = RepetitionPenalty(2.0)
    assert penalty.apply([2.0, 4.0], {1}) == [2.0, 2.0]


def test_top_p():
    sampler = Sampler(vocab_size=3)
    assert sampler.sample_top_p([1, 3, 2], p=0.5) == 1


def test_enable_foo():
    assert parse_args(["--enable-foo"]).enable_foo
'''


def test_section_names_new_module_class_method_and_flag_with_signatures(make_repo, tmp_path):
    repo = make_repo()
    repo.commit("init", {SRC: BASE_SRC, ARGS: BASE_ARGS, TEST: BASE_TEST})
    repo.commit(STATEMENT, {SRC: ORACLE_SAMPLER, ARGS: ORACLE_ARGS,
                            PENALTY: ORACLE_PENALTY, TEST: BASE_TEST + "\n\n" + NEW_NAMES_TEST})
    tasks = tmp_path / "tasks"
    assert mine(open_repo(repo.path), load_profile("sglang"), tasks).written == [TASK]
    set_fail_to_pass(tasks / TASK, [f"{TEST}::test_penalty", f"{TEST}::test_top_p", f"{TEST}::test_enable_foo"])
    report = lint_task(tasks / TASK, repo.path, write=True)
    mod = "sglang.srt.layers"
    items = {(i.kind, i.name): i for i in report.quality.interface}
    assert set(items) == {("module", f"{mod}.penalty"), ("class", f"{mod}.penalty.RepetitionPenalty"),
                          ("method", f"{mod}.penalty.RepetitionPenalty.apply"),
                          ("method", f"{mod}.sampler.Sampler.sample_top_p"), ("flag", "--enable-foo")}
    section = (tasks / TASK / "instruction.md").read_text().split(OPEN_MARK)[1]
    lines = {line for line in section.splitlines() if line.startswith("- ")}
    assert lines == {
        f"- module `{mod}.penalty` in `{PENALTY}` — Penalties applied to logits before sampling.",
        f"- class `{mod}.penalty.RepetitionPenalty` in `{PENALTY}`: `class RepetitionPenalty; "
        "RepetitionPenalty(factor: float=1.2)` — Scale down the logits of tokens already generated.",
        f"- method `{mod}.penalty.RepetitionPenalty.apply` in `{PENALTY}`: "
        "`apply(self, logits: list[float], seen: set[int]) -> list[float]` — "
        "Divide the logit of every seen token by the factor.",
        f"- method `{mod}.sampler.Sampler.sample_top_p` in `{SRC}`: `sample_top_p(self, logits, p: float=0.9) -> int`"
        " — Sample from the smallest set of tokens whose probability reaches p.",
        "- command-line flag `--enable-foo`: `parser.add_argument('--enable-foo', action='store_true', "
        "help='Sample with foo.')` — Sample with foo.",
    }, section
    assert report.quality.unfair == {}  # every name the tests need is announced now


HELPERS = "python/sglang/srt/layers/helpers.py"
DATA = "test/srt/data/clip.bin"


def drop_object(repo, spec):
    """Remove an object from the clone, as a partial clone lacks a blob: git reports it missing."""
    sha = repo.git("rev-parse", spec)
    (repo.path / ".git" / "objects" / sha[:2] / sha[2:]).unlink()
    return sha


def test_a_missing_blob_fails_only_the_task_that_reads_it(make_repo, tmp_path):
    repo = make_repo()
    repo.commit("init", {SRC: BASE_SRC, TEST: BASE_TEST, DATA: b"\0video\1" * 50,
                         HELPERS: '"""Helpers."""\n\n\ndef clip(x):\n    return x\n'})
    repo.commit(STATEMENT, {SRC: ORACLE_SRC, TEST: PR_TEST})
    repo.commit(STATEMENT.replace("(#50)", "(#52)"), {  # the helper module stays as it is at base
        SRC: ORACLE_SRC + "\n\ndef clamp(x, lo=0):\n    return max(x, lo)\n",
        "test/srt/test_clamp.py": "from sglang.srt.layers.helpers import clip\n"
                                  "from sglang.srt.layers.sampler import clamp\n\n\n"
                                  "def test_clamp():\n    assert clamp(clip(-1), lo=0) == 0\n"})
    tasks = tmp_path / "tasks"
    assert sorted(mine(open_repo(repo.path), load_profile("sglang"), tasks).written) == [
        TASK, "sgl-project__sglang-52"]
    drop_object(repo, f"HEAD~2:{DATA}")  # in every base tree, read by no lint
    lost = drop_object(repo, f"HEAD~1:{HELPERS}")  # #52's base version of the module its test calls

    out = run_cli("tasks", "lint", "--tasks", str(tasks), "--state-dir", str(tmp_path / "state"),
                  "--repo-path", str(repo.path), "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stderr  # the tasks fail lint; the run itself goes on
    reports = {r["task_id"]: r for r in json.loads(out.stdout)}
    assert len(reports[TASK]["quality"]["interface"]) == 4  # the missing data blob changes nothing
    assert not any("clone" in f for f in reports[TASK]["quality"]["findings"])
    [finding] = [f for f in reports["sgl-project__sglang-52"]["quality"]["findings"] if "clone" in f]
    assert finding.startswith(f"the clone cannot read 1 file lint reads: {HELPERS} at base") and lost in finding


def test_a_patch_whose_preimage_is_missing_is_one_finding_and_no_rejection(task_repo):
    repo, tasks = task_repo
    d = tasks / TASK
    set_fail_to_pass(d, [f"{TEST}::test_top_k_smallest"])
    name_the_module_imports(d)
    written = lint_task(d, repo.path, write=True)
    instruction = (d / "instruction.md").read_text()
    assert OPEN_MARK in instruction and written.passed
    drop_object(repo, f"HEAD~1:{SRC}")  # the oracle patches it: its tree cannot be built
    report = lint_task(d, repo.path, write=True, reject=True)
    [finding] = report.quality.findings
    assert finding.startswith("interface not computed: oracle.patch does not apply at ") and \
        f"error: failed to read {SRC}" in finding, finding
    assert (d / "instruction.md").read_text() == instruction  # the section it has is kept
    task = load_bundle(d).task
    assert task.quality.interface == written.quality.interface
    assert not report.rejected and task.validation.status == "valid"  # the clone's fault, not the task's


def test_lint_cli_finds_the_tasks_profile_in_the_state_dir(make_repo, tmp_path, monkeypatch):
    monkeypatch.delenv("SWESERVE_CONFIG_DIR", raising=False)
    state = tmp_path / "elsewhere" / "state"  # not the default .sweserve of the working folder
    (state / "profiles").mkdir(parents=True)
    spec = state / "profiles" / "myengine.json"
    spec.write_text(json.dumps({"extends": "sglang"}))
    repo = make_repo()
    repo.commit("init", {SRC: BASE_SRC, TEST: BASE_TEST})
    repo.commit(STATEMENT, {SRC: ORACLE_SRC, TEST: PR_TEST})
    tasks = tmp_path / "tasks"
    assert mine(open_repo(repo.path), load_profile(str(spec)), tasks).written == [TASK]
    assert load_bundle(tasks / TASK).task.profile == "myengine"
    out = run_cli("tasks", "lint", "--state-dir", str(state), "--tasks", str(tasks), "--repo-path", str(repo.path),
                  "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stderr  # linted (the decorator-made name is unfair), not an unknown profile
    assert json.loads(out.stdout)[0]["family"] == "decoding"


HELPERS_TEST = "from sglang.srt.layers import sampler\n\n" + "".join(
    f"\ndef check_{n}():\n    assert sampler.{n}_filter([1.0]) == [1.0]\n\n" for n in
    ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")) + \
    "\ndef test_filters():\n" + "".join(f"    check_{n}()\n" for n in
                                       ("hotel", "charlie", "alpha", "golf", "echo", "bravo", "foxtrot", "delta"))


def test_section_is_the_same_under_any_hash_seed_and_write_then_lint_is_not_stale(make_repo, tmp_path):
    import os
    import shutil

    repo = make_repo()
    repo.commit("init", {SRC: BASE_SRC, TEST: BASE_TEST})
    filters = "".join(f"\n\ndef {n}_filter(probs):\n    \"\"\"Filter {n}.\"\"\"\n    return probs\n"
                      for n in ("hotel", "alpha", "golf", "bravo", "charlie", "foxtrot", "delta", "echo"))
    repo.commit(STATEMENT, {SRC: BASE_SRC + filters, TEST: HELPERS_TEST})
    tasks = tmp_path / "tasks"
    assert mine(open_repo(repo.path), load_profile("sglang"), tasks).written == [TASK]
    shutil.copytree(tasks, tmp_path / "tasks2")
    common = ["--state-dir", str(tmp_path / "state"), "--repo-path", str(repo.path)]

    def lint_cli(folder, seed, *more):
        return subprocess.run([sys.executable, "-m", "sweserve.cli", "tasks", "lint", "--tasks", str(folder),
                               *common, *more], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)})

    sections = []
    for folder, seed in ((tasks, 1), (tmp_path / "tasks2", 2)):
        assert lint_cli(folder, seed, "--write").returncode == 0
        sections.append((folder / TASK / "instruction.md").read_bytes())
    assert sections[0] == sections[1]
    names = [line.split("`")[1] for line in sections[0].decode().splitlines() if line.startswith("- ")]
    assert names == sorted(names) and len(names) == 8  # one kind (function): by name
    again = lint_cli(tasks, 3, "--json")
    assert again.returncode == 0 and not any("lacks the current" in n
                                             for n in json.loads(again.stdout)[0]["quality"]["notes"])


# -- the section's defects on real tasks, each as a fixture (issue 16, point 5)

KV = "python/sglang/srt/mem_cache/kv_layout.py"
KV_TEST = "test/srt/test_kv_layout.py"
BASE_KV = '''"""Page layout of the KV cache."""
from dataclasses import dataclass


@dataclass
class PageTable:
    pages: list[int]


def page_ids(seq_lens, page_size=16):
    """The page of every token."""
    return [n // page_size for n in seq_lens]


def pack(tokens, page_size, pad):
    return list(tokens)


def plan(reqs, *, budget=100):
    return list(reqs)
'''
ORACLE_KV = '''"""Page layout of the KV cache."""
from dataclasses import dataclass

import numpy as np


@dataclass
class PageTable:
    pages: np.ndarray


def page_ids(seq_lens, offsets, page_size=64, dp_rank=0):
    """The page of every token."""
    return np.asarray([(n + o) // page_size for n, o in zip(seq_lens, offsets)])


def pack(tokens, pad, page_size):
    return list(tokens)


def plan(reqs, *, budget=100, rank):
    return list(reqs)
'''
KV_TESTS = '''import numpy as np

from sglang.srt.mem_cache.kv_layout import PageTable, page_ids, pack, plan


def test_page_ids_with_offsets():
    ids = page_ids([10, 70], [0, 0], 64, 1)
    assert ids.shape == (2,) and ids.mean() == 0.5 and ids.std() == 0.5


def test_pack_order():
    assert pack([1, 2], 0, 16) == [1, 2]


def test_plan_rank():
    assert plan([1], rank=0) == [1]


def test_default_page_size():
    assert page_ids([64], [0])[0] == 1


def test_table_is_an_array():
    table = PageTable(np.zeros(3))
    assert table.pages.shape == (3,)
'''


def test_section_names_changed_signatures_defaults_and_containers(make_repo, tmp_path):
    """Two new positional parameters of an existing function, a reorder, a new required keyword, a changed
    default and lists turned into arrays are announced, not missed; attributes of the numpy arrays the
    tests hold (shape, mean, std) are not."""
    repo = make_repo()
    repo.commit("init", {KV: BASE_KV, KV_TEST: "def test_nothing():\n    pass\n"})
    repo.commit("Page ids take request offsets (#50)\n\nToken pages must account for each request's offset.",
                {KV: ORACLE_KV, KV_TEST: KV_TESTS})
    tasks = tmp_path / "tasks"
    assert mine(open_repo(repo.path), load_profile("sglang"), tasks).written == [TASK]
    report = lint_task(tasks / TASK, repo.path, write=True)
    changed = {i.name.rsplit(".", 1)[-1]: i for i in report.quality.interface if i.kind == "changed"}
    assert set(changed) == {"page_ids", "pack", "plan", "pages"}, report.quality.interface
    assert changed["page_ids"].change == ("new positional parameter `offsets` after `seq_lens`; new positional "
                                          "parameter `dp_rank` after `page_size`; `page_size` defaults to `64` "
                                          "(was `16`); returns an array (was a list)")
    assert changed["page_ids"].was == "page_ids(seq_lens, page_size=16)"
    assert changed["pack"].change == "positional parameters reordered to (tokens, pad, page_size)"
    assert changed["plan"].change == "new required keyword argument `rank`"
    assert changed["pages"].change == "is `np.ndarray` (was `list[int]`)"
    names = {i.name for i in report.quality.interface}
    assert not any(n.endswith((".shape", ".mean", ".std")) for n in names), names
    text = (tasks / TASK / "instruction.md").read_text()
    assert "- changed `sglang.srt.mem_cache.kv_layout.page_ids` in `python/sglang/srt/mem_cache/kv_layout.py`: new " \
           "positional parameter `offsets`" in text
    assert "Names marked changed exist already" in text
    assert report.quality.unfair == {}, report.quality.unfair


NEW_MODEL = "python/sglang/srt/models/tiny.py"
NEW_MODEL_SRC = '''"""A tiny model."""
import flax.nnx as nnx


class TinyModel(nnx.Module):
    def __init__(self, dim):
        self.dim = dim

    def forward(self, x):
        return x
'''
REACH_TEST = '''import numpy as np

from sglang.srt.models.tiny import TinyModel
from sglang.srt.mem_cache.kv_layout import PageTable


class TestTiny:
    def setup_method(self):
        self.model = TinyModel(4)

    def _from_config(self):
        return PageTable.from_dict({"pages": []})  # a helper no test calls

    def test_forward(self):
        out = self.model.forward(np.ones(4))
        assert self.model.params is not None  # nnx.Module's, not the repository's
        out = np.asarray(out)
        assert out.mean() == 1.0 and out.shape == (4,)

    def test_config(self):
        assert self._from_config()


def unused_helper():
    return PageTable.from_dict({})


if __name__ == "__main__":
    PageTable.from_dict({})
'''


def test_no_finding_for_third_party_attributes_or_names_the_test_never_reaches(make_repo, tmp_path):
    repo = make_repo()
    repo.commit("init", {KV: BASE_KV, KV_TEST: "def test_nothing():\n    pass\n"})
    repo.commit("Add a tiny model (#50)\n\nSupport the tiny model: a model whose forward pass maps its inputs to "
                "themselves, so that the serving stack can be exercised end to end without any weights.",
                {NEW_MODEL: NEW_MODEL_SRC, KV_TEST: REACH_TEST})
    tasks = tmp_path / "tasks"
    assert mine(open_repo(repo.path), load_profile("sglang"), tasks).written == [TASK]
    set_fail_to_pass(tasks / TASK, [f"{KV_TEST}::TestTiny::test_forward"])
    report = lint_task(tasks / TASK, repo.path, write=True)
    names = {i.name for i in report.quality.interface}
    assert names == {"sglang.srt.models.tiny", "sglang.srt.models.tiny.TinyModel",
                     "sglang.srt.models.tiny.TinyModel.forward"}, names
    # from_dict: only in a helper the test never calls and in a __main__ block, and nobody defines it
    assert report.quality.unfair == {} and report.passed, report.quality.findings
    assert not any("from_dict" in n for n in report.quality.notes), report.quality.notes
    # the same name in code a test does reach, still defined by nobody: a note, never an unfair finding
    set_fail_to_pass(tasks / TASK, [f"{KV_TEST}::TestTiny::test_forward", f"{KV_TEST}::TestTiny::test_config"])
    reached = lint_task(tasks / TASK, repo.path)
    assert reached.quality.unfair == {}
    assert any("PageTable.from_dict" in n and "not judged unfair" in n for n in reached.quality.notes)


def test_the_interface_gives_a_docstrings_whole_first_sentence_not_its_first_line():
    """A first line can stop mid-sentence ("... (slot 0 is"): a blind reviewer could not tell the contract of
    the padding rows from it. The section gives the first paragraph, cut only after a whole sentence."""
    import ast

    from sweserve.dataset import interface

    source = '''
def future_slot_indices(batch):
    """Ring slots of the batch's rows. Padding rows go to the sentinel slot `map_size` (slot 0 is
    a real request's slot), so that they are dropped.

    Details that are not the summary.
    """
'''
    fn = ast.parse(source).body[0]
    assert interface._doc(fn) == ("Ring slots of the batch's rows. Padding rows go to the sentinel slot `map_size` "
                                  "(slot 0 is a real request's slot), so that they are dropped.")
    long_doc = "First sentence is here. " + "word " * 80 + "ends. Another sentence."
    fn = ast.parse(f'def f():\n    """{long_doc}"""\n').body[0]
    summary = interface._doc(fn)
    assert summary.endswith(".") and len(summary) <= interface.DOC_SUMMARY_CHARS and summary.startswith("First")


def test_the_interface_gives_a_long_signature_whole():
    """A new keyword's Callable type (the argument order a test calls it with) sat past 300 characters of an
    existing function's signature and was cut off with "..."; a blind reviewer could not pass the test."""
    import ast

    from sweserve.dataset import interface
    from sweserve.dataset.interface import Found

    params = ", ".join(f"select_policy_{i}: Callable[[list[int], list[int]], int | None]" for i in range(6))
    source = f"def assign_ranks(*, {params}, select_shape: Callable[[int, int, list[int], list[int]], int]) -> None:\n    pass\n"
    fn = ast.parse(source).body[0]
    text = interface.signature(Found(module=None, node=fn, qual="assign_ranks"))
    assert len(text) > 300 and text.endswith("select_shape: Callable[[int, int, list[int], list[int]], int]) -> None")
