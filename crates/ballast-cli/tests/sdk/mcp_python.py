"""The MCP Python SDK (`mcp`) as a real client of the gateway's `/mcp`: the MCP scenarios of README.md, one JSON
line each.

    target/sdk/venv/bin/python crates/ballast-cli/tests/sdk/mcp_python.py \
        --base-url http://127.0.0.1:PORT/mcp --api-key KEY [--upstream http://CHAOS] [--mode legacy] list_and_call ...

The client is `mcp.Client` over `streamable_http_client(url, http_client=create_mcp_http_client(headers=...))`: the
key and the run (`ballast-run-id`) are the transport's headers, set once per client. `--mode auto` (the default)
negotiates 2026-07-28 (`server/discover`) and falls back to the `initialize` handshake; `--mode legacy` forces the
handshake (2025-11-25). Every request has a read timeout; the watchdog ends the run if it takes longer anyway.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, List, Optional

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

sys.dont_write_bytecode = True  # no __pycache__ beside the sources when sdk_common is imported
from sdk_common import Context, now_ms, parse_args, run  # noqa: E402
from mcp_common import (  # noqa: E402
    TIMEOUT,
    add_options,
    headers_for,
    lookup_args,
    mcp_error_report,
    outcome_of,
    record_requests,
    refund_args,
    reissue_until_settled,
    run_id,
    tool_summary,
    until_in_flight,
)

CONCURRENT = 16  # identical calls at once in `concurrent_same_key`
BREAKER_CALLS = 12  # calls at most until the breaker of a failing server answers `circuit_open`


@asynccontextmanager
async def connect(ctx: Context, run: Optional[str]) -> AsyncIterator[Client]:
    """A connected client whose transport sends the key and `run`; its HTTP requests recorded in `ctx.out["http"]`."""
    http_log: List[Dict[str, Any]] = ctx.out.setdefault("http", [])
    http = create_mcp_http_client(headers=headers_for(ctx, run), timeout=httpx2.Timeout(TIMEOUT))
    record_requests(http, http_log)
    async with http:
        transport = streamable_http_client(ctx.base_url, http_client=http)
        async with Client(transport, mode=ctx.args.mode, cache=None, read_timeout_seconds=TIMEOUT) as client:
            ctx.out["protocol_version"] = client.protocol_version
            yield client


async def list_tools(client: Client) -> List[Dict[str, Any]]:
    """Every listed tool, page after page."""
    tools: List[Dict[str, Any]] = []
    cursor: Optional[str] = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor)
        tools.extend(tool_summary(tool) for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def caller(client: Client, name: str, args: Dict[str, Any], meta: Optional[Dict[str, Any]] = None) -> Callable[[], Awaitable[Any]]:
    return lambda: client.call_tool(name, args, meta=meta)


# --- the scenarios ----------------------------------------------------------------------------------------------


async def list_and_call(ctx: Context) -> None:
    async with connect(ctx, run_id(ctx)) as client:
        ctx.out["tools"] = await list_tools(client)
        ctx.out["calls"] = {
            "lookup_order": await outcome_of(caller(client, "lookup_order", lookup_args(ctx.op("-http")))),
            "shop_lookup_order": await outcome_of(caller(client, "shop_lookup_order", lookup_args(ctx.op("-shop")))),
            "create_refund": await outcome_of(caller(client, "create_refund", refund_args(ctx.op("-http")))),
            "shop_create_refund": await outcome_of(caller(client, "shop_create_refund", refund_args(ctx.op("-shop")))),
        }


async def lost_answer_reissued(ctx: Context) -> None:
    async with connect(ctx, run_id(ctx)) as client:
        call = caller(client, "shop_create_refund", refund_args(ctx.op()))
        ctx.out["first"] = await outcome_of(call)
        ctx.out["reissued"] = await outcome_of(call)


async def concurrent_same_key(ctx: Context) -> None:
    # The same run and arguments: one operation by the run's fingerprint.
    async with connect(ctx, run_id(ctx)) as client:
        call = caller(client, "shop_create_refund", refund_args(ctx.op("-run")))
        ctx.out["by_run"] = list(await asyncio.gather(*(outcome_of(call) for _ in range(CONCURRENT))))
    # No run: the same explicit key in `_meta`.
    async with connect(ctx, None) as client:
        meta = {"ballast/idempotency_key": f"key-{ctx.op('-key')}"}
        call = caller(client, "shop_create_refund", refund_args(ctx.op("-key")), meta)
        ctx.out["by_key"] = list(await asyncio.gather(*(outcome_of(call) for _ in range(CONCURRENT))))


async def cancelled_once_in_flight(ctx: Context, call: Callable[[], Awaitable[Any]], endpoint: str) -> Dict[str, Any]:
    """Starts `call`, cancels it once the upstream handles it at `endpoint` (the SDK closes the request's stream,
    or sends `notifications/cancelled` on a handshake connection); its outcome, with `in_flight_after_ms`."""
    task = asyncio.create_task(outcome_of(call))
    waited = await until_in_flight(ctx, endpoint)
    task.cancel()
    first = await task
    first["in_flight_after_ms"] = waited
    return first


async def close_mid_side_effect(ctx: Context) -> None:
    async with connect(ctx, run_id(ctx)) as client:
        call = caller(client, "shop_process_payment", refund_args(ctx.op()))
        ctx.out["first"] = await cancelled_once_in_flight(ctx, call, "process_payment")
        ctx.out["reissues"] = await reissue_until_settled(call)


async def read_only_cancelled(ctx: Context) -> None:
    async with connect(ctx, run_id(ctx)) as client:
        call = caller(client, "shop_lookup_order", lookup_args(ctx.op()))
        ctx.out["first"] = await cancelled_once_in_flight(ctx, call, "lookup_order")
        started = time.monotonic()
        await until_in_flight(ctx, "lookup_order", at_least=False)
        ctx.out["upstream_released_ms"] = now_ms(started)


async def breaker_opens(ctx: Context, tool: str) -> None:
    """Calls the read-only `tool` of a failing server until the gateway answers `circuit_open`: every outcome."""
    calls: List[Dict[str, Any]] = []
    ctx.out["calls"] = calls
    async with connect(ctx, run_id(ctx)) as client:
        for n in range(1, BREAKER_CALLS + 1):
            outcome = await outcome_of(caller(client, tool, lookup_args(ctx.op(f"-{n}"))))
            calls.append(outcome)
            if outcome.get("code") == "circuit_open":
                break
    ctx.out["codes"] = [c.get("code") or ("error" if "error" in c else None) for c in calls]


async def upstream_down(ctx: Context) -> None:
    await breaker_opens(ctx, "down_lookup_order")


async def slow(ctx: Context) -> None:
    await breaker_opens(ctx, "slow_lookup_order")


async def garbage(ctx: Context) -> None:
    await breaker_opens(ctx, "garbage_lookup_order")


async def untrusted_annotations(ctx: Context) -> None:
    """Every tool of the `untrusted_` and `trusted_` servers announced `readOnlyHint: true`, called without a run
    (`no_run`: a side-effecting call has nothing to key on), then twice in one run (`same_run`: a side-effecting
    call's second answer is the first's replay; a read-only one runs again)."""
    async with connect(ctx, None) as client:
        listed = await list_tools(client)
    hinted = [
        tool
        for tool in listed
        if (tool["name"] or "").startswith(("untrusted_", "trusted_"))
        and (tool.get("annotations") or {}).get("readOnlyHint") is True
    ]
    tools: Dict[str, Dict[str, Any]] = {}
    ctx.out["tools"] = tools
    for tool in hinted:
        name = tool["name"]
        args = refund_args(ctx.op(f"-{name}"))
        report: Dict[str, Any] = {"annotations": tool["annotations"]}
        tools[name] = report
        async with connect(ctx, None) as client:
            report["no_run"] = await outcome_of(caller(client, name, args))
        async with connect(ctx, run_id(ctx, f"-{name}")) as client:
            report["same_run"] = [await outcome_of(caller(client, name, args)) for _ in range(2)]


async def slow_side_effect(ctx: Context) -> None:
    """One side-effecting call on the slow payment tool, its run and arguments fixed: what the kill -9 test sends
    before the kill and again after the restart."""
    async with connect(ctx, run_id(ctx)) as client:
        ctx.out["call"] = await outcome_of(caller(client, "shop_process_payment", refund_args(ctx.op())))


SCENARIOS = {
    "list_and_call": list_and_call,
    "lost_answer_reissued": lost_answer_reissued,
    "concurrent_same_key": concurrent_same_key,
    "close_mid_side_effect": close_mid_side_effect,
    "read_only_cancelled": read_only_cancelled,
    "upstream_down": upstream_down,
    "slow": slow,
    "garbage": garbage,
    "untrusted_annotations": untrusted_annotations,
    "slow_side_effect": slow_side_effect,
}


def extend(parser: argparse.ArgumentParser) -> None:
    add_options(parser)
    parser.add_argument(
        "--mode",
        default="auto",
        choices=["auto", "legacy"],
        help="auto: 2026-07-28 when served (server/discover), else the handshake; legacy: the handshake (2025-11-25)",
    )


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], list(SCENARIOS), extend)
    table = {name: (lambda ctx, fn=fn: asyncio.run(fn(ctx))) for name, fn in SCENARIOS.items()}
    # The handshake's runs are other operations than 2026-07-28's: `op-mcp-py-legacy-...`.
    sdk = "mcp-py" if args.mode == "auto" else "mcp-py-legacy"
    run(args, sdk, table, setup=lambda: None, report=mcp_error_report)


if __name__ == "__main__":
    main()
