"""The OpenAI Agents SDK's MCP client as a real client of the gateway's `/mcp`: its MCP scenarios of README.md, one
JSON line each.

    target/sdk/venv/bin/python crates/ballast-cli/tests/sdk/mcp_agents.py \
        --base-url http://127.0.0.1:PORT/mcp --api-key KEY list_and_call lost_answer_reissued runs_are_separate

The documented way to give an agent its run: one `MCPServerStreamableHttp` per agent run, whose `params.headers`
carry `ballast-run-id` (and the key). Its tools are listed and called through that server object
(`list_tools()`, `call_tool()`), as an `Agent` given `mcp_servers=[server]` does; no model is needed. The SDK's own
retries (`max_retry_attempts`) stay at 0: a re-issued call here is the scenario's, not the SDK's.
"""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Dict, List

# Before the Agents SDK is imported: its trace provider reads this once.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

import agents  # noqa: E402
from agents.mcp import MCPServerStreamableHttp  # noqa: E402

sys.dont_write_bytecode = True  # no __pycache__ beside the sources when sdk_common is imported
from sdk_common import Context, parse_args, run  # noqa: E402
from mcp_common import (  # noqa: E402
    TIMEOUT,
    add_options,
    headers_for,
    lookup_args,
    mcp_error_report,
    outcome_of,
    refund_args,
    run_id,
    tool_summary,
)

MAX_RETRY_ATTEMPTS = 0  # the SDK's retries of a failed list_tools / call_tool: none, said explicitly
RUN_TIMEOUT = 60.0  # seconds, a whole scenario


@asynccontextmanager
async def server_for_run(ctx: Context, run: str) -> AsyncIterator[MCPServerStreamableHttp]:
    """The gateway as the MCP server of one agent run: `ballast-run-id` in the server object's headers."""
    server = MCPServerStreamableHttp(
        params={"url": ctx.base_url, "headers": headers_for(ctx, run), "timeout": TIMEOUT},
        name=f"ballast ({run})",
        cache_tools_list=False,
        client_session_timeout_seconds=TIMEOUT,
        max_retry_attempts=MAX_RETRY_ATTEMPTS,
        use_structured_content=True,
    )
    async with server:
        ctx.out["protocol_version"] = getattr(server.session, "protocol_version", None)
        yield server


async def list_and_call(ctx: Context) -> None:
    async with server_for_run(ctx, run_id(ctx)) as server:
        ctx.out["tools"] = [tool_summary(tool) for tool in await server.list_tools()]

        def call(name: str, args: Dict[str, Any]) -> Any:
            return outcome_of(lambda: server.call_tool(name, args))

        ctx.out["calls"] = {
            "lookup_order": await call("lookup_order", lookup_args(ctx.op("-http"))),
            "shop_lookup_order": await call("shop_lookup_order", lookup_args(ctx.op("-shop"))),
            "create_refund": await call("create_refund", refund_args(ctx.op("-http"))),
            "shop_create_refund": await call("shop_create_refund", refund_args(ctx.op("-shop"))),
        }


async def lost_answer_reissued(ctx: Context) -> None:
    async with server_for_run(ctx, run_id(ctx)) as server:
        args = refund_args(ctx.op())
        ctx.out["first"] = await outcome_of(lambda: server.call_tool("shop_create_refund", args))
        ctx.out["reissued"] = await outcome_of(lambda: server.call_tool("shop_create_refund", args))


async def runs_are_separate(ctx: Context) -> None:
    """Two agent runs, each its own server object, each calling the same refund with the same arguments twice: per
    run the second call is the first's replay; the two runs are two operations."""
    args = refund_args(ctx.op())
    runs: Dict[str, List[Dict[str, Any]]] = {}
    ctx.out["runs"] = runs
    for n in (1, 2):
        run_name = run_id(ctx, f"-{n}")
        async with server_for_run(ctx, run_name) as server:
            runs[run_name] = [await outcome_of(lambda: server.call_tool("shop_create_refund", args)) for _ in range(2)]


SCENARIOS = {
    "list_and_call": list_and_call,
    "lost_answer_reissued": lost_answer_reissued,
    "runs_are_separate": runs_are_separate,
}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], list(SCENARIOS), add_options)
    table = {
        name: (lambda ctx, fn=fn: asyncio.run(asyncio.wait_for(fn(ctx), RUN_TIMEOUT)))
        for name, fn in SCENARIOS.items()
    }
    run(args, "mcp-agents", table, setup=lambda: agents.set_tracing_disabled(True), report=mcp_error_report)


if __name__ == "__main__":
    main()
