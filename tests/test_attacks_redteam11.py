"""An eleventh red team's attacks: surfaces other than twin values (the outcome stream's recorder, the exports'
report format and apply, the disk limit at grading, a flaky set-up beside twins, the host plan's randomness), and
the repository prior (R11-6).

Each test asserts the defended behaviour: it FAILS while the attack wins (each failed before its fix). Honest runs are the oracle's code run by the real boot script (`python -I`, autoload off, the
nonce'd stream), as `tests.test_attacks_twins._run` does, no Docker.

- R11-1 WIN (honest false fail, every run, SWE-bench export): a graded test id holding whitespace (a parametrize
  id such as `test_x[1 2 4.5]`, `test_generate[hello world]`: pytest keeps spaces in ids) is recorded by validation
  as is and written by the in-box verifier as `PASSED <id>` between SWE-bench's markers; SWE-bench's
  `parse_log_pytest` keys each line by `line.split()[1]`, i.e. `test_x[1`, so the graded id is never found: the
  oracle, `resolved` by sweserve's own verifier, is RESOLVED_NO in SWE-bench's harness on every run. A P2P id with a
  space is enough (P2P lists hold every passing parametrized test of the hidden files).
- R11-2 WIN (honest false fail, per run, at the flake rate): an image with pytest-rerunfailures (its plugins are
  loaded by `-p`, as the boot script does for every `pytest11` plugin of the image) and a test marked
  `@pytest.mark.flaky(reruns=2)`: the plugin logs each failed attempt as a report whose outcome is `"rerun"`;
  `sweserve_outcomes.Recorder` maps every `call` report that is neither passed nor skipped to `failed`, and the
  stream keeps the worst report: a test pytest reports passed (after a rerun) is graded `failed`. Measured: a test
  failing one attempt in four, 4 of 24 honest gradings failed, plain pytest with the plugin 0 of 24.
- R11-3 WIN (honest false fail, per prediction, SWE-bench export): SWE-bench's harness applies a prediction with
  `git apply`, `--3way`, `--reject`, then `patch --fuzz=5`; the in-box verifier resets that tree to base and
  re-applies the raw prediction with a strict `git apply --index`: a correct fix whose context differs in
  whitespace (a trailing space) is applied by SWE-bench and `patch_failed` in the verifier (RESOLVED_NO).
- R11-4 WIN (crash as `error` instead of a verdict; Docker): code the hidden tests import writes 40 x 20 MB to /tmp
  as the test user; the grade box's disk watchdog stops it and the trial is `error` (kind `limit`), not `failed`.
  `run --retry-errors` redoes `error` attempts with a fresh grading plan, so a forger that fills the disk on the draws
  it cannot read and forges on the others turns a per-draw win rate q into 1 - (1 - q)^retries.
- R11-5 WIN (honest `tampered`, per run, at set-up flake rate times the members): `_read` calls a twin that errored
  (or a canary that errored) beside passing tests tampering. A set-up that flakes (a port another process took, a
  download time-out) errors a twin or a canary as often as the real test, and there are K twins per group plus the
  canaries: the oracle with a set-up failing at p = 0.05 per test is `tampered` 18 of 40 times (failed 4, resolved
  18); a deterministic "third set-up fails" fixture: tampered on 6 of 8 seeds, failed on 2.
- R11-6 WIN (forge odds): the repository prior was three sets, the numbers any file writes, those the test files
  write, and those the test files beside the hidden one write. A member inside a set where the real value is
  inside says nothing more, so validation balanced its draws on membership alone. But a value a test checks is
  often a constant the code writes in several places (a default, a limit), while its neighbours sit once in a
  table. Betting on the member most files write won 1.0 against recorded odds of 0.25 (the real value in 5 more
  files than a table of its neighbours; 7 files against 6 as well, so bands of counts do not hold), and so did
  betting on the member the module under test writes, with every member written by as many files, and betting
  on the member one file writes most often (a table of neighbours and the real value as a constant five times).
  Fix (a mechanism, `twins.Written`): every file is a set a forger may bet on, and so is every count of files;
  the prior that closes all of them at once is the values written by exactly the files that write the real one
  (none, for a value no file writes). Each file's numbers written at least k times are a file of their own
  (`guard.REPEAT`, k in `twins.REPEATS`: exact up to 8, then bands). Every member shares the real value's set
  of files, or the site is weak. Each case also shows the bet winning with `Written` left out.
  `test_a_bet_on_which_files_write_a_member_does_not_beat_the_recorded_odds`; the control, members written by
  the same files keep a strong site: `test_members_written_by_the_same_files_keep_a_strong_site`.
  Left: counts past 8 are read in bands (a value written 13 times against neighbours written 12), and the
  context a number is written in (beside a word like `limit`) is no prior the guard reads.

Fixed since (each test here failed before its fix):
- R11-1: the SWE-bench export lists, and its verifier prints, each graded id as `sweserve_protocol.log_name`
  gives it (whitespace and '%' percent-encoded where the id holds whitespace); ids that would print alike are
  refused at export.
- R11-2: `Recorder` sends nothing for a `rerun` report: the attempt after it decides (none: `missing`).
  pytest-rerunfailures is a test dependency, so the test runs the real plugin.
- R11-3: where SWE-bench's harness has applied its prediction, the verifier grades what it applied (the tree's
  diff, less `*.orig`/`*.rej` backups the prediction does not name) instead of applying it again strictly.
- R11-4: a limit broken while the hidden tests run is `failed` (`grading.run_tests`: a TestRunError, as a
  time-out is), and `run --retry-errors` never redoes an error of kind `limit` (`evaluate.OWN_ERRORS`): in the
  candidate's phase too, a disk limit or a submission too large stays `error` but is its result.
- R11-5: a twin skipped or errored beside its passing test, or a canary beside passing neighbours, is no
  evidence either way: its test (for a canary, every graded test) fails, with no accusation; a twin missing
  from a complete stream is still `tampered`. Not built: rerunning such a member in a fresh process.
- The lead on the host plan's randomness: an unseeded plan draws from `random.SystemRandom`.

Leads, not reproduced (left): an event line longer than a pipe's atomic write (PIPE_BUF; a failure message of
several KB) could be split by another writer on the same stdout and read as malformed (`tampered`); the boot's
stream is a duplicate of the original stdout, and pytest's capture moves the tests' own output (and their
children's) away from it, so only a writer that reopens the original stdout would. An error of kind `agent` is
still redone by `--retry-errors` (an API failure must be); an agent that crashes itself on purpose gets a fresh
attempt that way.
Looked at, no finding (red team 11): the stream parser's strict schema (a writer without the nonce only makes
events malformed); the export verifier's reading loop and output cap; `../` paths in a prediction; SWE-bench log
injection (output shown after the end marker, markers broken); Harbor's private /tests and root-written
reward.txt; the `timeout` process's command line; twins told apart by features other than values; escaping in
the board and review pages; the `cache` fixture under `-p no:cacheprovider` (`runner_only` catches it).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import types
from collections import Counter
from decimal import Decimal
from pathlib import Path
from unittest import mock

import pytest

from sweserve.evaluation import guard, twins
from sweserve.harness.sweserve_protocol import log_name
from tests import test_attacks_twins as T
from tests.test_attacks_redteam8 import CONVERT, _bet_among

FILE = T.FILE


def _verify_module():
    """The exports' in-box verifier, importable here (its sibling `sweserve_resets` is evaluation/resets.py)."""
    import sweserve.evaluation.resets as resets
    import sweserve.harness as harness

    sys.modules.setdefault("sweserve_resets", resets)
    here = os.path.dirname(harness.__file__)
    if here not in sys.path:
        sys.path.insert(0, here)
    import sweserve_verify

    return sweserve_verify


# --- R11-1: SWE-bench's log parser and ids with whitespace --------------------------------------------------------

SPACED = '''import pytest

from pkg.thing import mean


@pytest.mark.parametrize("text", ["1 2 4.5"])
def test_mean_of_text(text):
    assert mean([float(v) for v in text.split()]) == pytest.approx(2.5)
'''


def test_an_id_with_a_space_is_resolved_by_swebench_when_sweserve_resolves_it(tmp_path):
    """The oracle through the real boot script (sweserve: `passed`), its verdict printed by the in-box verifier's
    `report_swebench`, then read back by SWE-bench's own `get_logs_eval` and `get_eval_tests_report`."""
    pytest.importorskip("swebench")
    from swebench.harness.grading import get_eval_tests_report, get_logs_eval, get_resolution_status

    real = f"{FILE}::test_mean_of_text[1 2 4.5]"
    task = T._task(FAIL_TO_PASS=[real], PASS_TO_PASS=[])
    run = T._run(tmp_path, twins.grading_plan(task, {FILE: SPACED}), T.ORACLE, task=task)
    assert run.outcomes.get(real) == "passed" and not run.tampered, (run.outcomes, run.tampered)
    verify = _verify_module()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        verify.report_swebench({"FAIL_TO_PASS": [real], "PASS_TO_PASS": []}, "resolved", None,
                               {real: run.outcomes[real]}, {}, run.output)
    log = tmp_path / "test_output.txt"
    log.write_text(out.getvalue())
    status_map, ok = get_logs_eval(types.SimpleNamespace(log_parser="parse_log_pytest"), str(log))
    # the row lists the id as the verifier prints it (`log_name`), as `swebench_row` writes it
    report = get_eval_tests_report(status_map, {"FAIL_TO_PASS": [log_name(real)], "PASS_TO_PASS": []})
    assert ok and get_resolution_status(report) == "RESOLVED_FULL", (status_map, report)


# --- R11-2: pytest-rerunfailures' "rerun" reports -----------------------------------------------------------------

FLAKY = '''import pytest

from pkg.thing import mean

_tries = []


@pytest.mark.flaky(reruns=2)
def test_mean_after_warm_up():
    _tries.append(1)
    if len(_tries) == 1:  # the first request after start-up times out (a cold cache, a server warming up)
        raise TimeoutError("cold start")
    assert mean([1.0, 2.0, 4.5]) == pytest.approx(2.5)
'''
def test_a_test_pytest_passes_after_a_rerun_is_not_graded_failed(tmp_path):
    plugin = pytest.importorskip("pytest_rerunfailures")  # a test dependency: the real plugin
    site = os.path.dirname(plugin.__file__)
    real = f"{FILE}::test_mean_after_warm_up"
    task = T._task(FAIL_TO_PASS=[real], PASS_TO_PASS=[])
    plan = twins.grading_plan(task, {FILE: FLAKY})
    # control: plain pytest with the plugin in the same tree says the test passed (after one rerun)
    root = tmp_path / "plain"
    root.mkdir()
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "thing.py").write_text(T.ORACLE)
    (root / "test").mkdir()
    (root / FILE).write_text(FLAKY)
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "pytest_rerunfailures", FILE],
                           cwd=root, capture_output=True, text=True, timeout=120,
                           env={"PYTHONPATH": f"{root}:{site}", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert f"PASSED {real}" in plain.stdout and "1 rerun" in plain.stdout, plain.stdout[-2000:]
    run = T._run(tmp_path, plan, T.ORACLE, task=task, plugins=["pytest_rerunfailures"], paths=[site])
    assert not run.tampered, run.tampered
    assert run.outcomes.get(real) == "passed", run.outcomes


# --- R11-3: a prediction SWE-bench applies with its fall-backs, re-applied strictly by the in-box verifier ----------

# the oracle's change as a model often writes it: one context line carries a trailing space the file does not have
FUZZY_PREDICTION = ("diff --git a/pkg/thing.py b/pkg/thing.py\n"
                    "--- a/pkg/thing.py\n"
                    "+++ b/pkg/thing.py\n"
                    "@@ -8,4 +8,4 @@ def scale(values, factor):\n"
                    " \n"
                    " \n"
                    " def mean(values):  \n"  # the trailing space the file does not have
                    "-    return sum(values) / (len(values) + 1)\n"
                    "+    return sum(values) / len(values)\n")
SWEBENCH_APPLY = ["git apply --verbose", "git apply --verbose --3way", "git apply --verbose --reject",
                  "patch --batch --forward --fuzz=5 -p1 -i"]  # swebench.harness.run_evaluation.GIT_APPLY_CMDS


def _sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_a_prediction_swebench_applied_is_graded_as_applied(tmp_path, monkeypatch):
    """SWE-bench's harness applies a prediction with `git apply`, then `--3way`, `--reject`, then `patch --fuzz=5`,
    and runs the eval script only once one applied (else `Patch Apply Failed`). The in-box verifier then throws that
    tree away (`to_base`: reset to base) and applies the prediction's raw text again with a strict `git apply
    --index` (`submit`): a correct fix whose context line differs in whitespace is `patch_failed` there, every
    FAIL_TO_PASS printed FAILED: RESOLVED_NO, where SWE-bench itself grades the tree it applied."""
    import shutil

    if not shutil.which("patch"):
        pytest.skip("GNU patch not installed")
    repo = tmp_path / "testbed"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "thing.py").write_text(T.BASE)
    assert _sh("git init -q && git add -A && git -c user.email=a@b -c user.name=a commit -qm base", repo).returncode == 0
    base = _sh("git rev-parse HEAD", repo).stdout.strip()
    prediction = tmp_path / "patch.diff"
    prediction.write_text(FUZZY_PREDICTION)
    for attempt, cmd in enumerate(SWEBENCH_APPLY):  # as swebench's run_instance does
        if attempt:
            _sh("git checkout -- . ; git clean -fd", repo)
        if _sh(f"{cmd} {prediction}", repo).returncode == 0:
            break
    else:
        pytest.fail("swebench's chain did not apply the prediction")
    fixed = T.BASE.replace("(len(values) + 1)", "len(values)")
    assert (repo / "pkg" / "thing.py").read_text() == fixed  # swebench applied exactly the fix
    verify = _verify_module()
    monkeypatch.setattr(verify, "WORKDIR", str(repo))
    monkeypatch.setattr(verify, "HERE", str(tmp_path))  # where it keeps the submission it read
    cfg = {"base_commit": base, "patch": str(prediction), "format": "swebench"}  # as in_image writes it
    try:
        patch = verify.to_base(cfg)
        changed = verify.submit(cfg, patch)
    except verify.Verdict as v:
        pytest.fail(f"the verifier refused a prediction swebench applied: {v.status} ({v.reason})")
    assert changed == {"pkg/thing.py": "M"} and (repo / "pkg" / "thing.py").read_text() == fixed


# --- R11-4: the code under test fills the grade box's disk: `error`, which `--retry-errors` redraws -----------------

DISK_HOG = ("import os as _os\n"
            "for _i in range(40):  # each file under RLIMIT_FSIZE, together past the task's disk limit\n"
            "    try:\n"
            "        with open(f'/tmp/.hog{_os.getpid()}_{_i}', 'wb') as _f:\n"
            "            _f.write(b'\\0' * 20_000_000)\n"
            "    except OSError:\n"
            "        break\n")


@pytest.mark.docker
def test_code_under_test_filling_the_disk_at_grading_is_not_an_error(demo, tmp_path):
    """The submission is the real fix plus code the hidden tests import that writes 40 x 20 MB to /tmp as the
    unprivileged test user (the tests may write /tmp). The grade box's disk watchdog kills the box past
    `resources.disk_gb` and the trial ends `error` (kind `limit`): not a verdict, retried by `run --retry-errors`
    with a fresh grading plan. A forger with any draw-dependent prior fills the disk on the draws it cannot read
    and forges on the others. Defended: the grading of a submission whose own code broke a limit is `failed`."""
    from test_attacks_isolation import DIST, grading_time_agent, run_one

    b = demo.bundle(DIST).model_copy(deep=True)
    b.task.resources.disk_gb = 0.25
    (r,), _ = run_one(demo, tmp_path, grading_time_agent("grade-disk-hog", DISK_HOG), bundles=[b])
    assert r.status != "resolved", r
    assert r.status in ("failed", "tampered"), (r.status, r.error_kind, r.reason)


# --- R11-5: an honest flake in a twin's or a canary's set-up is graded `tampered` ----------------------------------

ONE_SETUP_FLAKES = T.HIDDEN.replace("from pkg.thing import mean, scale, shard_range", '''from pkg.thing import mean, scale, shard_range

_setups = []


@pytest.fixture(autouse=True)
def _port():  # a free port for the test's server: once in the session another process has just taken it
    _setups.append(1)
    if len(_setups) == 3:
        raise OSError("address already in use")
    yield''')


@pytest.fixture(scope="module")
def validated(tmp_path_factory):
    return _validate(tmp_path_factory)


def _validate(tmp_path_factory):
    """`tests.test_attacks_twins.validated`, inlined (a fixture cannot be called)."""
    from sweserve.evaluation.derive import derive

    tmp = tmp_path_factory.mktemp("validate11")
    task = T._task()
    plan = twins.grading_plan(task, {FILE: T.HIDDEN}, candidates=True, seed=11)
    before = [T._run(tmp, plan, T.BASE) for _ in range(2)]
    after = [T._run(tmp, plan, T.ORACLE) for _ in range(2)]
    f2p, p2p, _ = derive(before, after)
    kept, _ = twins.select(f2p + p2p, before, after)
    task.FAIL_TO_PASS, task.PASS_TO_PASS, task.twins = f2p, p2p, kept
    assert kept
    return task


def test_an_honest_set_up_flake_beside_passing_tests_is_not_tampering(validated, tmp_path):
    """The oracle, with an autouse fixture whose set-up fails once in the session (the third test to run: a port
    another process took). Without twins that fails one test, so `failed`. With twins and canaries:
    - when the third test to run is a twin or a canary, `_read` calls it tampering ("a twin ... errored while its
      test passed", "a canary ... errored while its neighbours passed");
    - a set-up flake of rate p then accuses honest solutions at about (twins + canaries) * p per run.
    Measured at p = 0.05 per set-up (random), 40 gradings: 18 tampered, 4 failed, 18 resolved.
    Defended: a member that errored (did not reach its check) is no evidence either way: `failed`, or the group
    rerun, never `tampered`."""
    verdicts = []
    for seed in range(8):
        run = T._run(tmp_path, twins.grading_plan(validated, {FILE: ONE_SETUP_FLAKES}, seed=seed), T.ORACLE)
        verdicts.append("tampered" if run.tampered else "resolved" if T._resolved(run, validated) else "failed")
    assert "tampered" not in verdicts, verdicts


# --- R11-6: which files write a value --------------------------------------------------------------------------

VALUE = 1317  # a strong site without a repository: not round, room for its shape on each side


def _rows(skip: int | None = None) -> str:
    """A lookup table (a fixture's rows) writing every value around VALUE once (but `skip`)."""
    return "ROWS = [" + ", ".join(str(v) for v in range(VALUE - 150, VALUE + 150) if v != skip) + "]\n"


def _tree(texts: dict[str, str]) -> tuple[dict[str, str], dict[str, frozenset[Decimal]]]:
    """The files, and the repository's numbers as `guard.repository_numbers` records them (`guard.entries`)."""
    return texts, {k: v for path, text in texts.items() for k, v in guard.entries(path, text).items()}


def _most_written(texts: dict[str, str]):
    """The forger's bet: the members the most files write (a count it reads from the tree)."""
    counts = Counter(n for text in texts.values() for n in twins.file_numbers(text))
    return lambda v: counts.get(v, 0) == max(counts.values())


def _most_often(texts: dict[str, str]):
    """The forger's bet: the members written the most times, over every file."""
    counts: Counter[Decimal] = sum((twins.file_counts(text) for text in texts.values()), Counter())
    return lambda v: counts.get(v, 0) == max(counts.values())


def _written_by(path: str):
    return lambda texts: lambda v: v in twins.file_numbers(texts[path])


LIMIT = f"LIMIT = {VALUE}\n"
REPOSITORIES = {
    # the real value in five more files than its neighbours' table
    "five-more-files": ({"pkg/table.py": _rows(), **{f"pkg/m{i}.py": LIMIT for i in range(5)}}, _most_written),
    # seven files against six: within any band of counts
    "one-more-file": ({**{f"pkg/table{i}.py": _rows() for i in range(6)}, "pkg/limits.py": LIMIT}, _most_written),
    # as many files each, but one of them is the module under test
    "the-module-under-test": ({"pkg/table.py": _rows(), "data/rows.py": _rows(skip=VALUE), "pkg/thing.py": LIMIT},
                              _written_by("pkg/thing.py")),
    # one file writes them all, the real value five times more
    "more-often-in-one-file": ({"pkg/table.py": _rows() + LIMIT * 5}, _most_often),
}


@pytest.mark.parametrize("case", sorted(REPOSITORIES))
def test_a_bet_on_which_files_write_a_member_does_not_beat_the_recorded_odds(case):
    texts, repository = _tree(REPOSITORIES[case][0])
    bet = REPOSITORIES[case][1](texts)
    source = CONVERT.replace("VALUE", str(VALUE))
    won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"], bet, 16,
                               repository=repository)
    assert won <= recorded + 0.1, (won, recorded)
    # without the defence: the members share the repository's three sets, and the bet wins against 0.25
    with mock.patch.object(twins.Written, "same", lambda self, value: frozenset(twins._window(value))):
        won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"], bet,
                                   16, repository=repository)
    assert won > recorded + 0.5, (won, recorded)


@pytest.mark.parametrize("copies", [1, 3])
def test_members_written_by_the_same_files_keep_a_strong_site(copies):
    """The control: where every member is written by exactly the files that write the real one (the same table
    rows), the prior says nothing, the site stays strong (recorded 1/4) and the bet on counts is at chance."""
    texts, repository = _tree({f"pkg/table{i}.py": _rows() for i in range(copies)})
    source = CONVERT.replace("VALUE", str(VALUE))
    won, recorded = _bet_among(source, "test_converts_a_large_input", [f"{FILE}::test_converts_nothing"],
                               _most_often(texts), 16, repository=repository)
    assert recorded == pytest.approx(0.25) and won <= recorded + 0.1, (won, recorded)
