"""Red team 15g: the fixes of red teams 15b and 15c to reports, results bookkeeping and reader-facing output.

R15g-1  `_one_file_per_attempt` (R15c-4) tells two runs apart by run id alone: two runs into two results files
        under the same `--run-id` (allowed: each file has its own runs/ folder) are "the same run", so one agent's
        attempt recorded in both is not refused and the later file's replaces the earlier's: the order of the
        files still picks a failure or a success.
R15g-2  `visible_controls` (R15b-1..2) spells C0/C1, bidi embeddings/overrides/isolates, LRM/RLM and four
        zero-width characters, but not the other invisible ones: ALM U+061C, soft hyphen, U+180E, U+206A..F,
        variation selectors, TAG characters U+E0000..7F, Hangul fillers (valid in Python identifiers), CGJ,
        U+2028/9. The R15b-2 attack works unchanged with TAG characters in place of the zero-width space.
R15g-3  The tamper scan's flags name the candidate's file as git wrote it (core.quotepath=off keeps non-ASCII
        raw); the reviewer page lists flags html-escaped only, so a bidi override in a file name reorders a flag.
R15g-4  `safe_name` keeps a clean name's case: two agents differing only in case share reviewer pages on a
        case-insensitive disk (macOS, Windows), R15b-8 again.
R15g-5  R15c-1 left out of `report`'s denominator the unready tasks whose results say so; an unready task a
        `run --include-unready` selected and has not run yet stays `missing` even with `--tasks` saying it is
        not ready: pass@1 counts a task the report claims to leave out.
"""

from __future__ import annotations

import json

import pytest
from test_attacks_redteam15c import ROOT, cli
from test_report_properties import manifest, record

# --- R15g-1: two runs, two files, one --run-id ------------------------------------------------------------------

def test_two_runs_under_one_run_id_in_two_files_are_not_one_attempt(tmp_path):
    """`sweserve run --run-id nightly --output first/results.jsonl` (failed), later the same command with
    `--output second/results.jsonl` (resolved): two runs (two manifests, two trial folders), one run id, which
    `run_id_taken` allows as each file has its own runs/ folder. `report first/... second/...` takes them for one
    run's copy and counts whichever file comes last."""
    for d, status in (("first", "failed"), ("second", "resolved")):
        (tmp_path / d).mkdir()
        manifest(tmp_path / d, "nightly", "a", {"A": "decoding"}, results="results.jsonl")
        (tmp_path / d / "results.jsonl").write_text(record("A", status, run_id="nightly").model_dump_json() + "\n")
    outs = []
    for order in (("first", "second"), ("second", "first")):
        proc = cli("report", *(str(tmp_path / d / "results.jsonl") for d in order), "--json", cwd=tmp_path)
        outs.append((proc.returncode, json.loads(proc.stdout)[0]["overall"]["pass_at_1"] if proc.returncode == 0
                     else None))
    assert outs[0] == outs[1], f"the order of the files picks the attempt that counts: {outs}"


# --- R15g-2: invisible characters visible_controls does not know -------------------------------------------------

def _bundle():
    from sweserve.dataset.taskstore import load_all

    return load_all(ROOT / "tasks")[0]


def _result(bundle, patch: str, flags=()):
    from datetime import datetime, timedelta, timezone

    from sweserve.models import AgentRun, RunResult, TestResults

    t0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
    t = bundle.task
    return RunResult(run_id="r1", task_id=t.task_id, family=t.family, agent="human-jane", status="failed",
                     model_patch=patch, tests=TestResults(fail_to_pass={x: "failed" for x in t.FAIL_TO_PASS}),
                     agent_run=AgentRun(agent="human-jane", candidate="jane", wall_s=600.0), flags=list(flags),
                     started_at=t0, finished_at=t0 + timedelta(seconds=600), duration_s=610)


def _patch(added_line: str, name: str = "python/sglang/utils_extra.py") -> str:
    return (f"diff --git a/{name} b/{name}\n"
            f"new file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/{name}\n"
            "@@ -0,0 +1,2 @@\n+import os\n" f"+{added_line}\n")


# characters a browser and a terminal show as nothing (or that only reorder their neighbours), none of which
# visible_controls spells: the Arabic letter mark (a bidi mark, as U+200F which is spelled), the soft hyphen, the
# Mongolian vowel separator, the deprecated format characters U+206A..F, variation selectors, the TAG characters
# U+E0000..7F (a whole invisible ASCII alphabet: "ASCII smuggling"), the Hangul fillers (letters: valid in a Python
# identifier, the "invisible backdoor" variable), the combining grapheme joiner, line and paragraph separators
UNSPELLED = ("\u061c", "\u00ad", "\u180e", "\u206a", "\u206f", "\ufe01", "\U000E0020", "\U000E0061", "\U000E007F",
             "\u3164", "\u115f", "\uffa0", "\u034f", "\U000E0100", "\u2028", "\u2029")
# the R15b-2 check, its zero-width space swapped for TAG characters: the reviewer reads `!= "user"`, Python compares
# with "user" plus two invisible characters, so every caller passes the admin branch
HIDDEN = 'if access_level != "user\U000E0020\U000E0061":  # only admins past here'


def test_reviewer_page_spells_every_invisible_character_in_the_candidate_diff():
    from sweserve.reporting.review import review_html, review_markdown

    bundle = _bundle()
    patch = _patch(HIDDEN + "\n+" + "\n+".join(f"x{i} = 'a{c}b'" for i, c in enumerate(UNSPELLED)))
    patch = patch.replace("@@ -0,0 +1,2 @@", f"@@ -0,0 +1,{2 + len(UNSPELLED)} @@")
    page = review_html(bundle, _result(bundle, patch))
    diff = page[page.index('id="candidate-diff"'):page.index('id="oracle-diff"')]
    assert "access_level" in diff
    raw = [f"U+{ord(c):04X}" for c in UNSPELLED if c in diff]
    assert not raw, f"invisible characters reach the reviewer page raw: {raw}"
    text = review_markdown(bundle, _result(bundle, patch))
    raw = [f"U+{ord(c):04X}" for c in UNSPELLED if c in text]
    assert not raw, f"invisible characters reach `sweserve review` raw: {raw}"


def test_control_sweserves_own_icons_and_honest_unicode_stay_as_they_are():
    from sweserve.reporting.review import visible_controls

    honest = "déjà vu ✓ 日本語 ⚠️ ⏭️ ✅ ❌ 👍🏽 مرحبا"
    assert visible_controls(honest) == honest


# --- R15g-3: the tamper scan's flags name the candidate's files, raw, on the reviewer page ------------------------

def test_reviewer_page_spells_bidi_controls_in_a_flag():
    """git (core.quotepath=off, as sweserve diffs) keeps non-ASCII file names raw; the tamper scan names the file in
    its flag, and the reviewer page lists the flags html-escaped only: a file name with U+202E reverses the rest of
    the flag, so the reviewer reads a flag on `utils.py` while the hook is in another file."""
    from sweserve.evaluation.tamper_scan import scan
    from sweserve.reporting.review import review_html

    name = "python/sglang/\u202eyp.slitu\u202c_hook.py"
    patch = _patch('import atexit; atexit.register(lambda: __import__("os")._exit(0))', name=name)
    flags = scan(patch)
    assert any("\u202e" in f for f in flags), flags  # the scan names the file as git wrote it
    bundle = _bundle()
    page = review_html(bundle, _result(bundle, patch, flags=flags))
    listed = page[page.index("flagged:"):]
    listed = listed[:listed.index("</ul>")] if "</ul>" in listed else listed[:2000]
    assert "\u202e" not in listed, "a bidi override in a flag reaches the reviewer page raw"


# --- R15g-4: safe_name keeps case, and a case-insensitive disk (macOS, Windows) does not ---------------------------

def test_two_agents_differing_in_case_get_different_reviewer_pages_on_any_disk(tmp_path):
    """`safe_name` (R15b-8: "one per name") keeps a clean name as it is; two agents whose names differ only in
    case (`Qwen3-Coder` and `qwen3-coder`, two checkpoints exported by two tools) get folders that are one folder
    on macOS's and Windows' default disks: the later agent's reviewer pages overwrite the earlier's, and the
    earlier agent's cells on the board open the later agent's pages (a resolved shown as the other's failure)."""
    from sweserve.reporting.html import review_path, safe_name

    a, b = "Qwen3-Coder", "qwen3-coder"
    assert safe_name(a).casefold() != safe_name(b).casefold(), (safe_name(a), safe_name(b))
    assert review_path(a, "t").casefold() != review_path(b, "t").casefold()
    assert safe_name("qwen3-coder") == "qwen3-coder"  # a lower-case clean name is kept as it is


# --- R15g-5: an unready task selected with --include-unready and not yet run is `missing` in the default report ---

def test_report_leaves_out_an_unready_selected_task_that_has_no_result_yet(tmp_path):
    """`run --include-unready o__r-1 o__r-2` (o__r-2 not ready) is stopped after o__r-1 resolved. `report --tasks`
    leaves unready tasks out by default, and R15c-1 leaves out those whose results say unready; but o__r-2 has no
    result yet, and the manifest's selection keeps it: `missing`, pass@1 halved, a task the same command would leave
    out once it has run (its result unready). The tasks folder says it is not ready."""
    from test_readiness import bundle as ready_bundle
    from test_readiness import task as ready_task

    from sweserve.dataset.readiness import assess
    from sweserve.dataset.taskstore import load_all, save_bundle

    tasks = tmp_path / "tasks"
    for t in (ready_task(1), ready_task(2, family_confident=False)):
        b = ready_bundle(t)
        b.task.readiness = assess(b.task, b.instruction)
        save_bundle(tasks, b)
    assert {b.task.task_id: b.task.ready for b in load_all(tasks)} == {"o__r-1": True, "o__r-2": False}
    manifest(tmp_path, "r1", "a", {"o__r-1": "decoding", "o__r-2": "decoding"}, results="results.jsonl")
    out = tmp_path / "results.jsonl"
    out.write_text(record("o__r-1", "resolved").model_copy(update={"task_ready": True}).model_dump_json() + "\n")
    proc = cli("report", str(out), "--tasks", str(tasks), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (rep,) = json.loads(proc.stdout)
    assert rep["statuses"]["missing"] == 0 and rep["overall"]["pass_at_1"] == pytest.approx(1.0), rep["tasks"]


def test_the_boards_cell_title_spells_a_flags_bidi_controls():
    """R15g-3 on the board: a cell's title (its reason and flags, shown on hover) named the flagged file raw."""
    from sweserve.reporting.html import _matrix
    from sweserve.reporting.summary import build_reports

    r = record("o__r-1", "failed", flags=["exit-time hook (x\u202eyp.slitu\u202c_hook.py)"])
    page = _matrix(build_reports([r], {}), set())
    assert "\u202e" not in page and "U+202E" in page
