"""A repository shaped like SGL-project's (python/<pkg>/test layout, unittest tests, pyproject dependencies)
mined and validated in Docker: the unittest runner, dependency-set env images, flake and accelerator checks."""

import json

import pytest

from sweserve.config_search import ConfigSearch
from sweserve.dataset.mining import mine, open_repo
from sweserve.dataset.profiles import load_profile
from sweserve.dataset.taskstore import load_all, load_bundle
from sweserve.evaluation.context import Context
from sweserve.evaluation.validation import validate_all

pytestmark = pytest.mark.docker

PYPROJECT = '[project]\nname = "jaxlike"\nversion = "0.1"\ndependencies = ["six==1.16.0"]\n'
POOL = "python/jaxlike/srt/mem_cache/pool.py"
POOL_TEST = "python/jaxlike/test/mem_cache/test_pool.py"
KERNEL = "python/jaxlike/srt/kernels/topk.py"
KERNEL_TEST = "python/jaxlike/test/kernels/topk_test.py"

POOL_V1 = '''import six  # from the env image: declared in python/pyproject.toml


class TokenPool:
    def __init__(self, size):
        self.free = list(range(size))

    def alloc(self, n):
        if n > len(self.free):
            return None
        out, self.free = self.free[:n], self.free[n:]
        return out

    def release(self, slots):
        self.free.extend(slots)
'''
POOL_TEST_V1 = '''import unittest

from jaxlike.srt.mem_cache.pool import TokenPool


class TestTokenPool(unittest.TestCase):
    def test_alloc(self):
        self.assertEqual(TokenPool(4).alloc(2), [0, 1])
'''
PROFILE = {
    "repo": "acme/jaxlike",
    "dependency_files": ["python/pyproject.toml"],
    "env_packages": [],
    "test_paths": ["python/jaxlike/test/*"],
    "test_file_patterns": ["test_*.py", "*_test.py"],
    "test_env": {"PYTHONPATH": "python"},
    "runner": "unittest",
    "family_rules": [
        {"family": "scheduling-memory", "paths": ["python/jaxlike/srt/mem_cache/*"]},
        {"family": "kernels-quant", "paths": ["python/jaxlike/srt/kernels/*"]},
    ],
}


@pytest.fixture
def jaxlike(docker_client, make_repo, tmp_path, monkeypatch):
    search = ConfigSearch(tmp_path / "project")
    (tmp_path / "project" / "profiles").mkdir(parents=True)
    (tmp_path / "project" / "profiles" / "jaxlike.json").write_text(json.dumps(PROFILE))
    repo = make_repo("jaxlike")
    repo.commit("init", {"python/pyproject.toml": PYPROJECT, "python/jaxlike/__init__.py": "",
                         POOL: POOL_V1, POOL_TEST: POOL_TEST_V1, KERNEL: "def topk(xs, k):\n    return xs[:k]\n"})
    # a real fix: release must not hand out a slot twice
    repo.commit("fix(mem_cache): double release corrupts the free list (#11)\n\nReleasing a slot twice puts it on "
                "the free list twice.", {
                    POOL: POOL_V1.replace("        self.free.extend(slots)\n",
                                          "        self.free.extend(s for s in slots if s not in self.free)\n"),
                    POOL_TEST: POOL_TEST_V1 + '''
    def test_double_release(self):
        pool = TokenPool(2)
        slots = pool.alloc(2)
        pool.release(slots)
        pool.release(slots)
        self.assertEqual(len(pool.free), 2)

    def test_flaky_counter(self):
        import os
        path = "/tmp/flaky-counter"
        n = int(open(path).read()) + 1 if os.path.exists(path) else 0
        open(path, "w").write(str(n))
        self.assertEqual(n % 2, 0)
'''})
    # a kernel whose only test needs a TPU
    repo.commit("[Kernel] sorted top-k (#12)", {
        KERNEL: "def topk(xs, k):\n    return sorted(xs, reverse=True)[:k]\n",
        KERNEL_TEST: '''import unittest


def on_tpu():
    return False


class TopKTest(unittest.TestCase):
    @unittest.skipUnless(on_tpu(), "requires a TPU (Pallas kernel)")
    def test_sorted(self):
        from jaxlike.srt.kernels.topk import topk
        self.assertEqual(topk([1, 3, 2], 2), [3, 2])
'''})
    tasks = tmp_path / "tasks"
    report = mine(open_repo(repo.path), load_profile("jaxlike", search), tasks)
    assert sorted(report.written) == ["acme__jaxlike-11", "acme__jaxlike-12"]
    ctx = Context.create(tmp_path / "state", repo_path=repo.path, search=search)
    yield tasks, ctx
    ctx.close()


def test_unittest_tasks_validate_with_flake_and_accelerator_checks(jaxlike):
    tasks, ctx = jaxlike
    results = {o.task_id: o for o in validate_all(ctx, tasks, load_all(tasks), runs=3)}

    fix = load_bundle(tasks / "acme__jaxlike-11").task
    assert results["acme__jaxlike-11"].status == "valid"
    assert fix.test.runner == "unittest" and fix.dependencies == ["six==1.16.0"]
    base_id = f"{POOL_TEST}::TestTokenPool"
    assert fix.FAIL_TO_PASS == [f"{base_id}::test_double_release"]
    assert fix.PASS_TO_PASS == [f"{base_id}::test_alloc"]
    assert fix.validation.flaky == [f"{base_id}::test_flaky_counter"]

    kernel = load_bundle(tasks / "acme__jaxlike-12").task
    assert results["acme__jaxlike-12"].status == "rejected"
    assert kernel.validation.reason.startswith("needs an accelerator (tpu)")
    assert kernel.resources.needs_accelerator == "tpu"
    assert kernel.validation.accelerator_tests == {f"{KERNEL_TEST}::TopKTest::test_sorted": "requires a TPU (Pallas kernel)"}
    assert fix.validation.image.rsplit("-", 1)[1] == kernel.validation.image.rsplit("-", 1)[1]  # one env image
