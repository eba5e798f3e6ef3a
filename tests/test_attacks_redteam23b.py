"""Red team 23b: counting, results files and reports. Every view of a results file (`report`, `report --difficulty`,
the board, a scorecard) counts each selected attempt once and says when it cannot see what was selected."""

from __future__ import annotations

import json
from pathlib import Path

from test_attacks_redteam15c import cli
from test_attacks_redteam22f import _killed_run

# --- R23b-1: `report --difficulty` by a name with no runs/ beside it said nothing of the runs it could not see ------

def _difficulty(path: Path, *extra: str) -> tuple[dict, str]:
    proc = cli("report", str(path), "--difficulty", "--json", *extra, cwd=path.parent)
    assert proc.returncode == 0, proc.stderr
    text = cli("report", str(path), "--difficulty", *extra, cwd=path.parent)
    assert text.returncode == 0, text.stderr
    return json.loads(proc.stdout), text.stdout


def test_r23b_1_difficulty_says_when_a_runs_selection_is_not_beside_its_records(tmp_path):
    """Attack: run R selected A and B, A resolved and R was killed with B unfinished. By the file's own name the fit
    counts B as a's unsolved attempt (R22b-2). Hand over a copy (or a hard link's other name) instead: no runs/
    beside it, B leaves the fit, a's ability is that of an agent that solved all it was given, and A and B look
    easier. `report` says so (`runs_unselected`, R22f-3); `report --difficulty` said nothing, in JSON or text.
    Defence: the fit names the runs whose records it fits with no selection to count them against."""
    real = _killed_run(tmp_path)
    pub = tmp_path / "pub" / "results.jsonl"
    pub.parent.mkdir()
    pub.write_bytes(real.read_bytes())
    cal, text = _difficulty(pub)
    assert [t["missing"] for t in cal["tasks"]] == [0]  # what the records alone say
    assert cal.get("runs_unselected") == {"a": ["R"]}
    assert "no selection" in text


def test_r23b_1_control_difficulty_by_the_files_own_name_says_nothing_more(tmp_path):
    real = _killed_run(tmp_path)
    cal, text = _difficulty(real)
    assert {t["task_id"]: t["missing"] for t in cal["tasks"]} == {"A": 0, "B": 1}
    assert cal.get("runs_unselected", {}) == {}
    assert "no selection" not in text
