"""Problem statements: which source wins, what is cut from SGLang-shaped PR, issue and squash texts, leak checks."""

from sglang_bodies import (
    BUG_ISSUE,
    EMPTY_TEMPLATE,
    FILLED_TEMPLATE,
    MOTIVATION_PART_OF,
    SQUASH_SUBCOMMITS,
    TRACKING_ISSUE,
)

from sweserve.dataset.github import IssueInfo, PullRequestInfo, linked_issue_refs
from sweserve.dataset.leaks import leak_findings
from sweserve.dataset.statement import build_statement, clean_commit_body, clean_description

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
