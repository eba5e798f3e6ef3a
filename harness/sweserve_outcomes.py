"""The recorders of test outcomes, shared by every runner that runs in a sandbox or an exported task's image.

`Recorder` is the pytest plugin: it sends each test's outcome as it is decided through `emit`. At grading
time `emit` is the boot script's channel (sweserve_boot.py), so no file is written that the code under test
could rewrite afterwards; exported tasks run the same boot script under sweserve_verify.py. The unittest runner (sweserve_unittest.py) sends the same events.

Outcomes: passed, failed, error (setup/teardown/collection), skipped; an xfail or xpass of a graded test is a
failure. A report of an attempt a rerun plugin repeats (outcome `rerun`) sends nothing, as pytest's summary counts
it apart: the last attempt decides, and a test with no other report is missing (not a pass). Skip reasons and the
tail of each failure travel with the outcome, so callers can tell tests that need an accelerator. Standard library only: it runs with the image's interpreter.
"""


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
        if getattr(report, "outcome", None) == "rerun":
            return  # an attempt a rerun plugin (pytest-rerunfailures) repeats: the attempt after it decides
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
