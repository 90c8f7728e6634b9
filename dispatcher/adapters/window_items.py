"""Reading the state table's partition: each kind of item by its own codec, into one window.

One Query a tick reads every item of the dispatcher's partition (`StartLedgerTable.window`):
start records, ends, voids, the members' queues, the pools' limits and sized executions,
and the pending cancellations. Each kind's item is read by its codec (`CODECS`); `read_items` gathers
them into the `StateWindow` the tick hands out, each phase its part.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatcher.adapters.limit_items import LIMIT_KIND, read_limit
from dispatcher.adapters.member_items import MEMBERS_KIND, read_members
from dispatcher.adapters.size_items import SIZES_KIND, read_reservation, read_sizes
from dispatcher.adapters.state_items import (
    CANCEL_KIND,
    ENDED_KIND,
    ENDS_KIND,
    STARTS_KIND,
    VOID_KIND,
    machine_of,
    packed_starts,
    read_pending,
    single_start,
)
from dispatcher.core.adaptive import LimitState
from dispatcher.core.counting import LedgerStart, StateWindow
from dispatcher.core.events import EndedExecution
from dispatcher.core.sizes import Reservation, SizeEntry


@dataclass
class _Read:
    """What a run of the table's items held, item by item."""

    starts: list[LedgerStart] = field(default_factory=list)
    ended: list[EndedExecution] = field(default_factory=list)
    void: set[str] = field(default_factory=set)
    pending: list[Mapping[str, Any]] = field(default_factory=list)
    members: dict[str, dict[str, str]] | None = None
    limits: dict[str, LimitState] = field(default_factory=dict)
    sizes: dict[str, dict[str, SizeEntry]] = field(default_factory=dict)
    reservations: dict[str, Reservation] = field(default_factory=dict)


def _sizes_item(item: Mapping[str, Any], _own: str, read: _Read) -> None:
    pool, entries = read_sizes(item)
    read.sizes.setdefault(pool, {}).update(entries)
    reservation = read_reservation(item)
    if reservation is not None:
        read.reservations[pool] = reservation


def _members_item(item: Mapping[str, Any], _own: str, read: _Read) -> None:
    read.members = read_members(item)


def _limit_item(item: Mapping[str, Any], _own: str, read: _Read) -> None:
    pool, state = read_limit(item)
    read.limits[pool] = state


def _starts_item(item: Mapping[str, Any], own: str, read: _Read) -> None:
    read.starts.extend(packed_starts(item, own))


def _ends_item(item: Mapping[str, Any], own: str, read: _Read) -> None:
    names, errors = item["names"]["L"], item.get("errors", {}).get("M", {})
    read.ended.extend(
        EndedExecution(
            name=name["S"],
            stopped_at=float(stop["N"]),
            state_machine_arn=machine,
            error=errors.get(name["S"], {}).get("S"),
        )
        for name, stop, machine in zip(
            names, item["stopped_at"]["L"], machine_of(item, len(names), own), strict=True
        )
    )


def _void_item(item: Mapping[str, Any], _own: str, read: _Read) -> None:
    read.void.update(item["keys"]["SS"])


def _ended_item(item: Mapping[str, Any], own: str, read: _Read) -> None:
    read.ended.append(
        EndedExecution(
            name=item["name"]["S"], stopped_at=float(item["stopped_at"]["N"]), state_machine_arn=own
        )
    )


def _cancel_item(item: Mapping[str, Any], _own: str, read: _Read) -> None:
    read.pending.append(item)


def _unkinded_item(item: Mapping[str, Any], own: str, read: _Read) -> None:
    """An item written before items had kinds: a resolved start's marker, or a single start."""
    if "resolved" in item:
        read.void.add(item["sk"]["S"])
    elif "name" in item:
        read.starts.append(single_start(item, own))


CODECS: Mapping[str | None, Callable[[Mapping[str, Any], str, _Read], None]] = {
    MEMBERS_KIND: _members_item,
    LIMIT_KIND: _limit_item,
    SIZES_KIND: _sizes_item,
    STARTS_KIND: _starts_item,
    ENDS_KIND: _ends_item,
    VOID_KIND: _void_item,
    ENDED_KIND: _ended_item,
    CANCEL_KIND: _cancel_item,
}
"""Each kind of item of the partition → how it is read (an item of another kind: `_unkinded_item`)."""


def read_items(items: Iterable[Mapping[str, Any]], own: str = "") -> StateWindow:
    """The window a run of the table's items holds: starts left out where a void names them.

    ``own``: the state machine that keys the partition (whose the records are that name none).
    Each item is read by its kind's codec (`CODECS`).
    """
    read = _Read()
    for item in items:
        CODECS.get(item.get("kind", {}).get("S"), _unkinded_item)(item, own, read)
    return StateWindow(
        starts=tuple(record for record in read.starts if record.sort_key not in read.void),
        ended=tuple(read.ended),
        void=frozenset(read.void),
        recorded=tuple(read.starts),
        cancellations=read_pending(read.pending),
        members=read.members,
        limits=read.limits,
        sizes=read.sizes,
        reservations=read.reservations,
    )
