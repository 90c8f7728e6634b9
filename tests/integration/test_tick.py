"""One tick of the real handler against moto: capacity, order, no loss, no duplicates."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from freezegun import freeze_time

from dispatcher import handler
from dispatcher.core.batching import ROUND_SIZE
from dispatcher.core.counting import RECENT_START_WINDOW_SECONDS
from dispatcher.core.errors import ConfigurationError
from dispatcher.in_process import LocalContext
from dispatcher.producer import Job
from tests.inputs import json_of_size
from tests.support.clock import advance
from tests.support.moto_harness import Harness


def test_tick_starts_max_minus_running(harness: Harness) -> None:
    """MAX 5 with 2 RUNNING and 4 queued starts 3 and leaves 1 on the queue."""
    harness.start_directly("already-1")
    harness.start_directly("already-2")
    for job in range(4):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    result = harness.tick()
    assert result["running"] == 2
    assert result["started"] == 3
    assert harness.running() == 5
    assert harness.queue_counts() == (1, 0)


def test_tick_return_value_has_the_contract_fields(harness: Harness) -> None:
    """The return value is JSON-serialisable with integer running, started and dead_lettered."""
    harness.send("{}")
    result = harness.tick()
    assert json.loads(json.dumps(result)) == result
    assert all(isinstance(result[key], int) for key in ("running", "started", "dead_lettered"))


def test_tick_drains_backlog_without_exceeding_max_in_group_order(harness: Harness) -> None:
    """Tick after tick, a backlog drains with RUNNING ≤ MAX, one execution per job, in group order."""
    harness.configure(4)
    groups: dict[str, list[int]] = defaultdict(list)
    for job in range(23):
        group = f"g{job % 3}"
        groups[group].append(job)
        harness.send(json.dumps({"job": job, "group": group}), group=group)
    for _ in range(30):
        harness.tick()
        assert harness.running() <= 4
        if harness.queue_counts() == (0, 0):
            break
        harness.finish_running()
    assert harness.queue_counts() == (0, 0)
    executions = harness.executions()
    assert len(executions) == 23
    assert len({execution["name"] for execution in executions}) == 23
    assert harness.started_by_group(lambda job: f"g{job % 3}") == groups


def test_tick_paused_starts_nothing_and_keeps_messages(harness: Harness) -> None:
    """MAX_CONCURRENCY=0 starts nothing and leaves every message visible."""
    harness.configure(0)
    for job in range(3):
        harness.send(json.dumps({"job": job}))
    result = harness.tick()
    assert result["started"] == 0
    assert result["stopped"] == "paused"
    assert harness.executions() == []
    assert harness.queue_counts() == (3, 0)


def test_tick_passes_the_body_verbatim(harness: Harness) -> None:
    """The execution input is the message body byte for byte, not re-serialised."""
    body = '{ "b" : [1,2 ,3],\n  "a":"ü", "n": 1.50 }'
    message_id = harness.send(body)
    harness.tick()
    assert harness.input_of(message_id) == body


def test_tick_names_execution_by_attribute_else_message_id(harness: Harness) -> None:
    """ExecutionName names the execution; without it the MessageId does."""
    named = harness.send('{"job": 1}', group="a", name="order-17")
    unnamed = harness.send('{"job": 2}', group="b")
    harness.tick()
    names = {execution["name"] for execution in harness.executions()}
    assert names == {"order-17", unnamed}
    assert named not in names


@pytest.mark.parametrize("finished", [False, True], ids=["still-running", "closed"])
def test_tick_redelivered_message_starts_no_second_execution(harness: Harness, finished: bool) -> None:
    """A message delivered again after its execution started is deleted, not started twice."""
    harness.send('{"job": 1}', name="job-1")
    harness.tick()
    if finished:
        harness.finish_running()
    harness.send('{"job": 1}', name="job-1")
    result = harness.tick()
    assert len(harness.executions()) == 1
    assert harness.queue_counts() == (0, 0)
    assert harness.dead_letters() == []
    assert result["started"] + result["already_started"] == 1
    if finished:
        assert result["already_started"] == 1


def test_tick_name_collision_goes_to_dlq(harness: Harness) -> None:
    """The same ExecutionName with a different input is dead-lettered, never dropped."""
    harness.send('{"job": 1}', name="job-1")
    harness.tick()
    harness.finish_running()
    harness.send('{"job": "other"}', group="g", name="job-1")
    result = harness.tick()
    assert result["dead_lettered"] == 1
    [letter] = harness.dead_letters()
    assert letter["Body"] == '{"job": "other"}'
    assert "name collision" in letter["MessageAttributes"]["DispatchError"]["StringValue"]
    assert len(harness.executions()) == 1


POISON = [
    pytest.param("not json", None, "String", "not valid JSON", id="invalid-json"),
    pytest.param('{"a": NaN}', None, "String", "not valid JSON", id="nan"),
    pytest.param(json.dumps({"x": "a" * 262_144}), None, "String", "larger than", id="too-large"),
    pytest.param("{}", "bad name", "String", "whitespace", id="name-whitespace"),
    pytest.param("{}", "x" * 81, "String", "longer than 80", id="name-too-long"),
    pytest.param("{}", "a:b", "String", "forbidden character", id="name-forbidden"),
    pytest.param("{}", "17", "Number", "must be of type String", id="name-number"),
    pytest.param("{}", "x", "Binary", "must be of type String", id="name-binary"),
]


@pytest.mark.parametrize(("body", "name", "name_type", "reason"), POISON)
def test_tick_poison_goes_to_dlq_and_neighbours_start(
    harness: Harness, body: str, name: str | None, name_type: str, reason: str
) -> None:
    """A message that can never start goes to the DLQ with a reason; the rest of its group starts."""
    before = harness.send('{"job": 1}', group="g")
    poison = harness.send(body, group="g", name=name, name_type=name_type)
    after = harness.send('{"job": 3}', group="g")
    result = harness.tick()
    assert result["dead_lettered"] == 1
    assert result["started"] == 2
    assert [execution["name"] for execution in harness.executions()] == [before, after]
    [letter] = harness.dead_letters()
    assert letter["Body"] == body
    assert letter["Attributes"]["MessageGroupId"] == "g"
    assert letter["Attributes"]["MessageDeduplicationId"] == poison
    assert reason in letter["MessageAttributes"]["DispatchError"]["StringValue"]
    assert harness.queue_counts() == (0, 0)


def test_tick_exactly_262144_byte_input_starts(harness: Harness) -> None:
    """An input of exactly 262,144 bytes is valid and starts."""
    body = json_of_size(262_144)
    assert len(body.encode()) == 262_144
    harness.send(body)
    assert harness.tick()["started"] == 1


def test_tick_missing_state_machine_stops_loudly_and_keeps_messages(harness: Harness) -> None:
    """A missing state machine raises an error naming it; no message is lost or dead-lettered."""
    harness.monkeypatch.setenv("STATE_MACHINE_ARN", harness.stack.state_machine_arn + "-gone")
    for job in range(3):
        harness.send(json.dumps({"job": job}))
    with pytest.raises(ConfigurationError, match="StateMachineDoesNotExist"):
        harness.tick()
    assert harness.queue_counts() == (3, 0)
    assert harness.dead_letters() == []


def test_tick_deleted_state_machine_mid_batch_releases_every_message(harness: Harness) -> None:
    """When StartExecution says the machine is gone, the whole batch stays on the queue."""
    for job in range(3):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    original = harness.stack.state_machine_arn

    def vanish(params: dict[str, object], **_: object) -> None:
        params["stateMachineArn"] = original + "-gone"

    harness.on("provide-client-params.states.StartExecution", vanish)
    with pytest.raises(ConfigurationError, match="StateMachineDoesNotExist"):
        harness.tick()
    assert harness.queue_counts() == (3, 0)
    assert harness.dead_letters() == []


def test_tick_bad_max_concurrency_stops_loudly_and_keeps_messages(harness: Harness) -> None:
    """A malformed MAX_CONCURRENCY names the variable and touches no message."""
    harness.monkeypatch.setenv("MAX_CONCURRENCY", "lots")
    harness.send("{}")
    with pytest.raises(ConfigurationError, match="MAX_CONCURRENCY"):
        harness.tick()
    assert harness.queue_counts() == (1, 0)


def test_tick_missing_queue_stops_loudly(harness: Harness) -> None:
    """A queue that doesn't exist is a configuration error, not an empty queue."""
    harness.monkeypatch.setenv("QUEUE_URL", harness.stack.queue_url.replace(".fifo", "-gone.fifo"))
    with pytest.raises(ConfigurationError, match="ReceiveMessage"):
        harness.tick()


def test_tick_missing_table_stops_loudly_and_keeps_messages(harness: Harness) -> None:
    """A state table that doesn't exist stops the tick before anything starts."""
    harness.monkeypatch.setenv("STATE_TABLE", "no-such-table")
    harness.send("{}")
    with pytest.raises(ConfigurationError, match="no-such-table"):
        harness.tick()
    assert harness.executions() == []
    assert harness.queue_counts() == (1, 0)


def test_tick_stops_admitting_when_time_runs_low(harness: Harness) -> None:
    """With less time left than the margin, nothing is received and nothing is lost."""
    harness.send("{}")
    result = harness.tick(remaining_seconds=5)
    assert result["stopped"] == "time"
    assert result["started"] == 0
    assert harness.queue_counts() == (1, 0)


def test_tick_input_rejected_by_step_functions_goes_to_dlq(harness: Harness) -> None:
    """Input Step Functions refuses (beyond what the dispatcher checks) is dead-lettered with its reason."""
    harness.fail("states.StartExecution", "InvalidExecutionInput", "Input is too deep")
    harness.send('{"deep": 1}')
    result = harness.tick()
    assert result["dead_lettered"] == 1
    [letter] = harness.dead_letters()
    reason = letter["MessageAttributes"]["DispatchError"]["StringValue"]
    assert "InvalidExecutionInput" in reason
    assert "Input is too deep" in reason


def test_tick_failed_dead_letter_keeps_the_message_queued(harness: Harness) -> None:
    """If the DLQ refuses a poison message, it stays on the queue; the rest of its group starts."""
    harness.fail("sqs.SendMessage", "ServiceUnavailable", "try later", status=503)
    harness.send("not json", group="g")
    after = harness.send('{"job": 2}', group="g")
    result = harness.tick()
    assert result["dead_lettered"] == 0
    assert result["released"] == 1
    assert result["stopped"] == "throttled"
    assert [execution["name"] for execution in harness.executions()] == [after]
    assert harness.queue_counts() == (1, 0)


class _RunningOutContext(LocalContext):
    """A Lambda context whose remaining time drops below the margin after the lease and the first check."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    def get_remaining_time_in_millis(self) -> int:
        self.checks += 1
        return 30_000 if self.checks <= 2 else 5_000


def test_tick_stops_between_rounds_when_time_runs_low(harness: Harness) -> None:
    """Time is checked before every round: a round in progress finishes, no new one starts."""
    harness.configure(200)
    for job in range(ROUND_SIZE + 15):
        harness.send(json.dumps({"job": job}), group=f"g{job}")
    result = handler.lambda_handler({}, _RunningOutContext())
    assert result["started"] == ROUND_SIZE
    assert result["stopped"] == "time"
    assert harness.queue_counts() == (15, 0)


def test_tick_waits_for_a_redrive_job_s_execution_describe_does_not_show_yet(harness: Harness) -> None:
    """A redrive job naming no known execution waits while it is young, then is dead-lettered.

    DescribeExecution may not show a new execution yet; only the job's group waits meanwhile.
    """
    harness.configure(3)
    with freeze_time(tick=True) as frozen:
        harness.sqs.send_message(
            QueueUrl=harness.stack.queue_url,
            MessageBody="{}",
            MessageGroupId="g",
            MessageDeduplicationId="redrive-ghost",
            MessageAttributes=Job("{}", "g", name="ghost", redrive_count=0).attributes(),
        )
        harness.send('{"behind": 1}', group="g", name="behind-the-ghost")
        harness.send('{"other": 1}', group="other", name="another-group")
        young = harness.tick()
        assert (young["started"], young["dead_lettered"]) == (1, 0), "only the other group went"
        assert young["stopped"] == "waiting", "the round after hands back the same two: not received again"
        advance(frozen, RECENT_START_WINDOW_SECONDS + 1)
        old = harness.tick()
    assert (old["started"], old["dead_lettered"]) == (1, 1)
    [letter] = harness.dead_letters()
    reason = letter["MessageAttributes"]["DispatchError"]["StringValue"]
    assert reason == "redrive: no execution named 'ghost'"
