"""Gates without AWS: requests, releases and admissions."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from dispatcher.core.admission import DeadLetter, Start, admit
from dispatcher.core.events import EndNews, Release, SkippedRecord, describe_trigger, end_news, read_release
from dispatcher.core.executions import execution_arn
from dispatcher.core.gates import (
    Enter,
    GateRequest,
    admission_output,
    once_a_round,
    plan_request,
    read_request,
    release_problem,
    token_digest,
)
from tests.support.events import message
from tests.support.events import record as sqs_record

GATED = "arn:aws:states:us-east-1:123456789012:stateMachine:ingest"
OTHER = "arn:aws:states:us-east-1:123456789012:stateMachine:other"


TOKEN = "task-token"


def request(name: str, token: str = TOKEN, machine: str = GATED, **more: object) -> str:
    """A gate request's body for execution ``name``."""
    return json.dumps({"token": token, "execution": execution_arn(machine, name), **more})


def test_a_request_is_its_token_and_execution_and_other_keys_are_ignored() -> None:
    """``{"token", "execution"}``: the execution's name is the last field of its ARN."""
    read = read_request(request("e-1", "abc", note="ignored"), GATED)
    assert read == GateRequest("abc", execution_arn(GATED, "e-1"))
    assert isinstance(read, GateRequest)
    assert read.name == "e-1"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("not json", "a gate request must be JSON"),
        ("[1]", 'must be a JSON object with the strings "token"'),
        (json.dumps({"token": "t"}), 'the strings "token" ($$.Task.Token) and "execution"'),
        (json.dumps({"token": 1, "execution": execution_arn(GATED, "e")}), 'the strings "token"'),
        (request("e", token=""), "the task token is 0 characters"),
        (request("e", token="t" * 2049), "the task token is 2049 characters"),
        (json.dumps({"token": "t", "execution": "e-1"}), "'e-1' is not an execution ARN"),
        (json.dumps({"token": "t", "execution": GATED}), "is not an execution ARN"),
        (request("e", machine=OTHER), f"is not one of the gate's state machine {GATED}"),
    ],
)
def test_a_malformed_request_is_poison_with_a_reason(body: str, problem: str) -> None:
    """Anything but the two strings of an execution of the gate's state machine goes to the DLQ."""
    decision = plan_request(message(body), GATED)
    assert isinstance(decision, DeadLetter)
    assert problem in decision.reason


def test_a_request_is_planned_as_an_admission_with_its_token() -> None:
    """A request is planned as an admission with its token."""
    decision = plan_request(message(request("e-1", "tok")), GATED)
    assert decision == Enter(message=message(request("e-1", "tok")), name="e-1", token="tok")


def test_a_round_admits_an_execution_once_and_holds_back_its_other_requests() -> None:
    """Two requests of one execution in one round: the second waits (its record is the first's)."""
    plan = once_a_round(lambda received: plan_request(received, GATED))
    first = plan(message(request("e-1"), message_id="a"))
    assert isinstance(first, Start)
    assert plan(message(request("e-1"), message_id="b")) is None
    assert isinstance(plan(message(request("e-2"), message_id="c")), Start)
    assert isinstance(plan(message("bad", message_id="d")), DeadLetter)


def test_an_execution_inside_takes_no_slot_and_the_others_wait_for_one() -> None:
    """With no slot free, a request of an execution inside is still handled; its group's order holds."""
    received = [
        message(request("new-1"), message_id="1", group="a"),
        message(request("inside"), message_id="2", group="b"),
        message(request("new-2"), message_id="3", group="a"),
        message("poison", message_id="4", group="c"),
    ]
    plan = once_a_round(lambda each: plan_request(each, GATED))
    decided = admit(received, 0, plan, takes_slot=lambda start: start.name != "inside")
    assert [start.name for start in decided.starts] == ["inside"]
    assert [held.message_id for held in decided.waiting] == ["1", "3", "4"]
    decided = admit(received, 1, once_a_round(lambda each: plan_request(each, GATED)))
    assert [start.name for start in decided.starts] == ["new-1"]
    assert [letter.message.message_id for letter in decided.dead_letters] == []


def test_poison_waits_for_a_slot_like_a_job_and_does_not_take_one() -> None:
    """As for a lane: poison is dead-lettered only when a slot is free, and takes none."""
    received = [
        message("poison", message_id="1", group="a"),
        message(request("e"), message_id="2", group="b"),
    ]
    decided = admit(received, 1, lambda each: plan_request(each, GATED))
    assert [letter.message.message_id for letter in decided.dead_letters] == ["1"]
    assert [start.name for start in decided.starts] == ["e"]


def test_the_admission_output_names_the_gate_and_when_in_iso_8601() -> None:
    """The admission output names the gate, and when in ISO 8601."""
    output = json.loads(admission_output("crawl", 1_800_000_000.25))
    assert output == {"gate": "crawl", "admitted_at": "2027-01-15T08:00:00.250Z"}
    assert datetime.fromisoformat(output["admitted_at"]).timestamp() == 1_800_000_000.25


def test_a_token_is_kept_as_a_digest_that_tells_tokens_apart() -> None:
    """A token is kept as a digest that tells tokens apart."""
    assert token_digest("a") == token_digest("a")
    assert token_digest("a") != token_digest("b")
    assert len(token_digest("t" * 2048)) == 32


def test_a_release_is_the_execution_and_the_gate_with_when_it_was_sent() -> None:
    """A release is the execution and the gate with when it was sent."""
    arn = execution_arn(GATED, "e-1")
    assert read_release({"release": arn, "gate": "crawl", "extra": 1}, 5.0) == Release("crawl", arn, 5.0)
    assert (
        read_release({"release": arn}, 5.0)
        == 'a release needs the strings "release" (the execution ARN) and "gate"'
    )
    assert read_release({"release": "e-1", "gate": "crawl"}, 5.0) == "'e-1' is not an execution ARN"
    assert read_release([arn], 5.0) == "a release must be a JSON object"


def test_a_release_of_an_unknown_gate_or_another_machines_execution_frees_nothing() -> None:
    """A release of an unknown gate, or of another machine's execution, frees nothing."""
    gates = {"crawl": GATED}
    assert release_problem(Release("crawl", execution_arn(GATED, "e"), 0.0), gates) is None
    assert (
        release_problem(Release("nope", execution_arn(GATED, "e"), 0.0), gates) == "no gate is called 'nope'"
    )
    problem = release_problem(Release("crawl", execution_arn(OTHER, "e"), 0.0), gates)
    assert problem is not None
    assert "is not one of gate crawl's" in problem


def test_a_batch_carries_releases_with_their_sent_timestamps_beside_the_ends() -> None:
    """A release record is no skipped record; it was sent at its SentTimestamp."""
    arn = execution_arn(GATED, "e-1")
    released = sqs_record({"release": arn, "gate": "crawl"}, "m-r")
    released["attributes"]["SentTimestamp"] = "1800000000500"
    broken = sqs_record({"release": "nope", "gate": "crawl"}, "m-bad")
    untimed = sqs_record({"release": arn, "gate": "other"}, "m-untimed")
    news = end_news({"Records": [released, broken, untimed]}, GATED, now=42.0)
    assert news.releases == (Release("crawl", arn, 1_800_000_000.5), Release("other", arn, 42.0))
    assert news.skipped == (SkippedRecord("m-bad", "'nope' is not an execution ARN"),)
    assert news.records == 3


def test_a_release_invoking_the_function_directly_was_sent_now() -> None:
    """A release invoking the function directly was sent now."""
    arn = execution_arn(GATED, "e-1")
    assert end_news({"release": arn, "gate": "crawl"}, GATED, now=7.0) == EndNews(
        releases=(Release("crawl", arn, 7.0),)
    )
    assert end_news({"release": 3}, GATED, now=7.0).skipped[0].message_id == "the event"
    assert describe_trigger({"release": arn, "gate": "crawl"}) == "a release"
