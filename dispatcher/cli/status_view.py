"""What `dispatcher status` found, and its text: the top-level row, pools, lanes, gates, settings, stale keys.

Each lane's and gate's settings are shown with their source (`dispatcher.core.effective`),
and a control parameter the ticks can't read is shown first, with how to mend it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from dispatcher.cli.kind_status import KindStatus, MemberRow, limit, yes
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
    executions: int = 0
    """Its RUNNING executions (``running`` is in slots: a job's size each)."""
    reserved: dict[str, Any] | None = None
    """The large job its freed slots are kept for: lane, name, slots, since (None: none)."""


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
    executions: int = 0
    """Pool default's RUNNING executions (``running`` is in slots)."""
    pools: tuple[PoolStatus, ...] = ()
    kinds: tuple[KindStatus, ...] = ()
    """Every kind's members (`STATUS_KINDS`' order: lanes first), each under its kind's key in ``--json``."""
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
        yes(status.paused),
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
                *([limit(pool.limit)] if adaptive else []),
                yes(pool.paused),
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
        key: value
        for key, value in document.items()
        if key not in ("limit", "adaptive", "reserved") or value is not None
    }


def status_document(status: Status) -> dict[str, Any]:
    """``status --json``: top-level keys (``limit``, ``adaptive`` when pool default adapts), every entry."""
    document: dict[str, Any] = {}
    for each in fields(status):
        value = getattr(status, each.name)
        if each.name == "kinds":
            document.update(_members_document(value))
        elif each.name == "pools":
            document["pools"] = [_pool_document(pool) for pool in value]
        elif each.name == "removed":
            document["removed"] = [asdict(removed) for removed in value]
        else:
            document[each.name] = value
    return _without_unset(document)


def _members_document(kinds: Iterable[KindStatus], pool: str | None = None) -> dict[str, Any]:
    """Each kind's members (those of ``pool``, if given) under its key (``lanes``, ``gates``)."""
    return {
        kind.kind.plural: [
            asdict(member) for member in (kind.members if pool is None else kind.of_pool(pool))
        ]
        for kind in kinds
    }


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
    if any(member.settings for kind in status.kinds for member in kind.members):
        parts.append(settings_table(status.kinds))
    if status.stale_keys:
        parts.append(_stale(status.stale_keys))
    if status.removed:
        parts.append(removed_table(status.removed))
    return "\n\n".join(parts)


def _member_tables(status: Status) -> list[str]:
    """The pools' table and each kind's, when there is more than pool and lane ``default``."""
    members = sum(len(kind.members) for kind in status.kinds)
    if not (members > 1 or len(status.pools) > 1 or status.stale_keys):
        return []
    return [_pools(status.pools), *_kind_tables(status.kinds)]


def _kind_tables(kinds: Iterable[KindStatus], pool: str | None = None) -> list[str]:
    """Each kind's table (of ``pool``'s members, if given): the primary kind's always, others' if any."""
    tables = []
    for kind in kinds:
        members = kind.members if pool is None else kind.of_pool(pool)
        if members or kind.kind.primary:
            tables.append(kind.table(members))
    return tables


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
    """One configured pool's or member's entry (for ``--json``) and its rows as text.

    A pool's text shows its row, then the rows of its members, kind after kind.
    """
    if kind == "pool":
        return _pool_status(status, next(pool for pool in status.pools if pool.name == name))
    found = next(each for each in status.kinds if each.kind.name == kind)
    member = next(each for each in found.members if each.name == name)
    return asdict(member), _with_settings(found.table((member,)), [(found.kind.name, member)])


def _pool_status(status: Status, pool: PoolStatus) -> tuple[dict[str, Any], str]:
    """A pool's entry (with its members') and its rows, then its members' rows."""
    text = "\n\n".join([_pools((pool,)), *_kind_tables(status.kinds, pool.name)])
    document = {**_pool_document(pool), **_members_document(status.kinds, pool.name)}
    members = [(kind.kind.name, member) for kind in status.kinds for member in kind.of_pool(pool.name)]
    return document, _with_settings(text, members)


def _with_settings(text: str, members: Sequence[tuple[str, MemberRow]]) -> str:
    return text if not any(member.settings for _, member in members) else f"{text}\n\n{_settings(members)}"


def settings_table(kinds: Iterable[KindStatus]) -> str:
    """A row per setting that is set anywhere: member, key, the value the ticks use, source, configured."""
    return _settings([(kind.kind.name, member) for kind in kinds for member in kind.members])


def _settings(members: Sequence[tuple[str, MemberRow]]) -> str:
    return settings_text(
        (f"{kind} {member.name}", key, setting)
        for kind, member in members
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
