"""Red team 18c: grading integrity and host safety, second round (the exports' privilege drop, the egress proxy's
logs, what a trial leaves on the host).

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working.

- R18c-1 (the exports): `sweserve_drop.drop` set `no_new_privs` with prctl and ignored what came back (a -1,
  or no libc to call at all, passed silently). The exports' verifier runs in a fresh container of the task image
  that the SWE-bench harness and Harbor start without Docker's no-new-privileges, and `lock` strips set-id bits
  only where it walks (the repository, the interpreter's prefix, the harness): the image's set-uid-root programs
  (su, mount, passwd, chsh, newgrp; sudo and whatever else a repository's image installs) stay. In the exports
  `no_new_privs` is the one thing that keeps them from giving the hidden tests (the submission's code) root: the
  verifier's pipe, its files, the reward. `sweserve run` has Docker's flag besides; the exports have nothing else.
  Where prctl failed (a seccomp filter answering EPERM/ENOSYS, a runtime without it, a libc that cannot be loaded)
  the tests ran on with set-uid programs live. Defence: `drop` fails closed: after prctl it reads the kernel's own
  word (`NoNewPrivs:` in /proc/self/status) and raises unless the flag is set (or, on a kernel too old to report
  it, unless prctl said 0): no test runs without it, the verdict is `error`, never a pass.

- R18c-2 (host disk and the harness's memory, every run): `export_tree` charged each entry of the candidate's tree
  4,096 bytes toward its 2 GiB limit, whatever its names: a hard link with a ~3,800-character path and link path
  (a chain of 255-character folders; no data, no disk in the sandbox) takes ~9 KB of PAX headers in the spooled
  archive on the host, and tarfile keeps every member it reads or writes, in `export_tree`, `inert_tree` and
  `_outside_tree` alike (8.6 KB of memory per entry measured in inert_tree alone). At the limit: ~500,000
  entries, ~4.8 GB of host temp disk and several GB of the harness's memory per trial, with trials in parallel.
  Defence: each entry is charged the larger of 4,096 bytes and its headers as written; the names have their own
  budget (`MAX_TREE_NAME_BYTES`, 64 MiB); every stream reader drops each member once read (`sandbox.streamed`).
  Variant: entries under `.git`, `__pycache__`, `.pytest_cache` were left out and charged nothing, though dockerd
  archives them and the harness reads each (millions of empty files: free); each now costs an entry.

Tried and held: the egress proxy's container still has the daemon's json-file log driver, but mitmdump runs `-q`
(errors only) and nothing a sandbox sent made it log a byte: 20 garbage requests, TLS and HTTP/2 prefaces
of junk, a 70,000-character URL, non-UTF-8 hosts and Host headers, bad ports, bad chunked bodies, h2c upgrades,
refused CONNECTs (0 bytes of logs, the audit log capped as before). The image's set-uid programs (su, mount,
passwd, chsh, newgrp, gpasswd, umount, chfn in the demo's task image) are inert under `drop` where the kernel
sets the flag (checked in a real Harbor run, oracle 1). Output of the hidden tests in the exports: capped
(OUTPUT_LIMIT) and shown behind "| ". SWE-bench's own apply of the prediction, through a link the patch makes (a
symlink `lnk -> /usr/local/lib`, then `lnk/sitecustomize.py`, which `/usr/bin/python3 -I` of eval.sh would import
as root): `git apply` refuses ("beyond a symbolic link") with and without --reject, GNU patch 2.7.6 skips it
("Invalid file name"); nothing written outside the tree.

Leads, not built: the proxy's log driver is still uncapped (a mitmproxy error path a model server the agent's
config names can reach, e.g. an addon exception on its answers, would write a traceback per request); task images with a `VOLUME` would keep writes outside the watched
writable layer and leave anonymous volumes behind (`remove(force=True)` without `v=True`).
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from sweserve.harness import sweserve_drop

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="drops privileges: needs root")


def _drop_in_child(setup: str) -> str:
    """Run `sweserve_drop.drop()` in a fresh root interpreter after `setup` (code that breaks prctl the way a
    runtime can); what it says: `dropped uid=... nnp=...` when drop returned, `refused: ...` when it raised."""
    import subprocess

    probe = textwrap.dedent(f'''
        import os, sys
        sys.path.insert(0, {str(Path(sweserve_drop.__file__).parent)!r})
        import sweserve_drop
    ''') + textwrap.dedent(setup) + textwrap.dedent('''
        try:
            sweserve_drop.drop()
        except Exception as exc:
            print("refused:", type(exc).__name__, exc)
        else:
            nnp = [l for l in open("/proc/self/status") if l.startswith("NoNewPrivs:")]
            print("dropped uid=%d nnp=%s" % (os.getuid(), nnp[0].split()[1] if nnp else "?"))
    ''')
    return subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60).stdout


# prctl as a seccomp filter or a runtime without it answers: -1 (EPERM/ENOSYS), the flag left unset
PRCTL_FAILS = '''
    import ctypes
    class _Libc:
        def __init__(self, *a, **k): pass
        def prctl(self, *a): return -1
    ctypes.CDLL = _Libc
'''
# no libc to load (a static or stripped interpreter): ctypes raises before prctl is ever called
NO_LIBC = '''
    import ctypes
    def _none(*a, **k): raise OSError("no libc")
    ctypes.CDLL = _none
'''
# a prctl that says 0 and did nothing (a shim, an interposed libc): only the kernel's word counts
PRCTL_LIES = '''
    import ctypes
    class _Libc:
        def __init__(self, *a, **k): pass
        def prctl(self, *a): return 0
    ctypes.CDLL = _Libc
'''


@needs_root
@pytest.mark.parametrize("setup", [PRCTL_FAILS, NO_LIBC, PRCTL_LIES], ids=["prctl-fails", "no-libc", "prctl-lies"])
def test_r18c_1_drop_never_leaves_set_uid_programs_live(setup):
    """Before: drop returned as if all were well and the tests ran with `NoNewPrivs: 0` (the image's set-uid-root
    programs live for them in the exports). After: drop raises, no test runs."""
    out = _drop_in_child(setup)
    assert out.startswith("refused:"), f"drop let the tests run without no_new_privs: {out!r}"


@needs_root
def test_r18c_1_control_an_honest_drop_still_works():
    out = _drop_in_child("")
    assert out.strip() == "dropped uid=65534 nnp=1", out


# --- R18c-2: a tree of many long-named entries costs the host far more than the tree limit counts ----------------

# root in the candidate sandbox: a chain of 255-character folders (a path of ~3,800 characters), an empty file at
# its end and N hard links to it beside it, each with a 200-character name: no data, almost no disk in the
# sandbox, and each entry's tar headers (PAX path and linkpath) some 9 KB on the host
LONG_TREE = r'''
import os, sys
n, top = int(sys.argv[1]), sys.argv[2]
deep = os.path.join(top, *["d" * 250] * 14)
os.makedirs(deep)
open(os.path.join(deep, "e"), "w").close()
for i in range(n):
    os.link(os.path.join(deep, "e"), os.path.join(deep, "%0200d" % i))
print("made", n)
'''


@pytest.fixture
def tree_box(docker_client):
    """A container from the base image (no network), a tree built in it by `build(n)`; yields (box, build)."""
    from types import SimpleNamespace

    from sweserve.environment.docker_sandbox import labels

    container = docker_client.containers.run("sweserve-base:bookworm", ["sleep", "600"], detach=True,
                                             network_mode="none", labels=labels("r18c", "long-tree", "candidate"))

    def build(n: int, top: str = "/testbed/t") -> None:
        code, out = container.exec_run(["python3", "-c", LONG_TREE, str(n), top])
        assert code == 0 and b"made" in out, out[-500:]

    try:
        yield SimpleNamespace(container=container), build
    finally:
        container.remove(force=True)


def _spooled_bytes(out) -> int:
    out.seek(0, 2)
    size = out.tell()
    out.seek(0)
    return size


@pytest.mark.docker
def test_r18c_2_a_tree_never_spools_more_on_the_host_than_its_limit(tree_box):
    """3,000 long-named hard links under a 16 MiB tree limit. Before: each entry was charged 4,096 bytes (12 MB in
    all, under the limit) while its headers took ~9 KB: 27 MB spooled on the host's disk, past the limit it claims
    (at the 2 GiB default: ~4.8 GB per trial). After: every entry is charged what it takes in the archive; the
    tree is refused (TreeTooLarge) or fits."""
    from sweserve.environment.sandbox import TreeTooLarge
    from sweserve.environment.transfer import export_tree

    box, build = tree_box
    build(3000)
    limit = 16 << 20
    try:
        out = export_tree(box, "/testbed", limit, prefix="sweserve/submitted/")
    except TreeTooLarge:
        return
    size = _spooled_bytes(out)
    out.close()
    assert size <= limit, f"a tree counted under its {limit} byte limit spooled {size} bytes on the host"


@pytest.mark.docker
def test_r18c_2_names_have_a_budget_of_their_own(tree_box, monkeypatch):
    """The tree's names are what the harness keeps in memory for every entry (export_tree's hard-link map,
    inert_tree's sets): at the 2 GiB limit ~500,000 entries of ~4,000-character names held some 4.5 GB of the
    harness's memory per trial (measured: 8.6 KB per entry in inert_tree alone), and trials run in parallel. After:
    the names' total has its own budget (`MAX_TREE_NAME_BYTES`, here lowered to 4 MiB: ~1,000 such entries)."""
    from sweserve.environment import transfer
    from sweserve.environment.sandbox import TreeTooLarge

    box, build = tree_box
    build(1500)
    monkeypatch.setattr(transfer, "MAX_TREE_NAME_BYTES", 4 << 20, raising=False)
    with pytest.raises(TreeTooLarge):
        transfer.export_tree(box, "/testbed", 2 << 30, prefix="sweserve/submitted/").close()


def _long_tar(n: int, kind: bytes = b"1") -> bytes:
    import io
    import tarfile

    prefix = "sweserve/submitted/"
    parts = ["d" * 250] * 14
    buf = io.BytesIO()

    def entry(name, kind, linkname=""):
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, linkname
        return info

    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(len(parts)):
            tar.addfile(entry(prefix + "/".join(parts[:i + 1]), tarfile.DIRTYPE))
        deep = prefix + "/".join(parts)
        tar.addfile(tarfile.TarInfo(deep + "/e"))
        for i in range(n):
            tar.addfile(entry(deep + "/%0200d" % i, kind, deep + "/e" if kind == tarfile.LNKTYPE else "x" * 4000))
    return buf.getvalue()


@pytest.mark.parametrize("kind", [b"1", b"2"], ids=["hard-links", "symlinks"])
@pytest.mark.parametrize("reader", ["inert_tree", "outside_tree"])
def test_r18c_2_inert_tree_keeps_names_not_every_header(reader, kind):
    """inert_tree (and `copy_tree_in`'s `_outside_tree`, which reads the same tree before it goes into the grade
    sandbox) read the archive with tarfile, which keeps every member it read (name, link name, and both again in
    its PAX headers): 0.93 bytes of memory per byte of archive. After: only the names inert_tree checks against."""
    import io
    import tracemalloc

    from sweserve.environment.docker_sandbox import _outside_tree
    from sweserve.evaluation.submission import inert_tree

    data = _long_tar(4000, kind)
    read = inert_tree if reader == "inert_tree" else _outside_tree
    tracemalloc.start()
    try:
        read(io.BytesIO(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(data) // 2, f"{reader} held {peak} bytes for a {len(data)} byte archive"


@pytest.mark.docker
def test_r18c_2_control_an_honest_tree_still_copies(tree_box):
    from sweserve.environment.transfer import export_tree

    box, build = tree_box
    build(50)
    out = export_tree(box, "/testbed", 2 << 30, prefix="sweserve/submitted/")
    import tarfile

    with tarfile.open(fileobj=out, mode="r|") as tar:
        names = [m.name for m in tar]
    assert len(names) == 1 + 14 + 1 + 50 and all(n.startswith("sweserve/submitted/t") for n in names), names[:3]


@pytest.mark.docker
@pytest.mark.parametrize("skipped", ["__pycache__", ".git/objects/x", ".pytest_cache"])
def test_r18c_2_entries_left_out_of_the_tree_still_count(tree_box, skipped):
    """Entries under `.git`, `__pycache__` and `.pytest_cache` are left out of the copy, and were charged nothing:
    dockerd still archives them and the harness reads every header (and, before `streamed`, kept every member in
    memory). Millions of empty files there cost no disk in the sandbox, nothing toward the limit, and minutes of
    the harness's time and GBs of its memory per trial. 20,000 of them under a 16 MiB limit: before, copied as if
    absent; after, each is charged an entry (ENTRY_BYTES) and the tree is refused."""
    from sweserve.environment.sandbox import TreeTooLarge
    from sweserve.environment.transfer import export_tree

    box, _ = tree_box
    code, out = box.container.exec_run(["python3", "-c", (
        f"import os; d = '/testbed/{skipped}'; os.makedirs(d)\n"
        "for i in range(20000): open(os.path.join(d, str(i)), 'w').close()")])
    assert code == 0, out
    with pytest.raises(TreeTooLarge):
        export_tree(box, "/testbed", 16 << 20, prefix="sweserve/submitted/").close()
