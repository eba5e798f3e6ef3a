"""Code a candidate's submission runs inside the grading test process, shared by the attack tests.

`STEAL_CHANNEL` finds what the boot script keeps from it: its `main` frame (walked up from wherever the
submission's module is imported, i.e. during collection) holds the run's nonce and the emitter, whose
closure holds the channel's fd. `_frame(event)` then writes a frame the harness parses like its own.
"""

STEAL_CHANNEL = '''
import json as _json
import os as _os
import sys as _sys


def _steal():
    f = _sys._getframe()
    while f is not None:
        if "nonce" in f.f_locals and "emit" in f.f_locals:
            emit = f.f_locals["emit"]
            cells = dict(zip(emit.__code__.co_freevars, emit.__closure__))
            return f.f_locals["nonce"], cells["fd"].cell_contents, f.f_globals, cells
        f = f.f_back
    return None, None, None, None


_NONCE, _FD, _BOOT, _CELLS = _steal()


def _raw(text):
    data = ("\\n@@sweserve:" + _NONCE + ":" + text + "\\n").encode()
    while data:
        data = data[_os.write(_FD, data):]


def _frame(event):
    _raw(_json.dumps(event))
'''
