"""SQS: a queue a command reads whole (the failure spool, the DLQ), holding what it read."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dispatcher.adapters.errors import translated
from dispatcher.adapters.sqs import queue_depth
from dispatcher.core.batching import SQS_BATCH_LIMIT, chunks
from dispatcher.core.errors import DispatcherError
from dispatcher.core.messages import Held

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

READ_VISIBILITY_SECONDS = 300
"""How long a read hides spool or dead-letter messages from other readers (renewed while working)."""
RENEW_MARGIN_SECONDS = 60.0
READ_WAIT_SECONDS = 1
"""Each receive long-polls this long: an empty short poll may miss messages on other SQS hosts."""


class QueueReading:
    """Reads a whole queue, hiding what it read until each message is deleted or shown again.

    SQS can't show a message without receiving it: a read hides messages for a while
    (renewed while this command still works on them) and gives back every one it did
    not delete, on success, on error and on Ctrl-C.
    """

    def __init__(
        self,
        client: SQSClient,
        url: str,
        *,
        visibility_seconds: int = READ_VISIBILITY_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self.url = url
        self._visibility = visibility_seconds
        self._clock = clock
        self.held: dict[str, Held] = {}

    def receive(self, count: int = SQS_BATCH_LIMIT) -> list[Held]:
        """Receive up to ``count`` more messages (at most 10), holding them."""
        with translated(f"ReceiveMessage on {self.url}"):
            response = self._client.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=max(1, min(SQS_BATCH_LIMIT, count)),
                VisibilityTimeout=self._visibility,
                WaitTimeSeconds=READ_WAIT_SECONDS,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            )
        hidden_until = self._clock() + self._visibility
        received = []
        for raw in response.get("Messages", []):
            held = Held(
                message_id=raw["MessageId"],
                receipt_handle=raw["ReceiptHandle"],
                body=raw.get("Body", ""),
                hidden_until=hidden_until,
                attributes=dict(raw.get("MessageAttributes", {})),
                system={str(key): str(value) for key, value in raw.get("Attributes", {}).items()},
            )
            self.held[held.message_id] = held
            received.append(held)
        return received

    def read_all(self, progress: Callable[[int], None] | None = None) -> list[Held]:
        """Receive until the queue shows nothing more; every message read, in receive order."""
        read: dict[str, Held] = {}
        while True:
            self.keep_hidden()
            batch = self.receive()
            if not batch:
                return list(read.values())
            # A message whose hold ran out while reading comes again: it is listed once.
            read.update((held.message_id, held) for held in batch)
            if progress is not None:
                progress(len(read))

    def keep_hidden(self) -> None:
        """Renew the hold on every message that would reappear soon."""
        now = self._clock()
        due = [held for held in self.held.values() if held.hidden_until - now < RENEW_MARGIN_SECONDS]
        for batch in chunks(due, SQS_BATCH_LIMIT):
            self._change_visibility(batch, self._visibility)
            for held in batch:
                held.hidden_until = now + self._visibility

    def delete(self, messages: Sequence[Held]) -> list[Held]:
        """Delete messages; those SQS did not delete (they will come back)."""
        failed: list[Held] = []
        for batch in chunks(list(messages), SQS_BATCH_LIMIT):
            entries = [
                {"Id": str(index), "ReceiptHandle": held.receipt_handle} for index, held in enumerate(batch)
            ]
            with translated(f"DeleteMessageBatch on {self.url}"):
                response = self._client.delete_message_batch(QueueUrl=self.url, Entries=entries)  # type: ignore[arg-type]
            undeleted = [batch[int(entry["Id"])] for entry in response.get("Failed", [])]
            failed += undeleted
            for held in batch:
                if held not in undeleted:  # still held: given back with the rest
                    self.held.pop(held.message_id, None)
        return failed

    def show_all_again(self) -> None:
        """Give back every message still held (visible again at once). Best effort."""
        held = list(self.held.values())
        self.held.clear()
        for batch in chunks(held, SQS_BATCH_LIMIT):
            with contextlib.suppress(DispatcherError):  # they reappear when their hold runs out
                self._change_visibility(batch, 0)

    def _change_visibility(self, batch: Sequence[Held], seconds: int) -> None:
        entries = [
            {"Id": str(index), "ReceiptHandle": held.receipt_handle, "VisibilityTimeout": seconds}
            for index, held in enumerate(batch)
        ]
        with translated(f"ChangeMessageVisibilityBatch on {self.url}"):
            self._client.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)  # type: ignore[arg-type]

    def depth(self) -> int:
        """About how many messages the queue holds (visible and in flight)."""
        depth = queue_depth(self._client, self.url)
        return depth.visible + depth.in_flight
