"""pytest plugin for exported tasks (SWE-bench, Harbor): writes {nodeid: outcome} as JSON to $SWESERVE_OUTCOMES.

Outcomes: passed, failed, error (setup/teardown/collection), skipped. Skip reasons go
under "skips" and each failure's text (bounded) under "messages", so callers can tell tests
that need an accelerator.
"""

import json
import os

_outcomes = {}
_skips = {}
_messages = {}


def _message(report, head=2048, tail=6144):
    """The whole failure text, or its first `head` and last `tail` characters: a sign sits anywhere in it."""
    text = str(getattr(report, "longreprtext", "") or report.longrepr or "").strip()
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n[... {len(text) - head - tail} characters ...]\n{text[-tail:]}"


def pytest_collectreport(report):
    if report.failed:
        _outcomes[report.nodeid] = "error"
        _messages[report.nodeid] = _message(report)


def pytest_runtest_logreport(report):
    nodeid = report.nodeid
    if report.when == "call":
        if report.passed:
            _outcomes[nodeid] = "failed" if getattr(report, "wasxfail", None) is not None else "passed"
        elif report.skipped:
            _outcomes[nodeid] = "skipped" if getattr(report, "wasxfail", None) is None else "failed"
        else:
            _outcomes[nodeid] = "failed"
            _messages[nodeid] = _message(report)
    elif report.failed:
        _outcomes[nodeid] = "error"
        _messages[nodeid] = _message(report)
    elif report.skipped and report.when == "setup":
        _outcomes[nodeid] = "skipped"
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            _skips[nodeid] = str(longrepr[2])


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("SWESERVE_OUTCOMES")
    if not path:
        return
    with open(path, "w") as fh:
        json.dump({"outcomes": _outcomes, "skips": _skips, "messages": _messages, "exitstatus": int(exitstatus)}, fh)
