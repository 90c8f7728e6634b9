"""SQS FIFO in memory: message groups, in-flight hiding, the visibility timeout, and the dead-letter queue.

A receive hands out visible messages in send order, skipping every group that had a
message in flight when it was asked (moto does the same; AWS may favour one group, which
changes who gets which message, not how many); the messages it hands out are hidden for
the visibility timeout, and their groups are blocked until each is deleted, released or
seen again. Each action of a queue has AWS's FIFO quota of 300 calls a second. A long
poll that finds nothing answers as soon as a message can be handed out, as AWS does
(looking every `LONG_POLL_STEP_SECONDS`), or after its whole wait. The dead-letter queue
keeps FIFO's 5-minute deduplication window (the dispatcher sends each letter under its
source MessageId, so a letter sent again after a crash is stored once). Not modelled: the
redrive policy's maxReceiveCount, message retention, the job queue's deduplication window
(every message a producer sends here is new).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from dispatcher.core.admission import DeadLetter
from dispatcher.core.batching import SQS_BATCH_LIMIT, chunks
from dispatcher.core.errors import TransientError
from dispatcher.core.messages import EXECUTION_NAME_ATTRIBUTE, QueuedMessage, dead_letter_attributes
from dispatcher.core.quotas import SQS_FIFO_CALLS_PER_ACTION, Bucket
from tests.support.sim.api import Client, LiveBucket
from tests.support.sim.faults import Faults
from tests.support.sim.scheduler import Scheduler

VISIBILITY_TIMEOUT_SECONDS = 120.0
DEDUPLICATION_WINDOW_SECONDS = 300.0
"""The template's job queue."""
LONG_POLL_STEP_SECONDS = 0.05
"""How often a waiting long poll looks again (AWS answers the moment a message can be handed out)."""


@dataclass(eq=False)
class Message:
    """One message on the queue."""

    sequence: int
    message_id: str
    body: str
    group: str
    sent_at: float
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    receive_count: int = 0
    first_received_at: float | None = None
    """When a receive first handed it out (the head of its group reached a tick)."""
    receipt: str | None = None
    """The receipt handle of its latest receive, while it is in flight."""
    hidden_until: float = 0.0


class FifoQueue:
    """One FIFO queue, as AWS keeps it."""

    def __init__(self, scheduler: Scheduler, url: str, quota: Bucket = SQS_FIFO_CALLS_PER_ACTION) -> None:
        """``quota``: calls a second of each action (a queue in high throughput mode has more)."""
        self.url = url
        self._quota = quota
        self._id_prefix = f"m-{url.rsplit('/', 1)[-1].removesuffix('.fifo')}-"
        """MessageIds are unique across queues, as SQS's are (lanes that share a state machine
        start executions named by them)."""
        self._scheduler = scheduler
        self._sequence = itertools.count()
        self._waiting: dict[str, deque[Message]] = {}
        """Group → its visible messages, in send order."""
        self._flying: Counter[str] = Counter()
        """Group → its messages in flight."""
        self._in_flight: dict[str, Message] = {}
        """Receipt handle → message."""
        self._ready: list[tuple[int, str]] = []
        """A heap of (sequence of its first message, group) of groups a receive may hand out."""
        self._expiry: list[tuple[float, str]] = []
        self._buckets: dict[str, LiveBucket] = {}
        self.sent: list[Message] = []
        """Every message ever sent, in send order (the ground truth)."""
        self.deleted = 0

    # -- the producers' side (not the dispatcher's calls) ------------------------------

    def send(
        self,
        body: str,
        group: str,
        name: str | None = None,
        attributes: dict[str, dict[str, str]] | None = None,
    ) -> Message:
        """Enqueue one job, as a producer does (``attributes``: its message attributes, else the name's)."""
        sequence = next(self._sequence)
        if attributes is None:
            attributes = (
                {}
                if name is None
                else {EXECUTION_NAME_ATTRIBUTE: {"DataType": "String", "StringValue": name}}
            )
        message = Message(
            sequence, f"{self._id_prefix}{sequence:09d}", body, group, self._scheduler.now, attributes
        )
        self.sent.append(message)
        self._enqueue(message)
        return message

    def waiting_in(self, group: str) -> int:
        """Visible messages of one group."""
        return len(self._waiting.get(group, ()))

    def depth(self) -> tuple[int, int]:
        """(visible, in flight) messages."""
        return sum(len(messages) for messages in self._waiting.values()), len(self._in_flight)

    # -- AWS's side ---------------------------------------------------------------------

    def admit(self, action: str) -> bool:
        """Whether a call of ``action`` on this queue is within its quota now."""
        bucket = self._buckets.get(action)
        if bucket is None:
            bucket = self._buckets[action] = LiveBucket.of(self._quota, self._scheduler.now)
        return bucket.take(self._scheduler.now) > 0

    def hand_out(self, count: int) -> list[Message]:
        """Up to ``count`` visible messages of groups with none in flight, in send order; now in flight."""
        self._expire()
        now = self._scheduler.now
        taken: list[Message] = []
        this_call: list[tuple[int, str]] = []
        while len(taken) < count:
            group = self._next_group(this_call)
            if group is None:
                break
            message = self._waiting[group].popleft()
            self._flying[group] += 1
            message.receive_count += 1
            if message.first_received_at is None:
                message.first_received_at = self._scheduler.now
            message.receipt = f"{message.message_id}#{message.receive_count}"
            message.hidden_until = now + VISIBILITY_TIMEOUT_SECONDS
            self._in_flight[message.receipt] = message
            heapq.heappush(self._expiry, (message.hidden_until, message.receipt))
            taken.append(message)
            if self._waiting[group]:
                heapq.heappush(this_call, (self._waiting[group][0].sequence, group))
        return taken

    def settle(self, receipt: str, *, delete: bool) -> bool:
        """Delete a message in flight, or make it visible again; False for a receipt handle not valid now."""
        message = self._in_flight.pop(receipt, None)
        if message is None:
            return False
        self._flying[message.group] -= 1
        message.receipt = None
        if delete:
            self.deleted += 1
            self._unblock(message.group)
        else:
            self._enqueue(message)
        return True

    def hide(self, receipt: str, seconds: float) -> bool:
        """Keep a message in flight ``seconds`` from now (its group blocked); False for a stale handle."""
        message = self._in_flight.get(receipt)
        if message is None:
            return False
        message.hidden_until = self._scheduler.now + seconds
        heapq.heappush(self._expiry, (message.hidden_until, receipt))
        return True

    def _enqueue(self, message: Message) -> None:
        """Put a message in its group's place (a new one at the end, a released one before later ones)."""
        messages = self._waiting.setdefault(message.group, deque())
        index = len(messages)
        while index > 0 and messages[index - 1].sequence > message.sequence:
            index -= 1
        messages.insert(index, message)
        self._unblock(message.group)

    def _unblock(self, group: str) -> None:
        if not self._flying[group] and self._waiting.get(group):
            heapq.heappush(self._ready, (self._waiting[group][0].sequence, group))

    def _next_group(self, this_call: list[tuple[int, str]]) -> str | None:
        """The group whose first visible message is oldest: ready, or already handed out in this call."""
        while self._ready:
            sequence, group = self._ready[0]
            messages = self._waiting.get(group)
            if not self._flying[group] and messages and messages[0].sequence == sequence:
                break
            heapq.heappop(self._ready)  # stale: the group was handed out or changed since
        ready = self._ready[0] if self._ready else None
        taken = this_call[0] if this_call else None
        if ready is None and taken is None:
            return None
        if taken is None or (ready is not None and ready < taken):
            return heapq.heappop(self._ready)[1]
        return heapq.heappop(this_call)[1]

    def _expire(self) -> None:
        """Messages whose visibility timeout ran out are visible again (their receiver died)."""
        now = self._scheduler.now
        while self._expiry and self._expiry[0][0] <= now:
            _, receipt = heapq.heappop(self._expiry)
            message = self._in_flight.get(receipt)
            if message is not None and message.hidden_until <= now:
                self.settle(receipt, delete=False)


def _queued(message: Message) -> QueuedMessage:
    name = message.attributes.get(EXECUTION_NAME_ATTRIBUTE)
    return QueuedMessage(
        message_id=message.message_id,
        receipt_handle=message.receipt or "",
        body=message.body,
        group_id=message.group,
        execution_name=None if name is None else name.get("StringValue"),
        execution_name_type=None if name is None else name["DataType"],
        receive_count=message.receive_count,
        sent_at=message.sent_at,
        attributes={key: dict(value) for key, value in message.attributes.items()},
    )


class JobQueueView:
    """The `JobQueue` port on one container's SQS client."""

    def __init__(
        self, queue: FifoQueue, client: Client, scheduler: Scheduler, wait_seconds: int, faults: Faults
    ) -> None:
        self._queue = queue
        self._client = client
        self._scheduler = scheduler
        self._wait_seconds = wait_seconds
        self._faults = faults

    def receive(self, count: int, *, wait: bool = True) -> list[QueuedMessage]:
        """``ReceiveMessage``: up to ``count`` messages; with none, a long poll waits for the first."""

        def hand_out() -> list[Message]:
            messages = self._queue.hand_out(count)
            steps = math.ceil(self._wait_seconds / LONG_POLL_STEP_SECONDS) if wait else 0
            for step in range(steps):
                if messages:
                    break
                self._scheduler.sleep(
                    min(LONG_POLL_STEP_SECONDS, self._wait_seconds - step * LONG_POLL_STEP_SECONDS)
                )
                messages = self._queue.hand_out(count)
            return messages

        admit = lambda: self._queue.admit("ReceiveMessage")  # noqa: E731 — a call's quota
        return [
            _queued(message)
            for message in self._client.call("ReceiveMessage", "ReceiveMessage", admit, hand_out)
        ]

    def delete(self, messages: Sequence[QueuedMessage]) -> list[QueuedMessage]:
        """``DeleteMessageBatch`` in chunks of 10; the messages not deleted."""
        return self._in_batches(messages, "DeleteMessageBatch", delete=True)

    def make_visible(self, messages: Sequence[QueuedMessage]) -> list[QueuedMessage]:
        """``ChangeMessageVisibilityBatch`` to 0 in chunks of 10; the messages not changed."""
        return self._in_batches(messages, "ChangeMessageVisibilityBatch", delete=False)

    def hide(self, messages: Sequence[QueuedMessage], seconds: int) -> list[QueuedMessage]:
        """``ChangeMessageVisibilityBatch`` to ``seconds`` in chunks of 10; the messages not changed."""
        return self._in_batches(
            messages, "ChangeMessageVisibilityBatch", delete=False, visibility_seconds=seconds
        )

    def _in_batches(
        self, messages: Sequence[QueuedMessage], action: str, *, delete: bool, visibility_seconds: int = 0
    ) -> list[QueuedMessage]:
        failed: list[QueuedMessage] = []
        for chunk in chunks(messages, SQS_BATCH_LIMIT):

            def settle(chunk: Sequence[QueuedMessage] = chunk) -> list[QueuedMessage]:
                return [
                    message
                    for message in chunk
                    if (delete and self._faults.delete_fails())
                    or not (
                        self._queue.hide(message.receipt_handle, visibility_seconds)
                        if visibility_seconds
                        else self._queue.settle(message.receipt_handle, delete=delete)
                    )
                ]

            try:
                failed += self._client.call(
                    action, f"{action} on {self._queue.url}", lambda: self._queue.admit(action), settle
                )
            except TransientError:  # as the adapter: a chunk that fails comes back by itself
                failed.extend(chunk)
        return failed


class DeadLetterBox:
    """The FIFO dead-letter queue: what was sent there, with its attributes (the reason among them)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._bucket = LiveBucket.of(SQS_FIFO_CALLS_PER_ACTION, scheduler.now)
        self.letters: list[tuple[QueuedMessage, dict[str, dict[str, str]]]] = []
        self._deduplicated: dict[str, float] = {}
        """Deduplication id → when it was first sent."""

    def admit(self) -> bool:
        """Whether a `SendMessage` to this queue is within its quota now."""
        return self._bucket.take(self._scheduler.now) > 0

    def store(self, message: QueuedMessage, attributes: dict[str, dict[str, str]]) -> None:
        """Keep a letter sent under the source MessageId, unless that id was sent within 5 minutes."""
        now = self._scheduler.now
        first = self._deduplicated.get(message.message_id)
        if first is not None and now - first < DEDUPLICATION_WINDOW_SECONDS:
            return
        self._deduplicated[message.message_id] = now
        self.letters.append((message, attributes))


class DeadLettersView:
    """The `DeadLetters` port on one container's SQS client: one `SendMessage` per letter, as the adapter."""

    def __init__(self, box: DeadLetterBox, client: Client) -> None:
        self._box = box
        self._client = client

    def send(self, dead_letters: Sequence[DeadLetter]) -> list[DeadLetter]:
        """Copy each message with its `DispatchError`; those not sent (they are released)."""
        failed = []
        for letter in dead_letters:

            def store(letter: DeadLetter = letter) -> None:
                attributes = dead_letter_attributes(letter.message.attributes, letter.reason)
                self._box.store(letter.message, attributes)

            try:
                self._client.call(
                    "SendMessage", "SendMessage to the dead-letter queue", self._box.admit, store
                )
            except TransientError:
                failed.append(letter)
        return failed
