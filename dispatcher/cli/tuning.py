"""`dispatcher set` and `unset`: a member's settings live, and the way back to what is configured.

``set --lane customers max_per_group=3 fair_share=true`` writes the control parameter's
``lanes.customers`` keys; ``set --pool glue adaptive.decrease=0.7`` a pool's adaptive
settings (``adaptive=false`` turns learning off); ``unset --lane customers max_per_group``
removes the key, so the value in ``LANES`` (lane default's variable) applies again. `unset`
also takes back a `set-max` or a pause (``max_concurrency``, ``paused``), a pool's
``adaptive`` (or one of its keys), a key no member has (a typo), or with no key the
member's whole entry. Both print each setting the ticks will use with its source, and both
mend a malformed parameter key by key: a malformed parameter's error names the `unset` that
mends it (`dispatcher.core.control.mend_commands`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, TextIO

from pydantic import ValidationError

from dispatcher.cli.args import AddCommand, parsed
from dispatcher.cli.config import Aws, Resources
from dispatcher.cli.errors import UsageError
from dispatcher.cli.members import add_member_options, chosen_member, member, names_of, unknown_member
from dispatcher.cli.parameter import Document, change_control, control_needs
from dispatcher.cli.pool_settings import ADAPTIVE, ADAPTIVE_KEYS, pool_report, pool_values, set_pool
from dispatcher.core.control import (
    CONTROL_MAX_AGE_SECONDS,
    LIVE_KEYS,
    SECTIONS,
    Control,
    steer,
)
from dispatcher.core.effective import keys_of, member_settings, shown
from dispatcher.core.errors import problems
from dispatcher.core.kinds import kind_of
from dispatcher.core.topology import DEFAULT, LANE, Member, Pool

POOL = "pool"
SECTION_OF = {kind: section for section, kind in SECTIONS.items()}


def _chosen(args: argparse.Namespace) -> tuple[str, str]:
    """(kind, name) of the member: lane default unless ``--pool``, ``--lane`` or ``--gate`` says."""
    return chosen_member(args) or (LANE, DEFAULT)


def assignments(words: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` words as text by key; a word without both, or a key given twice, is a usage error."""
    found: dict[str, str] = {}
    for word in words:
        key, equals, text = word.partition("=")
        if not equals or not text:
            raise UsageError(f"{word!r}: give KEY=VALUE, e.g. max_per_group=3")
        if key in found:
            raise UsageError(f"{key}: given twice ({found[key]!r} and {text!r}): give each key once")
        found[key] = text
    return found


def _values(kind: str, words: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` words as the keys of a lane's or gate's entry; a usage error naming a bad one."""
    allowed = keys_of(kind)
    found: dict[str, Any] = {}
    for key, text in assignments(words).items():
        if key not in allowed:
            hint = "; MAX and pause: set-max, pause, resume" if key in LIVE_KEYS else ""
            raise UsageError(
                f"{key}: a {kind} has no such setting ({kind} settings: {', '.join(allowed)}{hint})"
            )
        found[key] = parsed(text)
    model = kind_of(kind).override
    try:
        model.model_validate(found)
    except ValidationError as error:
        raise UsageError(problems(error, lambda field: field or "value")) from None
    return found


def _report(
    args: argparse.Namespace, resources: Resources, parameter: str, control: Control, out: TextIO
) -> int:
    """Each setting of the member as the ticks will use it, with its source."""
    kind, name = _chosen(args)
    topology = resources.topology(resources.max_concurrency or 0)
    if name not in names_of(topology, kind):  # a stale entry mended: nothing it steers is configured
        out.write(f"{kind} {name}: not configured; its entry in parameter {parameter} steers nothing\n")
        return 0
    if kind == POOL:
        steered = steer(topology, control, parameter).pool(name)
        return pool_report(topology.pool(name), steered, control, parameter, out, as_json=args.json)
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
    """Override a member's settings live, in the control parameter."""
    kind, name = _chosen(args)
    found = member(resources, kind, name)  # an unknown name is a usage error
    if isinstance(found, Pool):
        values = pool_values(assignments(args.assignments))

        def change(current: Document) -> Document:
            set_pool(current, found, values)
            return current

    else:
        settings = _values(kind, args.assignments)

        def change(current: Document) -> Document:
            _entry(current, kind, name).update(settings)
            return current

    parameter, control = change_control(aws, resources, change, topology=resources.topology())
    return _report(args, resources, parameter, control, out)


def _entry(document: Document, kind: str, name: str) -> Document:
    """The member's entry in ``document`` (pool default's keys are the top level's), made if missing."""
    if kind == POOL and name == DEFAULT:
        return document
    entries = document.get(SECTION_OF[kind])
    if not isinstance(entries, dict):
        entries = document[SECTION_OF[kind]] = {}
    entry = entries.get(name)
    if not isinstance(entry, dict):
        entry = entries[name] = {}
    return entry


def _unsettable(kind: str) -> tuple[str, ...]:
    """The keys a member of ``kind`` has, which `unset` takes back."""
    if kind == POOL:
        return (*LIVE_KEYS, ADAPTIVE, *ADAPTIVE_KEYS)
    return (*LIVE_KEYS, *keys_of(kind))


def _remove(document: Document, kind: str, name: str, keys: Sequence[str]) -> None:
    """Remove ``keys`` from the member's entry (none given: the whole entry).

    Pool default's MAX and pause are the top level's and its ``adaptive`` is
    ``pools.default``'s; a key misplaced in ``pools.default`` (where only ``adaptive``
    belongs) goes first, and the top level's stays. An ``adaptive.KEY`` leaves the other
    settings; an entry that is not an object, or is left empty, goes, and so does a
    section left empty.
    """
    if kind == POOL and name == DEFAULT:
        _remove_default_pool(document, keys)
    else:
        _remove_from(document, kind, name, keys)
    for section in SECTIONS:
        if document.get(section) == {}:
            del document[section]


def _remove_default_pool(document: Document, keys: Sequence[str]) -> None:
    """Remove pool default's ``keys``: its MAX and pause at the top level, the rest in ``pools.default``.

    A key misplaced in ``pools.default`` goes from there first, and the top level's stays.
    """
    misplaced = _default_pool_entry(document)
    adaptive = [key for key in keys if key == ADAPTIVE or key.startswith(f"{ADAPTIVE}.")]
    top = [key for key in keys if key not in adaptive] if keys else list(LIVE_KEYS)
    for key in top:
        if key not in misplaced:
            document.pop(key, None)
    _remove_from(document, POOL, DEFAULT, [*adaptive, *top] if keys else [])


def _default_pool_entry(document: Document) -> dict[str, Any]:
    """``pools.default``, where only ``adaptive`` belongs (empty when there is none, or it is no object)."""
    pools = document.get(SECTION_OF[POOL])
    own = pools.get(DEFAULT) if isinstance(pools, dict) else None
    return own if isinstance(own, dict) else {}


def _remove_from(document: Document, kind: str, name: str, keys: Sequence[str]) -> None:
    """Remove ``keys`` from ``SECTION.NAME`` (none given, or not an object: all of it)."""
    entries = document.get(SECTION_OF[kind])
    if not isinstance(entries, dict) or name not in entries:
        return
    entry = entries[name]
    if not keys or not isinstance(entry, dict):
        del entries[name]
        return
    for key in keys:
        setting = key.removeprefix(f"{ADAPTIVE}.")
        if setting == key:
            entry.pop(key, None)
        elif isinstance(entry.get(ADAPTIVE), dict):
            entry[ADAPTIVE].pop(setting, None)
            if not entry[ADAPTIVE]:
                del entry[ADAPTIVE]
    if not entry:
        del entries[name]


def _present(document: Document, kind: str, name: str) -> Document | None:
    """The member's entry in ``document`` as it is (None: it has none); pool default's is the top level."""
    if kind == POOL and name == DEFAULT:
        return document
    entries = document.get(SECTION_OF[kind])
    entry = entries.get(name) if isinstance(entries, dict) else None
    return entry if isinstance(entry, dict) else ({} if entry is not None else None)


def command_unset(args: argparse.Namespace, aws: Aws, resources: Resources, out: TextIO) -> int:
    """Remove keys from the control parameter: the configured value applies again.

    A key no member has is taken too when the member's entry holds it (a typo), and a
    member no longer configured when the parameter still has its entry: that is how a
    malformed parameter is mended.
    """
    kind, name = _chosen(args)
    topology = resources.topology(resources.max_concurrency or 0)
    configured = name in names_of(topology, kind)
    allowed = _unsettable(kind)

    def change(current: Document) -> Document:
        entry = _present(current, kind, name)
        if not configured and entry is None:
            raise unknown_member(kind, name, topology)
        held = {} if entry is None else entry
        pools = current.get(SECTION_OF[POOL])
        if (
            kind == POOL
            and name == DEFAULT
            and isinstance(pools, dict)
            and isinstance(pools.get(DEFAULT), dict)
        ):
            held = {**held, **pools[DEFAULT]}
        adaptive = held.get(ADAPTIVE)
        present = {*held, *(f"{ADAPTIVE}.{key}" for key in (adaptive if isinstance(adaptive, dict) else ()))}
        for key in args.keys:
            if key not in allowed and key not in present:
                raise UsageError(f"{key}: a {kind} has no such key (keys: {', '.join(allowed)})")
        _remove(current, kind, name, args.keys)
        return current

    parameter, control = change_control(aws, resources, change, topology=topology if configured else None)
    return _report(args, resources, parameter, control, out)


def register(command: AddCommand) -> None:
    """Add `set` and `unset`."""
    set_command = command(
        "set",
        command_set,
        "Change a member's settings without a deploy: a lane's max_per_group, fair_share and"
        " max_wait_seconds, a gate's max_per_group, a pool's adaptive settings (the control"
        " parameter's lanes.NAME, gates.NAME and pools.NAME keys).",
        "  dispatcher --stack jobs set --lane backfill max_per_group=3\n"
        "  dispatcher --stack jobs set --lane backfill fair_share=true max_wait_seconds=3600\n"
        "  dispatcher --stack jobs set --gate crawl max_per_group=1 --json\n"
        "  dispatcher --stack jobs set --pool glue adaptive.decrease=0.7 adaptive.cooldown_seconds=30\n"
        "  dispatcher --stack jobs set --pool glue adaptive.errors=Glue.ConcurrentRunsExceededException\n"
        "  dispatcher --stack jobs set --pool glue adaptive=false   # its limit is its MAX\n"
        "  dispatcher set max_per_group=2   # lane default\n",
        needs=control_needs,
    )
    add_member_options(set_command, "change", pool=True, default="lane")
    set_command.add_argument("assignments", nargs="+", metavar="KEY=VALUE", help="a setting and its value")
    unset = command(
        "unset",
        command_unset,
        "Take back a live change: remove keys from the control parameter, so LANES (or the"
        " environment) applies again; no KEY: every key of the member. Also mends a malformed"
        " key, which stops every tick (its error names the unset that mends it).",
        "  dispatcher --stack jobs unset --lane backfill max_per_group\n"
        "  dispatcher --stack jobs unset --lane backfill max_concurrency paused\n"
        "  dispatcher --stack jobs unset --pool glue max_concurrency\n"
        "  dispatcher --stack jobs unset --pool glue adaptive.decrease   # its default applies\n"
        "  dispatcher --stack jobs unset --pool glue adaptive   # LANES' adaptive settings apply\n"
        "  dispatcher --stack jobs unset --lane backfill   # every key of lane backfill\n"
        "  dispatcher unset max_wait_seconds   # lane default\n",
        needs=control_needs,
    )
    add_member_options(unset, "change", pool=True, default="lane")
    unset.add_argument(
        "keys", nargs="*", metavar="KEY", help="a key of the member's entry (none: all of them)"
    )
