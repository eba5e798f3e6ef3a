"""Python source parsed one thread at a time.

CPython 3.11 up to 3.11.7 (the system Python here) keeps the AST converter's recursion depth in shared state:
two threads in `ast.parse` at once can fail with `SystemError: AST constructor recursion depth mismatch`
(CPython issue gh-106905). Validation and `run` grade trials in threads (`--workers`), and each plans twins,
scans for tampering and reads interfaces with `ast.parse`; a task then failed for no reason of its own. Every
parse of sweserve's goes through here, under the one lock the harness modules' parses on the host take too.
"""

from __future__ import annotations

import ast

from sweserve.harness.sweserve_twins import PARSE_LOCK as _ONE_AT_A_TIME  # the harness parses on the host too


def parse_module(source: str | bytes) -> ast.Module:
    """A module's syntax tree (`ast.parse`), serialized across threads (parsing holds the GIL anyway)."""
    with _ONE_AT_A_TIME:
        return ast.parse(source)


def parse_expression(source: str) -> ast.Expression:
    """An expression's syntax tree (`ast.parse(..., mode="eval")`), serialized across threads."""
    with _ONE_AT_A_TIME:
        return ast.parse(source, mode="eval")
