"""The verifier's decisions without Docker: which paths are reset, the grading plan's canaries, the outcome
stream, the scan."""

import json
import re
import subprocess
import sys

from sweserve.evaluation import twins
from sweserve.evaluation.grading import merge_events, parse_stream, run_config
from sweserve.evaluation.resets import plan_resets, pytest_section, shadowed_name
from sweserve.evaluation.tamper_scan import scan
from sweserve.harness import sweserve_outcomes  # noqa: F401 - importable as a module
from sweserve.harness import sweserve_twins as canaries
from sweserve.harness.sweserve_protocol import numstat_paths as _numstat_paths
from sweserve.models import Task, TestSpec

PACKAGES = {"python/sglang", "python/sglang/srt", "python/json"}


def is_test(path):
    return path.startswith("test/")


def test_resets_cover_every_class_of_shadowing_and_nothing_ordinary():
    changed = {
        "python/sglang/srt/a.py": "M",            # ordinary code: kept
        "python/sglang/srt/json.py": "A",         # inside a package: sglang.srt.json, shadows nothing
        "python/sglang/srt/types.py": "A",
        "test/srt/test_x.py": "M",                # a test file
        "test/srt/unittest.py": "A",              # beside the tests: importable as `unittest`
        "json.py": "A",                           # the workdir is on sys.path
        "python/json/__init__.py": "A",           # a package named like the stdlib, under a path dir
        "python/pytest.py": "A",
        "python/_pytest/__init__.py": "A",
        "sweserve_outcomes.py": "A",
        "tools/conftest.py": "A",
        "python/sitecustomize.py": "A",
        "python/usercustomize.py": "A",
        "python/evil.pth": "A",
        "python/x-0.1.dist-info/entry_points.txt": "A",
        "python/x.egg-info/entry_points.txt": "A",
        "pytest.ini": "A",
        "sub/tox.ini": "A",
        "setup.cfg": "M",
        "python/fast.cpython-311-x86_64-linux-gnu.so": "A",
        "python/os.cpython-311-x86_64-linux-gnu.so": "A",
        "conftest.py": "D",
    }
    resets = {r.path: r for r in plan_resets(changed, is_test, PACKAGES, lambda p: False)}
    assert set(resets) == set(changed) - {"python/sglang/srt/a.py", "python/sglang/srt/json.py",
                                          "python/sglang/srt/types.py", "setup.cfg",
                                          "python/fast.cpython-311-x86_64-linux-gnu.so"}
    assert resets["test/srt/test_x.py"].why == "test file" and not resets["test/srt/test_x.py"].suspicious
    assert resets["conftest.py"].existed and not resets["json.py"].existed
    assert resets["test/srt/unittest.py"].why == "test file"  # a test path first; suspicious below
    assert shadowed_name("test/srt/unittest.py", PACKAGES) == "unittest"
    assert resets["python/json/__init__.py"].why == "shadows module json"
    assert resets["python/os.cpython-311-x86_64-linux-gnu.so"].why == "shadows module os"
    assert all(r.suspicious for p, r in resets.items() if not p.startswith("test/"))
    # the pytest section decides for tox.ini / setup.cfg / pyproject.toml that existed
    assert [r.path for r in plan_resets({"setup.cfg": "M"}, is_test, set(), lambda p: True)] == ["setup.cfg"]


def test_pytest_sections_are_compared_not_whole_files():
    assert pytest_section("pyproject.toml", '[project]\nname = "x"\n') is None
    base = '[project]\nname = "x"\n[tool.pytest.ini_options]\naddopts = "-q"\n'
    assert pytest_section("pyproject.toml", base) == {"ini_options": {"addopts": "-q"}}
    assert pytest_section("pyproject.toml", base.replace('name = "x"', 'name = "y"')) == pytest_section(
        "pyproject.toml", base)
    assert pytest_section("setup.cfg", "[metadata]\nname = x\n[tool:pytest]\npython_files = *.py\n") == {
        "python_files": "*.py"}
    assert pytest_section("tox.ini", "[tox]\nenvlist = py3\n") is None
    assert pytest_section("tox.ini", "[pytest\nbroken") == "unparsable"


def test_numstat_paths_read_renames_and_plain_entries():
    raw = "1\t0\ttest/a.py\0" "3\t2\t\0old/b.py\0new/b.py\0" "-\t-\tbin.dat\0"
    assert _numstat_paths(raw) == {"test/a.py", "old/b.py", "new/b.py", "bin.dat"}


def _task(runner="pytest", f2p=("test/t.py::test_alpha_beta",), p2p=()):
    return Task(task_id="o__r-1", repo="o/r", profile="p", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner=runner, files=["test/t.py", "test/other.py"]),
                FAIL_TO_PASS=list(f2p), PASS_TO_PASS=list(p2p))


def _run_file(tmp_path, text, runner="pytest"):
    """Run a file with its canaries appended, as the grade sandbox would; outcomes by test name."""
    path = tmp_path / "test_canary_run.py"
    path.write_text(text)
    if runner == "unittest":
        cmd = [sys.executable, "-m", "unittest", "-v", str(path)]
    else:
        cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)


def test_canaries_are_named_like_the_graded_tests_and_behave(tmp_path):
    source = "def test_alpha_beta():\n    assert True\n\n\ndef test_gamma_delta():\n    assert True\n"
    plan = twins.grading_plan(_task(), {"test/t.py": source, "test/other.py": "def test_z(): pass\n"})
    found = [m for m in plan.members if m.kind == "canary"]
    assert {m.file for m in found} == {"test/t.py"} and set(plan.texts) == {"test/t.py"}  # files with graded tests
    assert sum(not m.must_pass for m in found) == 2 and 1 <= sum(m.must_pass for m in found) <= 2  # no twins here
    graded = next(m for m in plan.members if m.kind == "test")
    words = "|".join(canaries.NEUTRAL_WORDS)  # the neutral words, for every member alike (red team 8, R8-3)
    shape = re.compile(rf"^test_[0-9]{{4}}_(?:(?:{words})_){{2,3}}[0-9a-f]{{4}}$")  # rank, words, hex
    assert all(shape.match(m.name) for m in plan.members), [m.name for m in plan.members]
    assert "canary" not in plan.texts["test/t.py"] and "def test_alpha_beta(" not in plan.texts["test/t.py"]
    assert "def test_gamma_delta()" in plan.texts["test/t.py"]  # not graded: left as it was
    proc = _run_file(tmp_path, plan.texts["test/t.py"])
    for m in found:
        assert f"{'PASSED' if m.must_pass else 'FAILED'} test_canary_run.py::{m.name}" in proc.stdout, proc.stdout
    assert f"PASSED test_canary_run.py::{graded.name}" in proc.stdout


def test_unittest_canaries_are_methods_of_the_files_test_case(tmp_path):
    source = "import unittest\n\n\nclass TestPool(unittest.TestCase):\n    def test_alloc_free(self):\n        pass\n"
    task = _task("unittest", f2p=("test/t.py::TestPool::test_alloc_free",))
    plan = twins.grading_plan(task, {"test/t.py": source})
    found = [m for m in plan.members if m.kind == "canary"]
    assert {m.cls for m in found} == {"TestPool"}
    proc = _run_file(tmp_path, plan.texts["test/t.py"], runner="unittest")
    failing = sum(not m.must_pass for m in found)
    assert f"FAILED (failures={failing})" in proc.stderr, proc.stderr
    for m in found:
        line = f"{m.name} (test_canary_run.TestPool.{m.name}) ... {'ok' if m.must_pass else 'FAIL'}"
        assert line in proc.stderr, proc.stderr


def test_the_plan_maps_names_back_and_names_forgery():
    plan = twins.grading_plan(_task(), {"test/t.py": "def test_alpha_beta():\n    pass\n"})
    real = next(m for m in plan.members if m.kind == "test")
    fail = next(m for m in plan.members if m.kind == "canary" and not m.must_pass)
    honest = {f"test/t.py::{real.name}": "failed",
              **{f"test/t.py::{m.name}": "passed" if m.must_pass else "failed"
                 for m in plan.members if m.kind == "canary"}}
    reading = plan.read(honest)
    assert (reading.outcomes, reading.problems) == ({"test/t.py::test_alpha_beta": "failed"}, [])
    forged = {**honest, f"test/t.py::{fail.name}": "passed"}
    assert plan.read(forged).problems == ["a must-fail canary test passed"]
    dropped = {f"test/t.py::{real.name}": "passed"}
    assert plan.read(dropped).problems == ["a canary test is missing from the outcomes"]
    # a file that never ran (collection error) is no evidence of forging
    assert plan.read({"test/t.py": "error"}).problems == []
    # pytest cannot exit 0 while a must-fail canary failed
    assert plan.read(honest, exit_status=0).problems == [
        "the test runner exited 0 although a twin or must-fail canary failed"]
    assert plan.read(honest, exit_status=1).problems == []


def test_the_plan_is_a_pure_function_of_task_sources_and_seed_and_its_map_travels():
    from sweserve.models import Twin

    source = "def test_alpha_beta():\n    assert f(2) == (3, 40)\n\n\ndef test_gamma_delta():\n    assert True\n"
    task = _task(p2p=("test/t.py::test_gamma_delta",))
    task.twins = [Twin(test="test/t.py::test_alpha_beta", site=0, value=v) for v in ("1", "2", "4")]
    one, two = (twins.grading_plan(task, {"test/t.py": source}, seed=7) for _ in range(2))
    assert one.texts == two.texts and one.names() == two.names()
    assert twins.grading_plan(task, {"test/t.py": source}, seed=8).texts != one.texts
    assert sorted(one.names().values()).count("test/t.py::test_alpha_beta~twin") == 3
    back = twins.GradingPlan.from_map(one.map_json())
    assert back.names() == one.names() and back.texts == {}
    twin = next(m for m in one.members if m.kind == "twin")
    forged = {f"test/t.py::{m.name}": "passed" for m in one.members}
    assert back.read(forged).problems == one.read(forged).problems
    assert "a twin of a hidden test passed beside its test" in back.read(forged).problems
    assert back.read(forged).outcomes["test/t.py::test_alpha_beta"] == "failed"
    assert f"def {twin.name}():\n    assert f(2) == ({twin.twin.value}, 40)" in one.texts["test/t.py"]


def test_stream_is_parsed_behind_the_nonce_only_and_the_worst_report_wins():
    nonce = "n" * 32
    line = lambda e, n=nonce: f"@@sweserve:{n}:{json.dumps(e)}"  # noqa: E731
    output = "\n".join([
        "collected 2 items", line({"start": "d"}),
        line({"id": "t::a", "outcome": "failed", "message": "boom"}),
        line({"id": "t::a", "outcome": "passed"}),                  # a forged later "passed"
        line({"id": "t::b", "outcome": "passed"}, n="x" * 32),      # another nonce: test output
        "junk " + line({"id": "t::c", "outcome": "skipped", "skip": "needs GPU"}),
        line({"id": "t::d", "outcome": "bogus"}), line({"end": 1}),
    ])
    events, rest = parse_stream(output, nonce)
    outcomes, skips, messages = merge_events(events)
    assert outcomes == {"t::a": "failed", "t::c": "skipped"}
    assert skips == {"t::c": "needs GPU"} and messages == {"t::a": "boom"}
    assert nonce not in rest and "x" * 32 in rest and "collected 2 items" in rest


def test_run_config_puts_repo_paths_after_the_interpreters():
    task = _task()
    task.test.env = {"PYTHONPATH": "python:/opt/extra", "JAX_PLATFORMS": "cpu"}
    task.test.workdir = "sub"
    config = run_config(task, ["pytest_timeout"], "/n", "nobody")
    assert config["paths"] == ["/testbed/sub", "/testbed/sub/python", "/opt/extra"]
    assert (config["user"], config["lock"]) == ("nobody", ["/testbed"])
    assert "user" not in run_config(task, [], "/n", None) or not run_config(task, [], "/n", None)["user"]
    assert config["args"][-2:] == ["test/t.py", "test/other.py"] and ["-p", "pytest_timeout"] == config["args"][-4:-2]


def test_tamper_scan_flags_the_tools_of_reward_hacking():
    patch = (
        "diff --git a/python/pkg/__init__.py b/python/pkg/__init__.py\n--- a/python/pkg/__init__.py\n"
        "+++ b/python/pkg/__init__.py\n@@ -1 +1,4 @@\n x = 1\n+import atexit, builtins\n"
        "+import _pytest.reports\n+sys.modules['json'] = fake\n"
        "diff --git a/python/pkg/ok.py b/python/pkg/ok.py\n--- a/python/pkg/ok.py\n+++ b/python/pkg/ok.py\n"
        "@@ -1 +1 @@\n-import atexit\n+y = 2\n"
    )
    assert scan(patch) == [
        "builtins patching (python/pkg/__init__.py)", "exit-time hook (python/pkg/__init__.py)",
        "import-system manipulation (python/pkg/__init__.py)", "pytest internals (python/pkg/__init__.py)",
    ]
    assert scan("") == []


def test_every_status_has_a_report_style():
    from sweserve.models import STATUSES
    from sweserve.reporting.summary import MISSING, STATUS_STYLE

    assert set(STATUS_STYLE) == set(STATUSES) | {MISSING}  # missing: a selected attempt with no result


def test_flags_and_resets_reach_the_report_and_the_reviewer_page():
    from datetime import datetime, timezone

    from sweserve.models import RunResult, TaskBundle
    from sweserve.reporting.review import review_markdown
    from sweserve.reporting.summary import build_reports

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    result = RunResult(run_id="r", task_id="o__r-1", family="decoding", agent="a", status="tampered",
                       reason="tampered: a must-fail canary test passed", started_at=at, finished_at=at,
                       duration_s=1, flags=["pytest internals (pkg/x.py)"], resets=["json.py (shadows module json)"])
    page = review_markdown(TaskBundle(task=_task(), instruction="i", oracle_patch="", tests_patch=""), result)
    assert "- flagged: pytest internals (pkg/x.py)" in page and "- reset to base: json.py (shadows module json)" in page
    (report,) = build_reports([result])
    assert report.tasks[0].flags == ["pytest internals (pkg/x.py)"] and report.statuses["tampered"] == 1
    assert report.overall.pass_at_1 == 0.0


def test_twin_sites_are_expected_values_bounds_and_tolerances_never_inputs():
    import ast

    source = (
        "def test_x(self):\n"
        "    \"\"\"doc 99\"\"\"\n"
        "    out = f(10, 4)\n"
        "    assert out == [(0, 3), (3, 6)]\n"
        "    assert g(7) < 12\n"
        "    assert h(2.5) == pytest.approx(1.25, rel=1e-06)\n"
        "    self.assertAlmostEqual(k(3), -0.5, places=4)\n"
        "    np.testing.assert_allclose(m(5), [1.0, 2.0], atol=0.001)\n"
        "    assert flag is True\n")
    fn = ast.parse(source).body[0]
    found = [[ast.unparse(n) for n in group] for group in twins.sites(fn)]
    assert found == [["0"], ["3", "3"], ["6"], ["12"], ["1.25"], ["1e-06"], ["-0.5"], ["4"], ["1.0"], ["2.0"],
                     ["0.001"]], found


def test_twin_values_are_equally_round_and_hold_the_real_one_at_any_rank():
    import random

    ranks = set()
    for seed in range(60):
        real, others = twins.values(300, random.Random(seed), 3)
        assert real == "300" and len(set(others)) == 3 and all(int(v) % 100 == 0 for v in others)
        ranks.add(sorted([300, *map(int, others)]).index(300))
    assert ranks == {0, 1, 2, 3}
    real, others = twins.values(1e-05, random.Random(1), 3)
    assert real == "0.00001" and all(len(v) == len(real) or v.startswith("-") for v in others), others


def test_a_twin_silenced_beside_a_passing_test_is_no_pass():
    """Passing one member of a group and skipping, erroring (or hiding) the rest: even a right guess does not
    pass. A hidden twin is forgery (a complete stream reports every collected test); one skipped or errored never
    reached its check (an honest set-up can flake: red team 11, R11-5), so its test fails, with no accusation."""
    from sweserve.models import Twin

    source = "def test_alpha_beta():\n    assert f(2) == (3, 40)\n"
    task = _task()
    task.twins = [Twin(test="test/t.py::test_alpha_beta", site=0, value=v) for v in ("1", "2", "4")]
    plan = twins.grading_plan(task, {"test/t.py": source}, seed=3)
    ids = {m.kind + str(i): f"test/t.py::{m.name}" for i, m in enumerate(plan.members)}
    real = next(v for k, v in ids.items() if k.startswith("test"))
    canary = {v: ("passed" if m.must_pass else "failed") for (k, v), m in zip(ids.items(), plan.members)
              if m.kind == "canary"}
    for silenced in ("skipped", "error", None):
        outcomes = {real: "passed", **canary}
        outcomes.update({v: silenced for k, v in ids.items() if k.startswith("twin") and silenced})
        reading = plan.read(outcomes)
        if silenced:  # no check reached: the test fails, no accusation
            assert reading.outcomes["test/t.py::test_alpha_beta"] == "failed" and reading.problems == [], silenced
        else:  # hidden from a complete stream: forged (the run is `tampered`)
            assert reading.problems == ["a twin of a hidden test was missing while its test passed"]
    honest = {real: "passed", **canary, **{v: "failed" for k, v in ids.items() if k.startswith("twin")}}
    assert plan.read(honest, exit_status=1).problems == []


def test_a_twin_that_passes_while_its_test_fails_is_a_wrong_value_not_tampering():
    """An honest candidate whose code computes a wrong value that happens to equal a twin's (a small value's
    twin of 0 where the fix gives 1) passes that twin and fails the test. It gained nothing: the test failed.
    That is `failed`, never `tampered` (an accusation a hiring team would read); a twin passing beside its
    passing test is forgery, in sweserve's reading and the exports' in-box one alike."""
    from sweserve.harness import sweserve_plan
    from sweserve.models import Twin

    source = "def test_alpha_beta():\n    assert f(2) == (3, 40)\n"
    task = _task()
    task.twins = [Twin(test="test/t.py::test_alpha_beta", site=0, value=v) for v in ("1", "2", "4")]
    plan = twins.grading_plan(task, {"test/t.py": source}, seed=3)
    members = json.loads(plan.map_json())["members"]
    twin = next(m for m in plan.members if m.kind == "twin")
    for real_passes, tampered in ((False, False), (True, True)):
        outcomes = {f"test/t.py::{m.name}": "failed" for m in plan.members if m.kind != "canary"}
        outcomes |= {f"test/t.py::{m.name}": "passed" for m in plan.members if m.kind == "canary"}
        outcomes[f"test/t.py::{twin.name}"] = "passed"
        real = next(m for m in plan.members if m.kind == "test")
        outcomes[f"test/t.py::{real.name}"] = "passed" if real_passes else "failed"
        reading = plan.read(outcomes)
        assert bool(reading.problems) == tampered, reading.problems
        assert reading.outcomes["test/t.py::test_alpha_beta"] == "failed"
        real_ids, problems = sweserve_plan.read(members, outcomes)
        assert bool(problems) == tampered and real_ids["test/t.py::test_alpha_beta"] == "failed", problems
