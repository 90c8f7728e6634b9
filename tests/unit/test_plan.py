"""Planning a tick without AWS: each pool's RUNNING and free slots, and its members' claims."""

from __future__ import annotations

from dispatcher.core.allocation import UNBOUNDED, Claim
from dispatcher.core.counting import pool_running
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.planning import TickPlan, plan_tick
from dispatcher.core.topology import DEFAULT, Lane, Pool, Topology

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:"
TOPOLOGY = Topology(
    pools=(Pool(DEFAULT, 10), Pool("glue", 4), Pool("idle", 5, paused=True)),
    members=(
        Lane(DEFAULT, DEFAULT, "q", "d", MACHINE + "jobs"),
        Lane(
            "paced",
            DEFAULT,
            "q2",
            "d2",
            MACHINE + "paced",
            priority=2,
            max_concurrency=5,
            starts_per_second=1,
        ),
        Lane("glue", "glue", "q3", "d3", MACHINE + "glue", paused=True),
        Gate("crawl", "glue", "q4", "d4", MACHINE + "ingest", max_concurrency=2),
    ),
)


def planned(pools: tuple[Pool, ...], running: dict[str, int], tokens: dict[str, int | None]) -> TickPlan:
    """The plan of ``pools`` with each count key's RUNNING, their pools' counted as the tick does."""
    pools_running = {pool.name: pool_running(TOPOLOGY, pool.name, running) for pool in pools}
    return plan_tick(TOPOLOGY, pools, running, pools_running, tokens)


def test_each_pool_counts_its_members_once_and_claims_follow_their_limits_and_tokens() -> None:
    """A lane's room is its own MAX less its RUNNING, cut to its tokens; a paused one claims none."""
    plan = planned(
        TOPOLOGY.pools[:2],
        {MACHINE + "jobs": 3, MACHINE + "paced": 2, MACHINE + "glue": 1, "gate:crawl": 1},
        {DEFAULT: None, "paced": 1, "glue": None},
    )
    default, glue = plan.pools
    assert (default.running, default.free) == (5, 5)
    assert default.claims == (Claim(DEFAULT, 0, UNBOUNDED), Claim("paced", 2, 1))
    assert (glue.running, glue.free) == (2, 2)
    assert glue.claims == (Claim("glue", 0, 0), Claim("crawl", 0, 1))
    assert plan.free == 7


def test_a_rate_capped_lane_its_tokens_hold_below_what_is_free_is_bound_and_with_none_starved() -> None:
    """One token where three slots are free: bound; none: starved too; enough: neither."""

    def bound(tokens: int) -> tuple[frozenset[str], frozenset[str]]:
        plan = planned(TOPOLOGY.pools[:1], {MACHINE + "jobs": 7, MACHINE + "paced": 0}, {"paced": tokens})
        return plan.bound, plan.starved

    assert bound(1) == ({"paced"}, frozenset())
    assert bound(0) == ({"paced"}, {"paced"})
    assert bound(3) == (frozenset(), frozenset())
