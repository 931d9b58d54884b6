"""What the two Python MCP programs (`mcp_python.py`, `mcp_agents.py`) share: the tools' arguments, a tool
result and an MCP error as a result line reports them, the recorder of the MCP client's HTTP requests, and the
upstream's stats, read to know when a call is in flight there (README.md, "The MCP scenarios").

Nothing here knows a scenario. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional

import httpx2

from sdk_common import Context, error_report, jsonable, now_ms, recording_hooks

# The gateway is on loopback: no MCP request goes through a proxy (httpx2 reads these when a client is made).
for _var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
    os.environ.pop(_var, None)

TIMEOUT = 15.0  # seconds: each MCP request's read timeout, the whole of a call that should simply be answered
IN_FLIGHT_PATIENCE = 10.0  # seconds: the longest wait for the upstream to see (or drop) a call
POLL = 0.02  # seconds between two reads of the upstream's stats
REISSUES = 40  # a re-issued call answered `idempotency_in_progress` is sent again at most this many times

# Request headers of the MCP transport reported per HTTP request it sent.
SENT_HEADERS = ("mcp-protocol-version", "mcp-method", "mcp-name", "mcp-session-id", "ballast-run-id")


def add_options(parser: argparse.ArgumentParser) -> None:
    """The MCP programs' own options."""
    parser.add_argument(
        "--upstream",
        default=None,
        help="the upstream MCP server's chaos root (http://127.0.0.1:PORT): its /stats say when a call is in flight",
    )


def lookup_args(op: str) -> Dict[str, Any]:
    return {"order_id": "1234", "op": op}


def refund_args(op: str) -> Dict[str, Any]:
    return {"order_id": "1234", "amount": 1250, "op": op}


def run_id(ctx: Context, suffix: str = "") -> str:
    """The scenario's agent run, sent as `ballast-run-id`: `run-op-mcp-py-list_and_call`."""
    return f"run-{ctx.op(suffix)}"


def headers_for(ctx: Context, run: Optional[str]) -> Dict[str, str]:
    """The transport's headers: the key, and the run when there is one."""
    headers = {"authorization": f"Bearer {ctx.api_key}"}
    if run is not None:
        headers["ballast-run-id"] = run
    return headers


def record_requests(client: httpx2.AsyncClient, http: List[Dict[str, Any]]) -> None:
    """Records every HTTP request `client` sends in `http`: method, the MCP headers it set, then the answer's status
    and selected headers."""
    client.event_hooks = recording_hooks(http, SENT_HEADERS, asynchronous=True)


def tool_summary(tool: Any) -> Dict[str, Any]:
    """A listed tool: its name, description, input schema and annotations (wire names)."""
    dumped = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {
        "name": dumped.get("name"),
        "description": dumped.get("description"),
        "input_schema": dumped.get("inputSchema"),
        "annotations": dumped.get("annotations"),
    }


def result_summary(result: Any) -> Dict[str, Any]:
    """A `CallToolResult`: `is_error`, `code` (a tool error's `structuredContent.code`), `structured`, `text` (the
    text contents joined), `meta` and `replayed` (`_meta["ballast/replayed"]`)."""
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    structured = dumped.get("structuredContent")
    is_error = bool(dumped.get("isError"))
    meta = dumped.get("_meta") or {}
    texts = [c.get("text", "") for c in dumped.get("content", []) if c.get("type") == "text"]
    return {
        "is_error": is_error,
        "code": structured.get("code") if is_error and isinstance(structured, dict) else None,
        "structured": structured,
        "text": "\n".join(texts),
        "meta": meta,
        "replayed": bool(meta.get("ballast/replayed")),
    }


def mcp_error_report(exc: BaseException) -> Dict[str, Any]:
    """An exception as a result reports it; an `MCPError`'s JSON-RPC `code`, `message` and `data`; an exception group
    of one (anyio's task groups) as that one, and of several as the first with `group` naming them all."""
    if isinstance(exc, BaseExceptionGroup):
        inner = list(exc.exceptions)
        report = mcp_error_report(inner[0])
        if len(inner) > 1:
            report["group"] = [f"{type(e).__name__}: {e}" for e in inner]
        return report
    report = error_report(exc)
    error = getattr(exc, "error", None)
    if error is not None and hasattr(error, "code"):
        report.update({"code": error.code, "message": error.message, "data": jsonable(error.data)})
    return report


async def outcome_of(call: Callable[[], Awaitable[Any]]) -> Dict[str, Any]:
    """One tool call's outcome: its result summarised, `ok` (no exception), `elapsed_ms`; an exception is its
    `error`. A call cancelled by the scenario is `cancelled: true`."""
    started = time.monotonic()
    fields: Dict[str, Any] = {}
    try:
        fields.update(result_summary(await call()))
        fields["ok"] = True
    except asyncio.CancelledError:
        fields.update({"ok": True, "cancelled": True})
    except Exception as exc:  # noqa: BLE001 - every outcome is reported
        fields.update({"ok": False, "error": mcp_error_report(exc)})
    fields["elapsed_ms"] = now_ms(started)
    return fields


async def reissue_until_settled(call: Callable[[], Awaitable[Any]]) -> List[Dict[str, Any]]:
    """The same call sent again while the gateway answers `idempotency_in_progress`, waiting its `retry_after_ms` (at most a
    second) between two, at most `REISSUES` times: every outcome, the settled one last."""
    outcomes: List[Dict[str, Any]] = []
    for _ in range(REISSUES):
        outcome = await outcome_of(call)
        outcomes.append(outcome)
        if outcome.get("code") != "idempotency_in_progress":
            break
        wait_ms = (outcome.get("structured") or {}).get("retry_after_ms") or 100
        await asyncio.sleep(min(float(wait_ms), 1000.0) / 1000.0)
    return outcomes


async def upstream_in_flight(ctx: Context, endpoint: str) -> int:
    """Requests the upstream is handling now at `endpoint` (its chaos `/stats`)."""
    upstream = ctx.args.upstream
    if not upstream:
        raise RuntimeError("this scenario needs --upstream (the upstream's chaos root) to see its calls in flight")
    async with httpx2.AsyncClient(timeout=5.0, trust_env=False) as http:
        stats = (await http.get(upstream.rstrip("/") + "/stats")).json()
    return int(((stats.get("endpoints") or {}).get(endpoint) or {}).get("in_flight", 0))


async def until_in_flight(ctx: Context, endpoint: str, at_least: bool = True) -> int:
    """Waits (bounded) until the upstream handles a request at `endpoint` (`at_least`), or none; the wait in ms."""
    started = time.monotonic()
    while time.monotonic() - started < IN_FLIGHT_PATIENCE:
        busy = await upstream_in_flight(ctx, endpoint) > 0
        if busy == at_least:
            return now_ms(started)
        await asyncio.sleep(POLL)
    state = "in flight" if at_least else "gone"
    raise TimeoutError(f"the upstream's {endpoint} had no call {state} within {IN_FLIGHT_PATIENCE} s")
