"""pytest plugin for exported tasks (SWE-bench, Harbor): writes {nodeid: outcome} as JSON to $SWESERVE_OUTCOMES.

Outcomes: passed, failed, error (setup/teardown/collection), skipped. Skip reasons go
under "skips" and the tail of each failure under "messages", so callers can tell tests
that need an accelerator.
"""

import json
import os

_outcomes = {}
_skips = {}
_messages = {}


def _message(report):
    text = str(getattr(report, "longreprtext", "") or report.longrepr or "")
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-3:])[-500:]


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
