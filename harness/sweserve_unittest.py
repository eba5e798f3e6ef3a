"""unittest runner used at grading time (through sweserve_boot): runs test files, sends each outcome.

Ids follow pytest's form for TestCase methods, `path::Class::method`, so tasks read the same
whichever runner their profile names. An expected failure or unexpected success is a failure. Events are
sweserve_outcomes.Recorder's, through the boot script's channel (exported tasks run it the same way).
"""

import importlib.util
import os
import sys
import traceback
import unittest

from sweserve_outcomes import tail


class Recorder(unittest.TestResult):
    def __init__(self, path, emit):
        super().__init__()
        self.path = path
        self.emit = emit
        self.failed = False

    def _send(self, test, outcome, message=None, skip=None):
        event = {"id": self._id(test), "outcome": outcome}
        if message is not None:
            event["message"] = message
        if skip is not None:
            event["skip"] = skip
        self.failed = self.failed or outcome in ("failed", "error")
        self.emit(event)

    def _id(self, test):
        method = getattr(test, "_testMethodName", None)
        if method is None:  # an _ErrorHolder: setUpClass / module fixture failed
            return self.path
        return f"{self.path}::{type(test).__name__}::{method}"

    def _text(self, err, test):
        return tail(self._exc_info_to_string(err, test))  # type: ignore[attr-defined]  # unittest's own formatting

    def addSuccess(self, test):
        self._send(test, "passed")

    def addFailure(self, test, err):
        self._send(test, "failed", self._text(err, test))

    def addError(self, test, err):
        self._send(test, "error", self._text(err, test))

    def addSkip(self, test, reason):
        self._send(test, "skipped", skip=str(reason))

    def addExpectedFailure(self, test, err):
        self._send(test, "failed")

    def addUnexpectedSuccess(self, test):
        self._send(test, "failed")

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self._send(test, "failed" if issubclass(err[0], test.failureException) else "error",
                       self._text(err, test))


def run_file(index, path, emit):
    name = f"sweserve_test_{index}_" + os.path.basename(path)[:-3]
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException:  # noqa: BLE001 - an import failure is the file's outcome
        emit({"id": path, "outcome": "error", "message": tail(traceback.format_exc())})
        return False
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    recorder = Recorder(path, emit)
    suite.run(recorder)
    return not recorder.failed


def main(paths, emit):
    """Run each file's TestCases; the boot script has already put the repo's paths on sys.path."""
    results = [run_file(i, path, emit) for i, path in enumerate(paths)]
    return 0 if all(results) else 1
