"""Bad input, one rule (docs/cli.md): what the command line, its files or settings get wrong is a usage error.

Found before any AWS call, reported together (a line a problem), exit status 2, and
nothing sent. What AWS refuses is exit status 1, with the fix when the cause is known.
The CLI runs in-process here: every usage row would fail its test by touching AWS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from dispatcher.cli.config import Aws
from tests.support.bad_input import CONFIGURED, PREFIX, run

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
    """The one line the CLI says when ``names`` are not configured."""
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
            'unknown-keys.jsonl:1: unknown key "nmae": a line holds "input", "body", "group", "name",'
            ' "slots"',
            'unknown-keys.jsonl:2: unknown key "lane": a line holds "input", "body", "group", "name", "slots"'
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
    "set-a-key-twice": Row(
        ["set", "max_per_group=2", "max_per_group=3"],
        ["max_per_group: given twice ('2' and '3'): give each key once"],
        {**CONFIGURED, "CONTROL_PARAMETER": "/jobs/control"},
    ),
    "set-adaptive-true": Row(
        ["set", "--pool", "default", "adaptive=true"],
        [
            "adaptive=true: only adaptive=false (its limit is MAX); give its settings as adaptive.errors=…,"
            " adaptive.min=…, adaptive.initial=…, adaptive.decrease=…, adaptive.cooldown_seconds=…,"
            " or `unset --pool NAME adaptive` for those in LANES"
        ],
        {**CONFIGURED, "CONTROL_PARAMETER": "/jobs/control"},
    ),
    "set-adaptive-out-of-range": Row(
        ["set", "--pool", "default", "adaptive.decrease=2"],
        ["adaptive.decrease: Input should be less than 1"],
        {**CONFIGURED, "CONTROL_PARAMETER": "/jobs/control"},
    ),
    "set-a-pools-max": Row(
        ["set", "--pool", "default", "max_concurrency=3"],
        [
            "max_concurrency: a pool has no such setting (pool settings: adaptive, adaptive.errors,"
            " adaptive.min, adaptive.initial, adaptive.decrease, adaptive.cooldown_seconds;"
            " MAX and pause: set-max, pause, resume)"
        ],
        {**CONFIGURED, "CONTROL_PARAMETER": "/jobs/control"},
    ),
    "forget-a-configured-lane": Row(
        ["forget", "--lane", "default"],
        [
            "--lane default: lane default is configured, so lanes.default is not stale:"
            " change it with pause, resume, set-max, set or unset --lane default"
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
        (
            ["enqueue", "{}", "--group", "g", "--start-by", "0m"],
            "dispatcher enqueue: error: argument --start-by: 0m has passed: the job would expire unstarted",
        ),
        (
            ["enqueue", "{}", "--group", "g", "--start-by", "-5m"],
            "dispatcher enqueue: error: argument --start-by: -5m has passed: the job would expire unstarted",
        ),
        (
            ["enqueue", "{}", "--group", "g", "--start-by", "2020-01-01T00:00:00Z"],
            "dispatcher enqueue: error: argument --start-by: 2020-01-01T00:00:00Z has passed",
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
        "start-by-now",
        "start-by-before-now",
        "start-by-long-ago",
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
