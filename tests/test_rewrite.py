"""Statement rewriting through an OpenAI-compatible endpoint (a scripted server on 127.0.0.1), guarded by the leak check."""

import json
import os
import subprocess
import sys

from fake_model import FakeModel

from sweserve.agents.config import ApiAgentConfig
from sweserve.dataset.rewrite import Rewriter
from sweserve.dataset.statement import StatementMaker

SRC = "python/sglang/srt/mem_cache/radix_cache.py"
TEST = "test/srt/test_radix_cache.py"
ORACLE_LINE = "self.tree_cache.dec_lock_ref(req.last_node)"
ORACLE = f"--- a/{SRC}\n+++ b/{SRC}\n@@ -1 +1,2 @@\n def f():\n+    {ORACLE_LINE}\n"
TESTS = f"--- a/{TEST}\n+++ b/{TEST}\n@@ -1 +1,2 @@\n+def test_abort_releases_prefix_lock():\n+    assert f()\n"
SPEC = ("# Aborted chunked requests must release their cached prefix\n\n"
        "After a request is aborted during chunked prefill, its radix-cache nodes must become evictable again.\n")


def answer(text):
    return {"role": "assistant", "content": text}


def maker(url, retries=0):
    cfg = ApiAgentConfig(kind="api", name="rewriter", base_url=url, model="spec-writer", request_retries=retries)
    return StatementMaker("sgl-project/sglang", rewriter=Rewriter(cfg, api_key="sk-rw"))


def test_clean_rewrite_replaces_the_statement():
    with FakeModel([answer(SPEC)]) as fake:
        st = maker(fake.base_url)(9023, "Fix radix lock leak", "Locks leak on abort.", ORACLE, TESTS)
        sent = fake.requests[0]["messages"][1]["content"]
        assert fake.auth == ["Bearer sk-rw"] and "tools" not in fake.requests[0]
    assert "Locks leak on abort." in sent and ORACLE_LINE in sent and "test_abort_releases_prefix_lock" in sent
    assert st.text == SPEC
    q = st.quality
    assert (q.statement_source, q.rewritten_from, q.statement_chars) == ("rewritten", "commit_message", len(SPEC.strip()))
    assert q.notes[-1] == "rewritten by spec-writer"


def test_leaking_rewrite_is_discarded_with_a_note():
    leaky = SPEC + f"\nCall `{ORACLE_LINE}` and make test_abort_releases_prefix_lock pass.\n"
    with FakeModel([answer(leaky)]) as fake:
        st = maker(fake.base_url)(9023, "Fix radix lock leak", "Locks leak on abort.", ORACLE, TESTS)
    assert st.text == "# Fix radix lock leak\n\nLocks leak on abort.\n"
    assert st.quality.statement_source == "commit_message" and st.quality.rewritten_from is None
    note = st.quality.notes[-1]
    assert note.startswith("rewrite by spec-writer discarded, it leaks:")
    assert ORACLE_LINE in note and "statement names hidden tests: test_abort_releases_prefix_lock" in note


def test_failing_or_empty_endpoint_keeps_the_original():
    with FakeModel([("status", 500)]) as fake:
        st = maker(fake.base_url)(1, "Fix it", "", ORACLE, TESTS)
    assert st.text == "# Fix it\n" and st.quality.notes[-1] == \
        "rewrite by spec-writer failed: HTTP 500 from model API (1 tries); original kept"
    with FakeModel([answer("   ")]) as fake:
        st = maker(fake.base_url)(1, "Fix it", "", ORACLE, TESTS)
    assert st.quality.statement_source == "title_only" and "was empty" in st.quality.notes[-1]


def test_mine_rewrite_with_agent_config(make_repo, tmp_path):
    repo = make_repo()
    repo.commit("init", {SRC: "def f():\n    return 1\n", TEST: "def test_f():\n    pass\n"})
    repo.commit("[Radix] Fix radix lock leak (#9023)\n\nLocks leak on abort.",
                {SRC: f"def f():\n    {ORACLE_LINE}\n", TEST: "def test_abort_releases_prefix_lock():\n    assert f\n"})
    with FakeModel([answer(SPEC)]) as fake:
        cfg = tmp_path / "rw.yaml"
        cfg.write_text(f"kind: api\nname: rw\nbase_url: {fake.base_url}\nmodel: spec-writer\napi_key_env: RW_KEY\n"
                       "request_retries: 0\n")
        proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "mine", "--repo", str(repo.path),
                               "--rewrite-with", str(cfg), "--tasks", str(tmp_path / "tasks"),
                               "--state-dir", str(tmp_path / "state")], capture_output=True, text=True, cwd=tmp_path,
                              env={**os.environ, "RW_KEY": "sk-from-env"})
        assert proc.returncode == 0, proc.stderr
        assert fake.auth == ["Bearer sk-from-env"]
    task_dir = tmp_path / "tasks" / "sgl-project__sglang-9023"
    assert (task_dir / "instruction.md").read_text() == SPEC
    quality = json.loads((task_dir / "task.json").read_text())["quality"]
    assert quality["statement_source"] == "rewritten" and quality["rewritten_from"] == "commit_message"
    # a command-kind agent cannot rewrite: one line, exit 2
    proc = subprocess.run([sys.executable, "-m", "sweserve.cli", "mine", "--repo", str(repo.path),
                           "--rewrite-with", "claude-code", "--tasks", str(tmp_path / "t2")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "kind: api" in proc.stderr
