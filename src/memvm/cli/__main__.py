"""`python -m memvm.cli`, as the `memvm` script."""

import sys

from memvm.cli import main

sys.exit(main())
