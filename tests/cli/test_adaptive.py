"""An adaptive pool from the CLI: `status` shows L, `set-max` clamps it at once, `reset-limit` gives back MAX.

The stack of test_members (pool glue, MAX 4, lane glue), made adaptive by the control parameter.
"""

from __future__ import annotations

import time

import boto3

from dispatcher.adapters.ledger import StartLedgerTable
from dispatcher.core.adaptive import LimitState
from dispatcher.local.account import REGION, pointed_at
from tests.support.members import Members, ok

GLUE = "Glue.ConcurrentRunsExceededException"


def ledger(members: Members) -> StartLedgerTable:
    """The start ledger over the stack's state table."""
    stack = members.cli.stack
    return StartLedgerTable(
        boto3.client("dynamodb", region_name=REGION), stack.state_table, stack.state_machine_arn
    )


def test_status_shows_the_limit_set_max_clamps_it_and_reset_limit_gives_back_max(members: Members) -> None:
    """L 2 of MAX 4 in `status`; `set-max 1` clamps it to 1 and it stays there; `reset-limit` is MAX again."""
    cli = members.cli
    members.control({"pools": {"glue": {"adaptive": {"errors": [GLUE], "cooldown_seconds": 30}}}})
    status = ok(cli.run("status", "--json"))
    glue = next(pool for pool in status["pools"] if pool["name"] == "glue")
    assert (glue["limit"], glue["max_concurrency"], glue["free"]) == (4, 4, 4)
    assert glue["adaptive"] == {
        "errors": [GLUE],
        "min": 1,
        "decrease": 0.5,
        "cooldown_seconds": 30.0,
        "initial": 4,  # where L starts: MAX, without an initial setting
    }
    default = next(pool for pool in status["pools"] if pool["name"] == "default")
    assert "limit" not in default
    assert "limit" not in status
    assert "adaptive" not in status
    with pointed_at(cli.endpoint_url):
        assert ledger(members).record_limit("glue", LimitState(limit=2, changed_at=1.0), None, 1.0)
    glue = ok(cli.run("status", "--pool", "glue", "--json"))
    assert (glue["limit"], glue["free"]) == (2, 2)
    rows = [line.split() for line in ok(cli.run("status")).splitlines()]
    assert ["POOL", "MAX", "LIMIT", "PAUSED", "RUNNING", "FREE"] in rows
    assert ["glue", "4", "2", "no", "0", "2"] in rows
    assert ["default", "3", "-", "no", "0", "3"] in rows
    clamped = ok(cli.run("set-max", "1", "--pool", "glue"))
    assert clamped.splitlines()[-1] == "pool glue: limit 1 (was 2; adaptive)"
    ok(cli.run("set-max", "4", "--pool", "glue"))
    assert ok(cli.run("status", "--pool", "glue", "--json"))["limit"] == 1, "the clamp was kept"
    reset = ok(cli.run("reset-limit", "--pool", "glue", "--json"))
    assert reset == {"pool": "glue", "limit": 4, "was": 1, "max_concurrency": 4}
    assert ok(cli.run("reset-limit", "--pool", "glue")) == (
        "pool glue: limit 4 (was 4; MAX 4); it learns again from there\n"
    )
    with pointed_at(cli.endpoint_url):
        kept = ledger(members).limit("glue")
    assert kept is not None
    assert (kept.limit, kept.cut_by, kept.clean) == (4, None, 0)


def test_l_starts_at_initial_and_reset_limit_goes_back_to_it_by_the_tables_clock(members: Members) -> None:
    """``initial`` 3 of MAX 4: `status` shows L 3 before a tick; `reset-limit` gives it back at AWS's time."""
    cli = members.cli
    members.control({"pools": {"glue": {"adaptive": {"errors": [GLUE], "initial": 3}}}})
    glue = ok(cli.run("status", "--pool", "glue", "--json"))
    assert (glue["limit"], glue["free"], glue["adaptive"]["initial"]) == (3, 3, 3)
    with pointed_at(cli.endpoint_url):
        assert ledger(members).record_limit("glue", LimitState(limit=1, changed_at=1.0), None, 1.0)
    before = time.time()
    reset = ok(cli.run("reset-limit", "--pool", "glue", "--json"))
    assert reset == {"pool": "glue", "limit": 3, "was": 1, "max_concurrency": 4}
    with pointed_at(cli.endpoint_url):
        kept = ledger(members).limit("glue")
    assert kept is not None
    assert kept.limit == 3
    # The table's Date header, to its second and rounded up: a whole second, not this machine's fraction.
    assert kept.since == int(kept.since)
    assert before - 1 <= kept.since <= time.time() + 2
    assert kept.changed_at == kept.since


def test_reset_limit_of_a_pool_that_does_not_adapt_is_a_usage_error(members: Members) -> None:
    """Pool default has no adaptive settings; pool nowhere is unknown: one line each, exit 2."""
    cli = members.cli
    result = cli.run("reset-limit")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "dispatcher: error: pool default is not adaptive: its limit is its MAX (3);"
        " give it adaptive settings in LANES or the control parameter"
    ]
    unknown = cli.run("reset-limit", "--pool", "nowhere")
    assert unknown.returncode == 2
    assert "--pool nowhere: no such pool (pools: default, glue)" in unknown.stderr


def test_set_max_0_is_a_pause_that_keeps_the_learned_limit(members: Members) -> None:
    """`set-max 0 --pool glue` then `unset`: L is what it had learned, not cut to 0 and restarted at min."""
    cli = members.cli
    members.control({"pools": {"glue": {"adaptive": {"errors": [GLUE]}}}})
    with pointed_at(cli.endpoint_url):
        assert ledger(members).record_limit("glue", LimitState(limit=3, changed_at=1.0), None, 1.0)
    paused = ok(cli.run("set-max", "0", "--pool", "glue"))
    assert "limit" not in paused
    assert ok(cli.run("status", "--pool", "glue", "--json"))["paused"] is True
    ok(cli.run("unset", "--pool", "glue", "max_concurrency"))
    assert ok(cli.run("status", "--pool", "glue", "--json"))["limit"] == 3
