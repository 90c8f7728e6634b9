"""Live control: the limit and the pause switch an operator changes without a deploy.

The control parameter is an SSM String parameter holding JSON such as
``{"max_concurrency": 8, "paused": false}``; each key is optional and overrides the
function's environment. Parsing is pure, so the same rules serve the dispatcher (which
reads it on every tick) and the CLI (which reads, modifies and writes it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import GenericAlias
from typing import Any, TypeVar

from pydantic import Field, ValidationError, field_validator

from dispatcher.core.errors import ConfigurationError, error_keys, problems
from dispatcher.core.kinds import KINDS, Kind, kind_of
from dispatcher.core.overrides import Override, PoolOverride
from dispatcher.core.topology import DEFAULT, Member, Pool, Topology

CONTROL_MAX_AGE_SECONDS = 5
"""How long a read of the parameter is reused (Powertools' own default would be 300 s)."""
LIVE_KEYS = ("max_concurrency", "paused")
"""Every member's keys: its MAX and its pause (`set-max`, `pause`, `resume`)."""


_SECTIONS = {kind.plural: GenericAlias(dict, (str, kind.override)) for kind in KINDS}
"""Each kind's section of the parameter (``lanes``, ``gates``): member name → its kind's override."""


class Control(Override):
    """The operator's overrides; a key left out keeps the environment's (or ``LANES``') value.

    The top-level keys steer pool ``default``; ``pools`` and each kind's section (``lanes``,
    ``gates``: `Kind.plural`) steer those named in ``LANES``.
    """

    pools: dict[str, PoolOverride] = Field(default_factory=dict)
    # A field per kind of member, as its registration says (`Kind.plural`, `Kind.override`).
    __annotations__.update(_SECTIONS)
    locals().update({section: Field(default_factory=dict) for section in _SECTIONS})

    @field_validator("pools", *_SECTIONS, mode="before")
    @classmethod
    def _entries(cls, value: Any) -> Any:
        """An entry given as any kind of override (a plain `Override`) is read as its section's kind's."""
        if isinstance(value, dict):
            return {
                key: entry.model_dump(exclude_none=True) if isinstance(entry, Override) else entry
                for key, entry in value.items()
            }
        return value

    def section(self, kind: Kind) -> Mapping[str, Override]:
        """Each member of ``kind`` the parameter names → its overrides."""
        entries: Mapping[str, Override] = getattr(self, kind.plural)
        return entries

    def document(self) -> dict[str, Any]:
        """Only the keys that are set (no empty ``pools`` nor member sections)."""
        return {key: value for key, value in self.model_dump(exclude_none=True).items() if value != {}}

    def as_json(self) -> str:
        """The parameter's value: only the keys that are set, in a stable order."""
        return json.dumps(self.document(), sort_keys=True)


def parse_document(name: str, value: str) -> dict[str, Any]:
    """The parameter's value as a JSON object, its keys not yet checked; else a ``ConfigurationError``."""
    try:
        document: Any = json.loads(value)
    except ValueError as error:
        raise ConfigurationError(f"control parameter {name} is not JSON: {error}") from error
    if not isinstance(document, dict):
        raise ConfigurationError(
            f'control parameter {name} must be a JSON object like {{"max_concurrency": 5, "paused": false}}'
        )
    return document


def parse_control(name: str, value: str) -> Control:
    """The parameter's value as a ``Control``; a ``ConfigurationError`` naming ``name`` if it is malformed."""
    return checked_control(name, parse_document(name, value))


SECTIONS = {"pools": "pool", **{kind.plural: kind.name for kind in KINDS}}
"""The parameter's sections of named members, and the kind of member each steers."""

Key = tuple[str, ...]
"""A key of the parameter, as its path: ``("lanes", "backfill", "max_per_group")``."""


def _unset(key: Key) -> tuple[str, str, str | None]:
    """What removes a malformed ``key``: (kind, member, its key; None: the member's whole entry)."""
    head, *rest = key
    if head not in SECTIONS or not rest:
        return "pool", DEFAULT, head
    kind, name = SECTIONS[head], rest[0]
    match rest[1:]:
        case []:
            return kind, name, None
        case ["adaptive", setting, *_] if setting != "errors":
            return kind, name, f"adaptive.{setting}"
        case [setting, *_]:
            return kind, name, setting
    raise AssertionError(key)  # pragma: no cover — the cases above take every key


def mend_commands(keys: Sequence[Key]) -> tuple[str, ...]:
    """The commands that mend malformed ``keys``: a `dispatcher unset` for each member, removing them.

    What is configured (or a setting's default) applies again once they are gone. A key of
    pool ``default`` is at the top level, but for ``adaptive`` (``pools.default.adaptive``);
    a member's entry that is not an object goes whole; a malformed ``adaptive.errors``
    takes the whole ``adaptive`` with it (the settings can't be without their errors).
    """
    members: dict[tuple[str, str], list[str | None]] = {}
    for key in keys:
        kind, name, setting = _unset(key)
        members.setdefault((kind, name), []).append(setting)
    commands = []
    for (kind, name), settings in members.items():
        said = [] if None in settings else list(dict.fromkeys(setting for setting in settings if setting))
        # Without its settings, adaptive's own keys go with it.
        said = [key for key in said if not (key.startswith("adaptive.") and "adaptive" in said)]
        commands.append(" ".join(["dispatcher unset", f"--{kind} {name}", *said]))
    return tuple(commands)


class ControlError(ConfigurationError):
    """A control parameter the ticks can't use: its malformed keys, each with the command that mends it."""

    def __init__(self, name: str, problem: str, keys: Sequence[Key]) -> None:
        self.keys = tuple(dict.fromkeys(keys))
        """The keys that are wrong (none: the whole value is)."""
        self.mending = mend_commands(self.keys)
        """A command for each member: run them all, and the parameter is sound again."""
        self.problem = f"control parameter {name}{problem}"
        """What is wrong, without how to mend it."""
        advice = f"; mend it: {'; '.join(self.mending)}" if self.mending else ""
        super().__init__(f"{self.problem}{advice}")


def checked_control(name: str, document: dict[str, Any]) -> Control:
    """A JSON object as a ``Control``; a `ControlError` naming ``name`` and each malformed key."""
    try:
        return Control.model_validate(document)
    except ValidationError as error:
        found = problems(error, lambda field: field or "value")
        raise ControlError(name, f" is malformed: {found}", error_keys(error)) from error


def stale_keys(topology: Topology, control: Control | None) -> tuple[str, ...]:
    """The control parameter's keys that name a pool, lane or gate ``topology`` doesn't have.

    A *stale* key: its member was removed from ``LANES`` (say, paused, then taken out and
    redeployed). It steers nothing, so it is ignored rather than stopping every tick; the
    tick names it in a warning, ``status`` shows it and ``dispatcher forget`` removes it.
    Each as ``lanes.<name>`` (``pools.``, ``gates.``), in the parameter's order.
    """
    if control is None:
        return ()
    pool_names = {pool.name for pool in topology.pools}
    stale = [f"pools.{pool}" for pool in control.pools if pool not in pool_names]
    for kind in KINDS:
        names = topology.names(kind.member)
        stale += [f"{kind.plural}.{member}" for member in control.section(kind) if member not in names]
    return tuple(stale)


def steer(topology: Topology, control: Control | None, name: str | None) -> Topology:
    """``topology`` with the control parameter's overrides: each pool's, lane's and gate's MAX and pause.

    A key naming what the topology doesn't have is stale and steers nothing (`stale_keys`).
    ``pools.default``, or a lane MAX for a lane whose state machine another lane starts, is
    a `ConfigurationError` naming the parameter and the key.
    """
    if control is None or name is None:
        return topology
    default = control.pools.get(DEFAULT)
    misplaced = [] if default is None else [key for key in LIVE_KEYS if getattr(default, key) is not None]
    if misplaced:
        raise ControlError(
            name,
            ": pools.default: pool default is steered by the top-level keys"
            " (pools.default takes only adaptive)",
            [("pools", DEFAULT, key) for key in misplaced],
        )
    pools = []
    for pool in topology.pools:
        override = control if pool.name == DEFAULT else control.pools.get(pool.name, PoolOverride())
        pools.append(_adapting(_overridden(pool, override), control.pools.get(pool.name)))
    members = tuple(_steered(topology, member, control, name) for member in topology.members)
    return replace(topology, pools=tuple(pools), members=members)


def _steered(topology: Topology, member: Member, control: Control, name: str) -> Member:
    """One member with its overrides; a MAX for a member that can't be counted apart is an error."""
    kind = kind_of(member.kind)
    override = control.section(kind).get(member.name) or kind.override()
    if override.max_concurrency is not None and not topology.has_own_counts(member):
        raise ControlError(
            name,
            f": {kind.plural}.{member.name}.max_concurrency: another {kind.name} starts"
            f" the same state machine, so this {kind.name}'s RUNNING can't be told apart",
            [(kind.plural, member.name, "max_concurrency")],
        )
    return _shared(_overridden(member, override), kind, override)


Limited = TypeVar("Limited", Pool, Member)


def _overridden(limited: Limited, override: Override) -> Limited:
    return replace(
        limited,
        max_concurrency=(
            limited.max_concurrency if override.max_concurrency is None else override.max_concurrency
        ),
        paused=limited.paused if override.paused is None else override.paused,
    )


def _adapting(pool: Pool, override: PoolOverride | None) -> Pool:
    """``pool`` with the parameter's adaptive settings: replaced, or turned off (``false``)."""
    if override is None or override.adaptive is None:
        return pool
    adaptive = None if override.adaptive is False else override.adaptive.settings()
    return replace(pool, adaptive=adaptive)


def _shared(member: Member, kind: Kind, override: Override) -> Member:
    """``member`` with the overrides of its kind's settings (how it shares its slots, …)."""
    changes = {key: value for key in kind.settings if (value := getattr(override, key)) is not None}
    return replace(member, **changes)


def max_source(control: Control | None, name: str | None) -> str:
    """Where pool ``default``'s MAX comes from: the parameter's name when it sets one, else "environment"."""
    if control is None or name is None or control.max_concurrency is None:
        return "environment"
    return name
