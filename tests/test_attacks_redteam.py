"""An independent red team's attacks on the newest defences: the two-container trial's inert tree (issue #18),
the mutation twins' values, the stream. Each docstring says what the attack did before its defence.

Tree attacks run the real seam: a tree made in a candidate sandbox of the demo's task image (or a crafted
archive, as a backend gone wrong would hand over), copied out by the backend and diffed in a grade sandbox.
"""

from __future__ import annotations

import random
import tarfile
from types import SimpleNamespace

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.environment.sandbox import WORKDIR, TreeTooLarge
from sweserve.evaluation import twins
from sweserve.evaluation.submission import SUBMITTED, SubmissionRejected, copy_tree, take_submission
from sweserve.evaluation.trial import evaluate_task
from sweserve.models import Task, TestSpec, Twin
from tests.test_attacks_inert_tree import DIST, PREFIX, STATE, crafted, grade_box

PREFIX_IN_TAR = SUBMITTED.lstrip("/") + "/"


def candidate_box(demo, b):
    return demo.ctx.sandbox(demo.ctx.task_image(b), b.task.task_id, "candidate", b.task.resources, [])


# --- the inert tree: paths the image's git refuses --------------------------------------------------------------

REFUSED = {  # git's verify_path (core.protectNTFS/HFS, on by default) refuses these: `git add` exits 128
    "a folder named .GIT": [("dir", PREFIX + ".GIT", ""), ("file", PREFIX + ".GIT/config", "x")],
    "an 8.3 short name of .git": [("file", PREFIX + "git~1", "x")],
    "a .git with a trailing dot, deeper": [("dir", PREFIX + "d", ""), ("dir", PREFIX + "d/.git.", ""),
                                           ("file", PREFIX + "d/.git./x", "x")],
    "a symlinked .gitmodules": [("sym", PREFIX + ".gitmodules", "/etc/passwd")],
}


@pytest.mark.docker
@pytest.mark.parametrize("attack", sorted(REFUSED))
def test_a_path_git_refuses_is_the_candidates_fault_not_the_machinerys(demo, attack):
    """Before: `git add -A` failed on the tree and the diff raised InfraError("sandbox"): the trial was `error`,
    blamed on the machinery and redone by `run --retry-errors` (a free resample for a candidate that plants
    `.GIT/x` whenever it is unsure). Now a tree git refuses is not a submission (`patch_failed`), and the
    grade sandbox is as the image left it."""
    b = demo.bundle(DIST)
    with grade_box(demo, b) as box:
        before = box.exec(STATE, 60).output
        with pytest.raises(SubmissionRejected, match="git refused the tree"):
            take_submission(box, crafted(REFUSED[attack]), b.task.base_commit)
        assert box.exec(STATE, 60).output == before


@pytest.mark.docker
def test_a_refused_tree_ends_patch_failed_end_to_end(demo):
    b = demo.bundle(DIST)
    r = evaluate_task(demo.ctx, b, CommandAgent("mkdir .GIT && echo x > .GIT/config", name="dotGIT"))
    assert r.status == "patch_failed", (r.status, r.error_kind, r.reason)
    assert r.reason and "git refused the tree" in r.reason and ".GIT/config" in r.reason


# --- the inert tree: what the size limit counts -----------------------------------------------------------------

@pytest.mark.docker
def test_hard_links_count_toward_the_tree_limit(demo):
    """Before: a hard link's data was never counted, so one file linked N times passed the 2 GiB limit at the
    size of one copy, and every link is hashed again by `git add` and written again by `diff --binary` in the
    grade sandbox (a 1 GiB file linked 100 times: hours of hashing, past every deadline)."""
    b = demo.bundle(DIST)
    with candidate_box(demo, b) as cand:
        made = cand.exec("head -c 1048576 /dev/urandom > big.bin && mkdir l && "
                         "for i in $(seq 1 100); do ln big.bin l/$i; done", 120)
        assert made.exit_code == 0, made.output
        with pytest.raises(TreeTooLarge):
            cand.copy_tree_out(WORKDIR, 32 << 20, prefix=PREFIX_IN_TAR)
        cand.exec("rm -rf l", 60)
        cand.copy_tree_out(WORKDIR, 32 << 20, prefix=PREFIX_IN_TAR).close()  # the file alone fits


@pytest.mark.docker
def test_empty_files_count_toward_the_tree_limit(demo):
    """Before: only file data counted, so any number of empty files (or folders) passed: 100k of them took a
    minute to copy out and overflowed the diff; millions, unbounded host disk for the spooled copy and time
    with no deadline. Now every entry costs a block."""
    b = demo.bundle(DIST)
    with candidate_box(demo, b) as cand:
        made = cand.exec("mkdir -p many && cd many && for d in $(seq 1 10); do mkdir $d; "
                         "(cd $d && touch $(seq -f f%g 1 1000)); done", 120)
        assert made.exit_code == 0, made.output
        with pytest.raises(TreeTooLarge):
            cand.copy_tree_out(WORKDIR, 16 << 20, prefix=PREFIX_IN_TAR)


# --- the inert tree: names and metadata as the backend hands them over ----------------------------------------

EXOTIC = (
    "printf 'x\\n' > \"$(printf 'new\\nline.py')\" && printf 'y\\n' > \"$(printf 'bad\\377\\376name.py')\" && "
    "printf 'z\\n' > donn\u00e9es_\u6d4b\u8bd5.py && mkdir -p \"$(printf 'd%.0s' $(seq 1 120))\" && "
    "printf 'l\\n' > \"$(printf 'd%.0s' $(seq 1 120))/$(printf 'f%.0s' $(seq 1 120)).py\" && "
    "printf 'w\\n' > '\"quoted\" tab\tname.py' && "
    "mkfifo fifo && python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\" && "
    "(mknod dev c 1 3 || true) && echo s > suid.sh && chmod 4755 suid.sh && "
    "echo secret > noread.txt && chmod 000 noread.txt && mkdir shut && echo in > shut/in.txt && chmod 000 shut && "
    "python3 -c \"import os; open('xa.py', 'w').write('1\\n'); "
    "os.setxattr('xa.py', 'security.capability', bytes([1, 0, 0, 2]) + bytes([255] * 4) + bytes(12))\"")


@pytest.mark.docker
def test_exotic_names_and_metadata_travel_as_data(demo):
    """Before: an entry whose name the backend's archive carries in a pax header (a non-ASCII or very long
    name) kept that header on the way through, and the header's own path (outside the copy) won over the
    name set under SUBMITTED: `données.py` in a candidate's tree made the whole submission `patch_failed`
    ("outside the submission"), and extended attributes rode along into the grade sandbox. Now names are the
    copy's own and nothing but path, link and size travels; fifos, sockets and devices stay out; a file no one
    may read, a folder no one may enter, a set-uid file, a newline, a quote or invalid UTF-8 in a name are
    submitted as data and nothing of them stays in the grade sandbox."""
    b = demo.bundle(DIST)
    with candidate_box(demo, b) as cand:
        made = cand.exec(EXOTIC, 120)
        assert made.exit_code == 0, made.output
        tree = copy_tree(cand)
    with tree:
        with tarfile.open(fileobj=tree, mode="r|") as tar:
            members = list(tar)
        tree.seek(0)
        assert all(m.name.startswith(PREFIX_IN_TAR) for m in members)
        assert not [m.name for m in members if any(k.startswith("SCHILY.xattr") for k in m.pax_headers)]
        assert not [m.name for m in members if not (m.isreg() or m.isdir() or m.issym() or m.islnk())]
        with grade_box(demo, b) as box:
            before = box.exec(STATE, 60).output
            patch = take_submission(box, tree, b.task.base_commit)
            assert box.exec(STATE, 60).output == before
    for name in ['"b/new\\nline.py"', '"b/bad\\377\\376name.py"', "b/noread.txt", "b/shut/in.txt", "b/xa.py",
                 '"b/donn\\303\\251es_\\346\\265\\213\\350\\257\\225.py"', "f" * 120 + ".py"]:
        assert name in patch, name
    assert "diff --git a/suid.sh b/suid.sh\nnew file mode 100755" in patch and "+secret" in patch
    assert "fifo" not in patch and "sock" not in patch and "b/dev" not in patch


# --- twins: a value the file writes outside the test ------------------------------------------------------------

SPREAD_FILE = "test/test_queue.py"
SPREAD = '''import pytest

from pkg.queue import Queue

# A queue for 37 requests keeps 29 free slots once 8 are reserved.


@pytest.fixture
def queue():
    return Queue(capacity=37)


def test_capacity_is_kept(queue):
    assert queue.capacity() == 37
    assert queue.reserve(8).free() == 29
    assert queue.pending() == 59  # 53 would be 37 + 8 + 8: read (`twins.derived`)


def test_release_restores():
    """Releasing all 8 again leaves 37 + 5 - 5 free."""
    q = Queue(capacity=42)
    assert q.release_all() == 42
'''
SPREAD_GRADED = [f"{SPREAD_FILE}::test_capacity_is_kept"]


def _spread_groups(plan: twins.GradingPlan) -> list[list[twins.Member]]:
    out: dict[tuple, list[twins.Member]] = {}
    for m in plan.members:
        if m.kind in ("test", "twin"):
            out.setdefault((m.cls, m.real), []).append(m)
    return [g for g in out.values() if any(m.kind == "twin" for m in g)]


def by_file_echo(plan: twins.GradingPlan, group: list[twins.Member], rng: random.Random) -> twins.Member:
    """The members differ in one literal; bet on the one whose literal the file writes somewhere else (an
    input in a fixture, a comment, a docstring, another test), read with a plain regex over the whole file."""
    text = plan.texts[group[0].file]
    counts: dict[str, int] = {}
    for token in __import__("re").findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text):
        counts[token] = counts.get(token, 0) + 1
    hits = [m for m in group if counts.get(m.literal or "", 0) > 1]
    return hits[0] if len(hits) == 1 else rng.choice(group)


def _spread_rate(draws: int = 120) -> tuple[float, int]:
    """The forger's rate on SPREAD over `draws` validations. `select` draws from its own stream: sharing the
    plan's seed correlates the draw of K with the real value's rank (a harness artifact, not sweserve's:
    validation's `select` draws from SystemRandom)."""
    rng = random.Random(9)
    hits = total = 0
    for seed in range(draws):
        task = Task(task_id="o__r-4", repo="o/r", profile="p", pr_number=4, title="t", base_commit="a" * 40,
                    merge_commit="b" * 40, family="scheduling-memory", created_at="2026-01-01T00:00:00Z",
                    test=TestSpec(runner="pytest", files=[SPREAD_FILE]), FAIL_TO_PASS=SPREAD_GRADED)
        plan = twins.grading_plan(task, {SPREAD_FILE: SPREAD}, seed=seed, candidates=True)
        run = SimpleNamespace(twins={m.twin.model_dump_json(): "failed" for m in plan.members if m.kind == "twin"},
                              shapes={})
        task.twins, _ = twins.select(SPREAD_GRADED, [run], [run], random.Random(f"select-{seed}"))
        plan = twins.grading_plan(task, {SPREAD_FILE: SPREAD}, seed=seed + 1)
        for group in _spread_groups(plan):
            hits += by_file_echo(plan, group, rng).kind == "test"
            total += 1
    return hits / max(total, 1), total


def test_a_value_the_file_writes_outside_the_test_is_never_a_site_nor_a_twin():
    """Before: only literals inside the test itself were kept off sites (`_elsewhere`), so a value written in
    a fixture (`Queue(capacity=37)`), a comment or another test's docstring was picked as a site; the member
    whose value the file repeats was the real one: the forger above won 0.73 (chance 0.25). Now every
    number the file writes outside the test, and in the test's own comments and strings, is one the forger
    reads: no site and no twin value equals one."""
    rate, total = _spread_rate()
    assert total > 0  # the test keeps twins (at 29 or 37 as a weak fallback only where nothing else is left)
    assert rate < 1 / (twins.K + 1) + 0.12, rate


# --- twins: the value the unsolved code computes ----------------------------------------------------------------

NEAR_FILE = "test/test_int8.py"
NEAR = '''from pkg.quant import quantize


def test_rounds_to_nearest():
    assert quantize(0.8675, scale=0.01) == 87
'''
NEAR_GRADED = [f"{NEAR_FILE}::test_rounds_to_nearest"]


def _near_rate(base_value: int | None, draws: int = 200, rng: random.Random | None = None,
               shown: bool = False) -> tuple[float, int]:
    """Validation as `select` sees it (its own random stream, as in `_spread_rate`) when the unsolved code
    computes `base_value` (None: one drawn per validation, `_far`): a planted value equal to it (twin or margin)
    passes at base, every other fails in both states. Then a forger who reads the computed value off the
    failure (`assert 86 == 87`: pytest's own message, the same for every member) bets on the member nearest
    to it. `shown`: the failures at base show the computed value, as pytest prints them."""
    rng = rng or random.Random(13)
    hits = total = 0
    for seed in range(draws):
        computed = base_value if base_value is not None else _far(rng)
        task = Task(task_id="o__r-5", repo="o/r", profile="p", pr_number=5, title="t", base_commit="a" * 40,
                    merge_commit="b" * 40, family="kernels-quant", created_at="2026-01-01T00:00:00Z",
                    test=TestSpec(runner="pytest", files=[NEAR_FILE]), FAIL_TO_PASS=NEAR_GRADED)
        plan = twins.grading_plan(task, {NEAR_FILE: NEAR}, seed=seed, candidates=True)
        planted = {kind: {m.twin.model_dump_json(): m.twin.value for m in plan.members if m.kind == kind and m.twin}
                   for kind in ("twin", "margin")}

        shapes: dict[str, tuple[str, ...]] = {}
        if shown:
            shapes[NEAR_GRADED[0]] = (f"assert {computed} == 87",)
            shapes |= {k: (f"assert {computed} == {v}", "87", v) for k, v in planted["twin"].items()}
        at_base = {kind: {k: "passed" if int(v) == computed else "failed" for k, v in values.items()}
                   for kind, values in planted.items()}
        before = SimpleNamespace(twins=at_base["twin"], margins=at_base["margin"], shapes=shapes)
        after = SimpleNamespace(twins=dict.fromkeys(planted["twin"], "failed"),
                                margins=dict.fromkeys(planted["margin"], "failed"), shapes={})
        task.twins, _ = twins.select(NEAR_GRADED, [before], [after], random.Random(f"select-{seed}"))
        plan = twins.grading_plan(task, {NEAR_FILE: NEAR}, seed=seed + 1)
        for group in _spread_groups(plan):
            best = min(abs(int(m.literal or 0) - computed) for m in group)
            nearest = [m for m in group if abs(int(m.literal or 0) - computed) == best]
            hits += rng.choice(nearest).kind == "test"
            total += 1
    return hits / max(total, 1), total


def _far(rng: random.Random) -> int:
    """How far a fix moves the value, as a forger cannot know it: any of 1..40 steps, either way."""
    return 87 + rng.choice([-1, 1]) * rng.randint(1, 40)


@pytest.mark.slow
def test_the_value_the_unsolved_code_computes_does_not_single_out_the_real_member(monkeypatch):
    """A fix that moves a value a little (round instead of truncate, an off-by-one, a scale closer to the
    reference) leaves the base computing a value next to the real one. Before, validation planted candidates
    around the real value and dropped a site when one passed at base: the computed value then fell inside
    them unless the real value sat at their end facing it, so a kept site had the real member nearest the
    computed value, and the forger who reads it off the failure (every member shows it alike) won every
    group: 1.0 at one step, 0.74 at three. Now whether a site is dropped depends on the group, never on the
    real value's rank: validation also plants every value up to MARGIN steps beyond the group
    (`twins.margins`), and drops the site where one passes at base or where every member's failure shows a
    number within SHOWN_MARGIN steps of the group. The test keeps no twin at such a site.

    What is left (README): the band just past the margin. A site is kept there only when the real value is
    the member facing the computed one (1.0 at MARGIN + 1 steps, 0.50 one step further, chance from
    MARGIN + K + 1 on), so a forger who knows the fix moves the value by exactly that much still wins; over
    fixes of 1 to 40 steps it is near chance."""
    for near in (86, 84):  # 1 and 3 steps below the real 87: every site dropped
        assert _near_rate(near) == (0.0, 0)
    for near in (86, 84, 81):  # 1, 3 and 6 steps, the computed value shown in the failures
        assert _near_rate(near, shown=True) == (0.0, 0)
    for shown in (False, True):
        rate, total = _near_rate(None, draws=600, shown=shown)
        assert total > 400 and rate < 1 / (twins.K + 1) + 0.05, (shown, rate, total)
    monkeypatch.setattr(twins, "margins", lambda value, members, m=twins.MARGIN: [])  # the defence off
    rate, total = _near_rate(86)
    assert total > 0 and rate > 0.9, rate


NEAR_BASE_CODE = "def quantize(x, scale):\n    return int(x / scale)\n"  # truncates: 86
NEAR_FIXED_CODE = "def quantize(x, scale):\n    return int(x / scale + 0.5)\n"  # rounds: 87


def _validated_near(tmp_path, seed: int | None = None) -> tuple[twins.GradingPlan, list]:
    """Validation's candidate runs of NEAR through the real runner (`tests.test_attacks_twins._run`: the boot
    script, the stream): the base truncates, the oracle rounds. `seed`: the plan's draw (None: a fresh one)."""
    from tests.test_attacks_twins import FILE, _run  # the runner's config names FILE
    task = Task(task_id="o__r-5", repo="o/r", profile="p", pr_number=5, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="kernels-quant", created_at="2026-01-01T00:00:00Z",
                test=TestSpec(runner="pytest", files=[FILE]), FAIL_TO_PASS=[f"{FILE}::test_rounds_to_nearest"])
    plan = twins.grading_plan(task, {FILE: NEAR.replace("pkg.quant", "pkg.thing")}, seed=seed, candidates=True)
    return plan, [_run(tmp_path, plan, NEAR_BASE_CODE), _run(tmp_path, plan, NEAR_FIXED_CODE)]


@pytest.mark.slow
def test_through_the_real_runner_a_fix_of_one_step_keeps_no_twin_at_its_site(tmp_path, monkeypatch):
    """The same off-by-one, run: the margin equal to 86 passes at base and pytest's failure of every member
    shows 86, so validation keeps no twin at the site (the test is named twinless, not falsely guarded).
    With both defences off, a kept group has the real member nearest 86 every time."""
    plan, (before, after) = _validated_near(tmp_path)
    assert any(v == "passed" for v in before.margins.values()) or any(v == "passed" for v in before.twins.values())
    graded = ["test/test_shards.py::test_rounds_to_nearest"]
    kept, twinless = twins.select(graded, [before], [after])
    assert (kept, twinless) == ([], graded)
    monkeypatch.setattr(twins, "margins", lambda value, members, m=twins.MARGIN: [])  # the defences off
    monkeypatch.setattr(twins, "_shown_near", lambda *a: False)
    groups = 0
    for seed in range(24):  # seeded draws: a group is kept on about one in four, so fresh ones failed 1 run in ~100
        plan, (before, after) = _validated_near(tmp_path, seed)
        kept, _ = twins.select(graded, [before], [after], random.Random(f"select-{seed}"))
        if kept:
            groups += 1
            assert min(abs(int(t.value) - 86) for t in kept) > 1  # every twin farther from 86 than the real 87
        if groups == 2:
            break
    assert groups == 2


def test_numbers_an_earlier_check_shows_do_not_drop_a_later_site():
    """The failure at base can be an earlier check's (`<OTHER: 3> != <CONTINUE: 1>`, the same for every
    member): it says nothing about the site's value, so its numbers do not drop a group around 2 (real
    sglang-jax tests kept no twin for this); a failure at the site that shows a value near the group does."""
    graded = "t.py::test_x"
    group = [Twin(test=graded, site=0, value=v) for v in ("3", "4", "5")]
    keys = [t.model_dump_json() for t in group]
    earlier = "E AssertionError: <AddReqResult.OTHER: 3> != <AddReqResult.CONTINUE: 1>"
    run = SimpleNamespace(shapes={graded: (earlier,), **{k: (earlier, "2", t.value) for k, t in zip(keys, group)}})
    assert not twins._shown_near(graded, group, keys, [run])
    at_site = {graded: ("E assert 7 == 2",), **{k: (f"E assert 7 == {t.value}", "2", t.value)
                                                for k, t in zip(keys, group)}}
    assert twins._shown_near(graded, group, keys, [SimpleNamespace(shapes=at_site)])


def test_a_test_named_from_the_runners_folder_keeps_its_twins():
    """sglang-jax runs pytest from `python/`: the runner names a hidden test `sgl_jax/test/t.py::T::test_x`,
    the plan (from task.test.files) `python/sgl_jax/test/t.py::T::test_x`. `select` matched the two names
    exactly, so every test of such a task was twinless (#1372's 18 FAIL_TO_PASS tests kept none)."""
    graded = ["sgl_jax/test/t.py::T::test_x"]
    group = [Twin(test="python/sgl_jax/test/t.py::T::test_x", site=0, value=v) for v in ("11", "12", "14")]
    run = SimpleNamespace(twins={t.model_dump_json(): "failed" for t in group}, shapes={}, margins={},
                          outcomes={graded[0]: "failed"})
    fixed = SimpleNamespace(**{**vars(run), "outcomes": {graded[0]: "passed"}})
    kept, twinless = twins.select(graded, [run], [fixed])
    assert kept == group and twinless == []
    assert twins.select(["other/t.py::T::test_x"], [run], [fixed]) == ([], ["other/t.py::T::test_x"])
