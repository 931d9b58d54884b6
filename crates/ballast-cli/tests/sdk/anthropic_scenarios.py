"""anthropic-sdk-python as a real client of the Ballast gateway: the Messages scenarios of README.md, one JSON line
each.

    target/sdk/venv/bin/python crates/ballast-cli/tests/sdk/anthropic_scenarios.py \
        --base-url http://127.0.0.1:PORT --api-key KEY message stream ...

`--base-url` is the gateway's root: the SDK adds `/v1/messages` itself. Every call sets its SDK timeout and
`max_retries` explicitly, so a wrong gateway can never hang the run; a watchdog ends the process if the whole run
takes longer than `--watchdog` seconds.

The timeout is set on the client, a float, and given again per request on the non-streamed calls: anthropic
2.17.0 sends `x-stainless-timeout: str(options.timeout)` (`_base_client.py`, `_build_headers`), which is `15.0`
for the float given per request — the gateway's deadline — and `NOT_GIVEN` for a stream or a count, whose timeout
is only the client's — read by the gateway as no such header. Both ways are what a user writes.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

import anthropic

sys.dont_write_bytecode = True  # no __pycache__ beside the sources when sdk_common is imported
from sdk_common import Context, error_report, now_ms, outcome, parse_args, recording_hooks, run, select_headers  # noqa: E402

HAPPY_TIMEOUT = 15.0  # seconds, on the client and per request (above); every call here, the failing ones too, ends well before
MAX_TOKENS = 1024
MAX_TURNS = 4  # the tool-use loop's bound (the script has three turns)
STORM_CALLS = 8  # the `storm` scenario makes at least this many calls...
STORM_SPREAD = 0.6  # ...over at least this many seconds (a breaker's streak must span 500 ms by default)...
STORM_MAX_CALLS = 40  # ...and at most this many

# Request headers the SDK sets itself, reported per HTTP request it sent (the key's header by name only).
SENT_HEADERS = ("x-stainless-retry-count", "x-stainless-read-timeout", "x-stainless-timeout", "anthropic-version")
AUTH_HEADERS = ("authorization", "x-api-key")

TOOLS = [
    {
        "name": "lookup_order",
        "description": "Look up an order by id.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "op": {"type": "string"}},
            "required": ["order_id", "op"],
        },
    },
    {
        "name": "create_refund",
        "description": "Refund an order.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}, "op": {"type": "string"}},
            "required": ["order_id", "amount", "op"],
        },
    },
]
TOOL_OUTPUTS = {"lookup_order": {"order_id": "1234", "amount": 12.5}, "create_refund": {"status": "succeeded"}}


def user_turn(op: str) -> Dict[str, Any]:
    return {"role": "user", "content": f"Refund order 1234, op={op}"}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def first_request(model: str, op: str) -> Dict[str, Any]:
    """The first turn of the refund conversation for `op`: answered with a `lookup_order` tool use."""
    return {"model": model, "max_tokens": MAX_TOKENS, "messages": [user_turn(op)], "tools": TOOLS}


def final_request(model: str, op: str) -> Dict[str, Any]:
    """The last turn of the refund conversation for `op`, the whole history sent: answered in text."""
    messages: List[Dict[str, Any]] = [user_turn(op)]
    for noun, name, arguments in [
        ("lookup", "lookup_order", {"op": op, "order_id": "1234"}),
        ("refund", "create_refund", {"amount": 12.5, "op": op, "order_id": "1234"}),
    ]:
        tool_use_id = f"toolu_{noun}_{op}"
        use = {"type": "tool_use", "id": tool_use_id, "name": name, "input": arguments}
        messages.append({"role": "assistant", "content": [use]})
        messages.append(
            {"role": "user",
             "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": compact(TOOL_OUTPUTS[name])}]}
        )
    return {"model": model, "max_tokens": MAX_TOKENS, "messages": messages, "tools": TOOLS}


# --- the client -------------------------------------------------------------------------------------------------


def make_client(ctx: Context, *, max_retries: int, http: List[Dict[str, Any]],
                headers: Optional[Dict[str, str]] = None) -> anthropic.Anthropic:
    """A client whose every HTTP request (each SDK retry included) is recorded in `http`: what the SDK sent of its
    own headers, which header carried the key, the status and the selected response headers."""
    http_client = anthropic.DefaultHttpxClient(
        trust_env=False, event_hooks=recording_hooks(http, SENT_HEADERS, AUTH_HEADERS)
    )
    return anthropic.Anthropic(
        base_url=ctx.base_url,
        api_key=ctx.api_key,
        timeout=HAPPY_TIMEOUT,
        max_retries=max_retries,
        default_headers=headers,
        http_client=http_client,
    )


def sdk_attempts(http: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The HTTP requests one SDK call sent: each SDK retry is one more."""
    return {"http": http, "sdk_requests": len(http), "sdk_retried": len(http) > 1}


def messages_error(exc: BaseException) -> Dict[str, Any]:
    """An exception as a result reports it (sdk_common's report), with Anthropic's own fields: `type` the error's
    type (`overloaded_error`...), `error_code` the SDK's (`error.details.error_code`), and `code` the gateway's
    stable code from the body's `error.code` (the SDK has no attribute for it)."""
    report = error_report(exc)
    body = report.get("body")
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        report["type"] = report["type"] or error.get("type")
        report["code"] = error.get("code")
    report["error_code"] = getattr(exc, "error_code", None)
    return report


# --- answers as a result reports them ----------------------------------------------------------------------------


def summary(message: Any) -> Dict[str, Any]:
    """A message: its id, `model`, stop reason, tool uses, text, content blocks and usage."""
    uses = [{"name": b.name, "id": b.id, "input": b.input} for b in message.content if b.type == "tool_use"]
    text = "".join(b.text for b in message.content if b.type == "text")
    usage = message.usage
    return {
        "id": message.id,
        "model": message.model,
        "stop_reason": message.stop_reason,
        "tool_uses": uses,
        "text": text,
        "content": [block.model_dump(mode="json", exclude_none=True) for block in message.content],
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }


def created(client: anthropic.Anthropic, params: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[Any]]:
    """One non-streamed `messages.create` through the raw-response access: its outcome and the message (None on
    error)."""
    parsed: List[Any] = []

    def call() -> Dict[str, Any]:
        raw = client.messages.with_raw_response.create(**params, timeout=HAPPY_TIMEOUT)
        message = raw.parse()
        parsed.append(message)
        return {"status": raw.status_code, "headers": select_headers(raw.headers),
                "retries_taken": raw.retries_taken, **summary(message)}

    return outcome(call, messages_error), (parsed[0] if parsed else None)


def streamed(client: anthropic.Anthropic, params: Dict[str, Any]) -> Dict[str, Any]:
    """One `messages.stream(...)` read to its end: the event types, the text and tool-use input as they arrived,
    the final message the SDK reassembled; what arrived before an exception is kept beside it."""
    started = time.monotonic()
    fields: Dict[str, Any] = {"event_types": [], "text": "", "content_events": 0}
    try:
        with client.messages.stream(**params) as stream:  # x-stainless-timeout: NOT_GIVEN
            fields["status"] = stream.response.status_code
            fields["headers"] = select_headers(stream.response.headers)
            for event in stream:
                fields["event_types"].append(event.type)
                if event.type == "message_start":
                    fields["model"] = event.message.model
                elif event.type == "content_block_delta":
                    fields["content_events"] += 1
                    if event.delta.type == "text_delta":
                        fields["text"] += event.delta.text
            fields["final"] = summary(stream.get_final_message())
        fields["ok"] = True
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome
        fields["ok"] = False
        fields["error"] = messages_error(exc)
    fields["message_stop"] = "message_stop" in fields["event_types"]
    fields["elapsed_ms"] = now_ms(started)
    return fields


# --- the gateway's tools -------------------------------------------------------------------------------------------


def call_tool(ctx: Context, run_id: str, name: str, arguments: Dict[str, Any], step: str) -> Dict[str, Any]:
    """`POST /v1/tools/{name}` on the gateway with the model's input as the body, under the run and a step (the
    gateway derives a side effect's key from them): its status and answer."""
    request = urllib.request.Request(
        f"{ctx.base_url.rstrip('/')}/v1/tools/{name}",
        data=compact(arguments).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {ctx.api_key}", "content-type": "application/json",
                 "ballast-run-id": run_id, "ballast-step-id": step},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy, as the SDK's client
    try:
        with opener.open(request, timeout=HAPPY_TIMEOUT) as answer:
            return {"name": name, "step": step, "status": answer.status, "output": answer.read().decode()}
    except urllib.error.HTTPError as error:
        return {"name": name, "step": step, "status": error.code, "output": error.read().decode()}


# --- the scenarios -------------------------------------------------------------------------------------------------


def message(ctx: Context) -> None:
    """The agent loop on `claude`: each tool use called through the gateway's tools under one run, its output sent
    back as a `tool_result`, until the final text."""
    http: List[Dict[str, Any]] = []
    run_id = f"run-{uuid.uuid4()}"
    client = make_client(ctx, max_retries=0, http=http, headers={"ballast-run-id": run_id})
    op = ctx.op()
    turns: List[Dict[str, Any]] = []
    tool_calls: List[Dict[str, Any]] = []
    ctx.out.update({"op": op, "turns": turns, "tool_calls": tool_calls, "http": http})
    params = first_request("claude", op)
    for turn_number in range(1, MAX_TURNS + 1):
        turn, answer = created(client, params)
        turns.append(turn)
        if answer is None or answer.stop_reason != "tool_use":
            break
        results = []
        for use in turn["tool_uses"]:
            called = call_tool(ctx, run_id, use["name"], use["input"], f"turn-{turn_number}-{use['name']}")
            tool_calls.append(called)
            results.append({"type": "tool_result", "tool_use_id": use["id"], "content": called["output"],
                            "is_error": called["status"] != 200})
        messages = params["messages"] + [
            {"role": "assistant", "content": turn["content"]},
            {"role": "user", "content": results},
        ]
        params = {**params, "messages": messages}
    ctx.out["tool_names"] = [[use["name"] for use in turn.get("tool_uses", [])] for turn in turns]
    ctx.out["final_text"] = turns[-1].get("text") if turns and turns[-1]["ok"] else None


def stream(ctx: Context) -> None:
    """The first turn (a tool use) and the last turn (text) on `claude`, each streamed with `messages.stream`, then
    not streamed."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, max_retries=0, http=http)
    ctx.out.update({"op": ctx.op(), "http": http})
    for part, params in (("first", first_request("claude", ctx.op())), ("final", final_request("claude", ctx.op()))):
        ctx.out[f"{part}_stream"] = streamed(client, params)
        ctx.out[f"{part}_json"], _ = created(client, params)


def overloaded_before_content(ctx: Context) -> None:
    """`claude-overloaded`, whose primary is overloaded on every attempt (a stream hears it after `message_start`):
    the last turn streamed, then not; the SDK retries nothing, the gateway falls back."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, max_retries=0, http=http)
    ctx.out.update({"op": ctx.op(), "http": http})
    params = final_request("claude-overloaded", ctx.op())
    ctx.out["stream"] = streamed(client, params)
    ctx.out["json"], _ = created(client, params)


def overloaded_after_content(ctx: Context) -> None:
    """`claude-late`, whose streams send `overloaded_error` after their first content event: the last turn
    streamed with the SDK's default retries."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, max_retries=anthropic.DEFAULT_MAX_RETRIES, http=http)
    ctx.out["op"] = ctx.op()
    call = streamed(client, final_request("claude-late", ctx.op()))
    call.pop("ok")
    ctx.out.update(call)
    ctx.out.update(sdk_attempts(http))


def spend_limit(ctx: Context) -> None:
    """`claude-spend`, whose provider's spend limit is reached: one call, the SDK's default retries."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, max_retries=anthropic.DEFAULT_MAX_RETRIES, http=http)
    ctx.out["op"] = ctx.op()
    call, _ = created(client, first_request("claude-spend", ctx.op()))
    call.pop("ok")
    ctx.out.update(call)
    ctx.out.update(sdk_attempts(http))


def storm(ctx: Context) -> None:
    """`claude-storm`, one overloaded deployment: calls with the SDK's default retries, at least `STORM_CALLS`
    over at least `STORM_SPREAD` seconds (no sleeping: the next call starts when one ends)."""
    started = time.monotonic()
    calls: List[Dict[str, Any]] = []
    ctx.out.update({"op": ctx.op(), "calls": calls})
    while len(calls) < STORM_MAX_CALLS and (len(calls) < STORM_CALLS or time.monotonic() - started < STORM_SPREAD):
        http: List[Dict[str, Any]] = []
        client = make_client(ctx, max_retries=anthropic.DEFAULT_MAX_RETRIES, http=http)
        call, _ = created(client, first_request("claude-storm", ctx.op(f"-{len(calls) + 1}")))
        call.update(sdk_attempts(http))
        calls.append(call)
    ctx.out["spread_ms"] = now_ms(started)


def count_tokens(ctx: Context) -> None:
    """`messages.count_tokens` on `claude` for the first turn (tools declared)."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, max_retries=0, http=http)
    params = first_request("claude", ctx.op())
    params.pop("max_tokens")
    raw = client.messages.with_raw_response.count_tokens(**params)  # x-stainless-timeout: NOT_GIVEN
    ctx.out.update({"op": ctx.op(), "status": raw.status_code, "headers": select_headers(raw.headers),
                    "input_tokens": raw.parse().input_tokens, "http": http})


def models(ctx: Context) -> None:
    """`models.list` and `models.retrieve`: the gateway's routes as Anthropic's model objects."""
    client = make_client(ctx, max_retries=0, http=[])
    listed = [model.id for model in client.models.list()]
    retrieved = client.models.retrieve("claude")
    ctx.out.update({"listed": listed, "retrieved": retrieved.id, "display_name": retrieved.display_name})


SCENARIOS: Dict[str, Callable[[Context], None]] = {
    "message": message,
    "stream": stream,
    "overloaded_before_content": overloaded_before_content,
    "overloaded_after_content": overloaded_after_content,
    "spend_limit": spend_limit,
    "storm": storm,
    "count_tokens": count_tokens,
    "models": models,
}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], list(SCENARIOS))
    run(args, "claude-py", SCENARIOS, setup=lambda: None, report=messages_error)


if __name__ == "__main__":
    main()
