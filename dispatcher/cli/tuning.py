"""`dispatcher set` and `unset`: a lane's or gate's settings live, and the way back to what is configured.

``set --lane customers max_per_group=3 fair_share=true`` writes the control parameter's
``lanes.customers`` keys; ``unset --lane customers max_per_group`` removes the key, so the
value in ``LANES`` (lane default's variable) applies again. `unset` also takes back a
`set-max` or a pause (``max_concurrency``, ``paused``). Both print each setting the ticks
will use with its source, and both can mend a malformed parameter key by key.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from pydantic import ValidationError

from dispatcher.cli.args import AddCommand
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.errors import UsageError
from dispatcher.cli.members import add_member_options, chosen_member, member
from dispatcher.cli.parameter import (
    Document,
    change_control,
    control_needs,
    entry_of,
    steered_topology,
    target_of,
)
from dispatcher.core.control import CONTROL_MAX_AGE_SECONDS, Control, GateOverride, LaneOverride
from dispatcher.core.effective import keys_of, member_settings, shown
from dispatcher.core.errors import problems
from dispatcher.core.topology import DEFAULT, GATE, LANE, Member

LIVE_KEYS = ("max_concurrency", "paused")
"""What `set-max`, `pause` and `resume` write, for every member (and what `unset` takes back)."""


def _chosen(args: argparse.Namespace) -> tuple[str, str]:
    """(kind, name) of the member: lane default unless ``--pool``, ``--lane`` or ``--gate`` says."""
    return chosen_member(args) or (LANE, DEFAULT)


def _values(kind: str, assignments: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` words as the keys of a lane's or gate's entry; a usage error naming a bad one."""
    allowed = keys_of(kind)
    found: dict[str, Any] = {}
    for word in assignments:
        key, equals, text = word.partition("=")
        if not equals or not text:
            raise UsageError(f"{word!r}: give KEY=VALUE, e.g. max_per_group=3")
        if key not in allowed:
            hint = "; MAX and pause: set-max, pause, resume" if key in LIVE_KEYS else ""
            raise UsageError(
                f"{key}: a {kind} has no such setting ({kind} settings: {', '.join(allowed)}{hint})"
            )
        found[key] = _parsed(text)
    model = GateOverride if kind == GATE else LaneOverride
    try:
        model.model_validate(found)
    except ValidationError as error:
        raise UsageError(problems(error, lambda field: field or "value")) from None
    return found


def _parsed(text: str) -> object:
    """``3`` as 3, ``true``/``false`` as booleans, anything else as it is (for the model to refuse)."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(text)
    except ValueError:
        return text


def _report(
    args: argparse.Namespace, resources: Resources, parameter: str, control: Control, out: TextIO
) -> int:
    """Each setting of the member as the ticks will use it, with its source."""
    kind, name = _chosen(args)
    found = member(resources, kind, name)
    settings = member_settings(found, control) if isinstance(found, Member) else ()
    if args.json:
        document = {
            "parameter": parameter,
            "member": {"kind": kind, "name": name},
            "settings": {setting.key: setting.as_json() for setting in settings},
            **control.document(),
        }
        out.write(json.dumps(document) + "\n")
        return 0
    said = ", ".join(
        f"{setting.key} {shown(setting.value)} ({setting.source}"
        + (f"; configured {shown(setting.configured)})" if setting.source == "parameter" else ")")
        for setting in settings
    )
    out.write(
        f"{kind} {name}: {said or 'MAX and pause only'}"
        f" (parameter {parameter}; ticks see it within {CONTROL_MAX_AGE_SECONDS} s)\n"
    )
    return 0


def command_set(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Override a lane's or gate's settings live, in the control parameter."""
    kind, name = _chosen(args)
    member(resources, kind, name)  # an unknown name is a usage error
    values = _values(kind, args.assignments)
    target = (f"{kind}s", name)

    def change(current: Document) -> Document:
        entry_of(current, target).update(values)
        return current

    parameter, control = change_control(aws, resources, change, topology=resources.topology())
    return _report(args, resources, parameter, control, out)


def command_unset(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Remove keys from the control parameter: the configured value applies again."""
    kind, name = _chosen(args)
    member(resources, kind, name)
    allowed = (*LIVE_KEYS, *(keys_of(kind) if kind in (LANE, GATE) else ()))
    for key in args.keys:
        if key not in allowed:
            raise UsageError(f"{key}: a {kind} has no such key (keys: {', '.join(allowed)})")
    target = target_of(args, resources) if chosen_member(args) else (f"{LANE}s", DEFAULT)

    def change(current: Document) -> Document:
        entry = entry_of(current, target)
        for key in args.keys:
            entry.pop(key, None)
        if target is not None and not entry:
            current[target[0]].pop(target[1])
            if not current[target[0]]:
                current.pop(target[0])
        return current

    parameter, control = change_control(aws, resources, change, topology=steered_topology(args, resources))
    return _report(args, resources, parameter, control, out)


def register(command: AddCommand) -> None:
    """Add `set` and `unset`."""
    set_command = command(
        "set",
        command_set,
        "Change a lane's or gate's settings without a deploy: max_per_group, fair_share and"
        " max_wait_seconds (the control parameter's lanes.NAME and gates.NAME keys).",
        "  dispatcher --stack jobs set --lane backfill max_per_group=3\n"
        "  dispatcher --stack jobs set --lane backfill fair_share=true max_wait_seconds=3600\n"
        "  dispatcher --stack jobs set --gate crawl max_per_group=1 --json\n"
        "  dispatcher set max_per_group=2   # lane default\n",
        needs=control_needs,
    )
    add_member_options(set_command, "change", default="lane")
    set_command.add_argument("assignments", nargs="+", metavar="KEY=VALUE", help="a setting and its value")
    unset = command(
        "unset",
        command_unset,
        "Take back a live change: remove keys from the control parameter, so LANES (or the"
        " environment) applies again. Also mends a malformed key, which stops every tick.",
        "  dispatcher --stack jobs unset --lane backfill max_per_group\n"
        "  dispatcher --stack jobs unset --lane backfill max_concurrency paused\n"
        "  dispatcher --stack jobs unset --pool glue max_concurrency\n"
        "  dispatcher unset max_wait_seconds   # lane default\n",
        needs=control_needs,
    )
    add_member_options(unset, "change", pool=True, default="lane")
    unset.add_argument("keys", nargs="+", metavar="KEY", help="a key of the member's entry")
