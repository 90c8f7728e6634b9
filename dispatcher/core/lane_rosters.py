"""A tenant lane's roster, packed and kept: what it costs is a few writes a round, not two an execution.

A lane that counts by message group keeps an entry per execution it started until the
execution ends (`dispatcher.core.rosters`). Written one item an entry, that was a write to
enter and a delete to leave, and every tick read the whole roster back. Here:

- **Packed**: a round's entries of one lane are items of at most `PACK_LIMIT`, as its starts
  are packed in the ledger. An entry is known by its pack and its place in it (its ``key``).
- **Left, in one item a tick**: the entries that left in a tick are named in one *gone* item
  (pack → places). A pack whose every entry left is deleted, and a gone item once every
  pack it names is.
- **Kept**: the keeper keeps the roster in memory (`KeptRoster`) and reads it back only when
  someone else may have written it since: a *head* item names the version the roster was
  last read at; each tick compares it (one small read), and a keeper that reads the roster
  writes a new one before it writes anything else.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dispatcher.core.batching import chunks
from dispatcher.core.rosters import RosterEntry
from dispatcher.core.tenants import Hold

PACK_LIMIT = 25
"""Entries a pack holds at most (a round's of one lane fit four)."""
PLACE = "|"
"""Between a pack's key and an entry's place in it (no execution name holds it)."""


def pack_key(recorded_at: float, first: str, write: str) -> str:
    """The key of a pack: when its entries were recorded, the first one's name, and its write's own token.

    The time and the name alone are not unique: a round whose first job didn't start
    records it again the next tick, and a clock that stood still (or stepped back) gives
    that tick the same reading. Its pack would then replace the earlier one whole, and the
    executions it held would stop counting in their groups. ``write`` (unique to one round's
    write, as the ledger's) keeps the two apart.
    """
    return f"{recorded_at:017.6f}#{first}#{write}"


def packed(entries: Iterable[RosterEntry], *, write: str) -> list[RosterEntry]:
    """Entries with their keys: packed by member and moment recorded, `PACK_LIMIT` a pack, in order.

    ``write``: a token unique to this write (`pack_key`).
    """
    by_pack: dict[tuple[str, float], list[RosterEntry]] = {}
    for entry in entries:
        by_pack.setdefault((entry.member, entry.recorded_at), []).append(entry)
    keyed: list[RosterEntry] = []
    for group in by_pack.values():
        for chunk in chunks(group, PACK_LIMIT):
            key = pack_key(chunk[0].recorded_at, chunk[0].name, write)
            keyed += [
                entry.model_copy(update={"key": f"{key}{PLACE}{place}"}) for place, entry in enumerate(chunk)
            ]
    return keyed


def pack_of(entry: RosterEntry) -> tuple[str, int] | None:
    """An entry's pack and place (None: an item of its own, an older release's)."""
    pack, found, place = entry.key.rpartition(PLACE)
    return (pack, int(place)) if found else None


@dataclass(frozen=True)
class Leaving:
    """What the roster writes when entries leave: one gone item, and the items it deletes."""

    gone: dict[str, tuple[int, ...]]
    """Pack → the places of its entries that left (written in one gone item; empty: none written)."""
    delete: tuple[str, ...]
    """Keys of items to delete: packs whose every entry left, gone items they outlived, single entries."""


@dataclass
class KeptRoster:
    """A lane's roster as its keeper keeps it: its entries, its packs, its gone items and its holds."""

    version: str
    """The head's version it was read at (or has written since)."""
    entries: dict[str, RosterEntry] = field(default_factory=dict)
    """Key → entry, of those still holding a place."""
    packs: dict[str, set[int]] = field(default_factory=dict)
    """Pack → the places of its entries still holding a place (a pack of none is deleted)."""
    gone: dict[str, set[str]] = field(default_factory=dict)
    """Gone item → the packs it names that are not deleted yet."""
    holds: dict[str, Hold] = field(default_factory=dict)
    """Group → its job held for the group's limit."""

    @classmethod
    def read(
        cls,
        version: str,
        entries: Iterable[RosterEntry],
        gone: Mapping[str, Mapping[str, Sequence[int]]],
        holds: Iterable[Hold] = (),
    ) -> KeptRoster:
        """The roster its items say: the packs' entries less the places a gone item names."""
        kept = cls(version, holds={hold.group: hold for hold in holds})
        left = {
            (pack, place) for named in gone.values() for pack, places in named.items() for place in places
        }
        for entry in entries:
            where = pack_of(entry)
            if where is not None:
                kept.packs.setdefault(where[0], set())
                if where in left:
                    continue
                kept.packs[where[0]].add(where[1])
            kept.entries[entry.key] = entry
        kept.gone = {key: set(named) & kept.packs.keys() for key, named in gone.items()}
        return kept

    def enter(self, entries: Iterable[RosterEntry]) -> None:
        """Entries written (`packed`): they hold places from now on."""
        for entry in entries:
            where = pack_of(entry)
            if where is not None:
                self.packs.setdefault(where[0], set()).add(where[1])
            self.entries[entry.key] = entry

    def _places_of(self, entries: Iterable[RosterEntry]) -> tuple[dict[str, set[int]], list[str]]:
        """Of kept entries: each pack's places they hold, and the keys of those kept unpacked."""
        gone: dict[str, set[int]] = {}
        unpacked: list[str] = []
        for entry in entries:
            if entry.key not in self.entries:
                continue
            where = pack_of(entry)
            if where is None:
                unpacked.append(entry.key)
            else:
                gone.setdefault(where[0], set()).add(where[1])
        return gone, unpacked

    def leave(self, entries: Iterable[RosterEntry], gone_key: str) -> Leaving:
        """Entries whose executions left: the gone item ``gone_key`` to write and the items to delete.

        Call `left` once they are written: until then the roster is as it was.
        """
        gone, delete = self._places_of(entries)
        emptied = [pack for pack, places in gone.items() if not self.packs.get(pack, set()) - places]
        delete += emptied
        # A gone item goes once every pack it names is deleted (one read back may name none left).
        outlived = [key for key, packs in self.gone.items() if not packs - set(emptied)]
        delete += outlived
        kept = {pack: places for pack, places in gone.items() if pack not in emptied}
        return Leaving({pack: tuple(sorted(places)) for pack, places in kept.items()}, tuple(delete))

    def left(self, entries: Iterable[RosterEntry], gone_key: str, leaving: Leaving) -> None:
        """Entries left, as `leave` planned, and its writes were made."""
        for entry in entries:
            self.entries.pop(entry.key, None)
        for pack, places in leaving.gone.items():
            self.packs[pack] -= set(places)
        deleted = set(leaving.delete)
        for pack in [pack for pack in self.packs if pack in deleted]:
            del self.packs[pack]
        self.gone = {key: packs - deleted for key, packs in self.gone.items() if key not in deleted}
        if leaving.gone:
            self.gone[gone_key] = set(leaving.gone)
