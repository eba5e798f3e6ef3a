"""Signal checks read from patches (dataset/signals.py), on git repositories the tests build: each check once
where it fires and once where it does not. Grading the structure-only control is in test_readiness_docker.py."""

import subprocess

from sweserve.dataset.gitio import Git
from sweserve.dataset.signals import cosmetic, imports_of, relax_only, structure_patch

BASE_MODEL = '''"""Wan 2.1 model."""
import math

from models.common import Linear


class WanModel:
    def forward(self, x):
        return x
'''


def diff(repo, a, b, *paths):
    return repo.git("diff", "--binary", "--full-index", "-M", a, b, "--", *paths) + "\n"


def two_commits(make_repo, before: dict, after: dict):
    repo = make_repo()
    base = repo.commit("base", before)
    head = repo.commit("change (#1)", after)
    return repo, base, head


def test_structure_patch_keeps_renames_deletions_and_imports_of_new_files(make_repo):
    repo, base, head = two_commits(make_repo, {
        "models/common.py": "class Linear:\n    pass\n",
        "models/wan2_1/__init__.py": "from models.wan2_1.model import WanModel\n",
        "models/wan2_1/model.py": BASE_MODEL,
        "models/old.py": "X = 1\n",
    }, {
        "models/wan2_1/__init__.py": None, "models/wan2_1/model.py": None, "models/old.py": None,
        "models/wan/__init__.py": "from models.wan.model import WanModel\n",
        "models/wan/model.py": BASE_MODEL.replace("return x", "return x * 2  # the new behaviour"),
        "models/wan/vae.py": "import math\nfrom models.common import (\n    Linear,\n)\n\n\ndef decode(z):\n"
                             "    return [math.tanh(v) for v in z]\n",
    })
    patch = structure_patch(diff(repo, base, head))
    # applied on base, it moves the package and adds the new module's imports, and nothing of the behaviour
    repo.git("checkout", "-q", base)
    (repo.path / "s.patch").write_text(patch)
    repo.git("apply", "s.patch")
    assert not (repo.path / "models/wan2_1").exists() and not (repo.path / "models/old.py").exists()
    assert (repo.path / "models/wan/model.py").read_text() == BASE_MODEL  # renamed, not rewritten
    vae = (repo.path / "models/wan/vae.py").read_text()
    assert vae.startswith("import math\nfrom models.common import Linear\n")
    assert "def decode(z):\n    raise NotImplementedError" in vae  # the name exists, not what it does
    assert "x * 2" not in patch and "tanh" not in patch


def test_skeleton_keeps_names_and_signatures_without_behaviour():
    from sweserve.dataset.signals import skeleton_of

    source = ("import os\nfrom typing import Any\n\nLIMIT = 3\n\n\n@cache\n"
              "def f(a: int, b=os.sep, *, c: Any = None) -> int:\n    return a\n\n\n"
              "class C(Base):\n    x = 1\n\n    def m(self):\n        return 2\n")
    skeleton = skeleton_of(source)
    namespace: dict = {"Base": object}
    exec(compile(skeleton, "s", "exec"), namespace)
    assert "LIMIT" not in namespace and "cache" not in skeleton and "x = 1" not in skeleton
    for call in (lambda: namespace["f"](1), lambda: namespace["C"]().m()):
        try:
            call()
            raise AssertionError("a stub ran")
        except NotImplementedError:
            pass


def test_structure_patch_is_empty_when_the_oracle_only_edits(make_repo):
    repo, base, head = two_commits(make_repo, {"a.py": "def f():\n    return 1\n"},
                                   {"a.py": "def f():\n    return 2\n"})
    assert structure_patch(diff(repo, base, head)) == ""


def test_imports_of_unparsable_code_keeps_import_lines():
    assert imports_of("import os\nfrom x import y\ndef broken(:\n") == "import os\nfrom x import y\n"


TEST_BASE = '''import pytest


def test_accuracy():
    err = compute()
    assert err < 1e-3
    assert abs(err) <= 0.01
    assert_allclose(a, b, atol=1e-5)
    assert len(out) == 4


def test_shape():
    assert out.shape == (2, 3)
'''


def test_relax_only_fires_when_existing_tests_are_only_loosened(make_repo):
    loosened = (TEST_BASE.replace("err < 1e-3", "err <= 1e-2").replace("atol=1e-5", "atol=1e-3")
                .replace("    assert len(out) == 4\n", "")
                .replace("def test_shape", "@pytest.mark.skip(reason='flaky')\ndef test_shape"))
    repo, base, head = two_commits(make_repo, {"test/test_acc.py": TEST_BASE}, {"test/test_acc.py": loosened})
    why = relax_only(diff(repo, base, head))
    assert why is not None and "only loosens" in why
    # an assert that checks nothing is no new signal
    padded = loosened.replace("    err = compute()\n", "    err = compute()\n    assert True\n")
    repo, base, head = two_commits(lambda: make_repo("padded"), {"test/test_acc.py": TEST_BASE},
                                   {"test/test_acc.py": padded})
    assert relax_only(diff(repo, base, head)) is not None


def test_relax_only_is_quiet_when_a_test_gains_signal(make_repo):
    cases = {
        "tightened": TEST_BASE.replace("err < 1e-3", "err < 1e-4"),
        "expected value changed": TEST_BASE.replace("== 4", "== 5"),
        "new assert": TEST_BASE.replace("    assert len(out) == 4\n", "    assert len(out) == 4\n    assert ok()\n"),
        "new test": TEST_BASE + "\n\ndef test_new():\n    assert run() == 3\n",
    }
    for name, text in cases.items():
        repo, base, head = two_commits(lambda name=name: make_repo(name.replace(" ", "_")), {"test/test_acc.py": TEST_BASE},
                                       {"test/test_acc.py": text})
        assert relax_only(diff(repo, base, head)) is None, name


def test_relax_only_is_quiet_for_a_new_test_file(make_repo):
    repo, base, head = two_commits(make_repo, {"a.py": "x = 1\n"},
                                   {"test/test_new.py": "def test_a():\n    assert 1\n"})
    assert relax_only(diff(repo, base, head, "test")) is None


CODE_BASE = '''import logging

logger = logging.getLogger(__name__)


def schedule(reqs, budget):
    """Pick requests."""
    out = []
    for r in reqs:
        if r.tokens <= budget:
            out.append(r)
            budget -= r.tokens
    return out
'''

COSMETIC = '''import logging

logger = logging.getLogger(__name__)


def schedule(reqs,   budget):
    """Pick the requests that fit in the token budget, in order.

    Longer explanation.
    """
    out = []  # chosen
    logger.debug("scheduling %d requests", len(reqs))
    for r in reqs:
        if r.tokens <= budget:
            out.append(r)
            budget -= r.tokens
        else:
            logger.info("skipped %s", r)
    return out
'''


def oracle_check(make_repo, after: str, name="repo", docs=None):
    repo = make_repo(name)
    base = repo.commit("base", {"sched.py": CODE_BASE, "README.md": "# x\n"})
    head = repo.commit("change (#1)", {"sched.py": after, **(docs or {})})
    with Git(repo.path) as g:
        return cosmetic(diff(repo, base, head), lambda p: g.read(base, p), lambda p: g.read(head, p))


def test_cosmetic_oracle_fires_for_logging_comments_docstrings_and_formatting(make_repo):
    why = oracle_check(make_repo, COSMETIC, docs={"README.md": "# x\n\nMore docs.\n"})
    assert why is not None and "sched.py" in why and "README.md" in why


def test_cosmetic_oracle_is_quiet_when_behaviour_changes(make_repo):
    changed = COSMETIC.replace("if r.tokens <= budget", "if r.tokens < budget")
    assert oracle_check(make_repo, changed) is None
    # a logger call whose argument has a side effect is still only logging; a call that is not logging is not
    assert oracle_check(make_repo, CODE_BASE.replace("    return out", "    flush(out)\n    return out"),
                        name="r2") is None


def test_cosmetic_oracle_is_quiet_for_non_python_code(make_repo):
    repo = make_repo()
    base = repo.commit("base", {"kernel.cu": "int x = 1;\n"})
    head = repo.commit("change (#1)", {"kernel.cu": "int x = 2;\n"})
    with Git(repo.path) as g:
        assert cosmetic(diff(repo, base, head), lambda p: g.read(base, p), lambda p: g.read(head, p)) is None


def test_git_lists_unreadable_blobs_of_a_tree(make_repo):
    repo = make_repo()
    head = repo.commit("base", {"a.py": "x = 1\n", "data/big.bin": b"\0" * 100, "d/c.txt": "hello\n"})
    big = repo.git("rev-parse", f"{head}:data/big.bin")
    text = repo.git("rev-parse", f"{head}:d/c.txt")
    (repo.path / ".git/objects" / big[:2] / big[2:]).unlink()
    corrupt = repo.path / ".git/objects" / text[:2] / text[2:]
    corrupt.chmod(0o644)
    corrupt.write_bytes(b"garbage")
    with Git(repo.path) as g:
        bad = g.unreadable_blobs(head)
    assert sorted(bad) == ["d/c.txt", "data/big.bin"]
    assert subprocess.run(["git", "-C", str(repo.path), "cat-file", "-e", f"{head}:a.py"]).returncode == 0
