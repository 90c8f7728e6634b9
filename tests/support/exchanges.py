"""What the fault middleware (`tests.support.faulty_aws`) sees and answers: requests and responses.

A request is named by its service and operation (from its JSON protocol's target); a
response is buffered, so the middleware can inspect it or replace it with an AWS error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

THROTTLE_CODES = {
    "states": "ThrottlingException",
    "sqs": "RequestThrottled",
    "dynamodb": "ThrottlingException",
    "ssm": "ThrottlingException",
}
SERVICE_BY_TARGET = {
    "AWSStepFunctions": "states",
    "AmazonSQS": "sqs",
    "DynamoDB_20120810": "dynamodb",
    "AmazonSSM": "ssm",
}


@dataclass
class Request:
    """One request as the middleware sees it."""

    service: str
    operation: str
    body: dict[str, Any]
    from_dispatcher: bool


@dataclass
class Response:
    """A WSGI response, buffered so it can be inspected or replaced."""

    status: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def ok(self) -> bool:
        """2xx."""
        return self.status.startswith("2")

    def json(self) -> Any:
        """The JSON body."""
        return json.loads(self.body or b"{}")


def json_response(status: int, document: dict[str, Any]) -> Response:
    """A JSON-protocol response."""
    reason = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}[status]
    body = json.dumps(document, default=str).encode()
    headers = [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))]
    return Response(f"{status} {reason}", headers, body)


def error_response(code: str, message: str, status: int = 400) -> Response:
    """An AWS JSON-protocol error, as botocore parses it."""
    return json_response(status, {"__type": code, "message": message})
