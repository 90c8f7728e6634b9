"""``python -m dispatcher.local downstream``, ``settle`` or ``gated``: helpers of `dispatcher local`."""

import sys

from dispatcher.local.helpers import main

sys.exit(main(sys.argv[1:]))
