"""Red team 18c: grading integrity and host safety, second round (the exports' privilege drop, the egress proxy's
logs, what a trial leaves on the host).

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working.

- R18c-1 (exports, Harbor above all): `sweserve_drop.drop` set `no_new_privs` with prctl and ignored what came
  back (a -1, or no libc to call at all, passed silently). In a Harbor export the agent is root in the very
  container the verifier grades, before it runs: it can leave a set-uid-root program anywhere `lock` does not walk
  (/var/tmp, /opt, /usr/local/bin ...), and the SWE-bench harness and Harbor start containers without Docker's
  no-new-privileges. `no_new_privs` is then the one thing that keeps that program from giving the hidden tests
  (the submission's code) root back: rewrite the harness's outcome pipe's reader, the verifier's files, the reward.
  Where prctl failed (a seccomp filter answering EPERM/ENOSYS, a sandbox runtime without it, a libc that cannot be
  loaded) the tests ran on, set-uid programs live. Defence: `drop` fails closed: after prctl it reads the kernel's
  own word (`NoNewPrivs:` in /proc/self/status) and raises unless the flag is set (or, on a kernel too old to
  report it, unless prctl said 0): no test runs without it, the verdict is `error`, never a pass.
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
    """Before: drop returned as if all were well and the tests ran with `NoNewPrivs: 0` (a set-uid-root program
    the agent left in a Harbor container gave them root). After: drop raises, no test runs."""
    out = _drop_in_child(setup)
    assert out.startswith("refused:"), f"drop let the tests run without no_new_privs: {out!r}"


@needs_root
def test_r18c_1_control_an_honest_drop_still_works():
    out = _drop_in_child("")
    assert out.strip() == "dropped uid=65534 nnp=1", out
