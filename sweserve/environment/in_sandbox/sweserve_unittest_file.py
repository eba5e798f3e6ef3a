"""unittest runner for exported tasks (SWE-bench, Harbor): writes every outcome as JSON to $SWESERVE_OUTCOMES.

The running and recording are sweserve_unittest's (the one grading uses); this gathers its events into
an OutcomeFile. Usage: python sweserve_unittest_file.py FILE...
"""

import os
import sys

from sweserve_outcomes import OutcomeFile
from sweserve_unittest import main as run


def main(paths):
    sys.path.insert(0, os.getcwd())
    record = OutcomeFile()
    code = run(paths, record.emit)
    record.write(os.environ["SWESERVE_OUTCOMES"], 0)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
