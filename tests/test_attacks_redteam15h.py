"""A fifteenth red team's (15h) attacks on the newest fixes: the export of /testbed after R15d-2, the endpoint
probe after R15d-5, the in-box verifier after R15d-3/R15e-1/R15e-2, egress's path rule. Each test asserts the
defended behaviour: it FAILS while the attack wins. The demo's task 103 in real sandboxes, as
tests/test_attacks_redteam15d.py runs it.

- R15h-1 (self-selected retry): R15d-2 made a 404 for /testbed an empty tree, graded; but dockerd resolves a
  /testbed that is a symlink, and a link it cannot resolve is a 500: `ln -s /testbed /testbed` (or two links in
  a loop, a link through a file: "not a directory", a link to a 300-character name: "file name too long") after `rm -rf /testbed` makes the archive fail with
  "evalSymlinksInScope: too many links", `InfraError("docker")`: `error`, redone by --retry-errors.
- R15h-2 (self-selected retry, endpoint-dependent): R15d-5's fix gives the probe PROBE_PATIENCE (4) times the
  conversation's patience; the agent's context sets how long each abandoned request takes on an in-order
  endpoint, so one jump past 4x the time-out per request (six 9,000-character outputs in one step: ~45 s against
  5 s here; ~8 minutes of prefill against the default 120 s) queues the probe behind three abandoned copies for
  longer than it waits; with the run's time not yet out, `_endpoint_answers` says False: `error`, redone. The
  endpoint answered everything, late; it lists its models throughout.
- R15h-3 (Harbor: excluded trial): R15e-2's fix bounds each git command of the in-box verifier (120 s), not
  their number: `to_base` runs one `git ls-files --error-unmatch` per path `git apply --numstat` lists in the
  patch that exists on disk, duplicates included. The agent's own model.patch (R15e-2's route) naming one base
  file 450,000 times (a 60-byte mode change each: 27 MB) costs 450,000 git processes (~2 ms each on the demo's
  25-file index, more on a real one): past Harbor's verifier limit (test_timeout_s + 300 = 900 s), a
  VerifierTimeoutError, the trial left out of the job's mean.

Tried, held (no test): /testbed replaced by a dangling link, a FIFO, a socket, a link to `/tb2/.`; files with
mtimes before 1970 and past 5000; a socket inside the tree: each graded. Egress's path rule against request
targets with `#/generate`, `?/generate`, tabs, VT, CR (mitmproxy refuses or keeps the same path urlsplit reads).
"""

from __future__ import annotations

import pytest
from test_attacks_redteam15d import FIX, _command_run, flooded_run, verifier_at_base

# --- R15h-1: /testbed as a link dockerd cannot resolve: the copy fails as Docker's error -------------------------

@pytest.mark.docker
@pytest.mark.parametrize("command", [
    "cd / && rm -rf /testbed && ln -s /testbed /testbed",
    "cd / && rm -rf /testbed && ln -s /loop /testbed && ln -s /testbed /loop",
    "cd / && rm -rf /testbed && touch /file && ln -s /file/x /testbed",
    "cd / && rm -rf /testbed && ln -s /$(head -c 300 /dev/zero | tr '\\0' a) /testbed",
], ids=["self-link", "two-link-loop", "through-a-file", "name-too-long"])
def test_a_tree_the_candidate_made_an_unresolvable_link_is_graded_not_a_redone_error(demo, tmp_path, command):
    """R15h-1: dockerd follows /testbed when it is a link; one that loops (or passes through a file) is a 500
    ("too many links", "not a directory"), which `docker_errors` makes `InfraError("docker")`: `error`, kind
    `docker`, redone. The sandbox is there: the unreadable tree is the attempt's own doing, an empty tree."""
    r, redo = _command_run(demo, tmp_path, FIX + command)
    assert r.status in ("failed", "patch_failed"), (r.status, r.error_kind, r.reason)
    assert redo == []


# --- R15h-2: a context jump past PROBE_PATIENCE x the time-out: the probe queues behind it and gives up ----------

@pytest.mark.slow
@pytest.mark.docker
def test_a_context_jump_past_the_probes_patience_is_not_a_redone_error(demo, tmp_path):
    """R15h-2: as R15d-5, with six 9,000-character outputs in one step instead of four: each copy of the next
    request takes ~45 s on the in-order endpoint (time-out 5 s, 2 retries: the probe waits 4 x 3 x 5 = 60 s),
    the probe is answered only after the three abandoned copies (~135 s), and the run still has time left:
    `_endpoint_answers` is False, the attempt `error`, redone. The endpoint was never down."""
    r, redo, sizes = flooded_run(demo, tmp_path, 6, "jumper")
    assert r.status == "resolved", (r.status, r.error_kind, r.reason, sizes)
    assert redo == []


# --- R15h-3: one git process per name the patch lists: the verifier's time grows with the patch ------------------

def test_a_patch_naming_one_file_many_times_does_not_cost_one_git_process_per_name(tmp_path, monkeypatch):
    """R15h-3: `to_base` (Harbor: the patch given, the tree fresh at base) checks each name `git apply --numstat`
    lists with its own `git ls-files`: 20,000 copies of one mode change (1.2 MB) are 20,000 git processes
    (~40 s here; 450,000 of them, 27 MB, outlast Harbor's 900 s). Defended: the number of git commands does not
    grow with the patch's repeated names (the test stops counting at 1,000)."""
    verify, tree, base = verifier_at_base(tmp_path)
    patch = tmp_path / "model.patch"
    patch.write_text("diff --git a/mod.py b/mod.py\nold mode 100644\nnew mode 100755\n" * 20_000)
    monkeypatch.setattr(verify, "WORKDIR", str(tree))
    monkeypatch.setattr(verify, "HERE", str(tmp_path))
    monkeypatch.delenv("GIT_DIR", raising=False)
    real, calls = verify.git, []

    def counted(*args, **kwargs):
        calls.append(args[0])
        if len(calls) > 1000:
            raise AssertionError(f"{len(calls)} git commands and counting ({calls[-1]}): one per name the patch lists")
        return real(*args, **kwargs)

    monkeypatch.setattr(verify, "git", counted)
    verify.to_base({"base_commit": base, "format": "harbor", "patch": str(patch)})
    assert len(calls) < 50, calls[:20]
