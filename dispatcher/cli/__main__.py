"""``python -m dispatcher.cli``: the `dispatcher` command."""

import sys

from dispatcher.cli.main import main

sys.exit(main())
