"""The recorders of test outcomes, shared by every runner that runs in a sandbox or an exported task's image.

`Recorder` is the pytest plugin: it sends each test's outcome as it is decided through `emit`. At grading
time `emit` is the boot script's channel (sweserve_boot.py), so no file is written that the code under test
could rewrite afterwards; in an exported task (sweserve_outcomes_file.py, sweserve_unittest_file.py) it is an
`OutcomeFile`, written to $SWESERVE_OUTCOMES at the end, because the harness grading those reads a file.
The unittest runner (sweserve_unittest.py) sends the same events.

Outcomes: passed, failed, error (setup/teardown/collection), skipped; an xfail or xpass of a graded test is a
failure. Skip reasons and the tail of each failure travel with the outcome, so callers can tell tests that
need an accelerator. Standard library only: it runs with the image's interpreter.
"""

import json

SEVERITY = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def tail(text, head=2048, tail=6144):
    """The whole failure text, or its first `head` and last `tail` characters: a sign sits anywhere in it."""
    text = str(text).strip()
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n[... {len(text) - head - tail} characters ...]\n{text[-tail:]}"


def _message(report):
    return tail(getattr(report, "longreprtext", "") or report.longrepr or "")


class Recorder:
    def __init__(self, emit):
        self._emit = emit

    def pytest_collectreport(self, report):
        if report.failed:
            self._emit({"id": report.nodeid, "outcome": "error", "message": _message(report)})

    def pytest_runtest_logreport(self, report):
        event = {"id": report.nodeid}
        xfail = getattr(report, "wasxfail", None) is not None
        if report.when == "call":
            if report.passed:
                event["outcome"] = "failed" if xfail else "passed"
            elif report.skipped:
                event["outcome"] = "failed" if xfail else "skipped"
            else:
                event.update(outcome="failed", message=_message(report))
        elif report.failed:
            event.update(outcome="error", message=_message(report))
        elif report.skipped and report.when == "setup":
            event["outcome"] = "failed" if xfail else "skipped"
            longrepr = report.longrepr
            if isinstance(longrepr, tuple) and len(longrepr) == 3:
                event["skip"] = str(longrepr[2])
        else:
            return
        self._emit(event)


class OutcomeFile:
    """Events gathered for an exported task's grader: the worst outcome per test wins, as in sweserve's own."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}
        self.skips: dict[str, str] = {}
        self.messages: dict[str, str] = {}

    def emit(self, event):
        test_id, outcome = event["id"], event["outcome"]
        if test_id not in self.outcomes or SEVERITY[outcome] >= SEVERITY[self.outcomes[test_id]]:
            self.outcomes[test_id] = outcome
        if "skip" in event:
            self.skips[test_id] = event["skip"]
        if "message" in event:
            self.messages[test_id] = event["message"]

    def write(self, path, exitstatus):
        with open(path, "w") as fh:
            json.dump({"outcomes": self.outcomes, "skips": self.skips, "messages": self.messages,
                       "exitstatus": int(exitstatus)}, fh)
