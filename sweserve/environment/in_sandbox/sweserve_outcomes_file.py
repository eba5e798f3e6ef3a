"""pytest plugin for exported tasks (SWE-bench, Harbor): writes every test's outcome as JSON to $SWESERVE_OUTCOMES.

The recording is sweserve_outcomes.Recorder's (the one grading uses); this only gathers its events into
{"outcomes", "skips", "messages", "exitstatus"} and writes them when the session ends.
"""

import os

from sweserve_outcomes import OutcomeFile, Recorder

_file = OutcomeFile()


def pytest_configure(config):
    config.pluginmanager.register(Recorder(_file.emit), "sweserve-recorder")


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("SWESERVE_OUTCOMES")
    if path:
        _file.write(path, exitstatus)
