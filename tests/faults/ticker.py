"""A dispatcher process of its own: ticks the real handler in a loop and prints each report.

    python -m tests.faults.ticker --seconds 8 --timeout 3

The environment (the function's variables, AWS_ENDPOINT_URL, credentials) comes from
the caller. One line per tick on stdout: "REPORT " and the report as JSON, with when it began and ended.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from dispatcher import handler
from dispatcher.in_process import LocalContext

BUSY_PAUSE_SECONDS = 0.1


def main() -> int:
    """Tick for ``--seconds`` (or ``--ticks`` ticks); each tick's context times out after ``--timeout``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--ticks", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument(
        "--until-drained", action="store_true", help="stop after a tick finds the queue empty"
    )
    parser.add_argument(
        "--ready-go",
        action="store_true",
        help='print "READY" once loaded, then wait for a line on stdin before the first tick',
    )
    args = parser.parse_args()
    if args.ready_go:
        # Processes started together begin together, however long each took to import.
        sys.stdout.write("READY\n")
        sys.stdout.flush()
        sys.stdin.readline()
    ends = time.monotonic() + args.seconds
    ticks = 0
    while time.monotonic() < ends and (not args.ticks or ticks < args.ticks):
        began = time.time()
        report = handler.lambda_handler({}, LocalContext(args.timeout))
        sys.stdout.write("REPORT " + json.dumps({**report, "began": began, "ended": time.time()}) + "\n")
        sys.stdout.flush()
        ticks += 1
        if args.until_drained and report["stopped"] == "drained":
            break
        if report["stopped"] == "busy":
            time.sleep(BUSY_PAUSE_SECONDS)  # the next invocation comes later, as a schedule or event would
    return 0


if __name__ == "__main__":
    sys.exit(main())
