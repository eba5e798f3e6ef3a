"""What the tests pin that the statement leaves open or cut (dataset/gaps.py): each check where it fires and where
it does not, its readiness reason, and the cut at mining (statement.build_statement)."""

from sweserve.dataset import gaps
from sweserve.dataset.github import PullRequestInfo
from sweserve.dataset.lint import gap_findings
from sweserve.dataset.readiness import assess, finding_kind
from sweserve.dataset.statement import build_statement
from sweserve.models import QualityRecord, Task, TestSpec, ValidationRecord


def patch_of(body: str, path: str = "test/test_sched.py") -> str:
    lines = body.strip("\n").split("\n")
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,0 +1,{len(lines)} @@\n"
            + "".join(f"+{ln}\n" for ln in lines))


# ---------------------------------------------------------------------------------------------- truncated


def test_a_last_sentence_without_its_end_is_cut_back_to_the_whole_ones():
    text = "# Fix padding\n\nThe ring wraps at the end. Padding rows must keep the slot index of the"
    out, cut = gaps.cut_back(text)
    assert out == "# Fix padding\n\nThe ring wraps at the end." and cut and "'the'" in cut


def test_a_lone_fragment_with_a_cut_sign_goes():
    text = ("Decode crashes on dp=4.\n\n- Unify the gate for all dp.\n"
            "- Compact the padded scalar logprobs (carrying `extend_lens` / `extend_l")
    out, cut = gaps.cut_back(text)
    assert out == "Decode crashes on dp=4.\n\n- Unify the gate for all dp." and "unclosed" in cut


def test_a_fragment_is_cut_where_the_texts_other_paragraphs_end_whole():
    text = ("Fixes the stall.\n\nThe actual cause is the admission gate:\n\n"
            "The other path goes through `add_one` instead, which has no such gate — so it looke")
    out, cut = gaps.cut_back(text)
    assert out == "Fixes the stall.\n\nThe actual cause is the admission gate:" and "other paragraphs" in cut


def test_whole_texts_are_left_alone():
    for text in ("Fixes the crash when loading a sharded checkpoint",  # one paragraph, no full stop: as written
                 "Loading fails.\n\n- Add the per-channel branch\n- Keep the block path",  # list items end bare
                 "The server hangs.\n\n## Reproduction",
                 "It fails:\n\n```\nTypeError: x\n```",
                 "Use the `--fast` flag (off by default)"):
        assert gaps.cut_back(text) == (text, None), text
        assert gaps.truncated_finding(text) is None


def test_an_open_fence_at_the_end_is_closed():
    out, cut = gaps.cut_back("It fails:\n\n```\nTraceback (most recent call last):\n  File")
    assert out.endswith("  File\n```") and cut == "a code block left open"


def test_mining_cuts_a_pr_text_that_stops_mid_sentence_and_records_why():
    pr = PullRequestInfo(repo="o/r", number=7, title="fix(sched): admit every DP rank",
                         body="## Motivation\n\nOnly one DP rank prefills per round when radix is on. "
                              "The gate compares the untruncated length with the global budget and the")
    st = build_statement("t", pr=pr)
    assert st.text.rstrip().endswith("Only one DP rank prefills per round when radix is on.")
    assert any("stops mid-sentence" in p.why and not p.kept for p in st.quality.parts)


def test_lint_flags_a_statement_that_still_stops_mid_sentence():
    f = gaps.truncated_finding("# t\n\nThe padding rows keep the slot. Rows past the ring must use the")
    assert f and f.startswith("statement stops mid-sentence") and finding_kind(f) == "truncated"
    # the issue titles mining adds after the text are not where the text stops
    said = "# t\n\nThe padding rows keep the slot.\n\nThis change addresses #12: Ring wraps around"
    assert gaps.truncated_finding(said) is None


# ---------------------------------------------------------------------------------------------- open question

QUESTION = """# Improve DP scheduling defaults

The miss path of cache_aware ignores the input/output balance.

## Proposed work

- Should `cache_aware` become the default when radix cache is enabled?
"""
PINS_DEFAULT = patch_of("""
def test_default_policy():
    args = ServerArgs(model_path="m")
    assert args.dp_schedule_policy == "cache_aware"
""")


def test_a_question_the_tests_answer_is_a_finding():
    f = gaps.open_question_finding(QUESTION, PINS_DEFAULT)
    assert f and "`cache_aware`" in f and "Should `cache_aware` become the default" in f
    assert finding_kind(f) == "open_question"
    assert gaps.open_question_finding("Using X is TBD: `fast_path` or `slow_path`.", patch_of(
        "def test_x():\n    assert run(mode='fast_path')\n"))


def test_a_question_the_tests_do_not_touch_or_a_statement_is_not():
    other = patch_of("def test_budget():\n    assert budget(4) == 8\n")
    assert gaps.open_question_finding(QUESTION, other) is None
    decided = QUESTION.replace("- Should `cache_aware` become the default when radix cache is enabled?",
                               "- `cache_aware` becomes the default when radix cache is enabled.")
    assert gaps.open_question_finding(decided, PINS_DEFAULT) is None
    assert gaps.open_question_finding("Why does the server hang? It waits on `recv_req`.", PINS_DEFAULT) is None


# ---------------------------------------------------------------------------------------------- private numbers

PINS_NUMBERS = patch_of("""
def test_swa_headroom():
    sched = make_scheduler(page_size=16, swa_window=4096)
    assert sched._swa_reserve_tokens() == 4352
    assert sched._swa_pages == 272
""")


def test_exact_numbers_of_private_names_the_instruction_never_gives_are_a_finding():
    found = gaps.private_numbers(PINS_NUMBERS, "Reserve SWA headroom for decode.", None)
    assert found == [("_swa_reserve_tokens", "4352"), ("_swa_pages", "272")]
    f = gaps.private_numbers_finding(PINS_NUMBERS, "Reserve SWA headroom.", {"test/test_sched.py"})
    assert f and finding_kind(f) == "private_numbers"


def test_numbers_given_set_up_trivial_or_of_public_names_are_not():
    said = "Reserve window + 16 pages: 4352 tokens for a 4096 window, that is 272 pages of 16."
    assert gaps.private_numbers(PINS_NUMBERS, said, None) == []
    assert gaps.private_numbers(PINS_NUMBERS, "x", {"test/test_other.py"}) == []  # not a FAIL_TO_PASS file
    setup = patch_of("def test_a():\n    s = S(size=4352)\n    assert s._size == 4352\n    assert s._n == 1\n")
    assert gaps.private_numbers(setup, "x", None) == []
    public = patch_of("def test_a():\n    assert sched.reserve_tokens() == 4352\n")
    assert gaps.private_numbers(public, "x", None) == []
    dunder = patch_of("def test_a():\n    assert len(s.__slots__) == 7\n    assert s._x == 1000\n")
    assert gaps.private_numbers(dunder, "x", None) == []


# ---------------------------------------------------------------------------------------------- oversize scope


def f2p(files: int, functions: int, params: int = 1) -> list[str]:
    return [f"test/test_{f}.py::TestX::test_{n}[{p}]" for f in range(files) for n in range(functions)
            for p in range(params)]


def test_many_tests_across_files_for_a_short_problem_are_a_finding():
    f = gaps.oversize_finding("x" * 900, f2p(3, 10))
    assert f and "30 FAIL_TO_PASS test functions in 3 files" in f and finding_kind(f) == "oversize_scope"


def test_parametrized_one_file_or_a_long_enough_problem_is_not():
    assert gaps.oversize_finding("x" * 300, f2p(1, 1, params=60)) is None  # one function, many parameters
    assert gaps.oversize_finding("x" * 300, f2p(1, 30)) is None  # one file
    assert gaps.oversize_finding("x" * 300, f2p(2, 5)) is None  # few tests
    assert gaps.oversize_finding("x" * 1900, f2p(2, 15)) is None  # 63 characters a test


# ---------------------------------------------------------------------------------------------- lint and readiness


def test_gap_findings_read_the_problem_not_the_requirements_and_name_their_reasons():
    statement = (QUESTION + "\n## Requirements\n\n- `ServerArgs.dp_schedule_policy` defaults to None, resolved at "
                 "startup to the policy for the cache in use\n")
    found = gap_findings(statement, statement, PINS_DEFAULT, ["test/test_sched.py::test_default_policy"])
    assert [finding_kind(f) for f in found] == ["open_question"]
    task = Task(task_id="o__r-1", repo="o/r", profile="sglang-demo", pr_number=1, title="t", base_commit="a" * 40,
                merge_commit="b" * 40, family="decoding", family_confident=True, created_at="2026-01-01T00:00:00Z",
                test=TestSpec(files=["test/test_sched.py"]), FAIL_TO_PASS=["test/test_sched.py::test_default_policy"],
                validation=ValidationRecord(status="valid", runs=1, signals=[], forge_odds=0.25),
                quality=QualityRecord(interface_from="fail_to_pass", findings=found + [
                    "tests need new names the instruction never gives: `_x`", "leak: y"]))
    assert [r.key for r in assess(task).reasons] == ["lint:open_question", "lint:vocabulary", "lint:findings"]


def test_the_length_cap_cuts_at_a_whole_sentence():
    from sweserve.dataset.statement import MAX_PART_CHARS

    body = "## Motivation\n\n" + " ".join(f"Sentence number {i} says the cache loses a page." for i in range(400))
    assert len(body) > MAX_PART_CHARS
    st = build_statement("t", pr=PullRequestInfo(repo="o/r", number=7, title="fix: cache", body=body))
    kept = st.text.split("[…]")[0].rstrip()
    assert kept.endswith("loses a page.") and "[…]" in st.text


# ---------------------------------------------------------------------------------------------- unstated

# An oracle in the shape of a real one: a helper gains an alias rule inside an existing class's method, and a
# scheduler method's admission gate changes; the hunk headers name only the classes, as git writes them.
UNSTATED_ORACLE = """\
diff --git a/python/pkg/layers/expert_capturer.py b/python/pkg/layers/expert_capturer.py
--- a/python/pkg/layers/expert_capturer.py
+++ b/python/pkg/layers/expert_capturer.py
@@ -50,9 +50,12 @@ class _ExpertCapturerReal(ExpertCapturer):
         cfg = model_config.hf_text_config
-        top_k = cfg.num_experts_per_tok
+        top_k = getattr(cfg, "num_experts_per_tok", None)
+        if top_k is None:
+            top_k = getattr(model_config.hf_config, "moe_topk", None)
         self.buffer = np.zeros((layers, top_k), np.int32)
diff --git a/python/pkg/managers/schedule_policy.py b/python/pkg/managers/schedule_policy.py
--- a/python/pkg/managers/schedule_policy.py
+++ b/python/pkg/managers/schedule_policy.py
@@ -582,7 +582,9 @@ class PrefillAdder:
-        if real_input_tokens >= self.rem_input_tokens and self.running:
+        if real_input_tokens >= self.rem_input_tokens and self.running and not self.chunked:
             return AddReqResult.OTHER
"""
UNSTATED_TESTS = patch_of("""
from pkg.layers.expert_capturer import _ExpertCapturerReal
from pkg.managers.schedule_policy import PrefillAdder


def test_capturer_reads_the_root_config():
    cap = _ExpertCapturerReal(config_with_root_topk())
    assert cap.buffer.shape == (2, 8)


def test_every_rank_admits_a_chunk():
    adder = PrefillAdder(chunked=True)
    assert adder.add_one_req(long_req()) == "CONTINUE"
""", "test/test_models.py")
F2P = ["test/test_models.py::test_capturer_reads_the_root_config", "test/test_models.py::test_every_rank_admits_a_chunk"]


def test_tests_that_reach_changed_code_the_text_never_points_to_are_flagged():
    statement = ("# Chunked prefill serialized to one DP rank\n\n`real_input_tokens` is the untruncated length and "
                 "`rem_input_tokens` the global budget, so only one rank admits a chunk per round.\n")
    found = gaps.unstated_behaviour(UNSTATED_ORACLE, UNSTATED_TESTS, statement, {"test/test_models.py"})
    assert found == ["_ExpertCapturerReal"]  # the admission gate is pointed to by its variables; the capturer not
    finding = gaps.unstated_behaviour_finding(UNSTATED_ORACLE, UNSTATED_TESTS, statement, None)
    assert finding and finding_kind(finding) == "unstated"
    assert any(f.startswith("tests reach changed code") for f in
               gap_findings(statement, statement, UNSTATED_TESTS, F2P, UNSTATED_ORACLE))
    # a FAIL_TO_PASS id relative to the runner's folder names the same file as the patch's path
    assert gaps.unstated_behaviour(UNSTATED_ORACLE, patch_of("x = _ExpertCapturerReal", "python/test/t.py"),
                                   statement, {"test/t.py"}) == ["_ExpertCapturerReal"]


def test_a_text_that_points_to_each_changed_piece_the_tests_reach_is_not_flagged():
    statement = ("# Chunked prefill serialized to one DP rank\n\n`real_input_tokens` is compared with the global "
                 "budget. The expert capturer (`expert_capturer`) must also find the top-k on the root config.\n")
    assert gaps.unstated_behaviour(UNSTATED_ORACLE, UNSTATED_TESTS, statement, None) == []
    # tests that reach none of the changed functions: nothing to point to
    other = patch_of("def test_unrelated():\n    assert helper() == 3\n", "test/test_models.py")
    assert gaps.unstated_behaviour(UNSTATED_ORACLE, other, "# Something\n", None) == []
    # the measured alternative (flag only when nothing is pointed to) stays silent here
    partly = "# Chunked prefill\n\n`real_input_tokens` is the untruncated length.\n"
    assert gaps.unstated_behaviour(UNSTATED_ORACLE, UNSTATED_TESTS, partly, None, each=False) == []
    assert gaps.unstated_behaviour(UNSTATED_ORACLE, UNSTATED_TESTS, partly, None) == ["_ExpertCapturerReal"]


def test_a_name_spelled_in_prose_points_to_it_but_a_module_glued_into_a_class_name_does_not():
    assert gaps._named("top_k", "Fix top-k for floats", prose=True)
    assert not gaps._named("top_k", "Fix top-k for floats")  # a changed line's variable must be written as code
    # `expert_capturer` is not named by `ExpertCapturer`: a sibling class of the module is not pointed to
    assert not gaps._named("expert_capturer", "guard ExpertCapturer.create()", prose=True)


def test_a_decorator_is_no_change_of_its_class_and_an_env_var_points_to_its_function():
    oracle = """\
diff --git a/pkg/sched.py b/pkg/sched.py
--- a/pkg/sched.py
+++ b/pkg/sched.py
@@ -10,6 +10,12 @@ class Scheduler:
     def gated(self):
-        return True
+        return os.environ.get("SGLANG_NO_TOKEN_GATE") is None
+
+    @staticmethod
+    def wants(args):
+        return args.chunk_slots > 1
"""
    tests = patch_of("def test_gate():\n    assert Scheduler().gated() is False\n    assert Scheduler.wants(a)\n")
    assert set(gaps.changed_bodies(oracle)) == {("sched", "Scheduler", "gated")}  # `wants` is new: no change
    assert gaps.unstated_behaviour(oracle, tests, "# Gate\n\nTurn the token gate off.\n", None) == ["Scheduler.gated"]
    assert gaps.unstated_behaviour(oracle, tests, "# Gate\n\n`SGLANG_NO_TOKEN_GATE` turns it off.\n", None) == []


def test_private_numbers_reads_a_test_file_named_relative_to_the_runner_folder():
    tests = patch_of("def test_budget():\n    assert adder._budget == 4093\n", "python/pkg/test/test_budget.py")
    assert gaps.private_numbers(tests, "# Budget\n", {"pkg/test/test_budget.py"}) == [("_budget", "4093")]
