"""A second independent red team's attacks on the newest grading defences (issue #15): the mutation twins'
reading (`twins._read`/`_problems`), names mapped by class and by runner rootdir, and the in-box verifier.

Each test asserts the defence holds: it FAILS when the attack wins. Attacks that win today are marked
`xfail(strict=True)` with what they do, so the suite stays green and a fix turns them into failures of the
xfail (then drop the mark). The forger is code the hidden tests import (the package `__init__`), run by the
real boot script (`python -I`, autoload off, the nonce'd stream) through `tests.test_attacks_twins._run`, on
a repository it has not fixed.
"""

from __future__ import annotations

import pytest

from sweserve.evaluation import twins
from tests.test_attacks_twins import BASE, F2P, FILE, HIDDEN, ORACLE, _resolved, _run, validated  # noqa: F401

# The real test names a forger reads off the base version of the hidden file (a modified test file: its
# PASS_TO_PASS tests and the FAIL_TO_PASS tests whose expected values the PR changes keep their names), the
# instruction, or the words every planted name is drawn from (`canaries.vocabulary`: the real names' words).
REAL_NAMES = ["test_even_split", "test_uneven_split_covers_everything", "test_mean_is_not_shifted",
              "TestScale.test_scale_doubles", "TestScale.test_mean_of_one"]

# Drops every planted test that calls the repository's code (each graded test and all its twins: the forger
# need not tell them apart) and keeps the rest (the canaries, whose bodies only use builtins), then adds a
# passing test under each real name. `_read` takes an outcome whose name no member has as the real id itself,
# a planted test that never ran is not a problem, and a twin missing beside a missing test is not either.
DROP_AND_ADD = '''
import inspect as _inspect
import types as _types
import unittest as _unittest
import _pytest.python as _pp

_REAL = REAL_NAMES
_orig = _pp.PyCollector.collect


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, _types.CodeType):
            yield from _codes(c)


def _calls_repo(fn, glb):
    names = {n for c in _codes(getattr(fn, "__code__", None) or compile("", "", "exec")) for n in c.co_names}
    return any(str(getattr(glb.get(n), "__module__", "") or "").startswith("pkg") for n in names)


def _pass(self=None):
    return None


def _collect(self):
    mod = getattr(self, "obj", None)
    if isinstance(mod, _types.ModuleType) and not getattr(mod, "_forged", False):
        mod._forged = True
        glb = vars(mod)
        scopes = [mod] + [v for v in list(glb.values()) if _inspect.isclass(v) and v.__module__ == mod.__name__]
        for scope in scopes:
            for name, v in list(vars(scope).items()):
                if name.startswith("test") and _inspect.isfunction(v) and _calls_repo(v, glb):
                    delattr(scope, name)
        for real in _REAL:
            owner, _, name = real.rpartition(".")
            target = glb[owner] if owner else mod
            setattr(target, name, _pass)
    return _orig(self)


_pp.PyCollector.collect = _collect
'''.replace("REAL_NAMES", repr(REAL_NAMES))


@pytest.mark.xfail(strict=True, reason="WINS: an outcome no planted member names is read as the real id, and a "
                   "planted test that never ran (with its twins) is no problem: drop the groups, add real names")
def test_dropping_every_group_and_adding_the_real_names_is_not_resolved(validated, tmp_path):
    run = _run(tmp_path, twins.grading_plan(validated, {FILE: HIDDEN}), BASE, DROP_AND_ADD)
    assert run.tampered or not _resolved(run, validated), (run.outcomes, run.tampered)
