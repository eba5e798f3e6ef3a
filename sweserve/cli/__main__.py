import sys

from sweserve.cli import main

sys.exit(main())
