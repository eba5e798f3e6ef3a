"""Taking a candidate's submission out of its sandbox: everything changed against base_commit, binary included."""

from __future__ import annotations

from sweserve.environment.sandbox import Sandbox
from sweserve.errors import InfraError, LimitExceeded


def take_submission(box: Sandbox, base_commit: str) -> str:
    res = box.exec(f"git add -A && git diff --cached --binary --full-index {base_commit}", 300, user="root")
    if res.exit_code != 0:
        raise InfraError("sandbox", f"could not take the candidate's diff: {res.tail(300).strip()}")
    if res.truncated:  # more than the sandbox keeps of a command's output
        raise LimitExceeded(f"submission too large: {res.output_bytes / 2**20:.1f} MB")
    return res.output
