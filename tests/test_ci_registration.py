"""Resources from SGLang's CI registration, in repositories shaped like each era of it."""

import pytest

from sweserve.dataset import ci_registration as ci
from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_bundle

SRC = "python/sglang/srt/mem_cache/radix_cache.py"
HEADER = "import unittest\n\nfrom sglang.test.ci.ci_register import register_cpu_ci, register_cuda_ci, register_amd_ci\n\n"
TESTCASE = "\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n\n\nif __name__ == '__main__':\n    unittest.main()\n"
LEGACY_RUN_SUITE = '''import argparse
from dataclasses import dataclass


@dataclass
class TestFile:
    name: str
    estimated_time: float = 60


suites = {
    "per-commit-1-gpu": [
        TestFile("test_radix_cache_unit.py", 5),
        TestFile("openai_server/basic/test_protocol.py", 10),
    ],
    "per-commit-2-gpu": [TestFile("test_dp_attention.py", 594)],
    "per-commit-4-gpu-b200": [TestFile("test_b200_only.py", 300)],
    "per-commit-amd": [TestFile("test_radix_cache_unit.py", 7), TestFile("test_amd_only.py", 10)],
    "per-commit-cpu": [TestFile("test_xeon.py", 10)],
}
'''


def read_from(files):
    return lambda path: files.get(path)


@pytest.mark.parametrize("call, backend, suite, est", [
    # Dec 2025: positional est and suite
    ('register_cpu_ci(1.0, "default")', "cpu", "default", 1.0),
    ('register_cuda_ci(est_time=190, suite="stage-b-test-small-1-gpu")', "cuda", "stage-b-test-small-1-gpu", 190),
    # May 2026: stage + runner_config
    ('register_cuda_ci(est_time=311, stage="base-c", runner_config="8-gpu-h200")', "cuda", "base-c-test-8-gpu-h200", 311),
    # the very first helper, PR #13927
    ('register_cuda_ci(estimation_time=60, ci_stage="stage-a-test-1")', "cuda", "stage-a-test-1", 60),
    ('register_amd_ci(est_time=1100, suite="stage-b-test-1-gpu-small-amd")', "amd", "stage-b-test-1-gpu-small-amd", 1100),
])
def test_registration_forms(call, backend, suite, est):
    [reg] = ci.registrations(HEADER + call + TESTCASE, "t.py")
    assert (reg.backend, reg.suite, reg.est_time) == (backend, suite, est)


def test_only_top_level_calls_with_a_literal_est_time_count():
    source = HEADER + (
        "EST = 5\n"
        "register_cuda_ci(est_time=EST, suite='stage-b-test-small-1-gpu')\n"  # not a literal
        "if True:\n    register_cuda_ci(est_time=5, suite='stage-b-test-large-1-gpu')\n"  # not top level
        "x = register_cuda_ci(est_time=5, suite='stage-c-test-4-gpu-h100')\n"  # not an expression statement
        "register_cuda_ci(est_time=5, suite='base-b-test-1-gpu-large', nightly=True)\n"
        "register_cuda_ci(5, 'base-b-test-2-gpu-large', disabled='flaky')\n"
    )
    regs = ci.registrations(source)
    assert [(r.suite, r.nightly, r.disabled) for r in regs] == [
        ("base-b-test-1-gpu-large", True, None), ("base-b-test-2-gpu-large", False, "flaky")]
    assert ci.registrations("def broken(:\n") == []


@pytest.mark.parametrize("suite, gpus, hardware", [
    ("stage-b-test-small-1-gpu", 1, "small"), ("stage-b-test-large-1-gpu", 1, "large"),
    ("base-b-test-1-gpu-small", 1, "small"), ("stage-c-test-4-gpu-h100", 4, "h100"),
    ("base-c-test-8-gpu-h200", 8, "h200"), ("stage-c-test-4-gpu-b200", 4, "b200"),
    ("stage-a-test-1", 1, None), ("per-commit-2-gpu", 2, None), ("base-c-test-deepep-8-gpu-h200", 8, "h200"),
])
def test_suite_names(suite, gpus, hardware):
    assert (ci.gpus_of(suite), ci.hardware_of(suite)) == (gpus, hardware)


def test_placement_prefers_cpu_and_adds_time_limits():
    files = {
        "test/registered/unit/test_parser.py": HEADER + 'register_cpu_ci(est_time=11, suite="base-a-test-cpu")\n'
                                               'register_cuda_ci(est_time=20, suite="base-b-test-1-gpu-small")\n',
        "test/registered/test_model.py": HEADER + 'register_cuda_ci(est_time=162, stage="extra-a", runner_config="1-gpu-large")\n'
                                         'register_amd_ci(est_time=1100, suite="stage-b-test-1-gpu-small-amd")\n',
    }
    cpu = ci.placement(read_from(files), ["test/registered/unit/test_parser.py"])
    assert (cpu.gpus, cpu.hardware, cpu.cpu_only, cpu.test_timeout_s) == (0, None, True, 120)  # 5 * 11 + 60 is under the floor
    both = ci.placement(read_from(files), sorted(files))
    assert (both.gpus, both.hardware, both.cpu_only) == (1, "large", False)
    assert both.test_timeout_s == 120 + (3 * 162 + 120)
    assert ci.placement(read_from(files), ["test/registered/elsewhere.py"]) is None


def test_floor_and_cap():
    assert ci.timeout_for(ci.Registration(file="a", backend="cuda", suite="x", est_time=1)) == 300
    assert ci.timeout_for(ci.Registration(file="a", backend="cuda", suite="x", est_time=5000)) == 1800
    assert ci.timeout_for(ci.Registration(file="a", backend="cpu", suite="default", est_time=1)) == 120
    assert ci.timeout_for(ci.Registration(file="a", backend="cpu", suite="default", est_time=500)) == 600


def test_hardware_this_harness_lacks_is_reported():
    files = {
        "test/registered/amd/test_rocm.py": HEADER + 'register_amd_ci(est_time=10, suite="stage-b-test-1-gpu-small-amd")\n',
        "test/registered/cpu/test_amx.py": HEADER + 'register_cpu_ci(est_time=10, suite="stage-b-test-cpu")\n',
        "test/registered/test_off.py": HEADER + 'register_cuda_ci(est_time=10, suite="stage-b-test-small-1-gpu", disabled="x")\n',
    }
    read = read_from(files)
    assert ci.placement(read, ["test/registered/amd/test_rocm.py"]).unsupported.endswith("only registered for amd")
    assert ci.placement(read, ["test/registered/cpu/test_amx.py"]).unsupported.endswith(
        "only registered for stage-b-test-cpu")
    assert "disabled" in ci.placement(read, ["test/registered/test_off.py"]).unsupported


def test_legacy_suite_lists():
    files = {"test/srt/run_suite.py": LEGACY_RUN_SUITE, "test/srt/test_radix_cache_unit.py": "import unittest\n"}
    read = read_from(files)
    one = ci.placement(read, ["test/srt/test_radix_cache_unit.py"])  # CUDA chosen over its AMD listing
    assert (one.gpus, one.cpu_only, one.suites, one.test_timeout_s) == (1, False, ["per-commit-1-gpu"], 300)
    nested = ci.placement(read, ["test/srt/openai_server/basic/test_protocol.py"])
    assert nested.suites == ["per-commit-1-gpu"]
    assert ci.placement(read, ["test/srt/test_dp_attention.py"]).gpus == 2
    assert ci.placement(read, ["test/srt/test_b200_only.py"]).hardware == "b200"
    assert ci.placement(read, ["test/srt/test_amd_only.py"]).unsupported.endswith("only registered for amd")
    assert ci.placement(read, ["test/srt/test_xeon.py"]).unsupported.endswith("only registered for xeon")
    assert ci.placement(read, ["test/srt/test_unlisted.py"]) is None


def era_repo(make_repo, files_at_base, pr_files, name="repo"):
    repo = make_repo(name)
    repo.commit("init", {SRC: "x = 0\n", **files_at_base})
    repo.commit("[Radix] fix (#500)", {SRC: "x = 1\n", **pr_files})
    return repo


def mined(repo, tmp_path):
    report = mine(open_repo(repo.path), load_profile("sglang"), tmp_path / "tasks")
    return report, (tmp_path / "tasks" / "sgl-project__sglang-500")


def test_mined_legacy_era(make_repo, tmp_path):
    repo = era_repo(make_repo, {"test/srt/run_suite.py": LEGACY_RUN_SUITE},
                    {"test/srt/test_dp_attention.py": "import unittest\n" + TESTCASE})
    report, task_dir = mined(repo, tmp_path)
    r = load_bundle(task_dir).task.resources
    assert (r.gpus, r.hardware, r.test_timeout_s) == (2, None, 1800)


def test_mined_registered_era_reads_the_merge_commit(make_repo, tmp_path):
    # the PR itself moves its test from a GPU suite to the CPU suite: the merge commit's registration counts
    test = "test/registered/unit/mem_cache/test_radix_cache.py"
    repo = era_repo(make_repo, {test: HEADER + 'register_cuda_ci(est_time=5, suite="stage-b-test-small-1-gpu")\n' + TESTCASE},
                    {test: HEADER + 'register_cpu_ci(est_time=11, suite="stage-a-test-cpu")\n' + TESTCASE + "# more\n"})
    report, task_dir = mined(repo, tmp_path)
    r = load_bundle(task_dir).task.resources
    assert (r.gpus, r.hardware, r.test_timeout_s) == (0, None, 120)


def test_mined_newest_era_and_unsupported(make_repo, tmp_path):
    test = "test/registered/models_e2e/test_mimo.py"
    repo = era_repo(make_repo, {}, {test: HEADER + 'register_cuda_ci(est_time=311, stage="base-c", '
                                    'runner_config="8-gpu-h200")\n' + TESTCASE})
    _, task_dir = mined(repo, tmp_path)
    r = load_bundle(task_dir).task.resources
    assert (r.gpus, r.hardware, r.gpu_memory_gb, r.test_timeout_s) == (8, "h200", 141, 3 * 311 + 120)

    amd = era_repo(make_repo, {}, {"test/registered/amd/test_x.py": HEADER + 'register_amd_ci(est_time=3, '
                                   'suite="stage-a-test-1-gpu-amd")\n' + TESTCASE}, name="amd")
    report = mine(open_repo(amd.path), load_profile("sglang"), tmp_path / "amd")
    assert report.rejected == {"unsupported_hardware": [
        "#500 [Radix] fix: test/registered/amd/test_x.py: only registered for amd"]}
