"""``LANES`` read once into a `Topology`: its pools, and the members of every kind (`KINDS`).

``LANES`` is a JSON object ``{"pools": {…}, "lanes": […], "gates": […]}`` (the contract's
"Lanes, pools and gates"): a list for each kind of member (`Kind.plural`, its entries
`Kind.document`). It is validated once, here: pool ``default`` (MAX from
``MAX_CONCURRENCY``) and lane ``default`` (the five contract variables) always exist, so
without ``LANES`` the topology is today's one queue and one state machine. Every error
names its field, e.g. ``LANES: lanes[1].queue_url: field required``, and is a
`ConfigurationError`: nothing is received from any queue.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import GenericAlias
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, ValidationError

from dispatcher.core.adaptive import Adaptive, AdaptiveDocument
from dispatcher.core.errors import ConfigurationError, field_problem, message_of
from dispatcher.core.kinds import KINDS
from dispatcher.core.lanes_document import (
    DEFAULT,
    DefaultPoolDocument,
    MemberDocument,
    Name,
    PoolDocument,
    Strict,
)
from dispatcher.core.topology import Lane, Member, Pool, Topology

_SECTIONS = {kind.plural: GenericAlias(list, (kind.document,)) for kind in KINDS}
"""Each kind's list in ``LANES`` (``lanes``, ``gates``): its members' entries."""


class LanesDocument(Strict):
    """The whole ``LANES`` value: its pools, and a list of entries for each kind of member."""

    pools: dict[Name, PoolDocument] = Field(default_factory=dict)
    # A list per kind of member, as its registration says (`Kind.plural`, `Kind.document`).
    __annotations__.update(_SECTIONS)
    locals().update({section: Field(default_factory=list) for section in _SECTIONS})


def parse_lanes(text: str | None, default: Lane, default_max: int) -> Topology:
    """``LANES`` (None or blank: absent) with the environment's lane and MAX, as a `Topology`.

    Raises a `ConfigurationError` naming the field: ``LANES: <field>: <what is wrong>``.
    """
    document, default_pool = _document(text)
    _check_names(document)
    _check_fifo(document)
    pools = [Pool(DEFAULT, default_max, adaptive=_settings(default_pool.adaptive))]
    pools += [
        Pool(name, pool.max_concurrency, adaptive=_settings(pool.adaptive))
        for name, pool in document.pools.items()
    ]
    members: list[Member] = [default]
    for kind in KINDS:
        members += [
            kind.member(**{field: getattr(entry, field) for field in type(entry).model_fields})
            for entry in getattr(document, kind.plural)
        ]
    for kind in KINDS:
        kind.check(members)
    return Topology(pools=tuple(pools), members=tuple(members))


def _entries(document: LanesDocument) -> Iterator[tuple[str, MemberDocument]]:
    """Every member's entry with where it is (``lanes[0]``), kind after kind."""
    for kind in KINDS:
        for index, entry in enumerate(getattr(document, kind.plural)):
            yield f"{kind.plural}[{index}]", entry


def _settings(document: AdaptiveDocument | None) -> Adaptive | None:
    return None if document is None else document.settings()


def _document(text: str | None) -> tuple[LanesDocument, DefaultPoolDocument]:
    """The document, and ``pools.default`` read apart (it may set only ``adaptive``)."""
    if text is None or not text.strip():
        return LanesDocument(), DefaultPoolDocument()
    try:
        value: Any = json.loads(text)
    except ValueError as error:
        raise ConfigurationError(f"LANES: not JSON: {error}") from error
    if not isinstance(value, dict):
        raise ConfigurationError('LANES: must be a JSON object like {"pools": {}, "lanes": []}')
    pools, default = value.get("pools"), {}
    if isinstance(pools, dict) and DEFAULT in pools:
        default = pools[DEFAULT]
        value = {**value, "pools": {name: pool for name, pool in pools.items() if name != DEFAULT}}
        if isinstance(default, dict) and "max_concurrency" in default:
            raise ConfigurationError(
                "LANES: pools.default: pool default is the environment's; its MAX is MAX_CONCURRENCY"
                " (pools.default takes only adaptive)"
            )
    try:
        return LanesDocument.model_validate(value), _default_pool(default)
    except ValidationError as error:
        found = "; ".join(field_problem(issue["loc"], message_of(issue)) for issue in error.errors())
        raise ConfigurationError(f"LANES: {found}") from error


def _default_pool(document: Any) -> DefaultPoolDocument:
    """``pools.default``, its problems located there (``pools.default.adaptive.min``)."""
    try:
        return DefaultPoolDocument.model_validate(document)
    except ValidationError as error:
        found = "; ".join(
            field_problem(("pools", DEFAULT, *issue["loc"]), message_of(issue)) for issue in error.errors()
        )
        raise ConfigurationError(f"LANES: {found}") from error


def _check_names(document: LanesDocument) -> None:
    """Every member's name is its own (and not ``default``), and its pool is one ``LANES`` names."""
    seen: dict[str, str] = {}
    for where, entry in _entries(document):
        name, pool = entry.name, entry.pool
        if name == DEFAULT:
            raise ConfigurationError(f"LANES: {where}.name: default is the environment's lane")
        if name in seen:
            raise ConfigurationError(f"LANES: {where}.name: {name!r} is already the name of {seen[name]}")
        seen[name] = where
        if pool != DEFAULT and pool not in document.pools:
            raise ConfigurationError(f"LANES: {where}.pool: unknown pool {pool!r}")


def is_fifo_queue_url(url: str) -> bool:
    """Whether ``url`` is a FIFO queue's (SQS names every FIFO queue ``….fifo``, and only those)."""
    return urlsplit(url).path.rstrip("/").endswith(".fifo")


def _check_fifo(document: LanesDocument) -> None:
    """Every member's queues are FIFO: a standard one would silently lose order and deduplication."""
    for where, member in _entries(document):
        for field, url in (
            ("queue_url", member.queue_url),
            ("dead_letter_queue_url", member.dead_letter_queue_url),
        ):
            if not is_fifo_queue_url(url):
                raise ConfigurationError(
                    f"LANES: {where}.{field}: {url} is not a FIFO queue (its name would end in .fifo):"
                    " a standard queue keeps no order within a group and no deduplication"
                )
