"""`set` and `unset`: a lane's and gate's settings live, shown with their source; a broken parameter mended.

The stack of test_members: lane ``glue`` (pool glue, MAX 2, its own state machine), lane
``urgent`` and gate ``crawl`` beside lane default.
"""

from __future__ import annotations

import copy
import shlex
import typing
from typing import Any

import annotated_types
import boto3
import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from dispatcher.core.adaptive import AdaptiveDocument
from dispatcher.core.control import Control
from dispatcher.core.errors import ConfigurationError
from dispatcher.core.kinds.gate import GateOverride
from dispatcher.core.kinds.lane import LaneOverride
from dispatcher.core.overrides import PoolOverride
from dispatcher.local.account import REGION, pointed_at
from dispatcher.local.stack import read_all, send_jobs
from tests.support.members import Members, ok


def test_set_changes_a_lanes_group_limit_live_and_unset_gives_back_the_configured_value(
    members: Members,
) -> None:
    """`set --lane glue max_per_group=1` holds the next tick to one of group g; `unset` takes it back."""
    cli = members.cli
    said = ok(cli.run("set", "--lane", "glue", "max_per_group=1", "fair_share=true"))
    assert said.startswith(
        "lane glue: max_per_group 1 (parameter; configured -), fair_share true (parameter; configured false),"
        " max_wait_seconds - (unset) (parameter "
    )
    assert members.control()["lanes"] == {"glue": {"fair_share": True, "max_per_group": 1}}
    lane = ok(cli.run("status", "--lane", "glue", "--json"))
    assert lane["settings"]["max_per_group"] == {"value": 1, "source": "parameter", "configured": None}
    text = ok(cli.run("status"))
    assert ["lane", "glue", "max_per_group", "1", "parameter", "-"] in [
        line.split() for line in text.splitlines()
    ]
    info = ok(cli.run("info", "--json"))
    assert info["lanes"][2]["settings"]["fair_share"] == {
        "value": True,
        "source": "parameter",
        "configured": False,
    }
    assert ["lane", "glue", "fair_share", "true", "parameter", "false"] in [
        line.split() for line in ok(cli.run("info")).splitlines()
    ]
    with pointed_at(cli.endpoint_url):
        send_jobs(members.lanes["glue"]["queue_url"], [{"body": "{}", "group": "g"} for _ in range(2)])
    assert members.tick()["started"] == 1, "max_per_group 1 holds group g to one RUNNING"
    back = ok(cli.run("unset", "--lane", "glue", "max_per_group", "fair_share", "--json"))
    assert back["settings"]["max_per_group"] == {"value": None, "source": "unset", "configured": None}
    assert "lanes" not in members.control()
    assert "SETTING OF" not in ok(cli.run("status"))
    gate = ok(cli.run("set", "--gate", "crawl", "max_per_group=2", "--json"))
    assert gate["settings"] == {"max_per_group": {"value": 2, "source": "parameter", "configured": None}}
    assert gate["gates"] == {"crawl": {"max_per_group": 2}}


def test_unset_takes_back_a_set_max_and_a_pause(members: Members) -> None:
    """`unset --lane glue max_concurrency paused`: LANES' MAX 2, no pause; pool default's at the top."""
    cli = members.cli
    members.control({})
    ok(cli.run("set-max", "1", "--lane", "glue"))
    ok(cli.run("pause", "--lane", "glue"))
    ok(cli.run("set-max", "9"))
    assert ok(cli.run("status", "--lane", "glue", "--json"))["paused"] is True
    ok(cli.run("unset", "--lane", "glue", "max_concurrency", "paused"))
    assert members.control() == {"max_concurrency": 9}
    lane = ok(cli.run("status", "--lane", "glue", "--json"))
    assert (lane["paused"], lane["max_concurrency"]) == (False, 2)
    ok(cli.run("unset", "--pool", "default", "max_concurrency"))
    assert members.control() == {}


def test_set_and_unset_refuse_what_a_member_does_not_have_and_write_nothing(members: Members) -> None:
    """One line, exit 2, the parameter unchanged."""
    cli = members.cli
    members.control({"max_concurrency": 3})
    refused = {
        (
            "set",
            "--lane",
            "glue",
            "max_per_group=0",
        ): "max_per_group: Input should be greater than or equal to 1",
        ("set", "--lane", "glue", "fair_share=maybe"): "fair_share: Input should be a valid boolean",
        ("set", "--lane", "glue", "max_per_group"): "'max_per_group': give KEY=VALUE, e.g. max_per_group=3",
        ("set", "--gate", "crawl", "fair_share=true"): "fair_share: a gate has no such setting",
        ("set", "--lane", "glue", "max_concurrency=3"): "MAX and pause: set-max, pause, resume",
        ("set", "--lane", "nope", "max_per_group=1"): "--lane nope: no such lane",
        ("unset", "--gate", "crawl", "fair_share"): "fair_share: a gate has no such key",
        ("unset", "--pool", "glue", "max_per_group"): "max_per_group: a pool has no such key",
    }
    for arguments, message in refused.items():
        result = cli.run(*arguments)
        assert result.returncode == 2, arguments
        assert message in result.stderr, (arguments, result.stderr)
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert members.control() == {"max_concurrency": 3}


def test_a_broken_parameter_is_shown_by_status_and_mended_by_the_commands_that_write_it(
    members: Members,
) -> None:
    """max_per_group 0 stops every tick: status says so; resume can't write past it; unset or set mends it."""
    cli = members.cli
    members.control({"max_concurrency": 3, "lanes": {"glue": {"max_per_group": 0, "paused": True}}})
    text = ok(cli.run("status"))
    assert text.startswith(
        "CONTROL PARAMETER BROKEN: every tick stops (nothing is received) until it is mended."
    )
    assert "lanes.glue.max_per_group" in text
    assert "lanes.glue.max_per_group" in ok(cli.run("status", "--json"))["control_problem"]
    assert "lanes.glue.max_per_group" in ok(cli.run("status", "--lane", "glue", "--json"))["control_problem"]
    refused = cli.run("resume", "--lane", "glue")
    assert refused.returncode == 1
    assert refused.stderr.startswith("dispatcher: error: not written: control parameter ")
    assert refused.stderr.rstrip().endswith("; mend it: dispatcher unset --lane glue max_per_group")
    ok(cli.run("set", "--lane", "glue", "max_per_group=2"))
    assert members.control()["lanes"] == {"glue": {"max_per_group": 2, "paused": True}}
    assert "control_problem" not in ok(cli.run("status", "--lane", "glue", "--json"))
    assert ok(cli.run("status", "--json"))["control_problem"] is None
    members.control({"lanes": {"glue": {"max_wait_seconds": True}}})
    ok(cli.run("unset", "--lane", "glue", "max_wait_seconds"))
    assert members.control() == {}
    with pointed_at(cli.endpoint_url):
        boto3.client("ssm", region_name=REGION).put_parameter(
            Name=cli.stack.control_parameter, Value="{oops", Type="String", Overwrite=True
        )
        assert read_all(members.lanes["glue"]["queue_url"]) == []
    assert "is not JSON" in ok(cli.run("status"))
    not_json = cli.run("set-max", "3")
    assert not_json.returncode == 1
    assert "replace it: aws ssm put-parameter --overwrite --type String --name " in not_json.stderr


def test_set_changes_a_pools_adaptive_settings_and_unset_gives_back_the_configured_ones(
    members: Members,
) -> None:
    """`set --pool glue adaptive.KEY=…` writes its settings, `adaptive=false` turns it off, `unset` too."""
    cli = members.cli
    members.control({})
    refused = cli.run("set", "--pool", "glue", "adaptive.decrease=0.7")
    assert (refused.returncode, refused.stderr) == (
        2,
        "dispatcher: error: pool glue has no adaptive settings to change: give adaptive.errors=NAME[,NAME...]"
        " too (the error names that mean throttled)\n",
    )
    said = ok(cli.run("set", "--pool", "glue", "adaptive.errors=Glue.A, Glue.B", "adaptive.decrease=0.7"))
    assert said.startswith(
        "pool glue: max_concurrency 4 (LANES), paused false (unset), adaptive (errors Glue.A,Glue.B, min 1,"
        " decrease 0.7, cooldown_seconds 60) (parameter; configured off) (parameter "
    )
    ok(cli.run("set", "--pool", "glue", "adaptive.min=2"))  # the other settings stay
    assert members.control() == {
        "pools": {
            "glue": {
                "adaptive": {
                    "errors": ["Glue.A", "Glue.B"],
                    "decrease": 0.7,
                    "min": 2,
                    "cooldown_seconds": 60.0,
                }
            }
        }
    }
    pool = ok(cli.run("status", "--pool", "glue", "--json"))
    assert pool["adaptive"] == {
        "errors": ["Glue.A", "Glue.B"],
        "min": 2,
        "decrease": 0.7,
        "cooldown_seconds": 60.0,
        "initial": 4,  # where L starts: its MAX, without an initial setting
    }
    off = ok(cli.run("set", "--pool", "glue", "adaptive=false", "--json"))
    assert off["settings"]["adaptive"] == {"value": None, "source": "parameter", "configured": None}
    assert off["pools"] == {"glue": {"adaptive": False}}
    back = ok(cli.run("unset", "--pool", "glue", "adaptive", "--json"))
    assert back["settings"]["adaptive"] == {"value": None, "source": "unset", "configured": None}
    assert members.control() == {}


# -- every malformed key mended by the command its error names ----------------------------

SECTION_MEMBERS = {"pools": "glue", "lanes": "glue", "gates": "crawl"}
"""The configured member of each section whose entry the walk makes malformed."""
SOUND = {
    "max_concurrency": 3,
    "pools": {"glue": {"paused": False}},
    "lanes": {"glue": {"fair_share": True}},
    "gates": {"crawl": {"max_per_group": 2}},
}
"""What the parameter holds beside the malformed key: sound, and kept by the mending."""
SECTION_MODELS: dict[str, type[BaseModel]] = {
    "pools": PoolOverride,
    "lanes": LaneOverride,
    "gates": GateOverride,
}


def refused_values(field: FieldInfo) -> list[object]:
    """Values the field refuses: one of the wrong type, and one past each of its bounds."""
    refused: list[object] = ["text"] if field.annotation is not str else [1]
    if typing.get_origin(field.annotation) is list:
        refused.append([1])
    for bound in field.metadata:
        if isinstance(bound, annotated_types.Ge):
            refused.append(bound.ge - 1)  # type: ignore[operator]
        elif isinstance(bound, annotated_types.Gt | annotated_types.Lt):
            refused.append(getattr(bound, "gt", None) or getattr(bound, "lt", None))
        elif isinstance(bound, annotated_types.MinLen):
            refused.append([])
    return refused


def malformed_keys() -> list[tuple[tuple[str, ...], object]]:
    """Every key the parameter takes, each with every value it refuses, walked from its models.

    Also: a key no member has (a typo) at every level, a section and an entry that are not
    objects, and the keys only the members refuse (pool default's MAX in ``pools.default``,
    a MAX for a lane whose state machine another lane starts).
    """
    found: list[tuple[tuple[str, ...], object]] = [(("max_concurency",), 3)]
    for key, field in Control.model_fields.items():
        if key not in SECTION_MODELS:
            found += [((key,), value) for value in refused_values(field)]
    for section, model in SECTION_MODELS.items():
        member = SECTION_MEMBERS[section]
        found += [((section,), 5), ((section, member), 5), ((section, member, "paused_"), True)]
        for key, field in model.model_fields.items():
            found += [((section, member, key), value) for value in refused_values(field)]
    for key, field in AdaptiveDocument.model_fields.items():
        found += [(("pools", "glue", "adaptive", key), value) for value in refused_values(field)]
    found += [(("pools", "glue", "adaptive", "decreas"), 0.5), (("pools", "glue", "adaptive"), True)]
    found += [(("pools", "default", "max_concurrency"), 3), (("pools", "default", "paused"), True)]
    found += [(("lanes", "urgent", "max_concurrency"), 1)]
    return found


def with_key(key: tuple[str, ...], value: object) -> dict[str, Any]:
    """`SOUND` with ``value`` at ``key`` (an adaptive key beside sound settings: errors given)."""
    document = copy.deepcopy(SOUND)
    entry: dict[str, Any] = document
    for part in key[:-1]:
        if not isinstance(entry.get(part), dict):
            entry[part] = {}
        entry = entry[part]
    if key[:3] == ("pools", "glue", "adaptive") and len(key) == 4:
        entry.setdefault("errors", ["Glue.ConcurrentRunsExceededException"])
    entry[key[-1]] = value
    return document


def test_every_malformed_key_of_the_parameter_is_mended_by_the_command_its_error_names(
    members: Members,
) -> None:
    """Each key, made malformed: the tick's error names the `unset` that mends it, and after it a tick runs.

    The keys are walked from the parameter's own models, so a key added later is walked too;
    the mending leaves every sound key of another member as it was.
    """
    cli = members.cli
    walked = malformed_keys()
    assert len(walked) > 40
    shown: set[str] = set()
    for key, value in walked:
        members.control(with_key(key, value))
        with pytest.raises(ConfigurationError) as stopped:
            members.tick()
        said = str(stopped.value)
        assert "; mend it: " in said, (key, said)
        if key[0] not in shown:  # status says the same, with the same advice (once a section: it costs)
            shown.add(key[0])
            assert ok(cli.run("status")).splitlines()[1] == said, key
        for command in said.split("; mend it: ")[1].split("; "):
            words = shlex.split(command)
            assert words[0] == "dispatcher", command
            ok(cli.run(*words[1:]))
        mended = members.control()
        members.tick()
        untouched = [section for section in SECTION_MODELS if section not in key[:1]]
        for section in untouched:
            assert mended.get(section) == SOUND[section], (key, mended)
        if key[0] != "max_concurrency":
            assert mended["max_concurrency"] == SOUND["max_concurrency"], (key, mended)
