"""What `dispatcher status` found, and its text: the top-level row, pools, lanes, gates, settings, stale keys.

Each lane's and gate's settings are shown with their source (`dispatcher.core.effective`),
and a control parameter the ticks can't read is shown first, with how to mend it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from dispatcher.cli.output import age, table
from dispatcher.core.effective import shown


@dataclass(frozen=True)
class PoolStatus:
    """One pool: its MAX, RUNNING across its lanes' state machines and inside its gates, and free slots."""

    name: str
    max_concurrency: int
    running: int
    free: int
    paused: bool
    limit: int | None = None
    """An adaptive pool's limit L as kept (None: it doesn't adapt; its limit is MAX)."""
    adaptive: dict[str, Any] | None = None
    """Its adaptive settings, as the contract spells them (None: it doesn't adapt)."""


@dataclass(frozen=True)
class LaneStatus:
    """One lane: its queue and dead letters (and its own MAX, None: its pool's alone)."""

    name: str
    pool: str
    priority: int
    queued: int
    in_flight: int
    dead_letters: int
    paused: bool
    max_concurrency: int | None
    settings: dict[str, Any] = field(default_factory=dict)
    """Each of its settings: the value the ticks use, its source and the configured value."""


@dataclass(frozen=True)
class GateStatus:
    """One gate: who is inside (as the dispatcher counts them), who waits (its requests), its dead letters."""

    name: str
    pool: str
    inside: int
    waiting: int
    paused: bool
    max_concurrency: int | None
    """The gate's own MAX (None: its pool's alone)."""
    dead_letters: int
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RemovedStatus:
    """A lane or gate no longer in ``LANES``: nothing receives from its queue, where its jobs wait."""

    member: str
    """``lanes.<name>`` or ``gates.<name>``."""
    queue_url: str
    dead_letter_queue_url: str
    queued: int | None
    """Jobs (visible and in flight) on its queue; None: the queue can't be read (deleted, say)."""
    dead_letters: int | None


@dataclass(frozen=True)
class Status:
    """How the dispatcher stands right now: top-level keys are pool and lane ``default``."""

    max_concurrency: int
    paused: bool
    running: int
    free: int
    queued: int
    in_flight: int
    dead_letters: int
    oldest_running_seconds: float | None
    max_from: str
    limit: int | None = None
    """Pool default's limit L, when it adapts."""
    adaptive: dict[str, Any] | None = None
    pools: tuple[PoolStatus, ...] = ()
    lanes: tuple[LaneStatus, ...] = ()
    gates: tuple[GateStatus, ...] = ()
    stale_keys: tuple[str, ...] = ()
    """Control parameter keys naming a pool, lane or gate that isn't configured: ignored by the ticks."""
    control_problem: str | None = None
    """Why the control parameter can't be read (every tick stops on it): the rest is without it."""
    removed: tuple[RemovedStatus, ...] = ()
    """Members the ticks recorded that are no longer in ``LANES``, and what waits on their queues."""


HEADERS = [
    "MAX",
    "PAUSED",
    "RUNNING",
    "FREE",
    "QUEUED",
    "IN FLIGHT",
    "DEAD LETTERS",
    "OLDEST RUNNING",
]


def _summary(status: Status) -> str:
    """The top-level row (pool and lane ``default``): a header and one row, right-aligned."""
    headers = HEADERS if status.limit is None else ["MAX", "LIMIT", *HEADERS[1:]]
    row = [
        str(status.max_concurrency),
        *([] if status.limit is None else [str(status.limit)]),
        _yes(status.paused),
        str(status.running),
        str(status.free),
        str(status.queued),
        str(status.in_flight),
        str(status.dead_letters),
        age(status.oldest_running_seconds),
    ]
    widths = [max(len(header), len(cell)) for header, cell in zip(headers, row, strict=True)]
    lines = [
        "  ".join(cell.rjust(width) for cell, width in zip(cells, widths, strict=True))
        for cells in (headers, row)
    ]
    return "\n".join(line.rstrip() for line in lines)


def _pools(pools: tuple[PoolStatus, ...]) -> str:
    adaptive = any(pool.limit is not None for pool in pools)
    return table(
        ["POOL", "MAX", *(["LIMIT"] if adaptive else []), "PAUSED", "RUNNING", "FREE"],
        [
            [
                pool.name,
                str(pool.max_concurrency),
                *([_max(pool.limit)] if adaptive else []),
                _yes(pool.paused),
                str(pool.running),
                str(pool.free),
            ]
            for pool in pools
        ],
    )


def _pool_document(pool: PoolStatus) -> dict[str, Any]:
    """A pool's entry: ``limit`` and ``adaptive`` only when it adapts (the other keys as they were)."""
    return _without_unset(asdict(pool))


def _without_unset(document: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value for key, value in document.items() if key not in ("limit", "adaptive") or value is not None
    }


def status_document(status: Status) -> dict[str, Any]:
    """``status --json``: top-level keys (``limit``, ``adaptive`` when pool default adapts), every entry."""
    document = _without_unset(asdict(status))
    document["pools"] = [_pool_document(pool) for pool in status.pools]
    return document


def _lanes(lanes: tuple[LaneStatus, ...]) -> str:
    return table(
        ["LANE", "POOL", "PRIORITY", "MAX", "PAUSED", "QUEUED", "IN FLIGHT", "DEAD LETTERS"],
        [
            [
                lane.name,
                lane.pool,
                str(lane.priority),
                _max(lane.max_concurrency),
                _yes(lane.paused),
                str(lane.queued),
                str(lane.in_flight),
                str(lane.dead_letters),
            ]
            for lane in lanes
        ],
    )


def _gates_table(gates: tuple[GateStatus, ...]) -> str:
    return table(
        ["GATE", "POOL", "MAX", "PAUSED", "INSIDE", "WAITING", "DEAD LETTERS"],
        [
            [
                gate.name,
                gate.pool,
                _max(gate.max_concurrency),
                _yes(gate.paused),
                str(gate.inside),
                str(gate.waiting),
                str(gate.dead_letters),
            ]
            for gate in gates
        ],
    )


def _stale(keys: tuple[str, ...]) -> str:
    """One line per stale key, with the command that removes it."""
    lines = ["STALE CONTROL KEYS (ignored: no such member is configured)"]
    for key in keys:
        kind, _, name = key.partition(".")
        lines.append(f"{key}  remove it: dispatcher forget --{kind.removesuffix('s')} {name}")
    return "\n".join(lines)


def status_table(status: Status) -> str:
    """The status as aligned tables: the top-level row, then pools, lanes, gates, settings and stale keys.

    A control parameter the ticks can't read comes first: every tick stops until it is mended.
    """
    parts = [] if status.control_problem is None else [problem_text(status.control_problem)]
    parts += [_summary(status), *_member_tables(status)]
    members: tuple[LaneStatus | GateStatus, ...] = (*status.lanes, *status.gates)
    if any(each.settings for each in members):
        parts.append(settings_table(members))
    if status.stale_keys:
        parts.append(_stale(status.stale_keys))
    if status.removed:
        parts.append(removed_table(status.removed))
    return "\n\n".join(parts)


def _member_tables(status: Status) -> list[str]:
    """The pools', lanes' and gates' tables, when there is more than pool and lane ``default``."""
    if not (len(status.lanes) > 1 or len(status.pools) > 1 or status.gates or status.stale_keys):
        return []
    return [
        _pools(status.pools),
        _lanes(status.lanes),
        *([_gates_table(status.gates)] if status.gates else []),
    ]


def removed_table(removed: tuple[RemovedStatus, ...]) -> str:
    """A row per member gone from ``LANES``, with its jobs and dead letters, and what to do."""
    rows = [[each.member, _count(each.queued), _count(each.dead_letters), each.queue_url] for each in removed]
    hint = (
        "Nothing receives from these queues: add the member back to LANES to run its jobs (or move them),"
        " then `dispatcher forget --lane|--gate NAME` once they are empty."
    )
    return "NO LONGER IN LANES\n" + table(["MEMBER", "QUEUED", "DEAD LETTERS", "QUEUE"], rows) + "\n" + hint


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def member_status(status: Status, kind: str, name: str) -> tuple[dict[str, Any], str]:
    """One configured pool's, lane's or gate's entry (for ``--json``) and its rows as text.

    A pool's text shows its row, then the rows of its lanes and gates.
    """
    entries: dict[str, tuple[Any, ...]] = {"pool": status.pools, "lane": status.lanes, "gate": status.gates}
    found = next(entry for entry in entries[kind] if entry.name == name)
    if isinstance(found, LaneStatus):
        return asdict(found), _with_settings(_lanes((found,)), (found,))
    if isinstance(found, GateStatus):
        return asdict(found), _with_settings(_gates_table((found,)), (found,))
    return _pool_status(status, found)


def _pool_status(status: Status, pool: PoolStatus) -> tuple[dict[str, Any], str]:
    """A pool's entry (with its lanes' and gates') and its rows, then its lanes' and gates' rows."""
    lanes = tuple(lane for lane in status.lanes if lane.pool == pool.name)
    gates = tuple(gate for gate in status.gates if gate.pool == pool.name)
    text = "\n\n".join([_pools((pool,)), _lanes(lanes), *([_gates_table(gates)] if gates else [])])
    document = {
        **_pool_document(pool),
        "lanes": [asdict(lane) for lane in lanes],
        "gates": [asdict(gate) for gate in gates],
    }
    return document, _with_settings(text, (*lanes, *gates))


def _with_settings(text: str, members: tuple[LaneStatus | GateStatus, ...]) -> str:
    return text if not any(each.settings for each in members) else f"{text}\n\n{settings_table(members)}"


def _max(value: int | None) -> str:
    return "-" if value is None else str(value)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def settings_table(members: tuple[LaneStatus | GateStatus, ...]) -> str:
    """A row per setting that is set anywhere: member, key, the value the ticks use, source, configured."""
    return settings_text(
        (f"{'lane' if isinstance(member, LaneStatus) else 'gate'} {member.name}", key, setting)
        for member in members
        for key, setting in member.settings.items()
    )


def settings_text(entries: Iterable[tuple[str, str, Mapping[str, Any]]]) -> str:
    """The settings table (`status`, `info`): (member, key, `Setting.as_json`) a row."""
    rows = [
        [label, key, shown(setting["value"]), setting["source"], shown(setting["configured"])]
        for label, key, setting in entries
    ]
    return table(["SETTING OF", "KEY", "VALUE", "SOURCE", "CONFIGURED"], rows)


def problem_text(problem: str) -> str:
    """A control parameter the ticks can't read: what is wrong, that ticks stop, and how to mend it."""
    return (
        f"CONTROL PARAMETER BROKEN: every tick stops (nothing is received) until it is mended.\n"
        f"{problem}\nBelow: what is configured, without the parameter."
    )
