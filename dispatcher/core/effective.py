"""Each lane's and gate's effective settings for sharing and waiting, and where each value comes from.

A lane's ``max_per_group``, ``fair_share`` and ``max_wait_seconds`` (a gate's
``max_per_group``) are set in ``LANES`` (lane default's by ``MAX_PER_GROUP``, ``FAIR_SHARE``
and ``MAX_WAIT_SECONDS``) and overridden live by the control parameter. `status`, `info`,
`set`, `unset` and `dispatcher local`'s banner show the value a tick uses with its source,
and the configured value an `unset` goes back to. Pure: no AWS here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dispatcher.core.control import Control
from dispatcher.core.kinds import kind_of
from dispatcher.core.overrides import Override
from dispatcher.core.topology import DEFAULT, Member, Topology

VARIABLES = {
    "max_per_group": "MAX_PER_GROUP",
    "fair_share": "FAIR_SHARE",
    "max_wait_seconds": "MAX_WAIT_SECONDS",
}
"""Lane default's variable for each key."""
PARAMETER = "parameter"
"""The source of a value the control parameter sets."""

Value = int | bool | None


@dataclass(frozen=True)
class Setting:
    """One key of one member: the value a tick uses, where it comes from, and what is configured."""

    kind: str
    """``lane`` or ``gate``."""
    member: str
    key: str
    value: Value
    source: str
    """``parameter``, ``LANES``, lane default's variable (``MAX_PER_GROUP``), or ``unset``."""
    configured: Value
    """The value without the parameter's override (what `unset` goes back to)."""

    def as_json(self) -> dict[str, object]:
        """The ``--json`` entry: value, source and configured value."""
        return {"value": self.value, "source": self.source, "configured": self.configured}


def keys_of(kind: str) -> tuple[str, ...]:
    """The keys a member of ``kind`` (``lane``, ``gate``) has (`Kind.settings`)."""
    return kind_of(kind).settings


def _unset(key: str) -> Value:
    return False if key == "fair_share" else None


def _configured_source(member: Member, key: str) -> str:
    if getattr(member, key) == _unset(key):
        return "unset"
    return VARIABLES[key] if kind_of(member.kind).primary and member.name == DEFAULT else "LANES"


def member_settings(member: Member, control: Control | None) -> tuple[Setting, ...]:
    """Every key of ``member`` (configured in ``LANES``, not yet steered), as a tick would use it."""
    kind = kind_of(member.kind)
    entries: Mapping[str, Override] = {} if control is None else getattr(control, kind.plural)
    override = entries.get(member.name, kind.override())
    found = []
    for key in keys_of(member.kind):
        configured: Value = getattr(member, key)
        overridden: Value = getattr(override, key)
        if overridden is not None:
            found.append(Setting(member.kind, member.name, key, overridden, PARAMETER, configured))
        else:
            found.append(
                Setting(
                    member.kind, member.name, key, configured, _configured_source(member, key), configured
                )
            )
    return tuple(found)


def settings(configured: Topology, control: Control | None) -> tuple[Setting, ...]:
    """Every member's keys that are set anywhere (left unset everywhere: not listed)."""
    return tuple(
        setting
        for member in configured.members
        for setting in member_settings(member, control)
        if setting.source != "unset"
    )


def shown(value: Value) -> str:
    """A value as the tables write it: ``3``, ``true``, ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
