"""An independent red team's attacks on the newest defences: the two-container trial's inert tree (issue #18),
the mutation twins' values, the stream. Each docstring says what the attack did before its defence.

Tree attacks run the real seam: a tree made in a candidate sandbox of the demo's task image (or a crafted
archive, as a backend gone wrong would hand over), copied out by the backend and diffed in a grade sandbox.
"""

from __future__ import annotations

import tarfile

import pytest

from sweserve.agents.command import CommandAgent
from sweserve.environment.sandbox import WORKDIR, TreeTooLarge
from sweserve.evaluation.submission import SUBMITTED, SubmissionRejected, copy_tree, take_submission
from sweserve.evaluation.trial import evaluate_task
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
