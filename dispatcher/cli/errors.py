"""The CLI's two kinds of failure, each reported as one line on stderr."""

from __future__ import annotations


class CliError(Exception):
    """A failure to report as one line (exit status 1)."""


class UsageError(CliError):
    """A usage error (exit status 2)."""


PROG = "dispatcher"
"""The command's name, which every error line starts with."""
