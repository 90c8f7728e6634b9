"""The in-memory AWS behaves as AWS does where the tick relies on it: time, FIFO, lag, quotas, writes."""

from __future__ import annotations

import json
import math

import pytest

from dispatcher.core.admission import DeadLetter
from dispatcher.core.errors import ExecutionExistsError, RejectedInputError, TransientError
from dispatcher.core.executions import execution_arn
from tests.support.plans import Lag
from tests.support.records import starts_at
from tests.support.sim.api import LiveBucket
from tests.support.sim.aws import InMemoryAws
from tests.support.sim.checks import in_process
from tests.support.sim.items import QUERY_PAGE_BYTES, READ_UNIT_BYTES
from tests.support.sim.scheduler import Scheduler, SimPool

pytestmark = pytest.mark.no_cover
"""Scale and whole runs of the in-memory AWS: untraced (tracing doubles a test's CPU time, and the
same lines run, measured, in tests/unit and tests/integration; CONTRIBUTING, "The suite's time")."""


def test_participants_run_one_at_a_time_in_the_order_of_virtual_time() -> None:
    """Two threads that sleep interleave by their clocks, not the wall's; the driver is back at its time."""
    scheduler = Scheduler(0.0)
    scheduler.attach()
    seen: list[tuple[str, float]] = []

    def sleeper(name: str, step: float) -> None:
        for _ in range(3):
            scheduler.sleep(step)
            seen.append((name, scheduler.now))

    scheduler.spawn(lambda: sleeper("slow", 2.0), "slow")
    scheduler.spawn(lambda: sleeper("fast", 0.5), "fast")
    scheduler.run_until(10.0)
    scheduler.stop()
    assert seen == [("fast", 0.5), ("fast", 1.0), ("fast", 1.5), ("slow", 2.0), ("slow", 4.0), ("slow", 6.0)]
    assert scheduler.now == 10.0
    assert scheduler.errors == []


def test_a_pool_runs_width_calls_at_once_and_hands_back_every_result_in_order() -> None:
    """Eight one-second calls on four threads take two seconds; a failure is handed back, not raised."""
    scheduler = Scheduler(0.0)
    scheduler.attach()
    results: list[object] = []

    def call(item: int) -> int:
        scheduler.sleep(1.0)
        if item == 5:
            raise ValueError("five")
        return item * 10

    def parent() -> None:
        results.extend(SimPool(scheduler, 4).gather(call, list(range(8))))
        results.append(scheduler.now)

    scheduler.spawn(parent, "parent")
    scheduler.run_until(60.0)
    scheduler.stop()
    *values, finished = results
    assert [value for index, value in enumerate(values) if index != 5] == [0, 10, 20, 30, 40, 60, 70]
    assert isinstance(values[5], ValueError)
    assert finished == 2.0


def test_a_bucket_grants_its_size_then_its_refill_rate() -> None:
    """AWS's token bucket: a burst of its size, then as many a second as it refills."""
    bucket = LiveBucket(size=3, refill=2, updated=0.0)
    assert [bucket.take(0.0) for _ in range(4)] == [1, 1, 1, 0]
    assert [bucket.take(1.0) for _ in range(3)] == [1, 1, 0]
    assert bucket.take(10.0, 5, partial=True) == 3


def test_a_throttled_call_is_retried_as_botocore_does_then_gives_up(aws: InMemoryAws) -> None:
    """Throttled: retried with backoff up to the client's attempts, each counted; then a TransientError."""
    clients = aws.clients()
    outcome: list[object] = []

    def caller() -> None:
        began = aws.scheduler.now
        try:
            clients.sqs.call("ReceiveMessage", "ReceiveMessage", lambda: False)
        except TransientError as error:
            outcome.extend([str(error), aws.scheduler.now - began])

    aws.scheduler.spawn(caller, "caller")
    aws.scheduler.run_until(aws.scheduler.now + 60)
    message, elapsed = outcome
    assert message == "ReceiveMessage failed with ThrottlingException: Rate exceeded"
    assert (aws.usage.calls["ReceiveMessage"], aws.usage.throttles["ReceiveMessage"]) == (4, 4)
    assert 4 * aws.latency <= elapsed <= 4 * aws.latency + 1 + 2 + 4  # three backoffs of rand * 1, 2, 4


def test_fifo_hands_out_in_send_order_and_blocks_a_group_while_one_of_its_messages_is_in_flight(
    aws: InMemoryAws,
) -> None:
    """A receive takes the oldest messages of groups with none in flight; release puts them back in order."""
    for index, group in enumerate(["a", "a", "b", "a", "c"]):
        aws.queue.send(json.dumps({"job": index}), group)
    queue = aws.ports(aws.clients()).default.queue
    received: list[list[str]] = []

    def body() -> None:
        first = queue.receive(2)
        received.append([message.body for message in first])
        received.append([message.body for message in queue.receive(10)])
        queue.make_visible(first[1:])
        queue.delete(first[:1])
        received.append([message.body for message in queue.receive(10)])

    in_process(aws, body)
    assert received == [
        ['{"job": 0}', '{"job": 1}'],  # group a twice: nothing of a was in flight before
        ['{"job": 2}', '{"job": 4}'],  # a is in flight: b and c only
        ['{"job": 1}', '{"job": 3}'],  # a again, in send order; b and c still in flight
    ]


def test_fifo_messages_come_back_when_their_visibility_timeout_runs_out(aws: InMemoryAws) -> None:
    """A receiver that dies leaves its messages hidden for 120 s, then they are received again."""
    aws.queue.send("{}", "g")
    queue = aws.ports(aws.clients()).default.queue
    counts: list[int] = []

    def body() -> None:
        counts.append(len(queue.receive(1)))
        aws.scheduler.sleep(119)
        counts.append(len(queue.receive(1)))
        aws.scheduler.sleep(2)
        again = queue.receive(1)
        counts.extend([len(again), again[0].receive_count])

    in_process(aws, body)
    assert counts == [1, 0, 1, 2]


def test_a_long_poll_answers_when_a_message_comes_and_waits_its_whole_wait_when_none_does(
    aws: InMemoryAws,
) -> None:
    """As AWS's: a job sent 0.3 s into a 1 s poll is handed out then; with none sent, the poll takes 1 s."""
    queue = aws.ports(aws.clients(), wait_seconds=1).default.queue
    seen: list[tuple[int, float]] = []

    def body() -> None:
        began = aws.scheduler.now
        aws.scheduler.call_at(began + 0.3, lambda: aws.queue.send("{}", "g"))
        seen.append((len(queue.receive(10)), aws.scheduler.now - began))
        began = aws.scheduler.now
        seen.append((len(queue.receive(10)), aws.scheduler.now - began))

    in_process(aws, body)
    (first, came_after), (second, empty_after) = seen
    assert first == 1
    assert 0.3 <= came_after <= 0.3 + 0.05 + 0.1, (
        "handed out within a step of its send (and a call's latency)"
    )
    assert second == 0
    assert 1.0 <= empty_after <= 1.1, "an empty poll waits its whole wait"


def test_the_dead_letter_queue_keeps_a_letter_sent_again_only_after_five_minutes(aws: InMemoryAws) -> None:
    """FIFO deduplication by the source MessageId: again at 299 s is dropped, at 301 s stored (as on AWS)."""
    source = aws.queue.send("{not json", "g")
    ports = aws.ports(aws.clients())

    def body() -> None:
        [message] = ports.default.queue.receive(1)
        letter = DeadLetter(message, "input is not valid JSON")
        for pause in (0, 299, 2):
            aws.scheduler.sleep(pause)
            assert ports.default.dead_letters.send([letter]) == []

    in_process(aws, body)
    sent = [
        (message.message_id, attributes["DispatchError"]["StringValue"])
        for message, attributes in aws.dead_letters.letters
    ]
    assert source.message_id.startswith("m-")
    assert sent == [(source.message_id, "input is not valid JSON")] * 2


def test_start_execution_is_idempotent_only_while_running_with_the_same_input(aws: InMemoryAws) -> None:
    """Same name and input while RUNNING: the same ARN; another input, or ended: ExecutionAlreadyExists."""
    machine = aws.ports(aws.clients()).default.admissions
    results: list[object] = []

    def body() -> None:
        arn = machine.start("job-1", '{"seconds": 5}')
        results.append(machine.start("job-1", '{"seconds": 5}') == arn)
        for name, execution_input in (("job-1", '{"other": 1}'), ("bad name", "{}")):
            try:
                machine.start(name, execution_input)
            except (ExecutionExistsError, RejectedInputError) as error:
                results.append(type(error).__name__)
        aws.scheduler.sleep(6)
        try:
            machine.start("job-1", '{"seconds": 5}')
        except ExecutionExistsError:
            results.append("ended")

    in_process(aws, body)
    assert results == [True, "ExecutionExistsError", "RejectedInputError", "ended"]
    assert len(aws.world.executions) == 1


def test_the_list_and_describe_lag_behind_starts_and_ends() -> None:
    """A new execution is missing from both reads within the lag; an ended one is still listed RUNNING."""
    aws = InMemoryAws(lag=Lag(start=10.0, end=10.0, describe=10.0, flaky=True), seed=3)
    machine = aws.ports(aws.clients()).default.state_machine
    seen: list[tuple[float, int, str | None]] = []

    def body() -> None:
        machine.start("job-1", '{"seconds": 30}')
        for _ in range(10):
            listing = machine.list_running(None, {}, aws.scheduler.now)
            state = machine.state_of("job-1")
            seen.append((aws.scheduler.now, len(listing.executions), None if state is None else state.status))
            aws.scheduler.sleep(5)

    in_process(aws, body)
    aws.scheduler.stop()
    started = aws.world.executions[execution_arn(aws.state_machine_arn, "job-1")].started_at
    assert any(listed == 0 for at, listed, _ in seen if at - started < 10)  # missing while new
    assert all(listed == 1 and status == "RUNNING" for at, listed, status in seen if 10 <= at - started < 30)
    assert any(listed == 1 for at, listed, _ in seen if 30 <= at - started < 40)  # still listed, ended
    assert all(listed == 0 for at, listed, _ in seen if at - started >= 40)


def test_a_batch_write_short_of_units_writes_what_fits_and_leaves_the_rest(aws: InMemoryAws) -> None:
    """BatchWriteItem on a partition out of write units: a prefix is written, the rest unprocessed."""
    table = aws.ports(aws.clients()).ledger
    results: list[int] = []

    def body() -> None:
        aws.table.write(1000)  # another writer took every unit: the call's 20 ms refill 20
        now = aws.scheduler.now  # 25 moments: 25 items of 1 unit (starts of one moment share one)
        records = [
            record
            for index in range(25)
            for record in starts_at(table, {f"job-{index}": "g"}, now + index / 1000)
        ]
        results.append(len(table.record(records)))
        results.append(len(table.window(aws.scheduler.now - 60).starts))

    in_process(aws, body)
    assert results == [5, 20]
    assert aws.usage.units["WriteRequestUnits"] == 1020


def test_a_query_reads_a_megabyte_a_page_and_costs_a_read_unit_per_4_kb(aws: InMemoryAws) -> None:
    """Thousands of records: several Query pages, strongly consistent units for every byte read."""
    table = aws.ports(aws.clients()).ledger
    found: list[int] = []

    def body() -> None:
        for batch in range(400):
            records = starts_at(
                table, {f"job-{batch}-{index}": "group" for index in range(25)}, aws.scheduler.now
            )
            assert table.record(records) == []
            aws.scheduler.sleep(0.05)
        found.append(len(table.window(aws.scheduler.now - 90).starts))

    in_process(aws, body)
    assert found == [10_000]
    sizes = [stored.size for page in aws.table.query(0.0) for stored in page]
    total = sum(sizes)
    pages = aws.usage.calls["Query"]
    assert math.ceil(total / QUERY_PAGE_BYTES) <= pages <= math.ceil(total / (QUERY_PAGE_BYTES - max(sizes)))
    assert (
        math.ceil(total / READ_UNIT_BYTES)
        <= aws.usage.units["ReadRequestUnits"]
        <= total // READ_UNIT_BYTES + pages
    )


@pytest.mark.parametrize("holder_time_left", [30.0, -1.0])
def test_the_lease_is_taken_once_until_its_holder_lets_go_or_its_time_is_up(
    aws: InMemoryAws, holder_time_left: float
) -> None:
    """The adapter's conditions: a live keeper keeps it (and can be asked again); an expired one loses it."""
    first, second = (aws.ports(aws.clients()).lease for _ in range(2))
    results: list[bool] = []

    def body() -> None:
        now = aws.scheduler.now
        results.append(first.acquire("one", now, now + holder_time_left))
        now = aws.scheduler.now
        results.append(second.acquire("two", now, now + 30))
        results.append(second.ask_again("two", aws.scheduler.now))
        results.append(first.take_ask("one") is not None)

    in_process(aws, body)
    expected = [True, False, True, True] if holder_time_left > 0 else [True, True, False, False]
    assert results == expected
