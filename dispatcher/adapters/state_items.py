"""The state table's items of recent starts and ends: how records are packed, keyed and read back.

A member's roster (a gate's admissions, a tenant lane's starts) is items of its own
(`dispatcher.adapters.gate_items`).

Writes are packed, because DynamoDB bills a write unit per kilobyte *per item*: one
item holds a batch of starts recorded together (up to 25), one the ends an invocation
learned, one the starts that stopped counting (a *void*, naming their sort keys). A
start costs about a tenth of a write unit instead of one.

Keys: ``pk`` = ``recent-start#<the default lane's state machine ARN>``: every lane's
records are in the one partition, so a round's starts of twenty lanes are a few items,
not twenty (a dispatcher without lanes always used this key). A start's key is
``<written at, fixed width>#<name>#<write id>`` (the write id is unique to one round's
records, so a void never applies to a later start of the same name at the same clock
reading), and ``#<state machine name>`` after it for another state machine than the
key's (its ARN if in another account or region), so two machines' executions of one name
have keys of their own. An item whose
records are not all the key's machine's lists those machines (``machines``) and each
record's (``machine_of``: 0 the key's, *i* the *i*-th listed). ``sk``:
a batch of starts takes its first start's key, ends and voids
``<written at>#ends#<first name>`` and ``<written at>#void#<first name>`` (an
execution name can't contain ``#``), so one query reads the whole window. A void is
written after the starts it names, so it is in every window they are in.

A batch of starts also keeps each job's message group, for 15 days (Step Functions'
redrive window is 14): ``dispatcher rerun --restart`` finds it near the execution's
start date; a void doesn't touch it. The table's items of one record each (an older
release's: a start, a start marked ``resolved``, an ``ended``) are still read.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dispatcher.adapters.item_keys import number, sort_key, stored_time
from dispatcher.adapters.table import RECORD_LIFETIME_SECONDS, START_RECORD_LIFETIME_SECONDS
from dispatcher.core.batching import chunks
from dispatcher.core.counting import LedgerRequest, LedgerStart, latest_ends
from dispatcher.core.events import EndedExecution
from dispatcher.core.jobs import CANCELLATION_LIFETIME_SECONDS, Cancellations, GroupCancellation
from dispatcher.core.rerun import Origin

ENDED_KIND = "ended"
"""An older release's item of one end."""
STARTS_KIND, ENDS_KIND, VOID_KIND = "starts", "ends", "void"
PACK_LIMIT = 500
"""Records an item of ends or a void holds at most (≈ 40 KB: far below DynamoDB's 400 KB)."""
STARTS_PACK_LIMIT = 25
"""Starts an item holds at most (a few KB: the write units of a full item, no more)."""


NAME_KIND = "n"
"""An older release's item of one name's cancellation (and a name's, when its hour's item is full)."""
NAMES_KIND = "h"
"""An item of the names cancelled in one hour (a shard of them): ``names``, name → when."""
GROUP_KIND = "g"
CANCEL_KIND = "cancel"
PENDING_PREFIX = "~cancel#"
"""``~`` sorts after the digits every record's sort key begins with."""


def pending_key(lane: str, kind: str, value: str) -> str:
    """A pending cancellation's sort key (lane names hold no ``#``, so the lane is its first field)."""
    return f"{PENDING_PREFIX}{lane}#{kind}#{value}"


def read_pending(items: Iterable[Mapping[str, Any]]) -> dict[str, Cancellations]:
    """Each lane's pending cancellations in the items of one read of the partition."""
    names: dict[str, set[str]] = {}
    cancelled_at: dict[str, dict[str, float]] = {}
    groups: dict[str, dict[str, GroupCancellation]] = {}
    for item in items:
        lane, kind, value = item["sk"]["S"].removeprefix(PENDING_PREFIX).split("#", 2)
        if kind == NAMES_KIND:
            packed = {name: float(at["N"]) for name, at in item.get("names", {}).get("M", {}).items()}
            names.setdefault(lane, set()).update(packed)
            cancelled_at.setdefault(lane, {}).update(packed)
        elif kind == NAME_KIND:
            names.setdefault(lane, set()).add(value)
            expires_at = item.get("expires_at", {}).get("N")
            if expires_at is not None:  # written 14 days before it expires, to the second
                cancelled_at.setdefault(lane, {})[value] = float(expires_at) - CANCELLATION_LIFETIME_SECONDS
        elif kind == GROUP_KIND:
            before = float(item["before"]["N"])
            found = groups.setdefault(lane, {})
            if value not in found or found[value].before < before:
                found[value] = GroupCancellation(value, before, item.get("reason", {}).get("S", ""))
    return {
        lane: Cancellations(frozenset(names.get(lane, ())), groups.get(lane, {}), cancelled_at.get(lane, {}))
        for lane in {*names, *groups}
    }


def _optional_int(text: str | None) -> int | None:
    return None if text is None else int(text)


def partition(state_machine_arn: str) -> str:
    """The partition key of a dispatcher's recent starts and ends (its default lane's state machine)."""
    return f"recent-start#{state_machine_arn}"


def machine_suffix(state_machine_arn: str, own: str) -> str:
    """What a record's key adds for a state machine other than the key's (``own``).

    Its name, when it is in the key's account and region (names are unique there), else its ARN.
    """
    if state_machine_arn in ("", own):
        return ""
    prefix, _, name = state_machine_arn.rpartition(":stateMachine:")
    return "#" + (name if prefix == own.rpartition(":stateMachine:")[0] else state_machine_arn)


def ledger_starts_of(requests: Sequence[LedgerRequest], now: float, own: str) -> list[list[LedgerStart]]:
    """The ledger's starts of these executions now, each lane's apart, their keys known before writing.

    ``own``: the state machine that keys the partition.
    """
    now = stored_time(now)
    # Unique to this write: a void names exactly the starts it voids, never a later start
    # of the same name at the same clock reading (a clock that stood still, or stepped
    # back), which would then not count.
    write = uuid.uuid4().hex[:12]
    return [
        [
            LedgerStart(
                name=name,
                recorded_at=now,
                sort_key=f"{sort_key(now, name)}#{write}{machine_suffix(request.state_machine_arn, own)}",
                group=group,
                redrive_count=request.redrives.get(name),
                state_machine_arn=request.state_machine_arn or own,
                lane=request.lane,
                slots=request.slots.get(name, 1),
            )
            for name, group in request.groups.items()
        ]
        for request in requests
    ]


def _machines(arns: Sequence[str], own: str) -> dict[str, Any]:
    """The attributes that say whose each record is, when not all are the key's machine's."""
    others = list(dict.fromkeys(arn for arn in arns if arn not in ("", own)))
    if not others:
        return {}
    index = {arn: position for position, arn in enumerate(others, start=1)}
    return {
        "machines": {"L": [{"S": arn} for arn in others]},
        "machine_of": {"L": [{"N": str(index.get(arn, 0))} for arn in arns]},
    }


def machine_of(item: Mapping[str, Any], count: int, own: str) -> list[str]:
    """Whose each of an item's ``count`` records is."""
    if "machine_of" not in item:
        return [own] * count
    machines = [own, *(value["S"] for value in item["machines"]["L"])]
    return [machines[int(value["N"])] for value in item["machine_of"]["L"]]


def write_id(sort_key: str) -> str:
    """A start key's write id: its third field, before any machine's name ("": none, a test's key)."""
    return "".join(sort_key.split("#")[2:3])


def starts_item(partition_key: str, records: Sequence[LedgerStart], own: str = "") -> dict[str, Any]:
    """Starts recorded together (one moment, one write, distinct keys), as one item of the table."""
    first = records[0]
    item: dict[str, Any] = {
        "pk": {"S": partition_key},
        "sk": {"S": first.sort_key},
        "kind": {"S": STARTS_KIND},
        "recorded_at": number(first.recorded_at),
        "expires_at": {"N": str(int(first.recorded_at) + START_RECORD_LIFETIME_SECONDS)},
        "names": {"L": [{"S": record.name} for record in records]},
        "groups": {
            "L": [{"NULL": True} if record.group is None else {"S": record.group} for record in records]
        },
    }
    write = write_id(first.sort_key)
    if write:
        item["write"] = {"S": write}
    machines = _machines([record.state_machine_arn for record in records], own)
    return item | _by_name(records) | machines | _lanes(records)


def _by_name(records: Sequence[LedgerStart]) -> dict[str, Any]:
    """A pack's redrive counts and sizes, each a map by name (a name is in a round once a state machine)."""
    item: dict[str, Any] = {}
    redrives = {record.name: record.redrive_count for record in records if record.redrive_count is not None}
    if redrives:
        item["redrive_counts"] = {"M": {name: {"N": str(count)} for name, count in redrives.items()}}
    sized = {record.name: record.slots for record in records if record.slots > 1}
    if sized:
        # A job's size, kept for a re-run of it (the count keeps it in the pool's item).
        item["slots"] = {"M": {name: {"N": str(slots)} for name, slots in sized.items()}}
    return item


def _lanes(records: Sequence[LedgerStart]) -> dict[str, Any]:
    """Which lane started each record: ``lane`` when one lane did all, else ``lanes`` and ``lane_of``.

    A round's item mostly holds one lane's starts: its name once costs a few bytes.
    """
    names = list(dict.fromkeys(record.lane for record in records if record.lane is not None))
    if not names:
        return {}
    if len(names) == 1 and all(record.lane is not None for record in records):
        return {"lane": {"S": names[0]}}
    return _lanes_and_positions(records, names)


def _lanes_and_positions(records: Sequence[LedgerStart], names: Sequence[str]) -> dict[str, Any]:
    """Several lanes' records: the names once (``lanes``), each record's position in them (0: none)."""
    index = {name: position for position, name in enumerate(names, start=1)}
    return {
        "lanes": {"L": [{"S": name} for name in names]},
        "lane_of": {"L": [{"N": str(index.get(record.lane or "", 0))} for record in records]},
    }


def _lane_of(item: Mapping[str, Any], count: int) -> list[str | None]:
    """Which lane started each of an item's ``count`` records (None: not recorded)."""
    if "lane" in item:
        return [item["lane"]["S"]] * count
    if "lane_of" not in item:
        return [None] * count
    lanes: list[str | None] = [None, *(value["S"] for value in item["lanes"]["L"])]
    return [lanes[int(value["N"])] for value in item["lane_of"]["L"]]


def ends_item(
    partition_key: str, ended: Sequence[EndedExecution], now: float, own: str = ""
) -> dict[str, Any]:
    """Ends status change events reported (distinct executions), as one item of the table."""
    now = stored_time(now)
    return (
        _machines([end.state_machine_arn for end in ended], own)
        | {
            "pk": {"S": partition_key},
            "sk": {"S": sort_key(now, f"{ENDS_KIND}#{ended[0].name}")},
            "kind": {"S": ENDS_KIND},
            "recorded_at": number(now),
            "expires_at": {"N": str(int(now) + RECORD_LIFETIME_SECONDS)},
            "names": {"L": [{"S": end.name} for end in ended]},
            "stopped_at": {"L": [number(end.stopped_at) for end in ended]},
        }
        | _errors(ended)
    )


def _errors(ended: Sequence[EndedExecution]) -> dict[str, Any]:
    """The errors the failed ones ended with, by name (only when one did: an adaptive pool's signals)."""
    errors = {end.name: {"S": end.error} for end in ended if end.error}
    return {"errors": {"M": errors}} if errors else {}


def void_item(partition_key: str, records: Sequence[LedgerStart], now: float) -> dict[str, Any]:
    """The starts that stopped counting (ended, superseded, never started), as one item of the table."""
    now = stored_time(max(now, *(record.recorded_at for record in records)))
    return {
        "pk": {"S": partition_key},
        "sk": {"S": sort_key(now, f"{VOID_KIND}#{records[0].name}")},
        "kind": {"S": VOID_KIND},
        "recorded_at": number(now),
        "expires_at": {"N": str(int(now) + RECORD_LIFETIME_SECONDS)},
        "keys": {"SS": sorted({record.sort_key for record in records})},
    }


def packed_starts(item: Mapping[str, Any], own: str) -> list[LedgerStart]:
    """The start records a pack of a round's starts holds."""
    recorded_at = float(item["recorded_at"]["N"])
    redrives = item.get("redrive_counts", {}).get("M", {})
    sized = item.get("slots", {}).get("M", {})
    write = item.get("write", {}).get("S")
    suffix = "" if write is None else f"#{write}"
    names = item["names"]["L"]
    records = []
    for name_value, group_value, machine, lane in zip(
        names,
        item["groups"]["L"],
        machine_of(item, len(names), own),
        _lane_of(item, len(names)),
        strict=True,
    ):
        name = name_value["S"]
        records.append(
            LedgerStart(
                name=name,
                recorded_at=recorded_at,
                sort_key=sort_key(recorded_at, name) + suffix + machine_suffix(machine, own),
                group=group_value.get("S"),
                redrive_count=_optional_int(redrives.get(name, {}).get("N")),
                state_machine_arn=machine,
                lane=lane,
                slots=int(sized.get(name, {}).get("N", 1)),
            )
        )
    return records


def single_start(item: Mapping[str, Any], own: str) -> LedgerStart:
    """An older release's item of one start."""
    return LedgerStart(
        name=item["name"]["S"],
        recorded_at=float(item["recorded_at"]["N"]),
        sort_key=item["sk"]["S"],
        group=item.get("group", {}).get("S"),
        redrive_count=_optional_int(item.get("redrive_count", {}).get("N")),
        state_machine_arn=own,
    )


def item_origins(item: Mapping[str, Any], state_machine_arn: str, own: str) -> dict[str, Origin]:
    """Name → message group and lane of one state machine's starts an item holds (a batch, or one start)."""
    if "names" in item and "groups" in item:
        names = item["names"]["L"]
        found = zip(
            names,
            item["groups"]["L"],
            machine_of(item, len(names), own),
            _lane_of(item, len(names)),
            strict=True,
        )
        sized = item.get("slots", {}).get("M", {})
        return {
            name["S"]: Origin(group.get("S"), lane, int(sized.get(name["S"], {}).get("N", 1)))
            for name, group, machine, lane in found
            if ("S" in group or lane is not None) and machine == state_machine_arn
        }
    name, group = item.get("name", {}).get("S"), item.get("group", {}).get("S")
    if state_machine_arn != own or name is None or group is None:
        return {}
    return {name: Origin(group, None)}


def start_packs(records: Sequence[LedgerStart]) -> list[list[LedgerStart]]:
    """Records in the items that hold them: one per moment recorded and write, 25 at most, in order."""
    packs: dict[tuple[float, str], list[LedgerStart]] = {}
    for record in records:
        packs.setdefault((record.recorded_at, write_id(record.sort_key)), []).append(record)
    return [list(chunk) for pack in packs.values() for chunk in chunks(pack, STARTS_PACK_LIMIT)]


def end_packs(ended: Sequence[EndedExecution], own: str) -> list[list[EndedExecution]]:
    """Reported ends in the items that hold them: each execution once with its latest stop, 500 an item."""
    by_machine: dict[str, list[EndedExecution]] = {}
    for end in ended:
        by_machine.setdefault(end.state_machine_arn or own, []).append(end)
    latest: list[EndedExecution] = []
    for arn, ends in by_machine.items():
        errors = {end.name: end.error for end in sorted(ends, key=lambda end: end.stopped_at)}
        latest += [
            EndedExecution(name=name, stopped_at=at, state_machine_arn=arn, error=errors[name])
            for name, at in latest_ends(ends).items()
        ]
    return [list(chunk) for chunk in chunks(latest, PACK_LIMIT)]
