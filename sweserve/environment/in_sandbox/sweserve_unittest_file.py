"""unittest runner for exported tasks (SWE-bench, Harbor): runs test files, writes outcomes as JSON to $SWESERVE_OUTCOMES.

Ids follow pytest's form for TestCase methods, `path::Class::method`, so tasks read the same
whichever runner their profile names. Usage: python sweserve_unittest_file.py FILE...
"""

import importlib.util
import json
import os
import sys
import traceback
import unittest

outcomes, skips, messages = {}, {}, {}


def _tail(text, head=2048, tail=6144):
    """The whole failure text, or its first `head` and last `tail` characters: a sign sits anywhere in it."""
    text = text.strip()
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n[... {len(text) - head - tail} characters ...]\n{text[-tail:]}"


class Recorder(unittest.TestResult):
    def __init__(self, path):
        super().__init__()
        self.path = path

    def _id(self, test):
        method = getattr(test, "_testMethodName", None)
        if method is None:  # an _ErrorHolder: setUpClass / module fixture failed
            return self.path
        return f"{self.path}::{type(test).__name__}::{method}"

    def addSuccess(self, test):
        outcomes[self._id(test)] = "passed"

    def addFailure(self, test, err):
        outcomes[self._id(test)] = "failed"
        messages[self._id(test)] = _tail(self._exc_info_to_string(err, test))

    def addError(self, test, err):
        outcomes[self._id(test)] = "error"
        messages[self._id(test)] = _tail(self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        outcomes[self._id(test)] = "skipped"
        skips[self._id(test)] = str(reason)

    def addExpectedFailure(self, test, err):
        outcomes[self._id(test)] = "failed"

    def addUnexpectedSuccess(self, test):
        outcomes[self._id(test)] = "failed"


def run_file(index, path):
    name = f"sweserve_test_{index}_" + os.path.basename(path)[:-3]
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except BaseException:  # noqa: BLE001 - an import failure is the file's outcome
        outcomes[path] = "error"
        messages[path] = _tail(traceback.format_exc())
        return
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    suite.run(Recorder(path))


def main(paths):
    sys.path.insert(0, os.getcwd())
    for i, path in enumerate(paths):
        run_file(i, path)
    with open(os.environ["SWESERVE_OUTCOMES"], "w") as fh:
        json.dump({"outcomes": outcomes, "skips": skips, "messages": messages, "exitstatus": 0}, fh)
    return 0 if all(o in ("passed", "skipped") for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
