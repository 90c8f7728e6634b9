"""Bad input, one rule (docs/cli.md): what the command line, its files or settings get wrong is a usage error.

Found before any AWS call, reported together (a line a problem), exit status 2, and
nothing sent. What AWS refuses is exit status 1, with the fix when the cause is known.
The CLI runs in-process here: every usage row would fail its test by touching AWS.
"""

from __future__ import annotations

import http.server
import io
import json
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from dispatcher import cli as cli_module
from dispatcher.cli.config import Aws
from dispatcher.settings import STACK_OUTPUTS, variable

CONFIGURED = {
    "QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo",
    "DEAD_LETTER_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dlq.fifo",
    "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:work",
    "STATE_TABLE": "jobs-state",
    "MAX_CONCURRENCY": "5",
}
LINES = {
    "no-group.jsonl": '{"input": {"x": 2}}\n',
    "mixed.jsonl": (
        '{"input": {"n": 1}, "group": "a"}\n'
        "{broken\n"
        '{"body": "not json", "group": "b"}\n'
        "\n"
        '{"input": {"n": 3}, "group": "a", "name": "has space"}\n'
        '{"group": "g"}\n'
        '{"input": {"n": 4}, "group": 7}\n'
    ),
    "unknown-keys.jsonl": (
        '{"input": {"n": 1}, "group": "a", "nmae": "first"}\n'
        '{"input": {"n": 2}, "group": "a", "lane": "urgent"}\n'
    ),
    "collisions.jsonl": (
        '{"input": {"n": 1}, "group": "a", "name": "one"}\n'
        '{"input": {"n": 1}, "group": "a", "name": "one"}\n'
        '{"input": {"n": 2}, "group": "a", "name": "one"}\n'
        '{"input": {"n": 3}, "group": "b", "name": "two"}\n'
        '{"input": {"n": 4}, "group": "b", "name": "two"}\n'
    ),
}
PREFIX = "dispatcher: error: "


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A shell with no dispatcher settings, no AWS configuration, and the test's files in the cwd."""
    names = {variable(name) for name in STACK_OUTPUTS} | {"MAX_CONCURRENCY"}
    for name in names | {"AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION"}:
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name, text in LINES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], arguments: list[str], stdin: str = "") -> tuple[int, list[str]]:
    """``dispatcher ARGUMENTS``: exit status and the lines on stderr (stdout must stay empty)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(stdin))
        try:
            status = cli_module.main(arguments)
        except SystemExit as exit_status:  # argparse's own usage errors
            status = int(exit_status.code or 0)
    captured = capsys.readouterr()
    assert captured.out == ""
    return status, captured.err.splitlines()


GROUP_WITH_SPACE = (
    "message group id may hold only letters, digits and punctuation (printable ASCII, no space)"
)
NOT_JSON = "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
NOT_VALID_JSON = "input is not valid JSON: Expecting value: line 1 column 1 (char 0)"


@dataclass(frozen=True)
class Row:
    """Bad input, and the lines it must print (after ``dispatcher: error: ``)."""

    arguments: list[str]
    lines: list[str]
    environment: dict[str, str] = field(default_factory=dict)
    stdin: str = ""


def unset(*names: str) -> str:
    return f"not configured: set {', '.join(names)} (or use --stack NAME)"


USAGE_ERRORS = {
    "nothing-set": Row(
        ["status"], [unset("QUEUE_URL", "DEAD_LETTER_QUEUE_URL", "STATE_MACHINE_ARN", "MAX_CONCURRENCY")]
    ),
    "some-set": Row(
        ["status"],
        [unset("QUEUE_URL", "DEAD_LETTER_QUEUE_URL", "STATE_MACHINE_ARN")],
        {"MAX_CONCURRENCY": "3"},
    ),
    "word-max-variable": Row(
        ["status"],
        ["MAX_CONCURRENCY must be an integer >= 0, not 'ten'"],
        {**CONFIGURED, "MAX_CONCURRENCY": "ten"},
    ),
    "negative-max-variable": Row(
        ["status"],
        ["MAX_CONCURRENCY must be an integer >= 0, not '-3'"],
        {**CONFIGURED, "MAX_CONCURRENCY": "-3"},
    ),
    "body-before-settings": Row(
        ["enqueue", "not json"],
        [
            f"BODY: {NOT_VALID_JSON}",
            "--group is required for one job (the SQS FIFO MessageGroupId)",
            unset("QUEUE_URL"),
        ],
    ),
    "body-not-json": Row(["enqueue", "not json", "--group", "g"], [f"BODY: {NOT_VALID_JSON}"], CONFIGURED),
    "no-group": Row(
        ["enqueue", "{}"], ["--group is required for one job (the SQS FIFO MessageGroupId)"], CONFIGURED
    ),
    "no-body": Row(
        ["enqueue", "--group", "g"],
        ["give the job's input as BODY (or - to read it from standard input), or --file"],
        CONFIGURED,
    ),
    "bad-group-and-name": Row(
        ["enqueue", "{}", "--group", "has space", "--name", "a/b"],
        [f"--group: {GROUP_WITH_SPACE}", "--name: execution name contains the forbidden character '/'"],
        CONFIGURED,
    ),
    "body-and-file": Row(
        ["enqueue", "{}", "--file", "-"],
        ["give either BODY (one job) or --file (JSON Lines), not both; --name is per line"],
        CONFIGURED,
    ),
    "line-without-group": Row(
        ["enqueue", "--file", "no-group.jsonl"],
        ['no-group.jsonl:1: no "group" (add one, or pass --group for every line)'],
        CONFIGURED,
    ),
    "every-bad-line": Row(
        ["enqueue", "--file", "mixed.jsonl", "--group", "c"],
        [
            f"mixed.jsonl:2: {NOT_JSON}",
            f'mixed.jsonl:3: "body": {NOT_VALID_JSON}',
            'mixed.jsonl:5: "name": execution name contains whitespace',
            'mixed.jsonl:6: expected an object with "input" (JSON) or "body" (text)',
            'mixed.jsonl:7: "group" must be a string, not 7',
        ],
        CONFIGURED,
    ),
    "unknown-keys": Row(
        ["enqueue", "--file", "unknown-keys.jsonl"],
        [
            'unknown-keys.jsonl:1: unknown key "nmae": a line holds "input", "body", "group", "name"',
            'unknown-keys.jsonl:2: unknown key "lane": a line holds "input", "body", "group", "name"'
            " (a lane is chosen with --lane)",
        ],
        CONFIGURED,
    ),
    "name-collisions": Row(
        ["enqueue", "--file", "collisions.jsonl"],
        [
            "collisions.jsonl:3: name 'one' is line 1's with another input:"
            " a name collision (the dispatcher would dead-letter it)",
            "collisions.jsonl:5: name 'two' is line 4's with another input:"
            " a name collision (the dispatcher would dead-letter it)",
            "2 name collisions in collisions.jsonl: nothing was sent",
        ],
        CONFIGURED,
    ),
    "unknown-lane": Row(
        ["status", "--lane", "nope"], ["--lane nope: no such lane (lanes: default)"], CONFIGURED
    ),
    "unknown-gate": Row(
        ["dead-letters", "--gate", "crawl"],
        ["--gate crawl: no such gate (gates: none are configured)"],
        CONFIGURED,
    ),
    "unknown-pool": Row(
        ["set-max", "3", "--pool", "glue"],
        ["--pool glue: no such pool (pools: default)"],
        {**CONFIGURED, "CONTROL_PARAMETER": "/jobs/control"},
    ),
    "forget-a-configured-lane": Row(
        ["forget", "--lane", "default"],
        [
            "--lane default: lane default is configured, so lanes.default is not stale:"
            " change it with pause, resume or set-max --lane default"
        ],
        {**CONFIGURED, "CONTROL_PARAMETER": "/jobs/control"},
    ),
    "rerun-for-an-unknown-lane": Row(
        ["rerun", "--restart", "--lane", "nope"],
        ["--lane nope: no such lane (lanes: default)"],
        {**CONFIGURED, "SPOOL_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-failures"},
    ),
    "bad-line-on-stdin": Row(
        ["enqueue", "--file", "-", "--group", "g"], [f"-:1: {NOT_JSON}"], CONFIGURED, "{broken\n"
    ),
    "missing-file": Row(
        ["enqueue", "--file", "no-such.jsonl"],
        ["--file: cannot read no-such.jsonl: No such file or directory", unset("QUEUE_URL")],
    ),
    "rerun-bad-group": Row(
        ["rerun", "--restart", "--group", "has space"],
        [f"--group: {GROUP_WITH_SPACE}", unset("SPOOL_QUEUE_URL")],
        CONFIGURED,
    ),
    "pause-without-parameter": Row(["pause"], [unset("CONTROL_PARAMETER")], CONFIGURED),
    "invoke-without-function": Row(["tick", "--invoke"], [unset("DISPATCHER_FUNCTION_NAME")], CONFIGURED),
    "move-without-dlq": Row(
        ["redrive-dead-letters"], [unset("DEAD_LETTER_QUEUE_URL")], {"QUEUE_URL": CONFIGURED["QUEUE_URL"]}
    ),
    "local-json": Row(
        ["--json", "local"],
        ["`dispatcher local` takes none of --region, --endpoint-url, --json (given: --json)"],
    ),
    "endpoint-without-scheme": Row(
        ["--endpoint-url", "127.0.0.1:4711", "--region", "us-east-1", "dead-letters"],
        [
            "--endpoint-url 127.0.0.1:4711 is not a URL: give the scheme and the host,"
            " e.g. http://127.0.0.1:4711"
        ],
        CONFIGURED,
    ),
    "endpoint-variable-without-scheme": Row(
        ["--stack", "jobs", "--region", "us-east-1", "status"],
        [
            "AWS_ENDPOINT_URL localhost:4567 is not a URL: give the scheme and the host,"
            " e.g. http://localhost:4567"
        ],
        {"AWS_ENDPOINT_URL": "localhost:4567"},
    ),
    "not-a-region": Row(
        ["--region", "mars-1", "dead-letters"],
        ["--region mars-1 is not the name of an AWS region, such as eu-west-1 (the emulator's is us-east-1)"],
        CONFIGURED,
    ),
    "not-a-configured-region": Row(
        ["--stack", "jobs", "status"],
        [
            "the configured region (AWS_DEFAULT_REGION or profile) Mars is not the name of an AWS region,"
            " such as eu-west-1 (the emulator's is us-east-1)"
        ],
        {"AWS_DEFAULT_REGION": "Mars"},
    ),
}


@pytest.mark.usefixtures("shell")
@pytest.mark.parametrize("row", USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_bad_input_is_a_usage_error_found_before_any_aws_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], row: Row
) -> None:
    """Each row: exit status 2, every problem on its own line, and no AWS client even made."""
    for name, value in row.environment.items():
        monkeypatch.setenv(name, value)

    def no_aws(_self: Aws, service: str) -> None:
        raise AssertionError(f"an AWS client ({service}) was made before the usage error")

    monkeypatch.setattr(Aws, "client", no_aws)
    status, printed = run(capsys, row.arguments, row.stdin)
    assert (status, printed) == (2, [PREFIX + line for line in row.lines])


@pytest.mark.usefixtures("shell")
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["set-max", "-1"], "dispatcher set-max: error: argument N: MAX must be an integer >= 0, not '-1'"),
        (
            ["failed", "--since", "yesterday"],
            "dispatcher failed: error: argument --since: not a time: 'yesterday'",
        ),
        (["local", "--region", "eu-west-1"], "dispatcher: error: unrecognized arguments: --region eu-west-1"),
        (
            ["--json", "local"],
            "dispatcher: error: `dispatcher local` takes none of --region, --endpoint-url, --json",
        ),
        (
            ["local", "--port", "99999"],
            "dispatcher local: error: argument --port: a port is an integer from 0 (any free one) to 65535,"
            " not '99999'",
        ),
        (
            ["local", "--lane", "urgent", "--lane", "urgent=5"],
            "dispatcher local: error: argument --lane: lane urgent is given twice",
        ),
        (["forget"], "dispatcher forget: error: one of the arguments --pool --lane --gate is required"),
        (
            ["status", "--pool", "glue", "--lane", "urgent"],
            "dispatcher status: error: argument --lane: not allowed with argument --pool",
        ),
    ],
    ids=[
        "negative-max",
        "unknown-time",
        "local-region",
        "local-json",
        "port-out-of-range",
        "repeated-lane",
        "forget-nothing",
        "two-members",
    ],
)
def test_argument_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    """Argparse's own errors: one line, exit status 2."""
    status, printed = run(capsys, arguments)
    assert status == 2
    assert len(printed) == 1
    assert printed[0].startswith(message)


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
