"""A gate in generated scenarios: gated executions, their requests and releases, under faults.

A quarter of the scenarios without wide rounds add gate ``crawl`` on a state machine of
its own: in pool ``default`` with the default lane's jobs ("a gate and a lane in one
pool", and with lane ``urgent`` too when the scenario has it there), or in a pool of its
own, sometimes with a MAX of its own. Its executions are started by their own producer
(not the dispatcher) and each, after a free part, sends its request and waits; the
dispatcher admits it (`SendTaskSuccess`, which the fault middleware answers as AWS does,
`tests.support.gate_world`); its section lasts a while; then it releases and ends. Drawn per execution:

- its request doubled (sent again, later: a producer's retry);
- its release lost, doubled, late, or sent early (before it was admitted, an earlier
  entry's stray release: through the queue, whose SentTimestamp says when);
- its fate: it dies while it waits (its token closes), is aborted inside, goes on past
  the section without a release, or releases as it should;

and a few poison requests, the operator pausing and resuming the gate, and crashes at
the gate's own steps (around `SendTaskSuccess`, the admission's record and confirmation,
the request's delete, a release). Checked: the gate's and the pool's caps at every
admission and start (the world), every request of a live execution admitted once (none
lost, none twice), poison in the gate's DLQ with its reason, nothing left on its queue,
and no place held once the quiet phase settles (the run's count against the truth).
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dispatcher.adapters.item_keys import INSIDE_KIND
from dispatcher.adapters.roster_items import inside_partition
from dispatcher.core.executions import execution_arn
from dispatcher.core.overrides import Override
from dispatcher.core.topology import DEFAULT
from dispatcher.local.gates import create_gate
from dispatcher.local.stack import read_all
from tests.faults.gate_plans import GATE, GATE_POOL, GATED_INPUT, GatedPlan, GatePlan
from tests.faults.lanes import steer
from tests.faults.tenants import gate_group
from tests.support.gate_world import Entry, Gates, GateSpec

if TYPE_CHECKING:
    from dispatcher.local.stack import Stack
    from tests.support.world import World


class GateRun:
    """The gate of one run: its resources, its executions' lives in virtual time, the operator, checks."""

    def __init__(
        self,
        plan: GatePlan,
        stack: Stack,
        world: World,
        clients: dict[str, Any],
        *,
        group_limit: int | None = None,
    ) -> None:
        """``group_limit``: the gate's ``max_per_group`` (its requests then go in a few tenant groups)."""
        self.plan = plan
        self.group_limit = group_limit
        self.world = world
        self._sqs, self._sfn, self._dynamodb = clients["sqs"], clients["stepfunctions"], clients["dynamodb"]
        self._table, self._own = stack.state_table, stack.state_machine_arn
        stack_name = stack.name
        self.entry = create_gate(stack_name, GATE, release_queue_url="https://sqs.invalid/unused")
        self.machine: str = self.entry["state_machine_arn"]
        self.prefix = execution_arn(self.machine, "")
        """Every ARN of the gated state machine's executions starts so."""
        self.pool = DEFAULT if plan.kind == "shared" else GATE_POOL
        world.gates = Gates(world)
        world.gates.machines.add(self.machine)
        world.gates.specs[GATE] = GateSpec(self.pool, plan.max_concurrency, group_limit)
        self._groups = {
            each.name: each.name if group_limit is None else gate_group(index)
            for index, each in enumerate(plan.executions)
        }
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._sequence = itertools.count()
        self._lock = threading.Lock()
        self.entries: dict[str, Entry] = {}
        """Execution name → its entry, once it asked."""
        self._plans = {plan.name: plan for plan in plan.executions}
        self._early: dict[str, dict[str, Any]] = {}
        """Execution name → the stray release it sent before it was admitted, delivered once it is."""
        world.gates.on_admit = self._admitted
        self.releases_delivered = 0

    def lanes_document(self) -> dict[str, Any]:
        """The gate's part of ``LANES``: the gate, and its pool."""
        gate = {**self.entry, "pool": self.pool}
        if self.plan.max_concurrency is not None:
            gate["max_concurrency"] = self.plan.max_concurrency
        if self.group_limit is not None:
            gate["max_per_group"] = self.group_limit
        pools = {GATE_POOL: {"max_concurrency": self.plan.pool_max}} if self.plan.kind == "pool" else {}
        return {"pools": pools, "gates": [gate]}

    def cap(self, default_machine: str, default_max: int) -> None:
        """Have the world check each pool at every start and admission."""
        self.world.max_concurrency = None
        self.world.pool_caps[DEFAULT] = (frozenset({default_machine}), default_max)
        if self.plan.kind == "pool":
            self.world.pool_caps[GATE_POOL] = (frozenset(), self.plan.pool_max)

    # -- time -------------------------------------------------------------------------

    def at(self, moment: float, action: Callable[[], None]) -> None:
        """Do ``action`` once the world's clock reaches ``moment`` (outside its lock)."""
        with self._lock:
            heapq.heappush(self._timers, (moment, next(self._sequence), action))

    def next_moment(self) -> float | None:
        """When the next planned step of a gated execution is due."""
        with self._lock:
            return self._timers[0][0] if self._timers else None

    def run_due(self) -> None:
        """Every planned step now due, in time order."""
        while True:
            with self._lock:
                if not self._timers or self._timers[0][0] > self.world.now:
                    return
                _, _, action = heapq.heappop(self._timers)
            action()

    # -- what happens before a scheduled tick -----------------------------------------

    def before_tick(self, tick: int, ssm: Any, parameter: str) -> None:
        """The producer starts the executions due, poison goes out, the operator pauses or resumes."""
        for plan in self.plan.executions:
            if plan.starts == tick:
                self._sfn.start_execution(stateMachineArn=self.machine, name=plan.name, input=GATED_INPUT)
                self.at(self.world.now + plan.asks_after, lambda plan=plan: self._ask(plan))
        if tick in self.plan.poison:
            self._send_request(json.dumps({"token": "t"}), f"poison-{tick}", f"poison-{tick}")
            self.world.injected["gate request that is poison"] += 1
        if tick in self.plan.pauses:
            paused = self.plan.pauses[tick]
            steer(ssm, parameter, lambda current: {"gates": {**current.gates, GATE: Override(paused=paused)}})

    def resume(self, ssm: Any, parameter: str) -> None:
        """Before the quiet phase: the gate admits."""
        if self.plan.pauses:
            steer(ssm, parameter, lambda current: {"gates": {**current.gates, GATE: Override(paused=False)}})

    # -- a gated execution's life -----------------------------------------------------

    def _arn(self, plan: GatedPlan) -> str:
        return execution_arn(self.machine, plan.name)

    def _send_request(self, body: str, group: str, dedup: str) -> None:
        self._sqs.send_message(
            QueueUrl=self.entry["queue_url"],
            MessageBody=body,
            MessageGroupId=group,
            MessageDeduplicationId=dedup,
        )

    def _ask(self, plan: GatedPlan) -> None:
        """It reaches the gate: its request goes out, and it waits."""
        execution = self.world.executions[self._arn(plan)]
        if execution.runs[-1].ended_at is not None:
            return
        gates = self.world.gates
        assert gates is not None
        group = self._groups[plan.name]
        entry = gates.enter(execution, GATE, group)
        self.entries[plan.name] = entry
        body = json.dumps({"token": entry.token, "execution": execution.arn})
        self._send_request(body, group, entry.token)
        now = self.world.now
        if plan.doubled_request is not None:
            self.world.injected["gate request doubled"] += 1
            self.at(
                now + plan.doubled_request,
                lambda: self._send_request(body, group, f"{entry.token}-again"),
            )
        if plan.early_release and self.world.events.batch_size:
            # A stray release sent now (an earlier entry's, say) that arrives once it is inside:
            # through the queue only, whose SentTimestamp says when it was sent.
            self._early[plan.name] = {"release": execution.arn, "gate": GATE, "sentAt": now}
        if plan.fate == "dies waiting":
            self.at(now + plan.dies_after, lambda: self._die_waiting(plan, entry))

    def _admitted(self, entry: Entry) -> None:
        """`SendTaskSuccess` took its token (in the middleware, under the world's lock): its section runs."""
        plan = self._plans[entry.execution.name]
        admitted = entry.admitted_at or self.world.now
        early = self._early.pop(plan.name, None)
        if early is not None and self.world.faults.enabled:
            self.world.injected["release sent before the admission, delivered after"] += 1
            self.world.deliver_later(early, plan.release_delay)
        if plan.fate == "aborted inside":
            self.at(admitted + min(plan.dies_after, plan.section), lambda: self._abort_inside(entry))
            return
        self.at(admitted + plan.section, lambda: self._section_over(plan, entry))

    def _section_over(self, plan: GatedPlan, entry: Entry) -> None:
        gates = self.world.gates
        assert gates is not None
        if not entry.inside:
            return
        gates.leave(entry)
        if plan.fate == "releases":
            self._release(plan, delay=plan.release_delay if plan.release == "late" else 0.0)
        else:
            self.world.injected["gated execution went on without a release"] += 1
        self.at(self.world.now + plan.after, lambda: self.world.finish(entry.execution.arn, "SUCCEEDED"))

    def _release(self, plan: GatedPlan, delay: float) -> None:
        """The execution sends its release (to the end-event queue): lost, doubled or late as planned."""
        if not self.world.faults.enabled:
            return  # the quiet phase: places come back by the checks and the ends alone
        document = {"release": self._arn(plan), "gate": GATE, "sentAt": self.world.now}
        if plan.release == "lost":
            self.world.injected["release lost"] += 1
            return
        copies = 2 if plan.release == "doubled" else 1
        if plan.release == "late":
            self.world.injected["release late"] += 1
        for copy in range(copies):
            if copy:
                self.world.injected["release doubled"] += 1
            self.world.deliver_later(document, delay + copy * 5.0)
            self.releases_delivered += 1

    def _die_waiting(self, plan: GatedPlan, entry: Entry) -> None:
        if entry.waiting:
            self.world.injected["gated execution died while it waited"] += 1
            self.world.finish(entry.execution.arn, "ABORTED")

    def _abort_inside(self, entry: Entry) -> None:
        if entry.inside:
            self.world.injected["gated execution aborted inside"] += 1
            self.world.finish(entry.execution.arn, "ABORTED")

    # -- the end ------------------------------------------------------------------------

    def waiting(self) -> int:
        """Gated executions still waiting (the quiet phase admits them)."""
        return sum(entry.waiting for entry in self.entries.values())

    def limit(self, default_max: int) -> int:
        """The most of the gate's executions one quiet tick may admit."""
        pool = default_max if self.plan.kind == "shared" else self.plan.pool_max
        return max(1, min(pool, self.plan.max_concurrency or math.inf))  # type: ignore[call-overload]

    def inside(self) -> int:
        """Executions truly inside the gate now."""
        gates = self.world.gates
        return 0 if gates is None else len(gates.inside(GATE))

    def recorded(self) -> list[str]:
        """The executions the state table still holds an admission of."""
        items = self._dynamodb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": inside_partition(self._own, GATE)}},
        )["Items"]
        return [item["sk"]["S"] for item in items if item.get("kind", {}).get("S") == INSIDE_KIND]

    def check(self) -> list[str]:
        """Every request of a live execution admitted once; poison in the gate's DLQ; its queue empty."""
        gates = self.world.gates
        assert gates is not None
        violations = []
        for plan in self.plan.executions:
            entry = self.entries.get(plan.name)
            if entry is None:
                violations.append(f"gate: {plan.name} never asked (the run never reached it)")
                continue
            if entry.waiting:
                violations.append(f"loss: gated execution {plan.name} still waits at the end")
            elif entry.admitted_at is None and plan.fate != "dies waiting":
                violations.append(f"loss: gated execution {plan.name} was never admitted")
            if gates.accepted[entry.token] > 1:
                violations.append(f"duplicate: {plan.name} admitted {gates.accepted[entry.token]} times")
        visible, in_flight = self._depth(self.entry["queue_url"])
        if visible or in_flight:
            violations.append(f"loss: {visible + in_flight} request(s) still on the gate's queue at the end")
        letters = read_all(self.entry["dead_letter_queue_url"], self._sqs)
        reasons = [
            letter.get("MessageAttributes", {}).get("DispatchError", {}).get("StringValue", "")
            for letter in letters
        ]
        if len(letters) != len(self.plan.poison) or not all('"execution"' in reason for reason in reasons):
            violations.append(f"gate: {len(self.plan.poison)} poison request(s), its DLQ holds {reasons}")
        return violations

    def _depth(self, url: str) -> tuple[int, int]:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]), int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )
