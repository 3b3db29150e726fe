"""`python -m mnemobus.cli`: the same as the `mnemobus` command."""

import sys

from mnemobus.cli import main

sys.exit(main())
