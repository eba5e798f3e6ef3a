"""Attacks on the seam where the candidate's tree is inert data in the grade sandbox (issue #18).

A trial takes the submission in the sandbox that then grades it: the candidate's tree, copied out by the
backend, is put under /sweserve/submitted, diffed by the image's git as root, and removed before the verifier
starts. Each attack is tree content that tries to act there (links out of the copy, entries written through a
link, files named like the harness, a `.git` and hooks inside the copy, many files), and each test checks
what the verifier then starts from: /testbed, its object store and /sweserve as the image left them.
"""

import io
import tarfile

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.evaluation import submission
from sweserve.evaluation.submission import SUBMITTED, SubmissionRejected, copy_tree, take_submission
from sweserve.evaluation.trial import evaluate_task

pytestmark = pytest.mark.docker
DIST = "sweserve-demo__sglang-mini-103"
PREFIX = SUBMITTED.lstrip("/") + "/"
STATE = ("cd /testbed && git status --porcelain --ignored | sort | md5sum; "
         "find /testbed/.git/objects -type f | sort | md5sum; "
         "ls -A /sweserve 2>/dev/null; find / -xdev -name 'planted*' 2>/dev/null")


def grade_box(demo, b):
    return demo.ctx.sandbox(demo.ctx.task_image(b), b.task.task_id, "grade", b.task.resources, [])


def crafted(entries: list[tuple[str, str, str]]) -> io.BytesIO:
    """A tar of (kind, name, data-or-link-target): what a backend gone wrong, or a forged copy, would hand over."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for kind, name, data in entries:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif kind in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = data
                tar.addfile(info)
            else:
                raw = data.encode()
                info.size = len(raw)
                tar.addfile(info, io.BytesIO(raw))
    buf.seek(0)
    return buf


WRITE_THROUGH = {
    "a link to /testbed, then a file through it": [
        ("dir", PREFIX + "python", ""), ("sym", PREFIX + "out", "/testbed/python"),
        ("file", PREFIX + "out/planted_conftest.py", "raise SystemExit")],
    "a link to the harness's folder, then its boot script": [
        ("sym", PREFIX + "h", "/sweserve"), ("dir", PREFIX + "h/harness", ""),
        ("file", PREFIX + "h/harness/planted_boot.py", "x")],
    "a relative link up and out": [
        ("sym", PREFIX + "up", "../../usr/lib"), ("file", PREFIX + "up/planted.pth", "import os")],
    "an entry outside the copy": [("file", "usr/local/lib/planted_sitecustomize.py", "x")],
    "an entry with ..": [("file", PREFIX + "../planted_dotdot.py", "x")],
    "a hard link to a file outside the copy": [("hard", PREFIX + "planted_passwd", "etc/passwd")],
    "a file, then an entry under it": [
        ("file", PREFIX + "f", "x"), ("file", PREFIX + "f/planted_under_file", "x")],
}


@pytest.mark.parametrize("attack", sorted(WRITE_THROUGH))
def test_a_tree_that_writes_through_its_own_links_never_goes_in(demo, attack):
    """Unpacked at "/", an archive's later entry goes through a link an earlier one planted: refused before
    anything is copied, and the sandbox is as the image left it."""
    b = demo.bundle(DIST)
    with grade_box(demo, b) as box:
        before = box.exec(STATE, 60).output
        with pytest.raises(SubmissionRejected):
            take_submission(box, crafted(WRITE_THROUGH[attack]), b.task.base_commit)
        assert box.exec(STATE, 60).output == before


def test_the_defence_is_what_stops_it(demo, monkeypatch):
    """Without the check the archive above does write into /testbed (so the test above tests something)."""
    b = demo.bundle(DIST)
    monkeypatch.setattr(submission, "inert_tree", lambda tree, prefix=PREFIX: None)
    with grade_box(demo, b) as box:
        try:
            take_submission(box, crafted(WRITE_THROUGH["a link to /testbed, then a file through it"]),
                            b.task.base_commit)
        except Exception:  # noqa: BLE001 - whatever the diff makes of it: the write already happened
            pass
        assert box.exec("ls /testbed/python/planted_conftest.py", 30).exit_code == 0


HOSTILE_TREE = (
    "ln -s / rootlink && ln -s /sweserve/harness harness_link && ln -s ../../etc/passwd up_link && "
    "ln -s /testbed/.git gitlink && "
    # files named like the harness and like interpreter start-up hooks, at the copy's root and in a package
    "for f in sweserve_boot sweserve_outcomes sweserve_drop sweserve_unittest sitecustomize usercustomize; do "
    "echo 'open(\"/tmp/planted_ran\", \"w\")' > $f.py; cp $f.py python/$f.py; done && "
    "echo 'import os; os.system(\"touch /tmp/planted_pth\")' > planted.pth && mkdir -p sweserve/harness && "
    "echo x > sweserve/harness/run.json && echo x > sweserve/harness/.nonce && "
    # a .git inside the copy (as a folder with hooks and config, and as a gitfile), attributes naming drivers
    "mkdir -p vendor/dep/.git/hooks && printf '#!/bin/sh\\ntouch /tmp/planted_hook\\n' > "
    "vendor/dep/.git/hooks/pre-commit && chmod +x vendor/dep/.git/hooks/pre-commit && "
    "printf '[core]\\n\\tfsmonitor = touch /tmp/planted_fsmonitor\\n' > vendor/dep/.git/config && "
    "echo 'gitdir: /tmp' > vendor/.git && echo x > vendor/dep/x.py && "
    "printf '* filter=evil diff=evil merge=evil\\n' > .gitattributes && "
    "printf '[filter \"evil\"]\\n\\tclean = touch /tmp/planted_filter\\n' > .gitmodules && "
    # many small files in deep folders
    "mkdir -p many/a/b/c/d && for i in $(seq 1 3000); do echo $i > many/a/b/c/d/f$i.txt; done")


def test_hostile_tree_content_is_inert_in_the_grade_sandbox(demo):
    """The candidate's real tree (copied out by the backend) full of links out, harness-named files, a .git
    with hooks and config, attribute drivers and 3000 files: diffed, then gone; nothing of it ran or stayed."""
    b = demo.bundle(DIST)
    with demo.ctx.sandbox(demo.ctx.task_image(b), b.task.task_id, "candidate", b.task.resources, []) as cand:
        made = cand.exec(HOSTILE_TREE, 300)
        assert made.exit_code == 0, made.output
        tree = copy_tree(cand)
    with tree, grade_box(demo, b) as box:
        before = box.exec(STATE, 60).output
        patch = take_submission(box, tree, b.task.base_commit)
        after = box.exec(STATE, 60).output
        ran = box.exec("ls /tmp/planted* 2>/dev/null; ls /testbed/sweserve_boot.py 2>/dev/null", 30).output
    assert after == before  # /testbed, its objects, /sweserve: as the image left them
    assert ran.strip() == ""  # no hook, filter, fsmonitor or start-up file ran
    assert "diff --git a/rootlink b/rootlink\nnew file mode 120000" in patch  # links travel as links
    assert "b/sweserve_boot.py" in patch and "b/many/a/b/c/d/f3000.txt" in patch
    assert "vendor/dep/.git" not in patch and "vendor/.git" not in patch and "b/vendor/dep/x.py" in patch


@pytest.mark.slow
def test_a_hostile_tree_is_graded_as_its_patch_alone(demo):
    """End to end: the same tree from a candidate is a patch, graded in the sandbox it was diffed in; the
    runner is intact (no tampering read) and the trial fails (the patch's own harness-named modules may break
    the hidden tests' collection: that is the patch graded, not the seam)."""
    b = demo.bundle(DIST)
    r = evaluate_task(demo.ctx, b, CommandAgent(HOSTILE_TREE, name="hostile-tree"))
    assert r.status == "failed", (r.status, r.reason)
    assert r.tests is not None and "passed" not in r.tests.fail_to_pass.values()
    assert "b/rootlink" in r.model_patch
