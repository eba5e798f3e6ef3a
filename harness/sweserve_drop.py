"""Least privilege for the hidden tests: what the tests read is root's, and the tests run as an unprivileged user.

Used by the boot script (`sweserve_boot.py`, which every grading runs, in `sweserve run` and in the exports)
and by the exports' root verifier (`sweserve_verify.py`). Stdlib only; runs as root inside the grade container.

- `lock(paths)`: every file and directory under `paths` (the repository, the interpreter's own paths with
  pytest's installed files, the harness) is made root's and loses group/other write and set-id bits. The test
  user then cannot rewrite a test file, a fixture or data file, a `__pycache__` of a test module, a conftest,
  a `.pth` or `sitecustomize`, an installed module or the runner, nor chmod any of them back (it owns none).
- `private(path)`: a directory only root can enter (the harness's inputs: tests.patch, run config, nonce).
- `drop(account)`: the process becomes the test user (no supplementary groups) with `no_new_privs` set, so no
  set-uid program gives root back (it raises if the kernel does not show the flag set: never tests without it); HOME is a fresh directory of its own, the only place besides the world-
  writable temp dirs (`/tmp`, `/dev/shm`) the tests can write.
- `kill_all(uid)`: every process of the test user ends (what the tests left running cannot act after them).
"""

import ctypes
import os
import pwd
import signal
import stat
import tempfile

TEST_USER = "nobody"
WRITE_BITS = stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID
PR_SET_NO_NEW_PRIVS = 38


def account(name=TEST_USER):
    """(uid, gid, name) of the test user; uid 65534 when the image has no such account."""
    try:
        entry = pwd.getpwnam(name)
        return entry.pw_uid, entry.pw_gid, name
    except KeyError:
        return 65534, 65534, name


def _fix(path, st):
    if st.st_uid != 0 or st.st_gid != 0:
        os.lchown(path, 0, 0)
    if not stat.S_ISLNK(st.st_mode) and st.st_mode & WRITE_BITS:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~WRITE_BITS)


def lock(paths, skip=("/tmp", "/dev", "/proc", "/sys")):
    """Root owns everything under `paths` and nothing there is writable by anyone else (links are not followed;
    `skip`: trees not walked into, the world-writable ones the tests may use, unless named in `paths`)."""
    skip = tuple(os.path.abspath(s) for s in skip)
    seen: set = set()
    for top in paths:
        top = os.path.abspath(top)
        inside = any(top == s or top.startswith(s.rstrip("/") + "/") for s in seen)  # walked already
        if inside or top in skip or top == "/" or not os.path.lexists(top):
            continue
        seen.add(top)
        _fix(top, os.lstat(top))
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
            for name in dirs + files:
                path = os.path.join(root, name)
                try:
                    _fix(path, os.lstat(path))
                except FileNotFoundError:
                    pass


def private(path):
    """`path` (a directory) root's alone: the test user can neither list it nor read what is in it."""
    os.chown(path, 0, 0)
    os.chmod(path, 0o700)


def _kernel_says_no_new_privs():
    """The kernel's own word on this process's `no_new_privs` (True/False); None where it says nothing (a
    kernel older than 4.10 has no `NoNewPrivs:` line, or no /proc)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("NoNewPrivs:"):
                    return line.split()[1:2] == ["1"]
    except OSError:
        pass
    return None


def no_new_privs():
    """Set `no_new_privs` for good, or raise: no set-uid program may ever give the tests root back. `lock` strips
    set-id bits only where it walks; the image's own set-uid-root programs (su, mount, sudo ...) stay, and neither
    the SWE-bench harness nor Harbor starts containers with Docker's no-new-privileges: in the exports this flag
    is all that keeps them inert. A
    prctl that fails (seccomp, a runtime without it), no libc to call, or a flag the kernel does not show set is
    an error, never tests run without it (red team 18c, R18c-1)."""
    try:
        rc = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    except (OSError, AttributeError) as exc:
        rc, why = -1, f"prctl cannot be called ({exc})"
    else:
        why = f"prctl returned {rc} (errno {ctypes.get_errno()})"
    said = _kernel_says_no_new_privs()
    if said is False or (said is None and rc != 0):
        raise OSError(f"sweserve: no_new_privs could not be set: {why}; the tests do not run without it")


def drop(user=TEST_USER):
    """Become the test user for good: no groups, its own uid and gid, no way back through set-uid programs.
    Returns the environment changes made (HOME, USER, ...) for the caller's children."""
    uid, gid, name = account(user)
    home = tempfile.mkdtemp(prefix="sweserve-home-")
    os.chown(home, uid, gid)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    no_new_privs()
    env = {"HOME": home, "USER": name, "LOGNAME": name, "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
           # the repository is root's now: git would refuse it as "dubious ownership" to a test that runs git
           "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
    os.environ.update(env)
    os.umask(0o022)
    return env


def kill_all(uid):
    """SIGKILL every process of `uid` (from a child that takes that uid: kill(-1) reaches exactly those)."""
    if os.geteuid() != 0 or uid == 0:
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(uid)
            for _ in range(3):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
