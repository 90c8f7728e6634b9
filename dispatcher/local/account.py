"""The emulator's account: region, account id, fake credentials, and pointing boto3 at an endpoint."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


@contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """Set environment variables for a while, then put back what was there."""
    saved = {key: os.environ.get(key) for key in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def pointed_at(endpoint_url: str) -> contextlib.AbstractContextManager[None]:
    """Point every boto3 client at ``endpoint_url`` with fake credentials."""
    return environment({**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint_url})


def local_client(service: str, endpoint_url: str) -> Any:
    """A boto3 client for the emulator at ``endpoint_url``, whatever the environment says."""
    return boto3.client(
        service,  # type: ignore[call-overload]  # any service the emulator serves
        region_name=REGION,
        endpoint_url=endpoint_url,
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
