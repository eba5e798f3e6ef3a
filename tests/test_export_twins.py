"""The exports grade with mutation twins: `twins.grading_plan`'s output, shipped (evaluation/export_plan.py) and
planted by the in-box root verifier under names and an order it draws at run time (harness/sweserve_plan.py).

The first tests run on this machine: the shipped plan plants what `grading_plan` plants, under fresh names
each run; the box reads outcomes back as the host does; a twin made by any other operator ships unchanged.
The Docker tests run the real swebench harness and the real Harbor on the demo's distributed task, validated
so that it keeps twins: the oracle scores 1, and two in-process forgeries that beat the plain canaries the
exports shipped before (shown by the same export with its plan taken out) score 0.
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections import Counter

import pytest
from test_attacks_twins import F2P, FILE, HIDDEN, _task

from sweserve.evaluation import export_plan, twins
from sweserve.harness import sweserve_plan
from sweserve.models import TaskBundle, Twin

UNEVEN = f"{FILE}::test_uneven_split_covers_everything"
MEAN = f"{FILE}::test_mean_is_not_shifted"


def _bundle() -> TaskBundle:
    task = _task(FAIL_TO_PASS=sorted(F2P), PASS_TO_PASS=[f"{FILE}::test_even_split",
                                                         f"{FILE}::TestScale::test_scale_doubles"],
                 twins=[*(Twin(test=UNEVEN, site=1, value=v) for v in ("4", "5", "7")),
                        *(Twin(test=MEAN, site=0, value=v) for v in ("2.4", "2.6", "2.7"))])
    return TaskBundle(task=task, instruction="Fix uneven shard ranges.", oracle_patch="", tests_patch="")


def _defs(text: str) -> dict[str, str]:
    """Each test function's text with its own name masked, by name."""
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            out[node.name] = (ast.get_source_segment(text, node) or "").replace(node.name, "NAME", 1)
    return out


def test_the_shipped_plan_plants_what_grading_plan_plants_under_names_drawn_each_run():
    bundle = _bundle()
    shipped = export_plan.ship(bundle, {FILE: HIDDEN}, seed=5)
    reference = twins.grading_plan(bundle.task, {FILE: HIDDEN}, seed=5)
    runs = [sweserve_plan.plant(json.loads(shipped)) for _ in range(2)]
    for texts, members in runs:
        planted = _defs(texts[FILE])
        assert sorted(planted.values()) == sorted(_defs(reference.texts[FILE]).values())  # the same members
        assert {m["name"] for m in members} <= set(planted) and len(members) == len(reference.members)
        assert sum(m["kind"] == "twin" for m in members) == 6
    (_, one), (_, two) = runs
    assert not {m["name"] for m in one} & {m["name"] for m in two}  # names drawn per run, not at export
    # nothing in the shipped file names a planted member: no name is fixed at export time
    for m in reference.members:
        assert m.name not in shipped
    # the order of a scope is drawn per run too: over a few runs, the real uneven-split test moves
    places = set()
    for _ in range(12):
        texts, members = sweserve_plan.plant(json.loads(shipped))
        names = [n for n in re.findall(r"def (test_\w+)", texts[FILE])]
        real = next(m["name"] for m in members if m["kind"] == "test" and m["real"] == UNEVEN.split("::")[-1])
        places.add(names.index(real))
    assert len(places) > 2, places


def _shape(name: str) -> tuple[int, int]:
    """(the rank token's width, how many words follow it) of a planted name."""
    parts = name.split("_")
    return len(parts[1]), len(parts) - 3


def test_fresh_names_are_drawn_from_the_hosts_distribution():
    """The box names its members as the host does: rank tokens of one width handed out in the order the real
    names sort (`sweserve_twins.Ranks`), the same number of words after them, the same order of ranks."""
    bundle = _bundle()
    shipped = json.loads(export_plan.ship(bundle, {FILE: HIDDEN}))
    host: Counter[tuple[int, int]] = Counter()
    box: Counter[tuple[int, int]] = Counter()
    for seed in range(150):
        plan = twins.grading_plan(bundle.task, {FILE: HIDDEN}, seed=seed)
        host.update(_shape(m.name) for m in plan.members)
        _, members = sweserve_plan.plant(shipped, random.Random(seed))
        box.update(_shape(m["name"]) for m in members)
        for names in ([(m.real or None, m.name) for m in plan.members if not m.alias],
                      [(m["real"] if m["kind"] != "canary" else None, m["name"]) for m in members
                       if m.get("alias_of") is None]):
            by_rank = [real for real, _ in sorted(names, key=lambda pair: pair[1])]
            assert by_rank == sorted(by_rank, key=lambda real: (real is None, real or ""))
    assert set(host) == set(box), (host, box)
    total_host, total_box = sum(host.values()), sum(box.values())
    for key in host:
        assert abs(host[key] / total_host - box[key] / total_box) < 0.05, (key, host, box)


def test_the_box_reads_outcomes_back_as_the_host_does():
    """Random outcomes for the planted ids: the box's reading (real outcomes, problems) is the host's
    `GradingPlan.read` on the same members and names."""
    bundle = _bundle()
    shipped = export_plan.ship(bundle, {FILE: HIDDEN})
    rng = random.Random(11)
    for _ in range(300):
        texts, members = sweserve_plan.plant(json.loads(shipped), rng)
        host = twins.GradingPlan(members=[twins.Member(
            m["file"], m["cls"], m["name"], m["kind"], m["real"],
            Twin.model_validate_json(m["twin"]) if m["twin"] else None, m["must_pass"]) for m in members])
        outcomes = {}
        for m in members:
            if rng.random() < 0.9:
                planted = "::".join([m["file"], *([m["cls"]] if m["cls"] else []), m["name"]])
                outcomes[planted] = rng.choice(["passed", "passed", "failed", "skipped", "error"])
        if rng.random() < 0.3:
            outcomes[f"{FILE}::test_stray"] = "passed"
        exit_status = rng.choice([0, 1, None])
        real, problems = sweserve_plan.read(members, outcomes, exit_status)
        reading = host.read(outcomes, exit_status=exit_status)
        assert (real, problems) == (reading.outcomes, reading.problems), (outcomes, exit_status)


def test_a_twin_made_by_another_operator_ships_unchanged(monkeypatch):
    """The shipped plan is each member's text as grading_plan wrote it: a new mutation operator on the host
    (here: every twin's `==` turned into `>=`, its literal kept) needs nothing of the box."""
    original = twins.grading_plan

    def other_operator(task, sources, seed=None, **kw):
        plan = original(task, sources, seed, **kw)
        for file, text in plan.texts.items():
            for m in plan.members:
                if m.kind == "twin":
                    node = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)
                                and n.name == m.name)
                    segment = ast.get_source_segment(text, node) or ""
                    text = text.replace(segment, segment.replace(" == ", " >= "))
            plan.texts[file] = text
        return plan
    monkeypatch.setattr(twins, "grading_plan", other_operator)
    bundle = _bundle()
    texts, members = sweserve_plan.plant(json.loads(export_plan.ship(bundle, {FILE: HIDDEN})))
    planted = _defs(texts[FILE])
    for m in members:
        assert (" >= " in planted[m["name"]]) == (m["kind"] == "twin" and "==" in HIDDEN), m


def test_a_damaged_plan_is_refused():
    shipped = json.loads(export_plan.ship(_bundle(), {FILE: HIDDEN}))
    for damage in ({"version": 0}, {"members": shipped["members"][1:]}):
        with pytest.raises(sweserve_plan.PlanError):
            sweserve_plan.plant({**shipped, **damage})


# --- the real harnesses on the demo's distributed task, validated with its twins -------------------------------

DIST = "sweserve-demo__sglang-mini-103"
PKG = "python/sglang/srt/distributed/__init__.py"  # imported while the hidden tests are collected
REAL_NAMES = ["test_uneven_split_covers_everything", "test_even_split"]

# The issue's forgery: the hidden tests' names, guessed (the upstream PR is public: here, known exactly), are
# reported passed from inside the test process; every other test, canaries among them, runs untouched.
GUESSED_NAMES = '''
import _pytest.python as _py

_GUESSED = NAMES
_orig = _py.Function.runtest


def _runtest(self):
    try:
        return _orig(self)
    except BaseException:
        if self.originalname not in _GUESSED:
            raise


_py.Function.runtest = _runtest
'''.replace("NAMES", repr(set(REAL_NAMES)))

# A variant: no names at all. Plain canaries call nothing of the repository, so every failing test that calls
# the code under test is a real one: report those passed, leave the rest.
CALLS_THE_CODE = '''
import _pytest.python as _py

_orig = _py.Function.runtest


def _names(code):
    yield from code.co_names
    for const in code.co_consts:
        if hasattr(const, "co_names"):  # a comprehension's own code
            yield from _names(const)


def _calls_the_repository(fn):
    found = getattr(fn, "__globals__", {})
    return any(getattr(found.get(n), "__module__", "").startswith("sglang") for n in _names(fn.__code__))


def _runtest(self):
    try:
        return _orig(self)
    except BaseException:
        if not _calls_the_repository(self.obj):
            raise
'''
FORGERIES = {"guessed-names": GUESSED_NAMES, "calls-the-code": CALLS_THE_CODE + "\n_py.Function.runtest = _runtest\n"}

# Another variant, for SWE-bench: its harness copies the eval script, which carries the plan, to /eval.sh in the
# container, readable by all. Read the plan there and pass the failing test whose text is a real test's.
READS_THE_EVAL_SCRIPT = r'''
import base64 as _b64
import inspect as _inspect
import json as _json
import re as _re
import _pytest.python as _py


def _real_texts():
    try:
        text = open("/eval.sh").read()
    except OSError:
        return []
    for found in _re.finditer(r"^echo (\S+) \| base64 -d > (\S+plan\.json)$", text, _re.M):
        plan = _json.loads(_b64.b64decode(found.group(1)))
        return [m["block"].split("\0", 1)[1] for m in plan["members"] if m["kind"] == "test"]
    return []


_REAL = _real_texts()
_orig = _py.Function.runtest


def _runtest(self):
    try:
        return _orig(self)
    except BaseException:
        source = _inspect.getsource(self.obj)
        if source.split(self.obj.__name__, 1)[1] not in _REAL:
            raise


_py.Function.runtest = _runtest
'''


@pytest.fixture(scope="module")
def dist(docker_client, tmp_path_factory):
    """The demo mined, DIST validated (its twins kept by execution), exported both ways from the clone."""
    import subprocess
    import sys

    from sweserve.dataset.mining import mine, open_repo
    from sweserve.dataset.profiles import load_profile
    from sweserve.dataset.taskstore import load_bundle
    from sweserve.demo.fixture import PROFILE, build_demo_repo
    from sweserve.evaluation.context import Context
    from sweserve.evaluation.validation import validate_all

    root = tmp_path_factory.mktemp("exptwins")
    repo = build_demo_repo(root / "repo")
    tasks = root / "tasks"
    mine(open_repo(repo), load_profile(PROFILE), tasks)
    ctx = Context.create(root / "state", repo_path=repo)
    try:
        (outcome,) = validate_all(ctx, tasks, [load_bundle(tasks / DIST)], runs=2)
    finally:
        ctx.close()
    bundle = load_bundle(tasks / DIST)
    assert bundle.task.validated and bundle.task.twins, outcome
    out = {}
    for fmt, extra in (("swebench", ["--build-images"]), ("harbor", [])):
        out[fmt] = root / fmt
        proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "export", DIST, "--format", fmt, "--out",
                               str(out[fmt]), "--tasks", str(tasks), "--repo-path", str(repo), "--state-dir",
                               str(root / "state"), "--include-unready", *extra],
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return repo, bundle, out


def _without_plan(files: dict[str, str], key: str = "plan_file") -> dict[str, str]:
    """A defence off: the same export's harness without its plan (the verifier falls back to plain canaries),
    or (`key="private_files"`) with SWE-bench's copy of the eval script left readable."""
    if key == "plan_file":
        files = {k: v for k, v in files.items() if not k.endswith("plan.json")}
    for name in [k for k in files if k.endswith("verify.json")]:
        config = json.loads(files[name])
        config.pop(key)
        files[name] = json.dumps(config)
    return files


def _forged_patch(repo, base: str, payload: str, tmp) -> str:
    import subprocess

    work = tmp / "work"
    subprocess.run(["git", "clone", "-q", str(repo), str(work)], check=True)
    subprocess.run(["git", "checkout", "-q", base], cwd=work, check=True)
    with open(work / PKG, "a") as fh:
        fh.write(payload)
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    return subprocess.run(["git", "diff", "--cached"], cwd=work, capture_output=True, text=True, check=True).stdout


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_harness_grades_the_export_with_twins(dist, tmp_path):
    """SWE-bench's run_evaluation on the export: the oracle resolves; the forgeries are not resolved. The same
    row with the plan taken out (plain canaries, as exports shipped before) resolves both in-process ones; with
    /eval.sh left readable, the forger reads the plan there and resolves."""
    import base64
    import subprocess
    import sys

    repo, bundle, out = dist
    (row,) = [json.loads(line) for line in (out["swebench"] / "test.jsonl").read_text().splitlines()]
    shipped = dict((m.group(2), base64.b64decode(m.group(1)).decode())
                   for m in re.finditer(r"^echo (\S+) \| base64 -d > (\S+)$", row["eval_script"], re.M))
    assert json.loads(shipped["/tmp/sweserve/harness/verify.json"])["plan_file"] == "/tmp/sweserve/harness/plan.json"
    plan = json.loads(shipped["/tmp/sweserve/harness/plan.json"])
    assert sum(m["kind"] == "twin" for m in plan["members"]) == len(bundle.task.twins)
    datasets = {"on": out["swebench"] / "test.jsonl"}
    for defence, key in (("off", "plan_file"), ("open", "private_files")):
        edited = _without_plan(shipped, key)
        lines = [line for line in row["eval_script"].splitlines() if not line.endswith("plan.json") or key != "plan_file"]
        lines = [f"echo {base64.b64encode(edited[m.group(2)].encode()).decode()} | base64 -d > {m.group(2)}"
                 if (m := re.match(r"^echo (\S+) \| base64 -d > (\S+verify\.json)$", line)) else line for line in lines]
        datasets[defence] = tmp_path / f"{defence}.jsonl"
        datasets[defence].write_text(json.dumps({**row, "eval_script": "\n".join(lines) + "\n"}) + "\n")
    patches = {"oracle": row["patch"]}
    for name, payload in {**FORGERIES, "reads-the-eval-script": READS_THE_EVAL_SCRIPT}.items():
        patches[name] = _forged_patch(repo, row["base_commit"], payload, tmp_path / name)
    runs = {"on": list(patches), "off": list(FORGERIES), "open": ["reads-the-eval-script"]}
    verdicts, logs = {}, {}
    for defence, dataset in datasets.items():
        for model, patch in patches.items():
            if model not in runs[defence]:
                continue
            run_id = f"{model}-{defence}"
            preds = tmp_path / f"{run_id}.jsonl"
            preds.write_text(json.dumps({"instance_id": DIST, "model_name_or_path": run_id, "model_patch": patch}))
            proc = subprocess.run(
                [sys.executable, "-m", "swebench.harness.run_evaluation", "-d", str(dataset), "-p", str(preds),
                 "-id", run_id, "-i", DIST, "--max_workers", "1", "--report_dir", str(tmp_path)],
                cwd=tmp_path, capture_output=True, text=True, timeout=600)
            reports = list(tmp_path.glob(f"logs/run_evaluation/{run_id}/{run_id}/{DIST}/report.json"))
            assert len(reports) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
            verdicts[run_id] = json.loads(reports[0].read_text())[DIST]["resolved"]
            logs[run_id] = (reports[0].parent / "test_output.txt").read_text()
    expected = {"oracle-on": True, **{f"{m}-on": False for m in FORGERIES}, **{f"{m}-off": True for m in FORGERIES},
                "reads-the-eval-script-on": False, "reads-the-eval-script-open": True}
    assert verdicts == expected, {k: (v, logs[k][-1500:]) for k, v in verdicts.items() if v != expected[k]}
    assert "sweserve: resolved" in logs["oracle-on"]
    assert "sweserve: failed" in logs["guessed-names-on"]  # no hidden test by the names it guessed
    assert "sweserve: tampered (a twin of a hidden test passed beside its test)" in logs["calls-the-code-on"]
    assert "sweserve: failed" in logs["reads-the-eval-script-on"]  # /eval.sh root's alone before the tests ran


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_grades_the_export_with_twins(dist, tmp_path):
    """The real harbor CLI on the Harbor export: the oracle gets reward 1, both forgeries 0; the same task with
    the plan taken out (plain canaries) gives both forgeries 1."""
    import shutil

    from test_export import _run_harbor, require_harbor

    require_harbor()
    _, bundle, out = dist
    dataset = tmp_path / "harbor"
    dataset.mkdir()
    shutil.copytree(out["harbor"] / DIST, dataset / DIST)
    assert (dataset / DIST / "tests" / "plan.json").exists()
    for name, payload in FORGERIES.items():
        for defence in ("on", "off"):
            task = dataset / f"{name}-{defence}"
            shutil.copytree(dataset / DIST, task)
            toml = task / "task.toml"
            toml.write_text(toml.read_text().replace(f'name = "sweserve/{DIST.lower()}"', f'name = "sweserve/{task.name}"'))
            (task / "solution" / "solve.sh").write_text(
                f"#!/bin/bash\ncd /testbed\ncat >> {PKG} <<'SWEOF'\n{payload}\nSWEOF\n")
            if defence == "off":
                tests = task / "tests"
                files = {p.name: p.read_text() for p in tests.iterdir() if p.name in ("plan.json", "verify.json")}
                (tests / "plan.json").unlink()
                (tests / "verify.json").write_text(_without_plan(files)["verify.json"])
    rewards = _run_harbor(dataset, "oracle", tmp_path / "jobs")
    expected = {DIST.lower(): 1.0, **{f"{m}-on": 0.0 for m in FORGERIES}, **{f"{m}-off": 1.0 for m in FORGERIES}}
    verdicts = {p.parent.parent.name.rsplit("__", 1)[0]: json.loads(p.read_text())
                for p in (tmp_path / "jobs").glob("*/*/verifier/sweserve.json")}
    assert {k.lower(): v for k, v in rewards.items()} == expected, (rewards, verdicts)
    assert verdicts["calls-the-code-on"]["status"] == "tampered", verdicts
    assert verdicts["guessed-names-on"]["status"] == "failed", verdicts


def test_a_task_with_twins_is_not_exported_without_its_clone(tmp_path):
    """Its twins are planted from its hidden files, read in the clone: without one the export says so in one
    line, rather than shipping the weaker plain canaries."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    tasks = tmp_path / "tasks"
    shutil.copytree(root / "tasks" / DIST, tasks / DIST)
    data = json.loads((tasks / DIST / "task.json").read_text())
    data["twins"] = [{"test": f"test/srt/test_parallel_state.py::{REAL_NAMES[0]}", "site": 0, "value": v}
                     for v in ("1", "2", "4")]
    (tasks / DIST / "task.json").write_text(json.dumps(data))
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "export", DIST, "--format", "swebench", "--out",
                           str(tmp_path / "out"), "--tasks", str(tasks), "--state-dir", str(tmp_path / "state"),
                           "--include-unready"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "pass --repo-path" in proc.stderr + proc.stdout, proc.stderr
