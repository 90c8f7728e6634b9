"""The bad-input corpus: each poison message reaches the DLQ with a precise reason, neighbours unharmed.

Every case is sent to one message group, with a valid neighbour after each, so a
case that stalled or broke its group would show as a neighbour not started, or
started out of order. Step Functions' checks and SQS's limits are those of the
faulty emulator (tests/support/faulty_aws.py), as AWS applies them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dispatcher.core.executions import MAX_INPUT_BYTES
from dispatcher.core.messages import DEAD_LETTER_HEADROOM_BYTES, SQS_MAX_MESSAGE_BYTES
from tests.faults.ending import dead_letters, queue_counts
from tests.faults.jobs import Job
from tests.faults.run import ScenarioRun
from tests.faults.scenario import Scenario
from tests.inputs import json_of_size
from tests.support.faulty_aws import REJECTED_INPUT_MARKER, FaultyAws

SOURCE_QUEUE_LIMIT = SQS_MAX_MESSAGE_BYTES - DEAD_LETTER_HEADROOM_BYTES
TOO_LARGE = f"larger than the {MAX_INPUT_BYTES}-byte Step Functions limit"


def attributes_bytes(attributes: dict[str, Any]) -> int:
    """What SQS counts for message attributes: name, type and value."""
    return sum(
        len(name) + len(value["DataType"]) + len(value["StringValue"]) for name, value in attributes.items()
    )


TEN_ATTRIBUTES = {f"a{index}": {"DataType": "String", "StringValue": str(index)} for index in range(9)}
LARGEST_NAME = {"ExecutionName": {"DataType": "String", "StringValue": "largest"}}
LARGEST_BODY = SOURCE_QUEUE_LIMIT - attributes_bytes({**TEN_ATTRIBUTES, **LARGEST_NAME})


@dataclass
class Case:
    """One corpus entry: what is sent, and the DispatchError it must get (None: it must start)."""

    label: str
    body: str = "{}"
    name: str | None = None
    name_type: str = "String"
    reason: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


CORPUS = [
    Case(
        "invalid JSON", '{"a":', reason="input is not valid JSON: Expecting value: line 1 column 6 (char 5)"
    ),
    Case("empty body", "", reason="input is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    Case("blank body", " \n", reason="input is not valid JSON: Expecting value: line 2 column 1 (char 2)"),
    Case("NaN", '{"x": NaN}', reason="input is not valid JSON: NaN is not valid JSON"),
    Case(
        "byte order mark",
        "\ufeff{}",
        reason="input is not valid JSON: Unexpected UTF-8 BOM (decode using utf-8-sig):"
        " line 1 column 1 (char 0)",
    ),
    Case("exactly 262,144 bytes", json_of_size(MAX_INPUT_BYTES)),
    Case("262,145 bytes", json_of_size(MAX_INPUT_BYTES + 1), reason=f"input is 262145 bytes, {TOO_LARGE}"),
    Case(
        "fewer characters than the limit, more bytes",
        json.dumps({"e": "€" * 87_382}, ensure_ascii=False),
        reason=f"input is 262155 bytes, {TOO_LARGE}",
    ),
    Case(
        "the largest message the queue takes, with ten attributes",
        json_of_size(LARGEST_BODY),
        name="largest",
        attributes=TEN_ATTRIBUTES,
        reason=f"input is {LARGEST_BODY} bytes, {TOO_LARGE} (attributes not copied: a8)",
    ),
    Case(
        "name with a space",
        name="has space",
        reason="invalid ExecutionName: execution name contains whitespace",
    ),
    Case(
        "name with a slash",
        name="a/b",
        reason="invalid ExecutionName: execution name contains the forbidden character '/'",
    ),
    Case(
        "name with DEL",
        name="del\x7f",
        reason="invalid ExecutionName: execution name contains a control character",
    ),
    Case("name with NEL", name="nel\x85", reason="invalid ExecutionName: execution name contains whitespace"),
    Case(
        "81-character name",
        name="n" * 81,
        reason="invalid ExecutionName: execution name is 81 characters, longer than 80",
    ),
    Case("80-character name", name="n" * 80),
    Case("empty name", name="", reason="invalid ExecutionName: execution name is empty"),
    Case("Unicode name", name="jöb-名前-😀"),
    Case(
        "binary name",
        name="b",
        name_type="Binary",
        reason="ExecutionName attribute must be of type String, not Binary"
        " (attributes not copied: ExecutionName)",
    ),
    Case(
        "number name",
        name="42",
        name_type="Number",
        reason="ExecutionName attribute must be of type String, not Number",
    ),
    Case("custom String type", name="custom-1", name_type="String.id"),
    Case("astral, private-use and replacement characters", '{"s": "😀\ue000\U0010ffff\ufffd"}'),
    Case("escaped lone surrogate", '{"s": "\\ud800"}'),
    Case("CR LF and tabs", '{\r\n\t"a": 1\r\n}'),
    Case(
        "input Step Functions rejects",
        json.dumps({"note": REJECTED_INPUT_MARKER}),
        reason="Step Functions rejected the start: InvalidExecutionInput:"
        " Invalid State Machine Execution Input",
    ),
    Case("name reused, same input", '{"same": 1}', name="reused"),
    Case("name reused, same input again", '{"same": 1}', name="reused"),
    Case(
        "name reused, other input",
        '{"same": 2}',
        name="reused",
        reason="name collision: execution 'reused' already exists with a different input",
    ),
]


def test_each_bad_input_is_dead_lettered_with_its_reason_and_neighbours_start_in_order(
    faulty_aws: FaultyAws,
) -> None:
    """Poison → DLQ with the exact DispatchError; every valid case and neighbour starts, in order."""
    run = ScenarioRun(Scenario.empty(5), faulty_aws)
    jobs: list[tuple[Case | None, Job]] = []
    for index, case in enumerate(CORPUS):
        job = Job(
            f"case-{index}", "corpus", case.body, 0, case.name, case.name_type, attributes=case.attributes
        )
        jobs.append((case, job))
        jobs.append((None, Job(f"neighbour-{index}", "corpus", json.dumps({"neighbour": index}), 0)))
    for _, job in jobs:
        run.send(job)
    for _ in range(len(jobs)):
        if run.tick()["stopped"] == "drained":
            break
        run.advance(1)

    letters = dead_letters(run)
    executions = {execution.name: execution for execution in run.world.executions.values()}
    problems: list[str] = []
    order: list[int] = []
    for case, job in jobs:
        label = case.label if case else job.key
        found = letters.pop(job.message_id, [])
        if case is not None and case.reason is not None:
            reasons = [letter["MessageAttributes"]["DispatchError"]["StringValue"] for letter in found]
            if reasons != [case.reason] or found[0]["Body"] != case.body:
                problems.append(f"{label}: dead-lettered as {reasons}, expected [{case.reason!r}]")
            continue
        if found:
            problems.append(f"{label}: dead-lettered, expected to start")
        execution = executions.get(job.name if job.name is not None else job.message_id)
        if execution is None or execution.input != job.body:
            problems.append(f"{label}: not started with its input verbatim")
        elif case is None or case.label != "name reused, same input again":
            order.append(execution.sequence)
    assert problems == [], "\n".join(problems)
    assert letters == {}
    assert order == sorted(order), "a bad input changed the order of its group"
    assert queue_counts(run) == (0, 0)
