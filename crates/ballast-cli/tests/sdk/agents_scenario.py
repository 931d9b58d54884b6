"""The OpenAI Agents SDK as a real client of the Ballast gateway: the `agent_tool` scenario, one JSON line.

    target/sdk/venv/bin/python crates/ballast-cli/tests/sdk/agents_scenario.py \
        --base-url http://127.0.0.1:PORT/v1 --api-key KEY agent_tool

An `Agent` with one function tool, `lookup_order`, on model `agent` through the gateway (the Responses API over
HTTP, an `AsyncOpenAI` as the default client, tracing disabled so nothing is ever exported), run by
`Runner.run` on `Refund order 1234, op=op-agents`. The mock model calls `lookup_order`, then answers in text that
`create_refund` is not available (the agent declares only `lookup_order`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any, Dict, List

# Before the Agents SDK is imported: its trace provider reads this once.
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

import agents  # noqa: E402
import openai  # noqa: E402

sys.dont_write_bytecode = True  # no __pycache__ beside the sources when sdk_common is imported
from sdk_common import SENT_HEADERS, Context, parse_args, run, select_headers  # noqa: E402

TIMEOUT = 15.0  # seconds, each model call
RUN_TIMEOUT = 60.0  # the whole agent run
MAX_TURNS = 4
TOOL_OUTPUT = {"order_id": "1234", "amount": 12.5}


def make_client(ctx: Context, http: List[Dict[str, Any]]) -> openai.AsyncOpenAI:
    """An AsyncOpenAI whose every HTTP request is recorded in `http` (as python_scenarios.py records them)."""
    pending: Dict[int, Dict[str, Any]] = {}

    async def on_request(request: Any) -> None:
        entry = {
            "method": request.method,
            "path": request.url.path,
            "sent": {name: request.headers[name] for name in SENT_HEADERS if name in request.headers},
            "status": None,
        }
        pending[id(request)] = entry
        http.append(entry)

    async def on_response(response: Any) -> None:
        entry = pending.pop(id(response.request), None)
        if entry is not None:
            entry["status"] = response.status_code
            entry["headers"] = select_headers(response.headers)

    return openai.AsyncOpenAI(
        base_url=ctx.base_url,
        api_key=ctx.api_key,
        timeout=TIMEOUT,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(
            trust_env=False, event_hooks={"request": [on_request], "response": [on_response]}
        ),
    )


async def agent_tool_run(ctx: Context) -> None:
    http: List[Dict[str, Any]] = []
    ctx.out.update({"op": "op-agents", "http": http})
    received: List[Dict[str, str]] = []
    ctx.out["tool_received"] = received

    @agents.function_tool
    def lookup_order(order_id: str, op: str) -> str:
        """Look up an order by id."""
        received.append({"order_id": order_id, "op": op})
        return json.dumps(TOOL_OUTPUT)

    client = make_client(ctx, http)
    agents.set_default_openai_client(client, use_for_tracing=False)
    agents.set_default_openai_api("responses")
    agents.set_default_openai_responses_transport("http")
    agent = agents.Agent(
        name="refunds",
        instructions="You handle refunds. Use the tools.",
        model="agent",
        tools=[lookup_order],
    )
    try:
        result = await agents.Runner.run(agent, "Refund order 1234, op=op-agents", max_turns=MAX_TURNS)
    finally:
        await client.close()

    calls = []
    for item in result.new_items:
        raw = item.raw_item
        if item.type == "tool_call_item":
            calls.append({"name": getattr(raw, "name", None), "call_id": getattr(raw, "call_id", None),
                          "arguments": getattr(raw, "arguments", None)})
    ctx.out.update(
        {
            "tool_called": bool(received),
            "tool_arguments": [json.loads(call["arguments"]) for call in calls if call["arguments"]],
            "calls": calls,
            "item_types": [item.type for item in result.new_items],
            "model_responses": len(result.raw_responses),
            "final_output": result.final_output,
        }
    )


def agent_tool(ctx: Context) -> None:
    asyncio.run(asyncio.wait_for(agent_tool_run(ctx), RUN_TIMEOUT))


def main() -> None:
    table = {"agent_tool": agent_tool}
    args = parse_args(__doc__.splitlines()[0], list(table))
    run(args, "agents", table, setup=lambda: agents.set_tracing_disabled(True))


if __name__ == "__main__":
    main()
