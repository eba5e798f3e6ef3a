"""What the boot script is told and what it sends, shared by whoever runs it and decides: the host
(`evaluation/grading.py`) in `sweserve run`, the root verifier inside the container (`sweserve_verify.py`) in
the exports. Stdlib only.

Each event is one line behind the run's nonce: `{"start": digest}` first, `{"id", "outcome", ...}` per test
report, `{"end": exit status}` last.
"""

import json
import posixpath

SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
PYTEST_ARGS = ["-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rN", "--continue-on-collection-errors",
               "--show-capture=no"]  # a failing twin of a chatty test reprints its output (red team 8, R8-12)


def log_name(test_id: str) -> str:
    """A graded test id as an exported SWE-bench row lists it and the verifier prints it: SWE-bench's
    `parse_log_pytest` keys a line by `line.split()[1]`, so an id holding whitespace (a parametrize id such as
    `test_x[1 2 4.5]`: pytest keeps spaces) would be read as its first word and never found (red team 11,
    R11-1). Such an id has its whitespace and its '%' percent-encoded; any other id is itself."""
    if not any(c.isspace() for c in test_id):
        return test_id
    return "".join(f"%{ord(c):02X}" if c.isspace() or c == "%" else c for c in test_id)


def numstat_paths(raw: str) -> set:
    """Paths in `git apply --numstat -z` output (a rename lists both names after an empty path field)."""
    paths, tokens, i = set(), raw.split("\0"), 0
    while i < len(tokens):
        if tokens[i].count("\t") >= 2:
            path = tokens[i].split("\t", 2)[2]
            if path:
                paths.add(path)
            else:
                paths.update(t for t in tokens[i + 1:i + 3] if t)
                i += 2
        i += 1
    return paths


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


OUTCOME_KEYS = {"id", "outcome", "message", "skip"}


def event_of(value):
    """The event as the runner writes it, or None: `{"start": str}`, `{"end": int}` or an outcome `{"id": str,
    "outcome": one of SEVERITY, "message"?: str, "skip"?: str}`; exact types (a bool is no int), no other keys.
    The runner writes nothing else, so anything else behind the nonce was written by something else."""
    if not isinstance(value, dict):
        return None
    if "start" in value:
        return value if set(value) == {"start"} and type(value["start"]) is str else None
    if "end" in value:
        return value if set(value) == {"end"} and type(value["end"]) is int else None
    if not set(value) <= OUTCOME_KEYS or type(value.get("id")) is not str:
        return None
    if type(value.get("outcome")) is not str or value["outcome"] not in SEVERITY:
        return None
    extras = {k: v for k, v in value.items() if k in ("message", "skip") and v is not None}
    if any(type(v) is not str for v in extras.values()):
        return None
    return {"id": value["id"], "outcome": value["outcome"], **extras}


def read_stream(output: str, nonce: str) -> tuple:
    """(the runner's events behind this run's nonce, each checked by event_of; how many were malformed; the
    output without the stream's lines)."""
    marker = f"@@sweserve:{nonce}:"
    events, kept, malformed = [], [], 0
    for line in output.split("\n"):
        at = line.find(marker)
        if at < 0:
            kept.append(line)
            continue
        if line[:at].strip():
            kept.append(line[:at])
        try:
            event = event_of(json.loads(line[at + len(marker):]))
        except (ValueError, RecursionError):  # not JSON, or nested past what the parser takes
            event = None
        if event is None:
            malformed += 1
        else:
            events.append(event)
    return events, malformed, "\n".join(kept)


def parse_stream(output: str, nonce: str) -> tuple:
    """The runner's well-formed events and the output without the stream (`read_stream` counts the rest)."""
    events, _, kept = read_stream(output, nonce)
    return events, kept


def merge_events(events: list) -> tuple:
    """Outcomes per id, the worst report winning (a forged later "passed" never upgrades a failure); events
    that are not outcome events of the schema are passed over."""
    outcomes: dict = {}
    skips: dict = {}
    messages: dict = {}
    for raw in events:
        event = event_of(raw)
        if event is None or "outcome" not in event:
            continue
        test_id, outcome = event["id"], event["outcome"]
        if test_id not in outcomes or SEVERITY[outcome] >= SEVERITY[outcomes[test_id]]:
            outcomes[test_id] = outcome
        if "skip" in event:
            skips[test_id] = event["skip"]
        if "message" in event:
            messages[test_id] = event["message"]
    return outcomes, skips, messages


def stream_problems(events: list[dict], manifest: str, exit_code: int, malformed: int = 0) -> list[str]:
    """What is wrong with a complete stream's shape: one `start` (the digest taken before the submission)
    first, one `end` last, and the process's exit status the one `end` reported. Any of these broken means
    something in the test process wrote events of its own; so does any `malformed` event (see event_of)."""
    problems = []
    if malformed:
        problems.append(f"the outcome stream has {malformed} malformed events")
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
