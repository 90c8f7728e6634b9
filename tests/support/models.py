"""One set of botocore's service models for every session a test process makes.

The harness makes sessions afresh all the time (a scenario's clients, each cold start's),
and each would parse the same model files again: an eighth of the suite's time went to
it. botocore's sessions take their loader from ``botocore.session.create_loader``; here it
hands every session the process's one (`dispatcher.adapters.clients.service_models`, which
the CLI's sessions share as well). What the calls do is unchanged: same models, same clients.
"""

from __future__ import annotations

from typing import Any

import botocore.session

from dispatcher.adapters.clients import service_models


def share_service_models() -> None:
    """Every botocore session of this process made from now on shares one loader of service models."""

    def shared(_search_path_string: Any = None) -> Any:
        return service_models()

    botocore.session.create_loader = shared  # type: ignore[attr-defined]
