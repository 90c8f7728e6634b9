"""The `dispatcher` command, for operators and producers: one module per command group.

``main`` builds the parser from each group's ``register``; no command module imports
another, or ``main``.
"""

from dispatcher.cli.main import main

__all__ = ["main"]
