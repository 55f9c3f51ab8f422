"""Entry point of `python -m fabctl`."""

import sys

from fabctl.cli import main

sys.exit(main())
