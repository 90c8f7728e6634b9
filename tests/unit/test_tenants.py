"""Tenants, pure: a group's limit, fair share, held jobs shown again, and their configuration errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dispatcher.core.admission import HoldForGroup, Wait, admit
from dispatcher.core.control import parse_control, steer
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.kinds.gate import Gate
from dispatcher.core.messages import QueuedMessage
from dispatcher.core.outcomes import Outcome
from dispatcher.core.tenants import PASSED_OVER_RECEIVES, Hold, Share, admit_shared, due_to_show
from dispatcher.core.topology import Lane
from dispatcher.settings import load_settings
from tests.support.lanes import ENVIRONMENT_LANE, arn, lane, parse, queue


def jobs(*groups: str) -> list[QueuedMessage]:
    """One job per group named, in this receive order (``a`` twice: a's first and second)."""
    seen: dict[str, int] = {}
    messages = []
    for group in groups:
        seen[group] = seen.get(group, 0) + 1
        messages.append(
            QueuedMessage(
                message_id=f"{group}{seen[group]}",
                receipt_handle=f"r-{group}{seen[group]}",
                body="{}",
                group_id=group,
            )
        )
    return messages


def ids(messages: Any) -> list[str]:
    """The message IDs of ``messages``."""
    return [getattr(each, "message", each).message_id for each in messages]


def test_a_group_at_its_limit_is_held_and_its_later_jobs_wait_behind_it() -> None:
    """A group at its limit is held, and its later jobs wait behind it."""
    admission = admit_shared(jobs("a", "a", "b", "a"), 10, Share(max_per_group=2), {"a": 1})
    assert ids(admission.starts) == ["a1", "b1"]
    assert ids(admission.held_for_group) == ["a2"]
    assert ids(admission.waiting) == ["a2", "a3"]


def test_each_waiting_job_is_a_decision_the_held_one_a_hold_for_its_group() -> None:
    """What waits is one decision a message: a plain wait, or a hold for a group at its limit."""
    admission = admit_shared(jobs("a", "a", "b", "a"), 10, Share(max_per_group=2), {"a": 1})
    assert [(type(wait), wait.message.message_id) for wait in admission.waits] == [
        (HoldForGroup, "a2"),
        (Wait, "a3"),
    ]
    assert all(wait.outcome is Outcome.WAITING for wait in admission.waits)
    assert [type(wait) for wait in admit(jobs("a", "b"), 1).waits] == [Wait]


def test_holds_keep_the_order_fair_share_came_to_their_groups() -> None:
    """With fair share the group holding fewest is served (and held) first, whatever was received first."""
    admission = admit_shared(jobs("a", "b"), 10, Share(max_per_group=1, fair_share=True), {"a": 2, "b": 1})
    assert ids(admission.waiting) == ["a1", "b1"]
    assert ids(admission.held_for_group) == ["b1", "a1"]


def test_the_round_s_own_starts_count_toward_the_limit() -> None:
    """The round's own starts count toward the limit."""
    admission = admit_shared(jobs("a", "a", "a", "b"), 10, Share(max_per_group=2), {})
    assert ids(admission.starts) == ["a1", "a2", "b1"]
    assert ids(admission.held_for_group) == ["a3"]


def test_a_group_below_its_limit_waits_for_a_slot_without_being_held() -> None:
    """A group below its limit waits for a slot without being held."""
    admission = admit_shared(jobs("a", "b"), 1, Share(max_per_group=5), {})
    assert ids(admission.starts) == ["a1"]
    assert admission.held_for_group == ()
    assert ids(admission.waiting) == ["b1"]


def test_fair_share_gives_the_slot_to_the_group_holding_fewest_ahead_of_older_jobs() -> None:
    """Fair share gives the slot to the group holding fewest ahead of older jobs."""
    admission = admit_shared(
        jobs("noisy", "noisy", "noisy", "quiet"), 1, Share(fair_share=True), {"noisy": 9}
    )
    assert ids(admission.starts) == ["quiet1"]
    assert ids(admission.waiting) == ["noisy1", "noisy2", "noisy3"]


def test_fair_share_levels_the_groups_and_keeps_each_group_s_order() -> None:
    """Fair share levels the groups and keeps each group's order."""
    admission = admit_shared(
        jobs("a", "a", "a", "a", "b", "b", "c"), 4, Share(fair_share=True), {"a": 1, "b": 0, "c": 2}
    )
    # b (0) takes one; a and b hold 1 each: a, received first; then b (1) before a and c (2);
    # then a (2), received before c (2).
    assert ids(admission.starts) == ["a1", "a2", "b1", "b2"]
    assert ids(admission.waiting) == ["a3", "a4", "c1"]


def test_fair_share_serves_a_job_passed_over_too_often_first_before_sqs_would_dead_letter_it() -> None:
    """Fair share serves a job passed over too often first, before SQS would dead-letter it."""
    noisy = jobs("noisy", "quiet")
    aged = [noisy[0].model_copy(update={"receive_count": PASSED_OVER_RECEIVES}), noisy[1]]
    assert ids(admit_shared(noisy, 1, Share(fair_share=True), {"noisy": 9}).starts) == ["quiet1"]
    assert ids(admit_shared(aged, 1, Share(fair_share=True), {"noisy": 9}).starts) == ["noisy1"]


def test_fair_share_alone_uses_every_slot_in_order() -> None:
    """Fair share alone uses every slot in order."""
    admission = admit_shared(jobs("a", "a", "a", "a"), 3, Share(fair_share=True), {"a": 50})
    assert ids(admission.starts) == ["a1", "a2", "a3"]


def test_fair_share_ties_go_to_the_group_received_first() -> None:
    """Fair share ties go to the group received first."""
    admission = admit_shared(jobs("b", "a"), 1, Share(fair_share=True), {})
    assert ids(admission.starts) == ["b1"]


def test_poison_is_dead_lettered_with_a_slot_and_does_not_count_in_its_group() -> None:
    """Poison is dead-lettered with a slot and does not count in its group."""
    poison = QueuedMessage(message_id="p", receipt_handle="r", body="not json", group_id="a")
    admission = admit_shared([poison, *jobs("a")], 2, Share(max_per_group=1), {})
    assert ids(admission.dead_letters) == ["p"]
    assert ids(admission.starts) == ["a1"]


def test_without_a_share_admission_is_the_plain_one() -> None:
    """Without a share admission is the plain one."""
    messages = jobs("a", "a", "b", "c")
    plain = admit(messages, 2)
    shared = admit_shared(messages, 2, Share(), {"a": 100})
    assert (shared.starts, shared.dead_letters, shared.waiting) == (
        plain.starts,
        plain.dead_letters,
        plain.waiting,
    )
    assert shared.held_for_group == ()


def test_held_jobs_are_shown_once_their_group_is_below_its_limit_or_has_none() -> None:
    """Held jobs are shown once their group is below its limit, or has none."""
    holds = [Hold("a", "a1", "r", 0.0), Hold("b", "b1", "r", 0.0)]
    assert due_to_show(holds, {"a": 2, "b": 1}, Share(max_per_group=2)) == [holds[1]]
    assert due_to_show(holds, {"a": 2, "b": 2}, Share(fair_share=True)) == holds


def test_lanes_and_gates_read_their_group_settings() -> None:
    """Lanes and gates read their group settings."""
    topology = parse(
        {
            "lanes": [lane("tenants", max_per_group=3, fair_share=True)],
            "gates": [lane("crawl", "gated", max_per_group=2)],
        }
    )
    tenants = topology.member("tenants", Lane)
    assert (tenants.max_per_group, tenants.fair_share, tenants.tenants) == (3, True, True)
    assert topology.member("crawl", Gate).max_per_group == 2
    assert not topology.default_lane.tenants


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"lanes": [lane("a", max_per_group=0)]}, "LANES: lanes[0].max_per_group: input should be"),
        (
            {"lanes": [lane("a", max_per_group=True)]},
            "LANES: lanes[0].max_per_group: input should be a valid",
        ),
        ({"lanes": [lane("a", max_per_group="2")]}, "LANES: lanes[0].max_per_group: input should be a valid"),
        (
            {"lanes": [lane("a", fair_share="yes")]},
            "LANES: lanes[0].fair_share: input should be a valid boolean",
        ),
        ({"lanes": [lane("a", fair_share=1)]}, "LANES: lanes[0].fair_share: input should be a valid boolean"),
        ({"gates": [lane("g", max_per_group=-1)]}, "LANES: gates[0].max_per_group: input should be"),
        (
            {"gates": [lane("g", fair_share=True)]},
            "LANES: gates[0].fair_share: extra inputs are not permitted",
        ),
    ],
)
def test_a_malformed_group_setting_names_its_field(document: Any, message: str) -> None:
    """A malformed group setting names its field."""
    with pytest.raises(ConfigurationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse(document)


def environment(**more: str) -> dict[str, str]:
    """The contract's variables with ``more``."""
    return {
        "QUEUE_URL": queue("jobs"),
        "DEAD_LETTER_QUEUE_URL": queue("dead-letters"),
        "STATE_MACHINE_ARN": arn("jobs"),
        "MAX_CONCURRENCY": "5",
        "STATE_TABLE": "state",
        **more,
    }


def test_the_environment_s_lane_takes_max_per_group_and_fair_share() -> None:
    """The environment's lane takes max_per_group and fair_share from its variables."""
    default = load_settings(environment(MAX_PER_GROUP="2", FAIR_SHARE="true")).topology().default_lane
    assert (default.max_per_group, default.fair_share) == (2, True)
    assert load_settings(environment()).topology().default_lane == ENVIRONMENT_LANE


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_max_per_group_names_the_variable(value: str) -> None:
    """A bad max_per_group names the variable."""
    with pytest.raises(ConfigurationError, match="MAX_PER_GROUP"):
        load_settings(environment(MAX_PER_GROUP=value))


def test_the_control_parameter_steers_a_lane_s_and_a_gate_s_share_live() -> None:
    """The control parameter steers a lane's and a gate's share live."""
    topology = parse({"lanes": [lane("tenants", max_per_group=3)], "gates": [lane("crawl", "gated")]})
    control = parse_control(
        "/p",
        json.dumps(
            {
                "lanes": {
                    "tenants": {"max_per_group": 1, "fair_share": True},
                    "default": {"max_per_group": 4},
                },
                "gates": {"crawl": {"max_per_group": 2}},
            }
        ),
    )
    steered = steer(topology, control, "/p")
    assert (steered.member("tenants", Lane).max_per_group, steered.member("tenants", Lane).fair_share) == (
        1,
        True,
    )
    assert steered.default_lane.max_per_group == 4
    assert steered.member("crawl", Gate).max_per_group == 2
    # A key left out keeps LANES' value.
    assert (
        steer(topology, parse_control("/p", '{"lanes": {"tenants": {"paused": true}}}'), "/p")
        .member("tenants", Lane)
        .max_per_group
        == 3
    )


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"lanes": {"a": {"max_per_group": 0}}}, "lanes.a.max_per_group"),
        ({"lanes": {"a": {"max_per_group": True}}}, "lanes.a.max_per_group"),
        ({"lanes": {"a": {"fair_share": "no"}}}, "lanes.a.fair_share"),
        ({"gates": {"g": {"fair_share": True}}}, "gates.g.fair_share"),
    ],
)
def test_a_malformed_group_override_is_a_configuration_error_naming_it(value: Any, field: str) -> None:
    """A malformed group override is a configuration error naming it."""
    with pytest.raises(ConfigurationError, match=f"control parameter /p is malformed: {field}"):
        parse_control("/p", json.dumps(value))
