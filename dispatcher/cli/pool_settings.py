"""A pool's settings as `set` and `unset` change them: its MAX and pause, and its adaptive settings.

``set --pool glue adaptive.decrease=0.7`` changes one adaptive setting in the control
parameter's ``pools.glue.adaptive``, which replaces the pool's settings in ``LANES`` whole: so
the first change copies ``LANES``' settings there and changes that key. ``adaptive=false``
turns learning off (the limit is MAX). What `set` and `unset` then print is each setting
the ticks will use, with its source and the configured value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TextIO

from pydantic import ValidationError

from dispatcher.cli.args import parsed
from dispatcher.cli.errors import UsageError
from dispatcher.core.adaptive import Adaptive, AdaptiveDocument
from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS, LIVE_KEYS, Control
from dispatcher.core.effective import PARAMETER, shown
from dispatcher.core.errors import problems
from dispatcher.core.topology import DEFAULT, Pool

ADAPTIVE = "adaptive"
ADAPTIVE_KEYS = tuple(f"{ADAPTIVE}.{key}" for key in AdaptiveDocument.model_fields)
"""A pool's adaptive settings, as `set` and `unset` name them (``adaptive.decrease``)."""
ERRORS = f"{ADAPTIVE}.errors"


def pool_values(assignments: Mapping[str, str]) -> dict[str, Any]:
    """``KEY=VALUE`` of a pool as the values to write; a usage error naming a key or value it refuses."""
    found: dict[str, Any] = {}
    for key, text in assignments.items():
        if key == ADAPTIVE:
            found[key] = _adaptive_off(text)
            continue
        if key not in ADAPTIVE_KEYS:
            hint = "; MAX and pause: set-max, pause, resume" if key in LIVE_KEYS else ""
            raise UsageError(
                f"{key}: a pool has no such setting (pool settings: {ADAPTIVE},"
                f" {', '.join(ADAPTIVE_KEYS)}{hint})"
            )
        value = [name.strip() for name in text.split(",")] if key == ERRORS else parsed(text)
        _check(key, value)
        found[key] = value
    if ADAPTIVE in found and len(found) > 1:
        raise UsageError(f"{ADAPTIVE}=false turns its settings off: give no {ADAPTIVE}.KEY beside it")
    return found


def _adaptive_off(text: str) -> bool:
    """``adaptive=false`` (its limit is MAX): the one value ``adaptive`` takes here."""
    if text.lower() != "false":
        raise UsageError(
            f"{ADAPTIVE}={text}: only adaptive=false (its limit is MAX); give its settings as"
            f" {', '.join(f'{each}=…' for each in ADAPTIVE_KEYS)},"
            " or `unset --pool NAME adaptive` for those in LANES"
        )
    return False


def _check(key: str, value: object) -> None:
    """Refuse a value the adaptive settings refuse, naming the key (the other settings aside)."""
    setting = key.removeprefix(f"{ADAPTIVE}.")
    document = {"errors": ["checked"], setting: value}
    try:
        AdaptiveDocument.model_validate(document)
    except ValidationError as error:
        raise UsageError(problems(error, lambda field: f"{ADAPTIVE}.{field}")) from None


def set_pool(document: dict[str, Any], pool: Pool, values: Mapping[str, Any]) -> None:
    """Write ``values`` into ``pools.NAME`` of ``document``: ``adaptive`` whole, or one of its keys.

    A key of ``adaptive`` changes the parameter's settings, or a copy of ``LANES``' (the
    parameter's replace them whole): the other settings stay as they were.
    """
    pools = document.get("pools")
    if not isinstance(pools, dict):
        pools = document["pools"] = {}
    entry = pools.get(pool.name)
    if not isinstance(entry, dict):
        entry = pools[pool.name] = {}
    if ADAPTIVE in values:
        entry[ADAPTIVE] = False
        return
    current = entry.get(ADAPTIVE)
    settings = dict(current) if isinstance(current, dict) else _configured(pool.adaptive)
    settings.update({key.removeprefix(f"{ADAPTIVE}."): value for key, value in values.items()})
    if "errors" not in settings:
        raise UsageError(
            f"pool {pool.name} has no adaptive settings to change: give {ERRORS}=NAME[,NAME...]"
            " too (the error names that mean throttled)"
        )
    entry[ADAPTIVE] = settings


def _configured(adaptive: Adaptive | None) -> dict[str, Any]:
    return {} if adaptive is None else adaptive.as_json()


def _settings_of(adaptive: Adaptive | None) -> dict[str, Any] | None:
    return None if adaptive is None else adaptive.as_json()


def _adaptive_text(adaptive: Adaptive | None) -> str:
    """``off``, or the settings: ``(errors A,B, min 1, decrease 0.5, cooldown_seconds 60)``."""
    if adaptive is None:
        return "off"
    said = [
        f"{key} {','.join(value) if key == 'errors' else format(value, 'g')}"
        for key, value in adaptive.as_json().items()
    ]
    return f"({', '.join(said)})"


def pool_settings(configured: Pool, steered: Pool, control: Control) -> dict[str, dict[str, Any]]:
    """Each of a pool's settings: the value the ticks use (``steered``), its source, the configured value."""
    entry = control.pools.get(configured.name)
    live = control if configured.name == DEFAULT else entry
    own = "environment" if configured.name == DEFAULT else "LANES"
    overridden = {
        "max_concurrency": live is not None and live.max_concurrency is not None,
        "paused": live is not None and live.paused is not None,
        ADAPTIVE: entry is not None and entry.adaptive is not None,
    }
    values: dict[str, tuple[object, object]] = {
        "max_concurrency": (steered.max_concurrency, configured.max_concurrency),
        "paused": (steered.paused, configured.paused),
        ADAPTIVE: (_settings_of(steered.adaptive), _settings_of(configured.adaptive)),
    }
    return {
        key: {
            "value": value,
            "source": PARAMETER if overridden[key] else (own if configured_value else "unset"),
            "configured": configured_value,
        }
        for key, (value, configured_value) in values.items()
    }


def pool_report(  # noqa: PLR0913 — the pool as configured and as steered, the parameter, where to say it
    configured: Pool,
    steered: Pool,
    control: Control,
    parameter: str,
    out: TextIO,
    *,
    as_json: bool,
) -> int:
    """A pool's MAX, pause and adaptive settings as the ticks will use them, each with its source."""
    settings = pool_settings(configured, steered, control)
    if as_json:
        document = {
            "parameter": parameter,
            "member": {"kind": "pool", "name": configured.name},
            "settings": settings,
            **control.document(),
        }
        out.write(json.dumps(document) + "\n")
        return 0
    said = []
    for key, setting in settings.items():
        if key == ADAPTIVE:
            value, configured_text = _adaptive_text(steered.adaptive), _adaptive_text(configured.adaptive)
        else:
            value, configured_text = shown(setting["value"]), shown(setting["configured"])
        note = f"; configured {configured_text}" if setting["source"] == PARAMETER else ""
        said.append(f"{key} {value} ({setting['source']}{note})")
    out.write(
        f"pool {configured.name}: {', '.join(said)}"
        f" (parameter {parameter}; ticks see it within {CONTROL_MAX_AGE_SECONDS} s)\n"
    )
    return 0
