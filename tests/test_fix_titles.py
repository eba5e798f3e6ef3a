"""A title that says what to change hands over the fix even when the body states the problem.

Titles in the shape of real squash titles (a conventional-commit prefix, `[Bug]` tags); nothing fetched.
"""

from __future__ import annotations

import pytest

from sweserve.dataset.readiness import finding_kind
from sweserve.dataset.statement import build_statement, eligibility, heading_fix, title_fix

ORACLE = """\
diff --git a/python/pkg/sampler.py b/python/pkg/sampler.py
--- a/python/pkg/sampler.py
+++ b/python/pkg/sampler.py
@@ -40,9 +40,9 @@ class Sampler:
     def _sample(self, logits, seeds):
-        out = lax.cond(seeds is not None, self._seeded, self._plain, logits)
+        if seeds is not None:
+            return self._seeded(logits)
+        return self._plain(logits)
"""
BODY = """\
`seeds is not None` is decided when the function is traced, yet both branches are still traced and their
output types unified. With deterministic sampling the two branches return arrays of different sharding, so
tracing fails with "branches must have equal output types". Sampling with seeds must trace and return the
seeded result.
"""
FIX_TITLES = [
    "fix(sampler): replace static-predicate lax.cond with `if` for seeded multinomial",
    "[Bug] use float32 for router_logits and topk_weights in moe.py",
    "refactor: extract precompile logic into CompilationManager",
    "fix(weight-loader): split 1-D per-channel weight_scale in fused QKV path",
]
PROBLEM_TITLES = [
    "fix(sampler): seeded multinomial fails to trace under deterministic sampling",
    "[Bug] MoE router logits lose precision in bf16",
    "feat: support Qwen3 MoE models",
    "Scheduler hangs when the radix cache is full",
    "fix(profiler): honour explicit host_tracer_level=0",
]


@pytest.mark.parametrize("title", FIX_TITLES)
def test_a_title_that_says_what_to_change_prescribes_the_fix(title):
    assert title_fix(title, ORACLE)


@pytest.mark.parametrize("title", PROBLEM_TITLES)
def test_a_title_that_states_a_problem_or_a_goal_does_not(title):
    assert title_fix(title, ORACLE) is None


def test_mining_drops_a_fix_title_and_keeps_the_problem_body():
    st = build_statement(FIX_TITLES[0], BODY, oracle_patch=ORACLE)
    assert "lax.cond" not in st.text.split("\n", 1)[0] and "replace" not in st.text.lower()
    assert st.text.startswith("`seeds is not None`")
    assert [p.why for p in st.quality.parts if p.source == "title"] == ["describes the fix"]
    assert heading_fix(st.text, ORACLE) is None
    assert not eligibility(st, ORACLE, "", 20).quality.leaks


def test_a_title_only_statement_keeps_its_title_and_stays_not_eligible():
    st = eligibility(build_statement(FIX_TITLES[0], "", oracle_patch=ORACLE), ORACLE, "", 20)
    assert st.text.startswith("# fix(sampler): replace")
    assert not st.quality.statement_eligible


def test_a_problem_title_stays():
    st = build_statement(PROBLEM_TITLES[0], BODY, oracle_patch=ORACLE)
    assert st.text.startswith(f"# {PROBLEM_TITLES[0]}\n")


def test_lint_flags_a_statement_mined_with_its_fix_title(make_repo, tmp_path):
    """A statement mined before titles were judged: lint names it, and readiness counts it (`lint:fix_title`)."""
    from local_backend import diff_of, local_task

    from sweserve.dataset.lint import lint_bundle
    from sweserve.models import TaskBundle

    repo = make_repo("titles")
    base = repo.commit("init", {"pkg/sampler.py": "def sample(x):\n    return x\n", "tests/__init__.py": ""})
    oracle = diff_of(repo, base, "pkg/sampler.py", "def sample(x):\n    return float(x)\n")
    tests = diff_of(repo, base, "tests/test_s.py", "from pkg.sampler import sample\n\n\ndef test_s():\n"
                    "    assert sample(1) == 1.0\n")
    task, ctx = local_task(tmp_path, repo, "titles", base, "tests/test_s.py", ["tests/*"])
    ctx.close()
    title = "fix(sampler): replace the int result of `sample` with `float(x)`"
    assert title_fix(title, oracle)
    bundle = TaskBundle(task=task, instruction=f"# {title}\n\n{BODY}", oracle_patch=oracle, tests_patch=tests)
    report = lint_bundle(bundle, repo.path, search=_search(tmp_path))
    found = [f for f in report.quality.findings if f.startswith("statement's title prescribes the fix")]
    assert found and finding_kind(found[0]) == "fix_title", report.quality.findings
    bundle.instruction = f"# fix(sampler): `sample` returns an int\n\n{BODY}"
    assert not [f for f in lint_bundle(bundle, repo.path, search=_search(tmp_path)).quality.findings
                if "title prescribes" in f]


def _search(tmp_path):
    from sweserve.config_search import ConfigSearch
    return ConfigSearch(tmp_path / "config")
