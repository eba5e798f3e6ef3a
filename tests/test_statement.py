"""Problem statements: which source wins, what is cut from SGLang-shaped PR, issue and squash texts, leak checks."""

from sglang_bodies import (
    BUG_ISSUE,
    EMPTY_ISSUE_TITLE,
    EMPTY_TEMPLATE,
    FILLED_TEMPLATE,
    MOTIVATION_PART_OF,
    PROCESS_ONLY_BODY,
    RFC_ISSUE,
    SQUASH_SUBCOMMITS,
    SUMMARY_WHAT_BODY,
    TRACKING_ISSUE,
)

from sweserve.dataset.github import IssueInfo, PullRequestInfo, linked_issue_refs
from sweserve.dataset.leaks import leak_findings
from sweserve.dataset.statement import StatementMaker, build_statement, clean_commit_body, clean_description

REPO = "sgl-project/sglang"


def pr(body, issues=(), title="Fix radix lock leak on abort"):
    return PullRequestInfo(repo=REPO, number=9023, title=title, body=body, issues=list(issues))


def test_filled_template_keeps_the_motivation_only():
    text = clean_description(FILLED_TEMPLATE)
    assert "radix cache keeps a lock on the partial prefix" in text and "Fixes #8331" in text
    for gone in ("<!--", "Modifications", "filter_batch", "dec_lock_ref", "Accuracy", "gsm8k", "Benchmarking",
                 "1534", "Checklist", "[x]", "Review Process", "CodeRabbit", "CI States", "pr-test"):
        assert gone not in text, gone
    assert text.startswith("## Motivation")


def test_empty_template_is_not_a_description():
    assert clean_description(EMPTY_TEMPLATE) == ""
    st = build_statement("Fix radix lock leak on abort", "", pr(EMPTY_TEMPLATE))
    assert st.quality.statement_source == "title_only"
    assert st.text == "# Fix radix lock leak on abort\n"


def test_squash_subcommit_list_and_coauthors_are_dropped():
    assert clean_commit_body(SQUASH_SUBCOMMITS) == ""
    st = build_statement("Fix radix lock leak on abort", SQUASH_SUBCOMMITS)
    assert st.quality.statement_source == "title_only" and "lint" not in st.text
    kept = clean_commit_body("The scheduler never releases aborted prefixes.\n\nSigned-off-by: a <a@b>")
    assert kept == "The scheduler never releases aborted prefixes."


def test_pasted_git_log_headers_are_not_a_statement():
    # a squash message that is only `git log` output: hashes, authors, dates
    body = "".join(f"commit {h * 40}\nAuthor: Dev {h} <dev{h}@example.com>\nDate:   Fri Jan 16 21:33:19 2026 +0800\n\n"
                   for h in "0123456789abcdef")
    st = build_statement("Moe quantization rebase", body)
    assert st.quality.statement_source == "title_only" and st.text == "# Moe quantization rebase\n"
    assert {p.why for p in st.quality.parts} == {"git log header"}
    # prose that mentions a commit or a date stays
    prose = ("The scheduler frees a slot twice since commit 1a2b3c4d; the date: field of the log is wrong too.\n\n"
             "Author: the request's owner must release it.")
    assert "since commit 1a2b3c4d" in build_statement("Fix double free", prose).text


def test_linked_issue_text_comes_first():
    issue = IssueInfo(repo=REPO, number=8331, kind="closes", title="[Bug] radix cache locks leak on abort",
                      body=BUG_ISSUE)
    st = build_statement("ignored", SQUASH_SUBCOMMITS, pr(FILLED_TEMPLATE, [issue]))
    assert st.quality.statement_source == "issue"
    assert st.quality.linked_issues == ["sgl-project/sglang#8331"]
    assert st.text.startswith("# [Bug] radix cache locks leak on abort\n")
    assert "every new request waits forever" in st.text and "--enable-mixed-chunk" in st.text
    assert "I have searched related issues" not in st.text and "<!--" not in st.text
    assert "filter_batch" not in st.text  # the PR's solution is not part of an issue statement
    assert st.quality.statement_chars == len(st.text.strip())


def test_pr_motivation_with_umbrella_issue_as_context():
    umbrella = IssueInfo(repo=REPO, number=13808, kind="part_of", title="[Tracking] OpenAI API gaps", body=TRACKING_ISSUE)
    st = build_statement("x", "", pr(MOTIVATION_PART_OF, [umbrella], title="Honor stop_token_ids when streaming"))
    assert st.quality.statement_source == "pr_description"
    assert st.text.startswith("# Honor stop_token_ids when streaming\n")
    assert "generation continues past the stop token" in st.text
    assert "This change is part of sgl-project/sglang#13808: [Tracking] OpenAI API gaps" in st.text
    for gone in ("build_sampling_params", "Gemini", "Highlights", "No measurable change", "streaming branch now"):
        assert gone not in st.text, gone


def test_linked_pull_request_is_not_an_issue():
    other = IssueInfo(repo=REPO, number=9000, kind="closes", title="Earlier attempt", body="x" * 50, is_pull_request=True)
    st = build_statement("t", "", pr(FILLED_TEMPLATE, [other]))
    assert st.quality.statement_source == "pr_description"
    assert any("#9000 is a pull request" in n for n in st.quality.notes)


def test_offline_commit_message_statement():
    st = build_statement("Fix radix lock leak", "Aborted chunked requests keep their prefix locked.\n\n* fix lint\n",
                         notes=["offline"])
    assert st.quality.statement_source == "commit_message" and st.quality.notes == ["offline"]
    assert st.text == "# Fix radix lock leak\n\nAborted chunked requests keep their prefix locked.\n"


def test_long_issue_bodies_are_cut_with_a_note():
    issue = IssueInfo(repo=REPO, number=1, kind="closes", title="Crash", body="log line\n" * 2000)
    st = build_statement("t", "", pr("", [issue]))
    assert len(st.text) < 7000 and any("cut to" in n for n in st.quality.notes)


def test_link_forms():
    text = ("fix #8331, see also #1\nFixes #29177.\nto fix https://github.com/sgl-project/sglang/issues/4300\n"
            "Part of #13808\nResolves other/repo#5\n<!-- e.g. Closes #999 -->\nrelated to #7, prefix#8, hotfixes #9")
    refs = [(r.repo, r.number, r.kind) for r in linked_issue_refs(text, REPO)]
    assert refs == [(REPO, 8331, "closes"), (REPO, 29177, "closes"), (REPO, 4300, "closes"),
                    ("other/repo", 5, "closes"), (REPO, 13808, "part_of")]
    assert linked_issue_refs("Fixes #12 (#12)", REPO, exclude=12) == []


def test_leak_findings_oracle_lines_and_test_names():
    oracle = ("--- a/python/sglang/srt/managers/schedule_batch.py\n+++ b/python/sglang/srt/managers/schedule_batch.py\n"
              "@@ -1,2 +1,3 @@\n     def filter_batch(self):\n+        self.tree_cache.dec_lock_ref(req.last_node)\n"
              "+        return None\n")
    tests = ("--- /dev/null\n+++ b/test/srt/test_abort_lock.py\n@@ -0,0 +1,4 @@\n+class TestAbortLock(unittest.TestCase):\n"
             "+    def test_abort_releases_prefix_lock(self):\n+        pass\n")
    clean = "Aborted requests must release their prefix locks so the cache can be evicted (see `filter_batch`)."
    assert leak_findings(clean, oracle, tests) == []
    leaky = ("Add this line:\n    self.tree_cache.dec_lock_ref(req.last_node)\n"
             "and make test_abort_releases_prefix_lock pass; return None is fine")
    found = leak_findings(leaky, oracle, tests)
    assert found == ["statement repeats 1 line the oracle adds, e.g. `self.tree_cache.dec_lock_ref(req.last_node)`",
                     "statement names hidden tests: test_abort_releases_prefix_lock"]
    # whitespace differences do not hide a quoted line; a longer identifier is not the test's name
    assert leak_findings("self.tree_cache.dec_lock_ref( req.last_node)", oracle, tests) == []
    assert leak_findings("self.tree_cache.dec_lock_ref(req.last_node)\n", oracle, tests)
    assert leak_findings("TestAbortLockExtra", oracle, tests) == []
    assert leak_findings("the TestAbortLock class", oracle, tests) == ["statement names hidden tests: TestAbortLock"]


def test_subcommit_bodies_stay_only_when_they_are_paragraphs():
    body = ("* perf(sp): gate reduce-scatter on a threshold\n\n"
            "Layers pick the sequence-parallel layout only when each device's token slice exceeds the threshold,\n"
            "otherwise they keep the data-parallel layout.\n\n"
            "* fix lint\n\n* Remove unused import.\n\nDrop the leftover helper import.\n\n"
            "---------\n\nCo-authored-by: Some One <one@example.com>\n")
    assert clean_commit_body(body) == (
        "Layers pick the sequence-parallel layout only when each device's token slice exceeds the threshold,\n"
        "otherwise they keep the data-parallel layout.")



JAX = "sgl-project/sglang-jax"
RING_ORACLE = """\
diff --git a/python/sgl_jax/srt/managers/tp_worker_overlap_thread.py b/python/sgl_jax/srt/managers/tp_worker_overlap_thread.py
--- a/python/sgl_jax/srt/managers/tp_worker_overlap_thread.py
+++ b/python/sgl_jax/srt/managers/tp_worker_overlap_thread.py
@@ -10,3 +10,3 @@ class TpWorkerOverlap:
     def __init__(self, max_running_requests):
-        self.future_token_ids_limit = 3 * max_running_requests
+        self.future_token_ids_limit = max_running_requests * FUTURE_RING_FACTOR
"""
RING_TESTS = """\
diff --git a/test/srt/test_future_ring.py b/test/srt/test_future_ring.py
new file mode 100644
--- /dev/null
+++ b/test/srt/test_future_ring.py
@@ -0,0 +1,3 @@
+from sgl_jax.srt.managers.tp_worker_overlap_thread import TpWorkerOverlap
+def test_ring_wraparound_keeps_tokens():
+    assert TpWorkerOverlap(64)
"""


def jax_pr(body, issues=(), title="fix(overlap): future-token ring wraparound corrupts outputs"):
    return PullRequestInfo(repo=JAX, number=1504, title=title, body=body, issues=list(issues))


def test_fix_descriptions_under_any_heading_and_junk_are_cut():
    st = build_statement("t", "", jax_pr(SUMMARY_WHAT_BODY), oracle_patch=RING_ORACLE, tests_patch=RING_TESTS)
    assert st.quality.statement_source == "pr_description"
    text = st.text
    assert "greedy outputs diverge from the overlap-off run" in text
    assert "must not depend on how many requests run at once" in text
    for gone in ("This PR replaces", "ring_capacity", "resolve_future_token_ids", "utils.py", "future_token_ids_limit",
                 "FUTURE_RING_FACTOR", "gsm8k", "0.955", "credit", "Draft", "rebased", "follow-up", "[!NOTE]",
                 "Try to resolve", "![", "| ", "```", "Summary", "Rationale", "Precision", "Verification", "Key change"):
        assert gone not in text, gone
    assert not any(line.startswith(">") for line in text.splitlines())  # no dangling quote of the dropped note
    why = {p.why for p in st.quality.parts if not p.kept}
    assert {"describes the fix", "section describing the solution", "image", "credit", "process note",
            "evaluation or process section"} <= why, why
    assert any(p.kept and p.why == "problem prose" for p in st.quality.parts)
    assert st.quality.leaks == [] and leak_findings(text, RING_ORACLE, RING_TESTS) == []


def test_a_part_that_repeats_the_oracle_or_names_a_hidden_test_is_cut():
    body = ("## Motivation\n\nOutputs are corrupted under high concurrency. The limit becomes "
            "self.future_token_ids_limit = max_running_requests * FUTURE_RING_FACTOR in the worker.\n\n"
            "- Outputs differ from the overlap-off run.\n- Running test_ring_wraparound_keeps_tokens shows it.\n")
    st = build_statement("t", "", jax_pr(body), oracle_patch=RING_ORACLE, tests_patch=RING_TESTS)
    assert "Outputs are corrupted under high concurrency." in st.text
    assert "FUTURE_RING_FACTOR" not in st.text and "test_ring" not in st.text
    leaks = [p for p in st.quality.parts if p.why.startswith("leak")]
    assert len(leaks) == 2 and all(not p.kept for p in leaks)


def test_an_empty_issue_does_not_beat_a_substantive_pr_text():
    empty = IssueInfo(repo=JAX, number=1317, kind="closes", title=EMPTY_ISSUE_TITLE, body="", state="closed")
    st = build_statement("t", "", jax_pr(SUMMARY_WHAT_BODY, [empty]))
    assert st.quality.statement_source == "pr_description"
    assert "greedy outputs diverge" in st.text
    assert f"This change addresses {JAX}#1317: {EMPTY_ISSUE_TITLE}" in st.text
    assert any("no substance" in n for n in st.quality.notes)
    # a short PR text (no substance either) still beats the title alone
    short = build_statement("t", "", jax_pr("Outputs differ at high concurrency.", [empty]))
    assert short.quality.statement_source == "pr_description" and "Outputs differ" in short.text
    # an issue with substance still comes first
    bug = IssueInfo(repo=JAX, number=1317, kind="closes", title="[Bug] radix locks leak", body=BUG_ISSUE)
    assert build_statement("t", "", jax_pr(SUMMARY_WHAT_BODY, [bug])).quality.statement_source == "issue"


def test_hoped_for_and_still_open_issues_are_not_closed():
    refs = [(r.number, r.kind) for r in linked_issue_refs(
        "Try to resolve #670\n**Likely fixes #1317** - same signature\nFixes #5\nThis should fix #7", JAX)]
    assert refs == [(5, "closes"), (670, "related"), (1317, "related"), (7, "related")]
    open_issue = IssueInfo(repo=JAX, number=670, kind="closes", title="[Feature] Wan 2.2", body=BUG_ISSUE, state="open")
    st = build_statement("t", "", jax_pr(SUMMARY_WHAT_BODY, [open_issue]))
    assert st.quality.statement_source == "pr_description"
    assert any("still open" in n for n in st.quality.notes)
    # with no PR text at all, a related issue with substance is better than the title
    related = IssueInfo(repo=JAX, number=670, kind="related", title="[Bug] radix locks leak", body=BUG_ISSUE)
    st = build_statement("t", "", jax_pr("", [related]))
    assert st.quality.statement_source == "issue" and "every new request waits forever" in st.text
    assert any("only relates" in n for n in st.quality.notes)


def test_process_notes_and_solution_steps_alone_leave_the_title():
    st = build_statement("Refactor wan", "", jax_pr(PROCESS_ONLY_BODY, title="Refactor wan"))
    assert st.quality.statement_source == "title_only" and st.text == "# Refactor wan\n"
    assert {p.why for p in st.quality.parts} >= {"process note", "section describing the solution"}


WAN_ORACLE = """\
diff --git a/python/sgl_jax/srt/multimodal/models/wan2_1/pipeline.py b/python/sgl_jax/srt/multimodal/models/wan/pipeline.py
similarity index 90%
rename from python/sgl_jax/srt/multimodal/models/wan2_1/pipeline.py
rename to python/sgl_jax/srt/multimodal/models/wan/pipeline.py
--- a/python/sgl_jax/srt/multimodal/models/wan2_1/pipeline.py
+++ b/python/sgl_jax/srt/multimodal/models/wan/pipeline.py
@@ -1,4 +1,8 @@
 class WanPipeline:
-    def encode(self, prompt, max_len=77):
+    def encode(self, prompt, negative_prompt,
+               max_len=512) -> list:
         return []
-def load(path: str) -> list:
+def load(path: str, *, dtype) -> "jax.Array":
     return []
diff --git a/python/sgl_jax/srt/multimodal/models/wan2_1/vae.py b/python/sgl_jax/srt/multimodal/models/wan/vae.py
similarity index 100%
rename from python/sgl_jax/srt/multimodal/models/wan2_1/vae.py
rename to python/sgl_jax/srt/multimodal/models/wan/vae.py
"""
WAN_TESTS = """\
diff --git a/python/sgl_jax/test/test_wan_encoder.py b/python/sgl_jax/test/test_wan_encoder.py
new file mode 100644
--- /dev/null
+++ b/python/sgl_jax/test/test_wan_encoder.py
@@ -0,0 +1,6 @@
+from sgl_jax.srt.multimodal.models.wan.pipeline import WanPipeline, load
+def test_encode_takes_a_negative_prompt():
+    assert WanPipeline().encode("a cat", "blurry") == []
+def test_load_is_an_array():
+    assert load("x", dtype="bf16").shape
"""


def test_requirements_state_what_the_tests_rely_on_that_the_problem_does_not():
    rfc = IssueInfo(repo=JAX, number=1316, kind="closes", title="[RFC] One Wan package", body=RFC_ISSUE, state="closed")
    st = build_statement("t", "", jax_pr("Fixes #1316", [rfc], title="fix(multimodal): route Wan text encoder"),
                         oracle_patch=WAN_ORACLE, tests_patch=WAN_TESTS)
    assert st.quality.statement_source == "issue"  # the RFC is the problem ...
    reqs = st.quality.requirements
    assert reqs == [  # ... and what the tests need that it does not say comes from the patches
        "- The module `sgl_jax.srt.multimodal.models.wan2_1` is renamed to "
        "`sgl_jax.srt.multimodal.models.wan`: code that uses it imports it from the new name, and the old "
        "name no longer exists.",
        "- `WanPipeline.encode` takes a new positional parameter `negative_prompt` (after `prompt`).",
        "- `WanPipeline.encode`'s `max_len` defaults to `512` (it was `77`).",
        "- `load` requires a new keyword argument `dtype`.",
        "- `load` returns `'jax.Array'` (it returned `list`).",
    ], reqs
    assert "## Requirements\n\n" + "\n".join(reqs) in st.text
    assert not any("test_" in r for r in reqs) and leak_findings(st.text, WAN_ORACLE, WAN_TESTS) == []
    # a fact the problem text already states is not repeated
    st = build_statement("t", "", jax_pr("The pipeline's `encode` gets a `negative_prompt` and a longer `max_len`; "
                                         "`load` takes a `dtype` and returns an array.", title="Wan"),
                         oracle_patch=WAN_ORACLE, tests_patch=WAN_TESTS)
    assert [r for r in st.quality.requirements if "encode" in r or "load" in r] == []


def test_mining_marks_title_only_short_and_leaky_statements_not_eligible():
    maker = StatementMaker(JAX, min_chars=150)
    title_only = maker(1504, "Fix the ring", "", RING_ORACLE, RING_TESTS)
    assert not title_only.quality.statement_eligible
    assert "title only" in title_only.quality.statement_blockers[0]
    short = maker(1504, "Fix the ring", "Outputs are corrupted under load.", RING_ORACLE, RING_TESTS)
    assert short.quality.statement_source == "commit_message" and not short.quality.statement_eligible
    assert "under the profile's minimum of 150" in short.quality.statement_blockers[0]
    long_enough = StatementMaker(JAX, min_chars=40)(1504, "Fix the ring", "Outputs are corrupted under load.",
                                                    RING_ORACLE, RING_TESTS)
    assert long_enough.quality.statement_eligible and long_enough.quality.statement_blockers == []
    leaky = maker(1504, "Make test_ring_wraparound_keeps_tokens pass", "Outputs are corrupted under high "
                  "concurrency, whatever the model; greedy decoding must give the same text as without overlap.",
                  RING_ORACLE, RING_TESTS)
    assert leaky.quality.leaks == ["statement names hidden tests: test_ring_wraparound_keeps_tokens"]
    assert not leaky.quality.statement_eligible and "at mining" in leaky.quality.statement_blockers[0]
    assert leaky.quality.parts and all(p.source == "commit message" for p in leaky.quality.parts)


def test_domain_words_histories_and_versions_are_not_junk():
    body = ("## Motivation\n\n"
            "Since #1408 was rebased onto #1411, the match walk freezes at the first interior node and matches nothing.\n"
            "The draft model's accepted tokens are dropped when a draft token is rejected at step 0.\n"
            "Because `0` is falsy, an explicit `0` is dropped and the defaults apply instead (`level=2`, `python=1` on "
            "jax 0.10.2).\n"
            "Models such as Ling-2.6 and Qwen3.5 hit it on 2x2x2x2 slices.\n\n"
            "gsm8k 200q: 0.955 at c4, 0.700 at c64. The ring holds 3x entries: c8 = 0.955; c64 = 0.700.\n")
    st = build_statement("t", "", jax_pr(body))
    for kept in ("Since #1408 was rebased onto #1411", "The draft model's accepted tokens",
                 "Because `0` is falsy", "Models such as Ling-2.6"):
        assert kept in st.text, kept
    assert "gsm8k" not in st.text and "c64 = 0.700" not in st.text


# Shaped like a PR that threads a DP rank through a transfer pool (sglang-jax #1506): the methods are named
# after their class, a constructor after its class, and a class only a hunk header shows still counts.
RANK_ORACLE = """\
diff --git a/python/sgl_jax/srt/disaggregation/raiden/pool.py b/python/sgl_jax/srt/disaggregation/raiden/pool.py
--- a/python/sgl_jax/srt/disaggregation/raiden/pool.py
+++ b/python/sgl_jax/srt/disaggregation/raiden/pool.py
@@ -10,12 +10,12 @@ import threading
 class TransferPool:
-    def __init__(self, bootstrap_key: str, capacity: int):
+    def __init__(self, bootstrap_keys: str, capacity: int):
         self.capacity = capacity
         self.rooms = {}
-    def pick_for_room(self, bootstrap_room: int):
+    def pick_for_room(self, bootstrap_room: int, dp_rank: int = 0):
         return self.rooms[bootstrap_room]
@@ -40,6 +40,6 @@ class DecodeAllocator:
         self.free = []
         self.ranks = 1
-    def release(self, kv_indices):
+    def release(self, kv_indices, dp_rank):
         self.free.extend(kv_indices)
"""
RANK_TESTS = """\
diff --git a/python/sgl_jax/test/test_raiden_ranks.py b/python/sgl_jax/test/test_raiden_ranks.py
new file mode 100644
--- /dev/null
+++ b/python/sgl_jax/test/test_raiden_ranks.py
@@ -0,0 +1,8 @@
+from sgl_jax.srt.disaggregation.raiden.pool import DecodeAllocator, TransferPool
+def test_rooms_are_per_rank():
+    pool = TransferPool(["k0", "k1"], capacity=4)
+    assert pool.pick_for_room(3, dp_rank=1) is not None
+def test_release_goes_to_the_rank():
+    alloc = DecodeAllocator()
+    alloc.release([1, 2], 1)
"""


def test_requirements_name_the_class_of_a_method_and_of_a_constructor():
    st = build_statement("t", "", jax_pr("With several DP ranks the transfer targets the wrong rank.",
                                         title="feat(pd): Raiden DP routing"),
                         oracle_patch=RANK_ORACLE, tests_patch=RANK_TESTS)
    assert st.quality.requirements == [
        "- `TransferPool(...)`'s parameter `bootstrap_key` is renamed to `bootstrap_keys`.",
        "- `TransferPool.pick_for_room` takes a new parameter `dp_rank` (after `bootstrap_room`, default `0`).",
        "- `DecodeAllocator.release` takes a new positional parameter `dp_rank` (after `kv_indices`).",
    ], st.quality.requirements
    assert "__init__" not in st.text


# Shaped like real sglang-jax PR bodies (#1490, #1507, #1517) and issues (#1496, #1412): a sentence that
# introduces a command, a table or an error which the statement cuts is left hanging. A bare pointer goes;
# a sentence that states something stays, with a full stop; an intro to a section that is kept stays as is.
DANGLING_BODY = """\
Two problems hit when serving the model:

## Summary

Prefill and decode workers exchange KV only through the default engine, and a remote engine cannot be chosen.

Enable it on both workers:

```bash
python -m sgl_jax.launch_server --disaggregation-mode prefill --disaggregation-use-raiden
```

1. **MoE experts fall back to the slow kernel.** Block-wise scales are rejected by the fast path.
2. **The fused backend crashes at warmup.** The scale weights are sharded on the expert axis while the kernel runs on the main mesh with a data and tensor split:
   ```
   ValueError: in_specs passed to shard_map do not match the specs of the input
   ```

For the same 294-request workload on two hosts:

| Version | Prefill forwards | Throughput |
| --- | ---: | ---: |
| before | 173 | ~19.9 req/s |

Configuration:

- chunked prefill of 8192 tokens
- page size 128
"""


def test_a_sentence_introducing_a_cut_part_goes_or_ends():
    text = clean_description(DANGLING_BODY)
    for gone in ("Enable it on both workers", "294-request workload", "```", "|"):
        assert gone not in text, gone
    for kept in ("Two problems hit when serving the model:", "a remote engine cannot be chosen",
                 "**The fused backend crashes at warmup.** The scale weights are sharded on the expert axis while "
                 "the kernel runs on the main mesh with a data and tensor split.",
                 "Configuration:", "- page size 128"):
        assert kept in text, kept
    st = build_statement("t", "", jax_pr(DANGLING_BODY, title="feat(pd): remote KV engine"))
    assert any(p.why == "introduces a part that was cut" and p.excerpt.startswith("Enable it")
               for p in st.quality.parts)


# Shaped like the squash message of sglang-jax #1534: each sub-commit is written as bare labels on their
# own lines ("outline:", "modify:", "reason:"), not as headings; those that name the change go with what
# follows them, the problem stays.
LABELLED_COMMIT = """\
outline:

- PR role: cleanup of the draft runtime surface.

modify:

- Before -> after: Move the draft and verify state classes from the utility module into their own module.
- Redirect scheduler and attention references to the new module.

reason:

- Problem: Unused methods and metadata increased maintenance surface and carried unnecessary values through
  device state, and a thousand-line utility module mixed state contracts with tree algorithms.
- Design: Mirror the existing info-module organization and keep the move behaviour-preserving.
"""


def test_bare_labels_that_name_the_change_cut_what_follows():
    st = build_statement("[Feat] Optimize the draft runtime", LABELLED_COMMIT)
    assert st.quality.statement_source == "commit_message"
    assert "Unused methods and metadata increased maintenance surface" in st.text
    for gone in ("modify:", "Before -> after", "Redirect scheduler", "outline:", "PR role", "Design:"):
        assert gone not in st.text, gone
    assert any(p.why.startswith("under the label 'modify:'") for p in st.quality.parts)
    # a label that names no change ("Configuration:") stays, with its list
    assert "Configuration:\n\n- page size 128" in clean_description("Configuration:\n\n- page size 128\n")


def test_how_to_run_the_benchmark_is_not_the_problem():
    """Shaped like sglang-jax #1507: the Summary lists the change, then a section explains how to run the
    PR's tuning script; none of it is a problem, so the statement is the title and not ready-eligible."""
    body = ("## Summary\n\n- add tuned lookup entries for 32 through 16384 tokens\n- enable the fused backend "
            "for the model\n\n## Using `bench_v2.py` for MoE tuning\n\nRun it as a script from the repository "
            "root with `PYTHONPATH=$PWD/python`. On a multi-host job, launch the same command on every "
            "process.\n\n### GLM FP8 auto-tuning\n\nThe sweeps used these settings.\n")
    st = build_statement("feat(fused-moe-v2): tune and serve GLM FP8", "", jax_pr(body, title="feat: tune"))
    assert st.quality.statement_source == "title_only", st.text
    assert "Run it as a script" not in st.text
    # nor is how to build the PR's dependencies (#1490's "## Raiden build and cache")
    text = clean_description("## Summary\n\nA remote engine cannot be chosen for KV transfer between workers, so "
                             "transfers are slow.\n\n## Raiden build and cache\n\nThe validated dependency set "
                             "is JAX 0.10.2 with the native extension built from source.\n")
    assert "remote engine cannot be chosen" in text and "dependency set" not in text
    # a reproduction stays in an issue
    assert "Run the server" in clean_description("## How to reproduce\n\nRun the server with two ranks and "
                                                  "send a long prompt; it hangs.\n", mode="issue")


def test_a_cherry_picks_list_of_commit_subjects_is_cut():
    """A squash body whose first sub-commit lists the commits it cherry-picks, indented (real sglang-jax #648's
    shape): subjects with GitHub's `(#N)`, at any depth, describe no behaviour."""
    body = ("* feat: cherry-pick attention optimizations from upstream (#56)\n\ncherry-pick them.\n"
            "    * [Kernel] Add support for W8A8 Attention (#656)\n    * [RPA] Set VMEM limit to 100MB (#806)\n"
            "    - Remove a branch with pl.when in fetching bkv (#1239)\n\n"
            "Paged attention reads past the end of a page when the sequence length is a multiple of the page size,"
            " so the last token's keys come from the next request.\n")
    st = build_statement("feat: integrate attention optimizations", body)
    assert "(#656)" not in st.text and "VMEM" not in st.text and "pl.when" not in st.text
    assert "reads past the end of a page" in st.text
