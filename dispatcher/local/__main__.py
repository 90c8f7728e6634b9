"""``python -m dispatcher.local downstream down|up`` or ``settle``: helpers of `dispatcher local`."""

import sys

from dispatcher.local.command import main

sys.exit(main(sys.argv[1:]))
