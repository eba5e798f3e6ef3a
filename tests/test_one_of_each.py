"""One of each: the loader, the git runner, the patch applier, the recorder's file and the redactor, and the
checks that keep a second one from being written again."""

import re
import subprocess
import time
from pathlib import Path

import pytest

from sweserve.agents.base import Redactor
from sweserve.dataset.patches import apply_command
from sweserve.errors import SweserveError
from sweserve.gitcmd import GitError, reason, run_git, subcommand
from sweserve.heartbeat import Heartbeat, clock
from sweserve.loading import load_model, read_data, read_text
from sweserve.models import Strict

PACKAGE = Path(__file__).resolve().parent.parent / "sweserve"


class Point(Strict):
    x: int


def test_the_loader_says_each_failure_in_one_line(tmp_path):
    with pytest.raises(SweserveError, match=r"a\.json: missing point file$"):
        read_text(tmp_path / "a.json", "point file")
    with pytest.raises(SweserveError, match=r": is a folder, not a point file$"):
        read_text(tmp_path, "point file")
    (tmp_path / "latin.json").write_bytes(b'{"x": "caf\xe9"}')
    with pytest.raises(SweserveError, match=r"latin\.json: not valid JSON: not UTF-8$"):
        read_data(tmp_path / "latin.json")
    with pytest.raises(SweserveError, match=r"latin\.json: not UTF-8 text$"):
        read_text(tmp_path / "latin.json")
    (tmp_path / "bad.json").write_text('{"x": 1,}')
    with pytest.raises(SweserveError, match=r"bad\.json: not valid JSON: .* at line 1$"):
        read_data(tmp_path / "bad.json")
    (tmp_path / "bad.yaml").write_text("x: [1\n")
    with pytest.raises(SweserveError, match=r"bad\.yaml: not valid YAML: "):
        read_data(tmp_path / "bad.yaml", "YAML")
    (tmp_path / "p.json").write_text('{"x": 1, "y": 2}')
    with pytest.raises(SweserveError, match=r"p\.json: field 'y': Extra inputs are not permitted$"):
        load_model(tmp_path / "p.json", Point)
    (tmp_path / "p.json").write_text('{"x": 3}')
    assert load_model(tmp_path / "p.json", Point) == Point(x=3)


def test_the_git_runner_carries_gits_own_words(tmp_path):
    with pytest.raises(GitError) as caught:
        run_git("-c", "core.quotepath=off", "rev-parse", "HEAD", repo=tmp_path)
    assert caught.value.subcommand == "rev-parse" and caught.value.returncode != 0
    assert str(caught.value).startswith("fatal:")
    run_git("init", "-q", repo=tmp_path)
    assert run_git("rev-parse", "--is-inside-work-tree", repo=tmp_path).strip() == b"true"
    assert subcommand(["-C", "x", "-c", "a=b", "fetch", "-q"]) == "fetch"
    assert reason("remote: fatal: bad object\nerror: aborting\n", 128) == "fatal: bad object"


def test_the_one_apply_command_applies_binary_patches_with_odd_paths(tmp_path):
    run_git("init", "-q", repo=tmp_path)
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01")
    run_git("add", "-A", repo=tmp_path)
    run_git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a", repo=tmp_path)
    (tmp_path / "blob.bin").write_bytes(b"\x00\x02\xff")
    patch = run_git("diff", "--binary", repo=tmp_path)
    run_git("checkout", "--", ".", repo=tmp_path)
    (tmp_path / "my patch.diff").write_bytes(patch)
    subprocess.run(apply_command(str(tmp_path / "my patch.diff"), index=True), shell=True, cwd=tmp_path, check=True)
    assert (tmp_path / "blob.bin").read_bytes() == b"\x00\x02\xff"
    assert run_git("diff", "--cached", "--name-only", repo=tmp_path).split() == [b"blob.bin"]


def test_the_redactor_replaces_the_longest_secret_first():
    assert Redactor(["abcd", "abcdef"])("x abcdef y abcd") == "x *** y ***"


def test_the_heartbeat_beats_until_it_is_left():
    beats = []
    with Heartbeat(lambda: beats.append(1), interval=0.01):
        while len(beats) < 3:
            pass
    seen = len(beats)
    time.sleep(0.05)
    assert len(beats) == seen  # no beat after the step ended
    assert clock(3725) == "1:02:05" and clock(65, hours=False) == "1:05"


def _sources() -> dict[str, str]:
    return {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in PACKAGE.rglob("*.py")}


def test_git_apply_is_spelled_in_one_place():
    """Every grader, agent and export applies a patch with patches.APPLY (its options are the sign of one). The
    scripts that run inside an image with its own Python (harness/) cannot import sweserve."""
    spelled = [rel for rel, text in _sources().items() if "--whitespace=" in text
               and rel != "dataset/patches.py" and not rel.startswith("harness/")]
    assert spelled == []


def test_git_is_spawned_by_the_one_runner():
    """Only gitcmd.run_git runs git on the host (gitio.Git keeps its batched, long-lived processes)."""
    spawning = [rel for rel, text in _sources().items()
                if re.search(r"""\[\s*["']git["']""", text) and not rel.startswith("harness/")]
    assert sorted(spawning) == ["dataset/gitio.py", "gitcmd.py"]


def test_python_source_is_parsed_by_the_one_parser():
    """Only pyast.py calls ast.parse: trials run in threads, and CPython 3.11.7's parser fails when two threads
    parse at once (a real task failed validation so), so every parse takes pyast's lock."""
    parsing = [rel for rel, text in _sources().items()
               if re.search(r"(?<![\w.])ast\.parse\(", text) and not rel.startswith("harness/")]
    assert parsing == ["pyast.py"]


def test_parsing_from_many_threads_at_once_succeeds():
    from concurrent.futures import ThreadPoolExecutor

    from sweserve import pyast

    source = "def f(x):\n" + "".join(f"    y{i} = [(x, {{'a': (x + {i},)}}) for _ in range({i})]\n" for i in range(300))
    with ThreadPoolExecutor(8) as pool:
        trees = list(pool.map(lambda _: pyast.parse_module(source), range(64)))
    assert all(len(tree.body[0].body) == 300 for tree in trees)  # type: ignore[attr-defined]


def test_closed_models_derive_from_strict():
    declared = [rel for rel, text in _sources().items() if 'extra="forbid"' in text]
    assert declared == ["models.py"]


def test_no_model_reads_a_file_by_itself():
    """Files become models through sweserve/loading.py (the one-line errors live there)."""
    offenders = [rel for rel, text in _sources().items()
                 if "describe_validation_error(" in text and rel not in ("loading.py", "errors.py",
                                                                           "evaluation/results.py")]
    assert offenders == []


def test_one_parse_lock_for_sweserve_and_the_harness_on_the_host():
    """CPython 3.11.7 fails two `ast.parse` calls at once (sweserve/pyast.py); the harness modules parse on the
    host too, in trial threads (the selector checks, the canaries' bodies): a second lock let a trial's plan and
    another trial's scan parse together, and a demo trial ended in `SystemError` (CI at ab25280)."""
    import ast

    from sweserve import pyast
    from sweserve.harness import sweserve_canaries, sweserve_twins

    assert pyast._ONE_AT_A_TIME is sweserve_twins.PARSE_LOCK
    for module in (sweserve_twins, sweserve_canaries):  # every parse of theirs goes through the lock
        calls = [n for n in ast.walk(pyast.parse_module(Path(module.__file__).read_text()))
                 if isinstance(n, ast.Call) and ast.unparse(n.func) == "ast.parse"]
        assert len(calls) <= (2 if module is sweserve_twins else 0), module.__name__
