"""Bad configuration of the CLI (docs/cli.md): no region, credentials, emulator or stack — one line each."""

from __future__ import annotations

import http.server
import json
import socket
import threading

import boto3
import pytest
from moto import mock_aws

from tests.support.bad_input import CONFIGURED, PREFIX, run


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.usefixtures("shell")
def test_no_region_names_the_option_and_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No region anywhere: exit 1, and the two ways to give one."""
    for name, value in CONFIGURED.items():
        monkeypatch.setenv(name, value)
    assert run(capsys, ["dead-letters"]) == (
        1,
        [PREFIX + "no AWS region: pass --region or set AWS_DEFAULT_REGION (the emulator's is us-east-1)"],
    )


@pytest.mark.usefixtures("shell")
def test_no_credentials_says_where_credentials_come_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A region but no credentials: exit 1, and where credentials come from (the emulator's exports too)."""
    for name, value in CONFIGURED.items():
        monkeypatch.setenv(name, value)
    status, printed = run(capsys, ["dead-letters", "--region", "us-east-1"])
    assert (status, len(printed)) == (1, 1)
    assert printed[0].startswith(
        PREFIX + "no AWS credentials: configure credentials (aws configure, AWS_PROFILE"
    )
    assert "the exports `dispatcher local` prints" in printed[0]


@pytest.mark.usefixtures("shell")
def test_nothing_listening_at_the_endpoint_asks_whether_the_emulator_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A refused connection: exit 1, the endpoint, and the likely fix."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    status, printed = run(
        capsys, ["--stack", "jobs", "--region", "us-east-1", "--endpoint-url", endpoint, "status"]
    )
    assert (status, printed) == (
        1,
        [
            PREFIX + f"nothing answers at {endpoint}: is `dispatcher local` running?"
            " (else check --endpoint-url or AWS_ENDPOINT_URL)"
        ],
    )


@pytest.mark.usefixtures("shell")
def test_an_answer_that_is_not_aws_asks_to_check_the_region_and_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An endpoint answering with an HTML error page (moto does, for a region it lacks): exit 1, one line."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")

    class HtmlError(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            page = b"<!doctype html>\n<title>500 Internal Server Error</title>\n"
            self.send_response(500)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *_: object) -> None:
            """Quiet."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HtmlError)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        status, printed = run(
            capsys, ["--stack", "jobs", "--region", "us-east-9", "--endpoint-url", endpoint, "status"]
        )
    finally:
        server.shutdown()
        server.server_close()
    assert (status, printed) == (
        1,
        [
            PREFIX + f"{endpoint} answered with something that is not an AWS response:"
            " check --region (the emulator's is us-east-1) and --endpoint-url"
        ],
    )


@pytest.mark.usefixtures("shell")
def test_an_unknown_stack_names_it_and_where_it_was_looked_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--stack` naming no stack: exit 1, the stack and the region looked in."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        status, printed = run(capsys, ["--stack", "nope", "--region", "eu-west-1", "status"])
    assert (status, len(printed)) == (1, 1)
    assert printed[0].startswith(PREFIX + "stack nope not found in eu-west-1:")
    assert printed[0].endswith("(check --stack and --region)")


@pytest.mark.usefixtures("shell")
def test_a_stack_without_the_outputs_names_every_missing_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stack that isn't a (complete) dispatcher stack: exit 1, every output the command needs named."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="bare", TemplateBody=json.dumps(template)
        )
        status, printed = run(capsys, ["--stack", "bare", "--region", "us-east-1", "status"])
    assert (status, printed) == (
        1,
        [
            PREFIX
            + "stack bare lacks JobQueueUrl, DeadLetterQueueUrl, StateMachineArn, parameter MaxConcurrency:"
            " is it a dispatcher stack, fully deployed?"
        ],
    )


@pytest.mark.usefixtures("shell")
def test_an_unknown_profile_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """AWS_PROFILE naming no profile: exit 1, the profile named, no traceback."""
    monkeypatch.setenv("AWS_PROFILE", "nope")
    for name, value in CONFIGURED.items():
        monkeypatch.setenv(name, value)
    status, printed = run(capsys, ["dead-letters"])
    assert (status, printed) == (1, [PREFIX + "The config profile (nope) could not be found"])
