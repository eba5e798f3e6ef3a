"""GitHub enrichment against a real HTTP server on 127.0.0.1 speaking GitHub's REST shapes, through PyGithub."""

import json
import os
import subprocess
import sys
import time

import pytest
from fake_github import FakeGitHub, issue_json, pull_json, rate_limited, secondary_rate_limited
from sglang_bodies import BUG_ISSUE, EMPTY_TEMPLATE, FILLED_TEMPLATE, MOTIVATION_PART_OF, TRACKING_ISSUE

from sweserve.dataset.github import GitHubClient, cache_key
from sweserve.errors import SweserveError

REPO = "sgl-project/sglang"


class FakeClock:
    """Time that moves only when the client sleeps."""

    def __init__(self, now=1_800_000_000.0):
        self.now, self.slept = now, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def client(tmp_path, gh, clock=None, **kw):
    clock = clock or FakeClock()
    return GitHubClient(tmp_path / "cache", token="ghp_test", base_url=gh.base_url, sleep=clock.sleep, clock=clock,
                        min_interval_s=None, **kw)


def test_pr_with_linked_issues_is_fetched_once_then_served_from_disk(tmp_path):
    routes = {f"/repos/{REPO}/pulls/9023": pull_json(REPO, 9023, "Fix radix lock leak on abort", FILLED_TEMPLATE,
                                                      labels=["bug", "run-ci"]),
              f"/repos/{REPO}/issues/8331": issue_json(REPO, 8331, "[Bug] radix locks leak", BUG_ISSUE, labels=["bug"])}
    with FakeGitHub(routes) as gh:
        info, notes = client(tmp_path, gh).pull_request(REPO, 9023)
        assert gh.auth[0] == "token ghp_test"
        assert gh.requests == [f"/api/v3/repos/{REPO}/pulls/9023", f"/api/v3/repos/{REPO}/issues/8331"]
    assert notes == []
    assert (info.title, info.labels, info.merged_at.isoformat()) == (
        "Fix radix lock leak on abort", ["bug", "run-ci"], "2026-06-10T12:00:00+00:00")
    assert [(i.label, i.kind, i.title, i.labels) for i in info.issues] == [
        (f"{REPO}#8331", "closes", "[Bug] radix locks leak", ["bug"])]
    assert (tmp_path / "cache" / cache_key(gh.base_url) / "sgl-project__sglang" / "pulls" / "9023.json").exists()
    again, _ = client(tmp_path, gh).pull_request(REPO, 9023)  # server is stopped: only the cache can answer
    assert again == info


def test_rate_limit_waits_for_the_reset_then_goes_on(tmp_path, caplog):
    clock = FakeClock()
    routes = {f"/repos/{REPO}/pulls/1": [rate_limited(reset_epoch=int(clock.now) + 30),
                                         rate_limited(retry_after=5, status=429),
                                         pull_json(REPO, 1, "Honor stop_token_ids", MOTIVATION_PART_OF)],
              f"/repos/{REPO}/issues/13808": issue_json(REPO, 13808, "[Tracking] OpenAI API gaps", TRACKING_ISSUE)}
    with FakeGitHub(routes) as gh:
        info, notes = client(tmp_path, gh, clock).pull_request(REPO, 1)
    messages = [rec.getMessage() for rec in caplog.records if rec.levelname == "WARNING"]
    assert clock.slept == [31.0, 6.0]
    assert len(messages) == 2 and "rate limit" in messages[0] and "waiting 31s" in messages[0]
    assert "HTTP 429" in messages[1]
    assert info.title == "Honor stop_token_ids" and info.issues[0].kind == "part_of" and notes == []


def test_rate_limit_that_never_lifts_is_one_clear_error(tmp_path):
    with FakeGitHub({f"/repos/{REPO}/pulls/1": rate_limited(retry_after=1)}) as gh:
        with pytest.raises(SweserveError, match="rate limit still exceeded"):
            client(tmp_path, gh, max_waits=2).pull_request(REPO, 1)


def test_forbidden_without_rate_limit_headers_is_a_note_not_a_wait(tmp_path):
    forbidden = ("status", 403, {"message": "Resource not accessible by integration"}, {})
    with FakeGitHub({f"/repos/{REPO}/pulls/1": forbidden}) as gh:
        clock = FakeClock()
        info, notes = client(tmp_path, gh, clock).pull_request(REPO, 1)
    assert info is None and clock.slept == [] and notes == [
        f"GitHub: PR {REPO}#1: HTTP 403 Resource not accessible by integration"]


def test_deleted_pr_and_deleted_issue_are_notes(tmp_path):
    routes = {f"/repos/{REPO}/pulls/2": pull_json(REPO, 2, "Fix it", "Fixes #77, fixes #78")}
    routes[f"/repos/{REPO}/issues/78"] = issue_json(REPO, 78, "Crash on empty prompt", "Empty prompts crash the tokenizer.")
    with FakeGitHub(routes) as gh:
        c = client(tmp_path, gh)
        assert c.pull_request(REPO, 404) == (None, [f"GitHub: PR {REPO}#404 not found (404, deleted or private)"])
        info, notes = c.pull_request(REPO, 2)
    assert [i.number for i in info.issues] == [78]
    assert notes == info.notes == [f"GitHub: issue {REPO}#77 not found (404, deleted or private)"]


@pytest.mark.parametrize("answer, why", [
    (("raw", b'{"number": 3, "title": "Trunc'), "response is not JSON"),
    (("raw", b"<html><body>502 Bad Gateway</body></html>"), "TypeError"),
    (dict(pull_json(REPO, 3, "Fix", None), body=["not", "text"]), "BadAttributeException"),
    (dict(pull_json(REPO, 3, "Fix", None), merged_at="yesterday"), "BadAttributeException"),
])
def test_malformed_body_is_a_per_pr_note(tmp_path, answer, why):
    with FakeGitHub({f"/repos/{REPO}/pulls/3": answer}) as gh:
        info, notes = client(tmp_path, gh).pull_request(REPO, 3)
    assert info is None and len(notes) == 1
    assert notes[0].startswith(f"GitHub: PR {REPO}#3: malformed response (") and why in notes[0]


@pytest.mark.parametrize("bad, why", [
    (("raw", b'{"number": 3, "title": "Trunc'), "response is not JSON"),
    (("cut", b'{"number": 3, "title": "Trunc'), "response cut short (ChunkedEncodingError)"),
    (dict(pull_json(REPO, 3, "Fix", None), body=["not", "text"]), "BadAttributeException"),
])
def test_malformed_answer_is_fetched_again_next_time_and_stands_only_offline(tmp_path, bad, why):
    good = pull_json(REPO, 3, "Fix the radix cache", "Evictions skip pinned nodes.")
    with FakeGitHub({f"/repos/{REPO}/pulls/3": [bad, good]}) as gh:
        info, notes = client(tmp_path / "a", gh).pull_request(REPO, 3)
        assert info is None and len(notes) == 1 and why in notes[0]
        info, notes = client(tmp_path / "a", gh).pull_request(REPO, 3)  # fetched again, not served from the cache
        assert gh.requests == [f"/api/v3/repos/{REPO}/pulls/3"] * 2
    assert notes == [] and info.title == "Fix the radix cache"
    assert client(tmp_path / "a", gh).pull_request(REPO, 3) == (info, [])  # now kept: the server is gone
    with FakeGitHub({f"/repos/{REPO}/pulls/3": bad}) as gh:
        first = client(tmp_path / "b", gh).pull_request(REPO, 3)
    assert client(tmp_path / "b", gh).pull_request(REPO, 3) == first  # offline: last time's answer, no error


def test_server_errors_are_not_kept(tmp_path):
    with FakeGitHub({f"/repos/{REPO}/pulls/5": [("status", 502, {"message": "Server Error"}, {}),
                                                pull_json(REPO, 5, "Fix", None)]}) as gh:
        assert client(tmp_path, gh).pull_request(REPO, 5) == (None, [f"GitHub: PR {REPO}#5: HTTP 502 Server Error"])
        info, notes = client(tmp_path, gh).pull_request(REPO, 5)
    assert info.title == "Fix" and notes == []


@pytest.mark.parametrize("retry_after, slept, reset", [(30, 31.0, "08:00:31"), (None, 60.0, "08:01:00")])
def test_secondary_rate_limit_is_waited_out(tmp_path, caplog, retry_after, slept, reset):
    clock = FakeClock()
    routes = {f"/repos/{REPO}/pulls/1": [secondary_rate_limited(retry_after), pull_json(REPO, 1, "Fix", None)]}
    with FakeGitHub(routes) as gh:
        info, notes = client(tmp_path, gh, clock).pull_request(REPO, 1)
    messages = [rec.getMessage() for rec in caplog.records if rec.levelname == "WARNING"]
    assert info.title == "Fix" and notes == [] and clock.slept == [slept]
    assert messages == [f"GitHub secondary rate limit reached (HTTP 403) fetching {REPO} pulls #1; waiting "
                        f"{slept:.0f}s for the reset at {reset} UTC"]


def test_a_wait_longer_than_the_bound_is_one_clear_error(tmp_path):
    clock = FakeClock()
    with FakeGitHub({f"/repos/{REPO}/pulls/1": secondary_rate_limited(86_400)}) as gh:
        with pytest.raises(SweserveError, match=r"secondary rate limit reached \(HTTP 403\): it asks for a "
                                                r"86401s wait, over the 3700s limit"):
            client(tmp_path, gh, clock).pull_request(REPO, 1)
    assert clock.slept == []


def test_unreachable_server_and_bad_token_are_clear_errors(tmp_path):
    with FakeGitHub({f"/repos/{REPO}/pulls/1": ("status", 401, {"message": "Bad credentials"}, {})}) as gh:
        with pytest.raises(SweserveError, match="rejected the credentials"):
            client(tmp_path, gh).pull_request(REPO, 1)
    gh.stop()
    with pytest.raises(SweserveError, match="cannot reach the GitHub API at http://127.0.0.1"):
        client(tmp_path, gh).pull_request(REPO, 1)


# -- end to end: `sweserve mine --github` on a git repository built by the test ---------------------------

SRC = "python/sglang/srt/mem_cache/radix_cache.py"
SERVING = "python/sglang/srt/entrypoints/openai/serving_completions.py"
TEST = "test/srt/test_radix_cache.py"
TEST2 = "test/srt/openai_server/test_serving_completions.py"


def sweserve(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "sweserve.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env)


def history(make_repo):
    repo = make_repo()
    repo.commit("init", {SRC: "def f():\n    return 1\n", TEST: "def test_f():\n    pass\n",
                         SERVING: "STOP = None\n", TEST2: "def test_stop():\n    pass\n"})
    repo.commit("[Radix] Release locks of aborted chunked requests (#9023)\n\n* Release radix lock on abort\n\n* fix lint\n"
                "\n---------\n\nCo-authored-by: Some One <one@example.com>",
                {SRC: "def f():\n    return 2\n", TEST: "def test_f():\n    assert 1\n"})
    repo.commit("[OpenAI] Honor stop_token_ids when streaming (#9100)\n\n* wip\n",
                {SERVING: "STOP = [1]\n", TEST2: "def test_stop():\n    assert 1\n"})
    repo.commit("[Radix] Tidy eviction (#9200)", {SRC: "def f():\n    return 3\n", TEST: "def test_f():\n    assert 3\n"})
    repo.commit("[Radix] Speed up match (#9300)", {SRC: "def f():\n    return 4\n", TEST: "def test_f():\n    assert 4\n"})
    repo.commit("[Radix] Keep pinned nodes (#9400)\n\nEviction drops nodes that are still pinned.",
                {SRC: "def f():\n    return 5\n", TEST: "def test_f():\n    assert 5\n"})
    return repo


def e2e_routes(now):
    return {
        f"/repos/{REPO}/pulls/9023": [rate_limited(reset_epoch=int(now) - 5),  # already reset: no real wait
                                      pull_json(REPO, 9023, "[Radix] Release locks of aborted chunked requests",
                                                FILLED_TEMPLATE)],
        f"/repos/{REPO}/issues/8331": issue_json(REPO, 8331, "[Bug] radix locks leak on abort", BUG_ISSUE),
        f"/repos/{REPO}/pulls/9100": pull_json(REPO, 9100, "[OpenAI] Honor stop_token_ids when streaming",
                                               MOTIVATION_PART_OF, labels=["OpenAI API", "bug"]),
        f"/repos/{REPO}/issues/13808": issue_json(REPO, 13808, "[Tracking] OpenAI API gaps", TRACKING_ISSUE),
        f"/repos/{REPO}/pulls/9200": pull_json(REPO, 9200, "[Radix] Tidy eviction", EMPTY_TEMPLATE + "\nFixes #404404\n"),
        f"/repos/{REPO}/pulls/9300": ("raw", b'{"number": 9300, "title": "[Radix] Sp'),
    }


def load(tasks):
    from sweserve.dataset.taskstore import task_dirs

    return {d.name: (json.loads((d / "task.json").read_text()), (d / "instruction.md").read_text())
            for d in task_dirs(tasks)}


def test_mine_github_end_to_end_then_offline(make_repo, tmp_path):
    repo = history(make_repo)
    env = {**os.environ, "GITHUB_TOKEN": "ghp_e2e"}
    with FakeGitHub(e2e_routes(time.time())) as gh:
        proc = sweserve("mine", "--repo", str(repo.path), "--github", "--github-url", gh.base_url,
                        "--tasks", str(tmp_path / "t1"), "--state-dir", str(tmp_path / "state"), cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "GitHub rate limit reached (HTTP 403)" in proc.stderr  # logged
        assert set(gh.auth) == {"token ghp_e2e"}
    first = load(tmp_path / "t1")
    assert len(first) == 5
    q = {k: v[0]["quality"] for k, v in first.items()}
    text = {k: v[1] for k, v in first.items()}
    assert q["sgl-project__sglang-9023"]["statement_source"] == "issue"
    assert q["sgl-project__sglang-9023"]["linked_issues"] == [f"{REPO}#8331"]
    assert text["sgl-project__sglang-9023"].startswith("# [Bug] radix locks leak on abort\n")
    assert q["sgl-project__sglang-9100"]["statement_source"] == "pr_description"
    assert "part of sgl-project/sglang#13808" in text["sgl-project__sglang-9100"]
    # labels are kept and count as a family signal
    assert q["sgl-project__sglang-9100"]["labels"] == ["OpenAI API", "bug"]
    assert first["sgl-project__sglang-9100"][0]["family"] == "serving-api"
    assert first["sgl-project__sglang-9100"][0]["family_confident"] is True
    # every part of the texts has its fate on record; the issue's checklist and the PR's solution are cut
    parts = q["sgl-project__sglang-9023"]["parts"]
    assert any(p["kept"] and p["source"] == f"issue {REPO}#8331" for p in parts)
    assert any(not p["kept"] and p["why"] == "checklist" for p in parts)
    assert q["sgl-project__sglang-9023"]["statement_eligible"] is True
    assert q["sgl-project__sglang-9200"]["statement_source"] == "title_only"
    assert q["sgl-project__sglang-9200"]["statement_eligible"] is False
    assert text["sgl-project__sglang-9200"] == "# [Radix] Tidy eviction\n"
    assert q["sgl-project__sglang-9200"]["notes"] == [f"GitHub: issue {REPO}#404404 not found (404, deleted or private)"]
    # a deleted PR (404) falls back to the commit message, with a note
    assert q["sgl-project__sglang-9400"]["statement_source"] == "commit_message"
    assert q["sgl-project__sglang-9400"]["notes"] == [f"GitHub: PR {REPO}#9400 not found (404, deleted or private)"]
    assert "still pinned" in text["sgl-project__sglang-9400"]
    # a malformed PR falls back to the commit message, with the reason on record
    assert q["sgl-project__sglang-9300"]["statement_source"] == "title_only"
    assert "malformed response" in q["sgl-project__sglang-9300"]["notes"][0]
    # the server is gone: mining again is answered from the cache, with the same tasks
    proc = sweserve("mine", "--repo", str(repo.path), "--github", "--github-url", gh.base_url,
                    "--tasks", str(tmp_path / "t2"), "--state-dir", str(tmp_path / "state"), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert load(tmp_path / "t2") == first
    # and without --github it still works, and says so
    proc = sweserve("mine", "--repo", str(repo.path), "--tasks", str(tmp_path / "t3"), "--state-dir",
                    str(tmp_path / "state"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    offline = load(tmp_path / "t3")
    assert {v[0]["quality"]["statement_source"] for v in offline.values()} == {"title_only", "commit_message"}
    assert all("mined without GitHub" in v[0]["quality"]["notes"][0] for v in offline.values())
    assert "fix lint" not in offline["sgl-project__sglang-9023"][1]


def test_mine_github_unreachable_is_one_line(make_repo, tmp_path):
    repo = history(make_repo)
    proc = sweserve("mine", "--repo", str(repo.path), "--github", "--github-url", "http://127.0.0.1:9/api/v3",
                    "--tasks", str(tmp_path / "t"), "--state-dir", str(tmp_path / "state"), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: cannot reach the GitHub API at http://127.0.0.1:9/api/v3: ConnectionError"]
