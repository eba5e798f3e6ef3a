"""Taking a candidate's submission out of its sandbox: everything changed against base_commit, binary included."""

from __future__ import annotations

from sweserve.environment.sandbox import Sandbox
from sweserve.errors import InfraError


def take_submission(box: Sandbox, base_commit: str) -> str:
    res = box.exec(f"git add -A && git diff --cached --binary --full-index {base_commit}", 300, user="root")
    if res.exit_code != 0:
        raise InfraError("sandbox", f"could not take the candidate's diff: {res.tail(300).strip()}")
    return res.output
