"""What the boot script is told and what it sends, shared by whoever runs it and decides: the host
(`evaluation/grading.py`) in `sweserve run`, the root verifier inside the container (`sweserve_verify.py`) in
the exports. Stdlib only.

Each event is one line behind the run's nonce: `{"start": digest}` first, `{"id", "outcome", ...}` per test
report, `{"end": exit status}` last.
"""

import json
import posixpath

SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
PYTEST_ARGS = ["-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rN", "--continue-on-collection-errors"]


def boot_config(runner: str, files: list, workdir: str, pythonpath: str, plugins: list, nonce_file: str,
                user: str = "", lock: tuple | list = (), private: tuple | list = ()) -> dict:
    """The boot script's CONFIG: the tests' runner and files, the repo paths appended to sys.path (the test
    workdir and its PYTHONPATH entries), the profile's pytest plugins, where the nonce is, and the privilege
    drop (`user` to become, paths to `lock` read-only, directories made root's alone: see sweserve_drop)."""
    paths = [workdir] + [posixpath.join(workdir, p) for p in pythonpath.split(":") if p]
    args = list(PYTEST_ARGS)
    for plugin in plugins:
        args += ["-p", plugin]
    return {"runner": runner, "paths": paths, "files": list(files), "args": args + list(files),
            "nonce_file": nonce_file, "user": user, "lock": list(lock), "private": list(private)}


def parse_stream(output: str, nonce: str) -> tuple[list[dict], str]:
    """The runner's events (lines behind this run's nonce) and the output without them."""
    marker = f"@@sweserve:{nonce}:"
    events, kept = [], []
    for line in output.split("\n"):
        at = line.find(marker)
        if at < 0:
            kept.append(line)
            continue
        if line[:at].strip():
            kept.append(line[:at])
        try:
            event = json.loads(line[at + len(marker):])
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events, "\n".join(kept)


def merge_events(events: list[dict]) -> tuple[dict, dict, dict]:
    """Outcomes per id, the worst report winning (a forged later "passed" never upgrades a failure)."""
    outcomes: dict = {}
    skips = {}
    messages = {}
    for event in events:
        test_id, outcome = event.get("id"), event.get("outcome")
        if not isinstance(test_id, str) or outcome not in SEVERITY:
            continue
        if test_id not in outcomes or SEVERITY[outcome] >= SEVERITY[outcomes[test_id]]:
            outcomes[test_id] = outcome
        if isinstance(event.get("skip"), str):
            skips[test_id] = event["skip"]
        if isinstance(event.get("message"), str):
            messages[test_id] = event["message"]
    return outcomes, skips, messages


def stream_problems(events: list[dict], manifest: str, exit_code: int) -> list[str]:
    """What is wrong with a complete stream's shape: one `start` (the digest taken before the submission)
    first, one `end` last, and the process's exit status the one `end` reported. Any of these broken means
    something in the test process wrote events of its own."""
    problems = []
    starts = [i for i, e in enumerate(events) if "start" in e]
    ends = [i for i, e in enumerate(events) if "end" in e]
    if starts[0] != 0 or len(starts) > 1:
        problems.append("the outcome stream has events before or a second start")
    elif events[0]["start"] != manifest:
        problems.append("pytest's installed files or the harness changed before the run")
    if len(ends) > 1 or ends[0] != len(events) - 1:
        problems.append("the outcome stream has events after its end")
    reported = events[ends[-1]].get("end")
    if exit_code < 128 and reported != exit_code:  # killed by a signal after its end: no forgery in that
        problems.append("the test runner's exit status is not the one its stream reported")
    return problems
