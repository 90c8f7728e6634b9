"""SQS: the source FIFO queue, its dead-letter queue, and queue depths."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from dispatcher.adapters.errors import translated
from dispatcher.core.admission import DeadLetter
from dispatcher.core.batching import SQS_BATCH_LIMIT, chunks
from dispatcher.core.errors import ConfigurationError, TransientError
from dispatcher.core.messages import EXECUTION_NAME_ATTRIBUTE, QueuedMessage, dead_letter_attributes

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef


def _to_message(raw: MessageTypeDef) -> QueuedMessage:
    system = raw.get("Attributes", {})
    attributes: dict[str, dict[str, str]] = {}
    for key, value in raw.get("MessageAttributes", {}).items():
        attributes[key] = {"DataType": value["DataType"]}
        if "StringValue" in value:
            attributes[key]["StringValue"] = value["StringValue"]
    name_attribute = raw.get("MessageAttributes", {}).get(EXECUTION_NAME_ATTRIBUTE)
    return QueuedMessage(
        message_id=raw["MessageId"],
        receipt_handle=raw["ReceiptHandle"],
        body=raw.get("Body", ""),
        group_id=system.get("MessageGroupId", ""),
        receive_count=int(system.get("ApproximateReceiveCount", "1")),
        sent_at=int(system["SentTimestamp"]) / 1000 if "SentTimestamp" in system else None,
        execution_name=None if name_attribute is None else name_attribute.get("StringValue"),
        execution_name_type=None if name_attribute is None else name_attribute["DataType"],
        attributes=attributes,
    )


@dataclass(frozen=True)
class Depth:
    """About how many messages a queue holds."""

    visible: int
    in_flight: int


def queue_depth(client: SQSClient, url: str) -> Depth:
    """Visible and in-flight messages on a queue (SQS's approximate counts)."""
    with translated(f"GetQueueAttributes on {url}"):
        attributes = client.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
    return Depth(
        visible=int(attributes.get("ApproximateNumberOfMessages", 0)),
        in_flight=int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
    )


class SourceQueue:
    """The FIFO queue producers send jobs to."""

    def __init__(self, client: SQSClient, url: str, wait_seconds: int = 1) -> None:
        self._client = client
        self.url = url
        self._wait_seconds = wait_seconds

    def receive(self, count: int, *, wait: bool = True) -> list[QueuedMessage]:
        """Receive up to ``count`` messages (at most 10), in queue order.

        ``wait``: long-poll for the configured time; a round's later receives don't, as
        an empty answer there only means the visible groups are all in flight.
        """
        with translated("ReceiveMessage"):
            response = self._client.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=count,
                WaitTimeSeconds=self._wait_seconds if wait else 0,
                MessageSystemAttributeNames=["MessageGroupId", "ApproximateReceiveCount", "SentTimestamp"],
                MessageAttributeNames=["All"],
            )
        return [_to_message(raw) for raw in response.get("Messages", [])]

    def delete(self, messages: Sequence[QueuedMessage]) -> list[QueuedMessage]:
        """Delete messages whose work is done; return those SQS failed to delete.

        A message that fails to delete is redelivered later and found already started,
        so a failure here costs a call, never a duplicate.
        """
        return self._in_batches(messages, self._client.delete_message_batch, {}, "DeleteMessageBatch")

    def make_visible(self, messages: Sequence[QueuedMessage]) -> list[QueuedMessage]:
        """Make messages visible again at once; return those that failed.

        A message that fails to become visible simply reappears when its visibility
        timeout ends, so nothing is lost.
        """
        return self._change_visibility(messages, 0)

    def hide(self, messages: Sequence[QueuedMessage], seconds: int) -> list[QueuedMessage]:
        """Keep messages in flight for ``seconds`` (a held job: its group waits); return those that failed."""
        return self._change_visibility(messages, seconds)

    def _change_visibility(self, messages: Sequence[QueuedMessage], seconds: int) -> list[QueuedMessage]:
        return self._in_batches(
            messages,
            self._client.change_message_visibility_batch,
            {"VisibilityTimeout": seconds},
            "ChangeMessageVisibilityBatch",
        )

    def _in_batches(
        self,
        messages: Sequence[QueuedMessage],
        call: Callable[..., Any],
        extra: dict[str, Any],
        action: str,
    ) -> list[QueuedMessage]:
        """Apply a receipt-handle batch call in chunks of 10; return the messages it failed.

        A configuration error (queue gone, access denied) is raised: it would fail
        every tick, and only an error makes that visible.
        """
        failed: list[QueuedMessage] = []
        for chunk in chunks(messages, SQS_BATCH_LIMIT):
            by_id = {str(index): message for index, message in enumerate(chunk)}
            entries = [
                {"Id": key, "ReceiptHandle": message.receipt_handle, **extra}
                for key, message in by_id.items()
            ]
            try:
                with translated(f"{action} on {self.url}"):
                    response = call(QueueUrl=self.url, Entries=entries)
            except ConfigurationError:
                raise
            except (TransientError, ClientError):  # the chunk comes back by itself
                failed.extend(chunk)
                continue
            failed.extend(by_id[entry["Id"]] for entry in response.get("Failed", []))
        return failed


class DeadLetterQueue:
    """The FIFO queue that keeps messages which can never start, with the reason."""

    def __init__(self, client: SQSClient, url: str) -> None:
        self._client = client
        self.url = url

    def send(self, dead_letters: Sequence[DeadLetter]) -> list[DeadLetter]:
        """Copy each message to the DLQ with a `DispatchError`; return those that failed.

        One `SendMessage` per letter: a poison message may be up to 1 MiB, so a batch
        could exceed the request limit. The deduplication id is the source MessageId,
        so a retry after a crash between this send and the source delete does not
        store the message twice. A missing or forbidden DLQ is a configuration error.
        """
        failed: list[DeadLetter] = []
        for letter in dead_letters:
            attributes = dead_letter_attributes(letter.message.attributes, letter.reason)
            try:
                with translated("SendMessage to the dead-letter queue"):
                    self._client.send_message(
                        QueueUrl=self.url,
                        MessageBody=letter.message.body,
                        MessageGroupId=letter.message.group_id,
                        MessageDeduplicationId=letter.message.message_id,
                        MessageAttributes=attributes,  # type: ignore[arg-type]
                    )
            except ConfigurationError:
                raise
            except (TransientError, ClientError):
                failed.append(letter)
        return failed


def send_message(  # noqa: PLR0913, PLR0917 — one argument per part of the message
    client: SQSClient, url: str, body: str, group: str, deduplication_id: str, attributes: dict[str, Any]
) -> None:
    """Send one message as it is (a dead letter going back: no producer rules applied)."""
    request: dict[str, Any] = {
        "QueueUrl": url,
        "MessageBody": body,
        "MessageGroupId": group,
        "MessageDeduplicationId": deduplication_id,
    }
    if attributes:
        request["MessageAttributes"] = attributes
    with translated(f"SendMessage to {url}"):
        client.send_message(**request)
