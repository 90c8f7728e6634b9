"""The embedded AWS: moto's HTTP server on loopback, with its SQS made atomic per request."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import botocore.session
from botocore.loaders import Loader

from dispatcher.adapters.clients import service_models
from dispatcher.local.emulation import Emulation
from dispatcher.local.loopback import serve_here

_SQS_LOCK = threading.RLock()
_ITEM_LOCK = threading.Lock()


RECEIVE_POLL_SECONDS = 0.05
"""How often a long-polling receive looks again, without the lock in between."""
SHUTDOWN_POLL_SECONDS = 0.05
"""How often the server looks for a request to stop (werkzeug's default, 0.5 s, is the time
Ctrl-C waits for `dispatcher local` to stop)."""


def share_service_models() -> None:
    """Every botocore session this process makes from now on shares one loader of service models.

    moto makes sessions of its own (importing its EC2 backend, which moto's Step Functions
    interpreter does, lists the regions through a new one), and each would read and parse
    the same model files again: a quarter of the CPU time `dispatcher local` takes to
    start (5.0 s, 3.8 s with one loader). The CLI's sessions use the same loader
    (`dispatcher.adapters.clients.service_models`); what each call does is unchanged.
    """

    def shared(search_path_string: str | None = None) -> Loader:
        return service_models()

    botocore.session.create_loader = shared


def atomic_item_updates() -> None:
    """Make moto's DynamoDB `UpdateItem` atomic, as it is in AWS (its condition and its change at once).

    moto reads, checks and writes an item without a lock: the sample workflow's executions,
    run on threads, take the simulated downstream API's slots with a conditional ``ADD``, and
    two at once could both pass a condition only one of them meets.
    """
    from moto.dynamodb.models import DynamoDBBackend  # noqa: PLC0415 — local-only

    update_item = DynamoDBBackend.update_item
    if getattr(update_item, "atomic", False):
        return

    def atomic(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _ITEM_LOCK:
            return update_item(self, *args, **kwargs)

    atomic.atomic = True  # type: ignore[attr-defined]
    DynamoDBBackend.update_item = atomic  # type: ignore[method-assign]


def atomic_sqs() -> None:
    """Make each of moto's SQS actions atomic, as each SQS request is in AWS (idempotent).

    moto's SQS backend isn't thread-safe: two receives at once can return the same
    message, or fail with "Set changed size during iteration". The dispatcher receives
    in parallel, so every emulator here serialises SQS actions with one lock. A receive
    that long-polls holds it for one look at a time, not for its whole wait: held for the
    wait, one empty queue's long poll (a second, the dispatcher's) held up every other
    SQS call of every client, a `status` of ten queues took ten seconds.
    """
    from moto.core.utils import unix_time  # noqa: PLC0415 — local-only
    from moto.sqs.models import SQSBackend  # noqa: PLC0415
    from moto.sqs.responses import SQSResponse  # noqa: PLC0415 — local-only

    call_action = SQSResponse.call_action
    if getattr(call_action, "atomic", False):
        return
    receive = SQSBackend.receive_message

    def atomic(self: Any) -> Any:
        if self._get_action() == "ReceiveMessage":
            return call_action(self)  # it takes the lock for each look (`polling`)
        with _SQS_LOCK:
            return call_action(self)

    def polling(  # noqa: PLR0913, PLR0917 — moto's own signature
        self: Any,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> Any:
        deadline = time.monotonic() + wait_seconds_timeout
        while True:
            with _SQS_LOCK:
                found = receive(self, queue_name, count, 0, visibility_timeout, message_attribute_names)
            if found or time.monotonic() >= deadline:
                return found
            time.sleep(RECEIVE_POLL_SECONDS)

    def retained(self: Any, queue_name: str, message: Any) -> bool:
        # moto reads the retention period from every attribute of the queue (counting its
        # messages) for each message a receive hands out: a receive cost the square of the
        # queue's depth. The queue keeps the period as an attribute of its own.
        period = self.get_queue(queue_name).message_retention_period
        return bool(int(period) + message.sent_timestamp / 1000 > unix_time())

    atomic.atomic = True  # type: ignore[attr-defined]
    SQSResponse.call_action = atomic  # type: ignore[method-assign]
    SQSBackend.receive_message = polling  # type: ignore[method-assign]
    SQSBackend.is_message_valid_based_on_retention_period = retained  # type: ignore[method-assign]


STARTING_WORKER_PATIENCE_SECONDS, STARTING_WORKER_PAUSE_SECONDS = 10.0, 0.01


def quick_dispatch(app: Any) -> Any:
    """Remember what moto works out the same way for every request: ``app`` back, faster.

    For each request moto's router lists its own package's folders from disk to find
    the service a host names (a directory listing and ~120 ``stat`` calls), and each
    action lists its responses class's methods (``inspect.getmembers``). Both answers
    never change in a process; here each is worked out once. In the fault scenarios
    that was a quarter of their CPU.
    """
    from moto.core import responses  # noqa: PLC0415 — local-only

    app.get_backend_for_host = functools.cache(app.get_backend_for_host)
    names = responses.method_names_from_class  # type: ignore[attr-defined]
    if not hasattr(names, "cache_info"):
        responses.method_names_from_class = functools.cache(names)  # type: ignore[attr-defined]
    return app


def quick_serialize() -> None:
    """Make moto's response serializer remember where to look in a dict: the same answers, faster.

    For every member of every structure of a response (each AttributeValue of each item a
    DynamoDB `Query` returns has ten), moto builds six alias providers to list the keys the
    member's value may sit under, then tries each key. For a plain dict that list depends on
    the member only (its service, its structure and its name), so here it is worked out once
    per member, and looked up in the dict directly. A `Query` of 100 state-table items took
    0.59 s of CPU, now 0.16 s.
    Any other value (a model object, a dotted key, a response transformer) goes moto's way.
    """
    from moto.core.serialize import (  # noqa: PLC0415 — local-only
        DEFAULT_ALIAS_PROVIDERS,
        AttributePickerContext,
        ResponseSerializer,
        XFormedAttributePicker,
    )

    get_value = ResponseSerializer.get_value
    if getattr(get_value, "quick", False):
        return
    known: dict[tuple[str, str, str], tuple[str, ...] | None] = {}

    def possible_keys(self: Any, value: Any, key: str, shape: Any) -> tuple[str, ...] | None:
        parent = getattr(shape, "parent", None)
        if parent is None:
            return None
        # Within a service's model a structure's name and a member's key name the member.
        memo = (self.operation_model.service_model.service_name, parent.name, key)
        if memo not in known:
            picker = self._value_picker
            context = AttributePickerContext(obj=value, key=key, shape=shape)
            keys = tuple(picker.get_possible_keys(context))
            known[memo] = None if any("." in each for each in keys) else keys
        return known[memo]

    def quick(self: Any, value: Any, key: str, shape: Any) -> Any:
        picker = self._value_picker
        if (
            type(value) is not dict
            or type(picker) is not XFormedAttributePicker
            or picker.alias_providers is not DEFAULT_ALIAS_PROVIDERS
            or picker.response_transformers
        ):
            return get_value(self, value, key, shape)
        keys = possible_keys(self, value, key, shape)
        if keys is None:
            return get_value(self, value, key, shape)
        for each in keys:
            if each in value:
                return value[each]
        return None

    quick.quick = True  # type: ignore[attr-defined]
    quick.moto = get_value  # type: ignore[attr-defined]
    ResponseSerializer.get_value = quick  # type: ignore[method-assign]


def patient_task_tokens() -> None:
    """Make moto's `SendTaskSuccess` wait for an execution that has just started.

    moto looks for the token's task in every RUNNING execution, and trips (an
    AttributeError, a 500) on one whose worker thread has not set up yet: a lane's
    execution started in the same round as a gate's admission. AWS has no such race;
    here the call is tried again a moment later.
    """
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend  # noqa: PLC0415 — local-only

    send_task_success = StepFunctionsParserBackend.send_task_success
    if getattr(send_task_success, "patient", False):
        return

    def patient(self: Any, task_token: Any, outcome: Any) -> Any:
        # Until the worker is set up, however busy the machine (its thread may wait for a core).
        deadline = time.monotonic() + STARTING_WORKER_PATIENCE_SECONDS
        while time.monotonic() < deadline:
            try:
                return send_task_success(self, task_token, outcome)
            except AttributeError:  # an execution's worker without its environment yet
                time.sleep(STARTING_WORKER_PAUSE_SECONDS)
        return send_task_success(self, task_token, outcome)

    patient.patient = True  # type: ignore[attr-defined]
    StepFunctionsParserBackend.send_task_success = patient  # type: ignore[method-assign]


def enable_execution(endpoint_url: str, *, enabled: bool = True) -> None:
    """Make a moto server really run state machines (Wait states take real time), or not.

    The switch is moto's, global to the process: every server in it shares it.
    """
    import requests  # noqa: PLC0415 — local-only

    response = requests.post(
        f"{endpoint_url}/moto-api/config",
        json={"stepfunctions": {"execute_state_machine": enabled}},
        timeout=10,
    )
    response.raise_for_status()


@contextmanager
def moto_server(
    host: str = "127.0.0.1",
    *,
    port: int = 0,
    execute: bool = True,
    wrap: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    loopback: bool = True,
) -> Iterator[str]:
    """Run moto's HTTP server on a loopback port (a free one by default); yield its endpoint URL.

    ``execute``: whether moto really runs state machines. ``wrap``: a WSGI middleware
    factory to put in front of moto (the fault-injection tests use one). ``loopback``:
    this process's own requests to it are served in the process (`serve_here`); other
    processes always come over HTTP. Off, every request goes through the socket (what a
    measurement of the wire wants).
    """
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer  # noqa: PLC0415 — local-only
    from moto.moto_server.werkzeug_app import (  # noqa: PLC0415
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server  # noqa: PLC0415

    share_service_models()
    atomic_sqs()
    atomic_item_updates()
    patient_task_tokens()
    quick_serialize()
    app: Callable[..., Any] = quick_dispatch(DomainDispatcherApplication(create_backend_app))
    if wrap is not None:
        app = wrap(app)

    class Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever(poll_interval=SHUTDOWN_POLL_SECONDS)

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    # moto logs every failed state of a workflow it runs as an error: failures are expected here.
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    server = Server(ip_address=host, port=port, verbose=False)
    server.start()
    try:
        _, port = server.get_host_and_port()
        endpoint_url = f"http://{host}:{port}"
        with serve_here(endpoint_url, app) if loopback else contextlib.nullcontext():
            enable_execution(endpoint_url, enabled=execute)  # another server may have set it either way
            try:
                yield endpoint_url
            finally:
                enable_execution(endpoint_url, enabled=False)  # the switch outlives the server
    finally:
        server.stop()


@contextmanager
def emulated_server(
    host: str = "127.0.0.1", *, port: int = 0, execute: bool = True
) -> Iterator[tuple[str, Emulation]]:
    """`moto_server` behind `Emulation`, delivering events; yield the endpoint URL and the emulation.

    Add `Rule`s to ``emulation.rules`` (e.g. the failure spool: `failure_pattern`, `to_queue`).
    """
    made: list[Emulation] = []

    def wrap(app: Callable[..., Any]) -> Emulation:
        made.append(Emulation(app))
        return made[0]

    with moto_server(host, port=port, execute=execute, wrap=wrap) as endpoint_url:
        emulation = made[0]
        # A workflow's service tasks (e.g. dynamodb:getItem) call moto back on MOTO_PORT.
        saved_port = os.environ.get("MOTO_PORT")
        os.environ["MOTO_PORT"] = endpoint_url.rsplit(":", 1)[-1]
        emulation.start_events(endpoint_url)
        try:
            yield endpoint_url, emulation
        finally:
            emulation.stop_events()
            if saved_port is None:
                os.environ.pop("MOTO_PORT", None)
            else:
                os.environ["MOTO_PORT"] = saved_port
