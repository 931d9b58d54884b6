"""What the Python client programs share: arguments, the result lines, error reports, the watchdog.

Each program runs the scenarios named on its command line, in order, in one process, and prints one JSON object
per scenario on stdout (README.md in this directory has the format). Nothing here knows a scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

# Response headers a result reports: the ones a caller acts on, and every `ballast-*` header.
SELECTED_HEADERS = ("x-request-id", "x-should-retry", "retry-after", "retry-after-ms", "content-type")

# Request headers the SDK sets itself that a result reports per HTTP request it sent.
SENT_HEADERS = ("x-stainless-retry-count", "x-stainless-read-timeout", "x-stainless-timeout")

_print_lock = threading.Lock()


def now_ms(since: float) -> int:
    return int(round((time.monotonic() - since) * 1000))


def select_headers(headers: Any) -> Dict[str, str]:
    """The reported subset of a response's headers, names in lower case."""
    if headers is None:
        return {}
    picked: Dict[str, str] = {}
    for name, value in headers.items():
        lower = name.lower()
        if lower in SELECTED_HEADERS or lower.startswith("ballast-"):
            picked[lower] = value
    return picked


def recording_hooks(
    http: List[Dict[str, Any]], sent_headers: tuple, key_headers: tuple = (), asynchronous: bool = False
) -> Dict[str, List[Callable[[Any], Any]]]:
    """httpx event hooks that record every HTTP request of an SDK (each of its retries included) in `http`: its
    method and path, the `sent_headers` it set, which of `key_headers` carried the key (when asked), then its status
    and the selected response headers. `asynchronous`: as coroutines, which an async client's hooks must be."""
    pending: Dict[int, Dict[str, Any]] = {}

    def on_request(request: Any) -> None:
        entry: Dict[str, Any] = {
            "method": request.method,
            "path": request.url.path,
            "sent": {name: request.headers[name] for name in sent_headers if name in request.headers},
            "status": None,
        }
        if key_headers:
            entry["key_header"] = [name for name in key_headers if name in request.headers]
        pending[id(request)] = entry
        http.append(entry)

    def on_response(response: Any) -> None:
        entry = pending.pop(id(response.request), None)
        if entry is not None:
            entry["status"] = response.status_code
            entry["headers"] = select_headers(response.headers)

    if asynchronous:

        async def on_request_async(request: Any) -> None:
            on_request(request)

        async def on_response_async(response: Any) -> None:
            on_response(response)

        return {"request": [on_request_async], "response": [on_response_async]}
    return {"request": [on_request], "response": [on_response]}


def jsonable(value: Any) -> Any:
    """`value` as plain JSON data (SDK models dumped, anything else as its text)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def error_report(exc: BaseException) -> Dict[str, Any]:
    """An exception as a result reports it: its class, and what the SDK exposes of status, code and body."""
    report: Dict[str, Any] = {
        "class": type(exc).__name__,
        "module": type(exc).__module__,
        "message": str(getattr(exc, "message", None) or exc),
        "status": getattr(exc, "status_code", None),
        "code": getattr(exc, "code", None),
        "type": getattr(exc, "type", None),
        "param": getattr(exc, "param", None),
        "body": jsonable(getattr(exc, "body", None)),
        "request_id": getattr(exc, "request_id", None),
        "headers": select_headers(getattr(getattr(exc, "response", None), "headers", None)),
    }
    cause = exc.__cause__ or exc.__context__
    if cause is not None and report["status"] is None:
        # What the transport said (a reset, a cut body, a read timeout); a status error's cause is only httpx's
        # restatement of the status.
        report["cause"] = f"{type(cause).__name__}: {cause}"
    if not report["module"].startswith(("openai", "agents", "anthropic", "mcp")):
        # Not an SDK error: a bug in the program or an unexpected answer shape; keep where it happened.
        report["traceback"] = traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]
    return report


def emit(result: Dict[str, Any]) -> None:
    with _print_lock:
        sys.stdout.write(json.dumps(result, default=str) + "\n")
        sys.stdout.flush()


class Context:
    """One scenario's run: the arguments, and `out`, the fields its result line reports (filled as it goes, so
    what was observed before an exception is still reported)."""

    def __init__(self, args: argparse.Namespace, sdk: str, scenario: str) -> None:
        self.args = args  # every option, a program's own ones included
        self.base_url: str = args.base_url
        self.api_key: str = args.api_key
        self.sdk = sdk
        self.scenario = scenario
        self.out: Dict[str, Any] = {}

    def op(self, suffix: str = "") -> str:
        """The scenario's operation id, named in the user turn: `op-py-responses-tool_call`."""
        return f"op-{self.sdk}-{self.scenario.replace('.', '-')}{suffix}"


def outcome(
    fn: Callable[[], Dict[str, Any]], report: Callable[[BaseException], Dict[str, Any]] = error_report
) -> Dict[str, Any]:
    """Runs one call of a scenario that makes several: its fields, `ok` and `elapsed_ms`; an exception is its
    `error` (as `report` says it), never raised."""
    started = time.monotonic()
    fields: Dict[str, Any] = {}
    try:
        fields.update(fn())
        fields["ok"] = "error" not in fields
    except BaseException as exc:  # noqa: BLE001 - every outcome is reported
        fields["ok"] = False
        fields["error"] = report(exc)
    fields["elapsed_ms"] = now_ms(started)
    return fields


class Watchdog:
    """Ends the process when the whole run takes longer than `seconds`: the running scenario is reported as
    failed by the watchdog, and the exit code is 3. The SDK timeouts of every scenario should fire first."""

    def __init__(self, seconds: float) -> None:
        self.current: Optional[str] = None
        self.started = time.monotonic()
        self.scenario_started = self.started
        timer = threading.Timer(seconds, self._fire, args=(seconds,))
        timer.daemon = True
        timer.start()

    def _fire(self, seconds: float) -> None:
        emit(
            {
                "scenario": self.current or "(none)",
                "ok": False,
                "elapsed_ms": now_ms(self.scenario_started),
                "error": {"class": "Watchdog", "message": f"the run took over {seconds} s; killed"},
            }
        )
        os._exit(3)


def parse_args(
    description: str,
    scenarios: List[str],
    extend: Optional[Callable[[argparse.ArgumentParser], None]] = None,
) -> argparse.Namespace:
    """The common arguments, and a program's own options when `extend` adds them to the parser."""
    parser = argparse.ArgumentParser(
        description=description,
        epilog="scenarios: " + " ".join(scenarios) + " (or `all`)",
    )
    parser.add_argument("--base-url", required=True, help="the API's base URL, e.g. http://127.0.0.1:PORT/v1")
    parser.add_argument("--api-key", default="sk-ballast-test", help="the bearer key the SDK sends")
    parser.add_argument(
        "--watchdog", type=float, default=120.0, help="seconds after which the whole run is killed (exit code 3)"
    )
    if extend is not None:
        extend(parser)
    parser.add_argument("scenario", nargs="+", help="scenario names, run in order")
    args = parser.parse_args()
    names: List[str] = []
    for name in args.scenario:
        names.extend(scenarios if name == "all" else [name])
    unknown = [name for name in names if name not in scenarios]
    if unknown:
        parser.error(f"unknown scenario(s): {' '.join(unknown)}; known: {' '.join(scenarios)}")
    args.scenario = names
    return args


def _failed(value: Any) -> bool:
    """A call's outcome (see `outcome`) that failed, alone or in a list."""
    if isinstance(value, list):
        return any(_failed(item) for item in value)
    return isinstance(value, dict) and value.get("ok") is False


def run(
    args: argparse.Namespace,
    sdk: str,
    table: Dict[str, Callable[[Context], None]],
    setup: Callable[[], None],
    report: Callable[[BaseException], Dict[str, Any]] = error_report,
) -> None:
    """Runs `args.scenario` in order, one result line each, an exception as `report` says it. `setup` runs first,
    under the watchdog."""
    watchdog = Watchdog(args.watchdog)
    setup()
    for name in args.scenario:
        ctx = Context(args, sdk, name)
        watchdog.current = name
        watchdog.scenario_started = started = time.monotonic()
        error: Optional[Dict[str, Any]] = None
        try:
            table[name](ctx)
        except BaseException as exc:  # noqa: BLE001 - never crash: the exception is the scenario's result
            if isinstance(exc, KeyboardInterrupt):
                raise
            error = report(exc)
        result: Dict[str, Any] = {"scenario": name, "ok": error is None, "elapsed_ms": now_ms(started)}
        result.update(ctx.out)
        if error is not None:
            result["error"] = error
        if "error" in result or any(_failed(value) for value in ctx.out.values()):
            result["ok"] = False
        emit(result)
