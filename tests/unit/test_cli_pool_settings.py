"""A pool's adaptive settings as `set` writes them into the control parameter, without AWS."""

from __future__ import annotations

from typing import Any

import pytest

from dispatcher.cli.errors import UsageError
from dispatcher.cli.pool_settings import pool_values, set_pool
from dispatcher.core.adaptive import Adaptive
from dispatcher.core.topology import Pool

GLUE = Pool("glue", 8, adaptive=Adaptive(errors=("Glue.A",), min=2, decrease=0.5, cooldown_seconds=15.0))


def test_a_first_change_copies_the_configured_settings_and_changes_its_key() -> None:
    """The parameter's `adaptive` replaces LANES' whole: the other settings are LANES' own, not defaults."""
    document: dict[str, Any] = {"max_concurrency": 3}
    set_pool(document, GLUE, pool_values({"adaptive.decrease": "0.7"}))
    assert document == {
        "max_concurrency": 3,
        "pools": {
            "glue": {"adaptive": {"errors": ["Glue.A"], "min": 2, "decrease": 0.7, "cooldown_seconds": 15.0}}
        },
    }
    set_pool(document, GLUE, pool_values({"adaptive.errors": "Glue.A,Glue.B"}))
    assert document["pools"]["glue"]["adaptive"]["errors"] == ["Glue.A", "Glue.B"]
    assert document["pools"]["glue"]["adaptive"]["decrease"] == 0.7


def test_adaptive_false_turns_it_off_and_mends_an_entry_that_is_not_an_object() -> None:
    """``adaptive=false`` is written as it is, over whatever the pool's entry held."""
    document: dict[str, Any] = {"pools": {"glue": 3}}
    set_pool(document, GLUE, pool_values({"adaptive": "false"}))
    assert document == {"pools": {"glue": {"adaptive": False}}}


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"adaptive": "false", "adaptive.min": "2"}, "adaptive=false turns its settings off"),
        ({"adaptive.min": "0"}, "adaptive.min: Input should be greater than or equal to 1"),
        ({"adaptive.errors": " "}, "adaptive.errors: Value error, an error name can't be empty"),
        ({"adaptive.cooldown": "3"}, "adaptive.cooldown: a pool has no such setting"),
    ],
)
def test_a_value_or_key_the_settings_refuse_is_a_usage_error_naming_it(
    given: dict[str, str], said: str
) -> None:
    """Refused before anything is read or written."""
    with pytest.raises(UsageError, match=said):
        pool_values(given)
