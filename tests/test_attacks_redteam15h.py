"""A fifteenth red team's (15h) attacks on the newest fixes: the export of /testbed after R15d-2, the endpoint
probe after R15d-5, the in-box verifier after R15d-3/R15e-1/R15e-2, egress's path rule. Each test asserts the
defended behaviour: it FAILS while the attack wins. The demo's task 103 in real sandboxes, as
tests/test_attacks_redteam15d.py runs it.

- R15h-1 (self-selected retry): R15d-2 made a 404 for /testbed an empty tree, graded; but dockerd resolves a
  /testbed that is a symlink, and a link it cannot resolve is a 500: `ln -s /testbed /testbed` (or two links in
  a loop, or a link through a file: "not a directory") after `rm -rf /testbed` makes the archive fail with
  "evalSymlinksInScope: too many links", `InfraError("docker")`: `error`, redone by --retry-errors.
"""

from __future__ import annotations

import pytest

from test_attacks_redteam15d import FIX, _command_run


# --- R15h-1: /testbed as a link dockerd cannot resolve: the copy fails as Docker's error -------------------------

@pytest.mark.docker
@pytest.mark.parametrize("command", [
    "cd / && rm -rf /testbed && ln -s /testbed /testbed",
    "cd / && rm -rf /testbed && ln -s /loop /testbed && ln -s /testbed /loop",
    "cd / && rm -rf /testbed && touch /file && ln -s /file/x /testbed",
], ids=["self-link", "two-link-loop", "through-a-file"])
def test_a_tree_the_candidate_made_an_unresolvable_link_is_graded_not_a_redone_error(demo, tmp_path, command):
    """R15h-1: dockerd follows /testbed when it is a link; one that loops (or passes through a file) is a 500
    ("too many links", "not a directory"), which `docker_errors` makes `InfraError("docker")`: `error`, kind
    `docker`, redone. The sandbox is there: the unreadable tree is the attempt's own doing, an empty tree."""
    r, redo = _command_run(demo, tmp_path, FIX + command)
    assert r.status in ("failed", "patch_failed"), (r.status, r.error_kind, r.reason)
    assert redo == []
