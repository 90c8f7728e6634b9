"""`set` and `unset`: a lane's and gate's settings live, shown with their source; a broken parameter mended.

The stack of test_members: lane ``glue`` (pool glue, MAX 2, its own state machine), lane
``urgent`` and gate ``crawl`` beside lane default.
"""

from __future__ import annotations

import boto3

from dispatcher.local.account import REGION, pointed_at
from dispatcher.local.stack import read_all, send_jobs
from tests.cli.test_members import Members, members, ok

__all__ = ["members"]  # the fixture, used by name


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
    assert "mend it: `dispatcher unset [--lane|--gate|--pool NAME] KEY` removes a key" in refused.stderr
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
