"""Step Functions' facts about executions: statuses, names, inputs, ARNs and windows.

The one home of each: the tick, the re-run commands, the emulator and the tests import
them from here.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass

ACTIVE_STATUSES = frozenset({"RUNNING", "PENDING_REDRIVE"})
"""An execution in one of these holds a slot."""
CLOSED_ORDER = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
"""The closed statuses, in the order Step Functions' documentation (and the template) lists them."""
CLOSED_STATUSES = frozenset(CLOSED_ORDER)
"""An execution in one of these has ended: a status change event with one frees its slot."""
REDRIVABLE_STATUSES = CLOSED_STATUSES - {"SUCCEEDED"}
"""The closed statuses `RedriveExecution` accepts: the failures the spool keeps."""

MAX_INPUT_BYTES = 262_144
MAX_NAME_LENGTH = 80
FORBIDDEN_NAME_CHARACTERS = frozenset('<>{}[]?*"#%\\^|~`$&,;:/')
REDRIVE_WINDOW_SECONDS = 14 * 24 * 3600
"""`RedriveExecution` accepts an execution that stopped less than this long ago."""
CLIENT_TOKEN_SECONDS = 15 * 60
"""`RedriveExecution`'s ``clientToken`` is idempotent for this long."""


@dataclass(frozen=True)
class ExecutionState:
    """What `DescribeExecution` says of one execution."""

    status: str
    redrive_count: int
    input: str | None
    """None when Step Functions left it out (no permission on its KMS key)."""
    error: str | None = None
    """The error it ended with (None: none, or still running)."""
    stopped_at: float | None = None
    """When it ended, in epoch seconds (None: it runs)."""


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The deterministic ARN of execution ``name`` of a state machine."""
    prefix, _, machine = state_machine_arn.rpartition(":stateMachine:")
    return f"{prefix}:execution:{machine}:{name}"


def execution_name(execution_arn: str) -> str:
    """The name of an execution, the last field of its ARN."""
    return execution_arn.rsplit(":", 1)[-1]


def state_machine_of(arn: str) -> str:
    """The state machine ARN of an execution ARN (``...:execution:<machine>:<name>``)."""
    prefix, _, rest = arn.partition(":execution:")
    machine = rest.rsplit(":", 1)[0] if ":" in rest else rest
    return f"{prefix}:stateMachine:{machine}"


def _reject_constant(token: str) -> object:
    raise ValueError(f"{token} is not valid JSON")


def input_problem(body: str) -> str | None:
    """Why a message body can never be an execution input, or None when it can."""
    try:
        size = len(body.encode("utf-8"))
    except UnicodeEncodeError:
        return "input is not valid UTF-8"
    if size > MAX_INPUT_BYTES:
        return f"input is {size} bytes, larger than the {MAX_INPUT_BYTES}-byte Step Functions limit"
    try:
        json.loads(body, parse_constant=_reject_constant)
    except ValueError as error:
        return f"input is not valid JSON: {error}"
    return None


def name_problem(name: str) -> str | None:
    """Why a string can't be a Step Functions execution name, or None when it can."""
    if not name:
        return "execution name is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"execution name is {len(name)} characters, longer than {MAX_NAME_LENGTH}"
    for character in name:
        if character.isspace():
            return "execution name contains whitespace"
        if character in FORBIDDEN_NAME_CHARACTERS:
            return f"execution name contains the forbidden character {character!r}"
        if unicodedata.category(character) == "Cc":
            return "execution name contains a control character"
    return None


def same_input(existing: str | None, execution_input: str) -> bool:
    """Whether an existing execution's input is this one: the same text, or the same JSON.

    Step Functions leaves the input out (None) only when the caller may not see it: it is
    taken as the same, rather than dead-letter a redelivered message as a name collision.
    """
    if existing is None or existing == execution_input:
        return True
    try:
        return bool(json.loads(existing) == json.loads(execution_input))
    except ValueError:
        return False
