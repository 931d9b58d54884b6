"""openai-python as a real client of the Ballast gateway: the scenarios of README.md, one JSON line each.

    target/sdk/venv/bin/python crates/ballast-cli/tests/sdk/python_scenarios.py \
        --base-url http://127.0.0.1:PORT/v1 --api-key KEY responses.tool_call chat.stream ...

Every call sets its SDK timeout and `max_retries` explicitly, so a wrong gateway can never hang the run; a
watchdog ends the process if the whole run takes longer than `--watchdog` seconds.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import openai

sys.dont_write_bytecode = True  # no __pycache__ beside the sources when sdk_common is imported
from sdk_common import SENT_HEADERS, Context, error_report, now_ms, outcome, parse_args, recording_hooks, run, select_headers  # noqa: E402

HAPPY_TIMEOUT = 15.0  # seconds; the calls that should simply succeed
SHORT_TIMEOUT = 2.0  # the `timeout` and `long_stream` scenarios
SHED_TIMEOUT = 30.0  # each of the two `shed` calls, its SDK retry wait included
MAX_TURNS = 4  # the tool-calling loop's bound (the script has three turns)

TOOL_SCHEMAS = {
    "lookup_order": {
        "description": "Look up an order by id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "op": {"type": "string"}},
            "required": ["order_id", "op"],
        },
    },
    "create_refund": {
        "description": "Refund an order.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"}, "op": {"type": "string"}},
            "required": ["order_id", "amount", "op"],
        },
    },
}
RESPONSES_TOOLS = [{"type": "function", "name": name, **schema} for name, schema in TOOL_SCHEMAS.items()]
CHAT_TOOLS = [{"type": "function", "function": {"name": name, **schema}} for name, schema in TOOL_SCHEMAS.items()]
TOOL_OUTPUTS = {"lookup_order": {"order_id": "1234", "amount": 12.5}, "create_refund": {"status": "succeeded"}}


def user_turn(op: str) -> str:
    return f"Refund order 1234, op={op}"


def long_history(op: str) -> List[Dict[str, str]]:
    """Four older user/assistant turns of about 2,000 characters each (about 16,000 in all), then the user turn
    naming `op`: what the `context_*` scenarios send."""
    filler = "The quick brown fox jumps over the lazy dog while the ledger is reconciled line by line. "
    messages = []
    for turn in range(4):
        messages.append({"role": "user", "content": f"Earlier question {turn}: " + filler * 22})
        messages.append({"role": "assistant", "content": f"Earlier answer {turn}: " + filler * 22})
    messages.append({"role": "user", "content": user_turn(op)})
    return messages


def compact(value: Any) -> str:
    """JSON text as the model and openai-node write it: no spaces."""
    return json.dumps(value, separators=(",", ":"))


def tool_output(name: str) -> str:
    return compact(TOOL_OUTPUTS.get(name, {"error": f"no such tool: {name}"}))


# --- the client -------------------------------------------------------------------------------------------------


def make_client(ctx: Context, *, timeout: float, max_retries: int, http: List[Dict[str, Any]]) -> openai.OpenAI:
    """A client whose every HTTP request (each SDK retry included) is recorded in `http`: what the SDK sent of
    its own headers, the status and the selected response headers."""
    http_client = openai.DefaultHttpxClient(trust_env=False, event_hooks=recording_hooks(http, SENT_HEADERS))
    return openai.OpenAI(
        base_url=ctx.base_url,
        api_key=ctx.api_key,
        timeout=timeout,
        max_retries=max_retries,
        http_client=http_client,
    )


def sdk_attempts(http: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The HTTP requests one SDK call sent: each SDK retry is one more."""
    return {"http": http, "sdk_requests": len(http), "sdk_retried": len(http) > 1}


def resource(client: openai.OpenAI, api: str) -> Any:
    return client.responses if api == "responses" else client.chat.completions


def request(api: str, model: str, op: str) -> Dict[str, Any]:
    """The first turn of the refund conversation for `op`, in `api`'s shape, tools declared: answered with a
    `lookup_order` call."""
    if api == "responses":
        return {"model": model, "input": user_turn(op), "tools": RESPONSES_TOOLS}
    return {"model": model, "messages": [{"role": "user", "content": user_turn(op)}], "tools": CHAT_TOOLS}


def final_request(api: str, model: str, op: str) -> Dict[str, Any]:
    """The last turn of the refund conversation for `op`, the whole history sent (no `previous_response_id`):
    answered in text. A streamed chat answer in text starts with a bare role chunk (nothing to commit), where
    a call's first chunk already names the function."""
    calls = [
        (f"call_lookup_{op}", "lookup_order", compact({"op": op, "order_id": "1234"})),
        (f"call_refund_{op}", "create_refund", compact({"amount": 12.5, "op": op, "order_id": "1234"})),
    ]
    if api == "responses":
        items: List[Dict[str, Any]] = [{"role": "user", "content": user_turn(op)}]
        for call_id, name, arguments in calls:
            items.append({"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments})
            items.append({"type": "function_call_output", "call_id": call_id, "output": tool_output(name)})
        return {"model": model, "input": items, "tools": RESPONSES_TOOLS}
    messages: List[Dict[str, Any]] = [{"role": "user", "content": user_turn(op)}]
    for call_id, name, arguments in calls:
        messages.append(
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": tool_output(name)})
    return {"model": model, "messages": messages, "tools": CHAT_TOOLS}


# --- answers as a result reports them ----------------------------------------------------------------------------


def summary(api: str, answer: Any) -> Dict[str, Any]:
    """A non-streamed answer: its id, `model`, text and function calls (name, id, arguments string)."""
    if api == "responses":
        calls = [
            {"name": item.name, "call_id": item.call_id, "arguments": item.arguments}
            for item in answer.output
            if item.type == "function_call"
        ]
        return {"id": answer.id, "model": answer.model, "response_status": answer.status, "text": answer.output_text,
                "calls": calls}
    choice = answer.choices[0]
    calls = [
        {"name": call.function.name, "call_id": call.id, "arguments": call.function.arguments}
        for call in choice.message.tool_calls or []
    ]
    return {"id": answer.id, "model": answer.model, "finish_reason": choice.finish_reason,
            "text": choice.message.content or "", "calls": calls}


def answered(client: openai.OpenAI, api: str, params: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[Any]]:
    """One non-streamed call through the raw-response access: its outcome and the parsed answer (None on error)."""
    parsed: List[Any] = []

    def call() -> Dict[str, Any]:
        raw = resource(client, api).with_raw_response.create(**params)
        answer = raw.parse()
        parsed.append(answer)
        return {"status": raw.status_code, "headers": select_headers(raw.headers),
                "retries_taken": raw.retries_taken, **summary(api, answer)}

    return outcome(call), (parsed[0] if parsed else None)


class Reassembly:
    """A stream put back together as it arrives, kept when the stream raises: events, the text, the calls, the
    terminal event and the timing (first event, longest gap between events)."""

    def __init__(self, api: str, started: float) -> None:
        self.api = api
        self.started = started
        self.last = started
        self.events = 0
        self.types: List[str] = []
        self.text = ""
        self.calls: Dict[int, Dict[str, Any]] = {}
        self.model: Optional[str] = None
        self.terminal: Optional[str] = None
        self.final: Optional[Dict[str, Any]] = None
        self.error_event: Optional[Dict[str, Any]] = None
        self.first_event_ms: Optional[int] = None
        self.max_gap_ms = 0

    def feed(self, item: Any) -> None:
        moment = time.monotonic()
        if self.first_event_ms is None:
            self.first_event_ms = now_ms(self.started)
        else:
            self.max_gap_ms = max(self.max_gap_ms, int(round((moment - self.last) * 1000)))
        self.last = moment
        self.events += 1
        if self.api == "responses":
            self._responses_event(item)
        else:
            self._chat_chunk(item)

    def _responses_event(self, event: Any) -> None:
        kind = event.type
        self.types.append(kind)
        if kind in ("response.created", "response.in_progress"):
            self.model = event.response.model
        elif kind == "response.output_item.added" and event.item.type == "function_call":
            self.calls[event.output_index] = {"name": event.item.name, "call_id": event.item.call_id, "arguments": ""}
        elif kind == "response.function_call_arguments.delta":
            self.calls.setdefault(event.output_index, {"name": None, "call_id": None, "arguments": ""})
            self.calls[event.output_index]["arguments"] += event.delta
        elif kind == "response.output_text.delta":
            self.text += event.delta
        elif kind == "error":
            # Only when the event has no `error` object: openai-python raises on one (_streaming.py).
            self.terminal = kind
            self.error_event = {"code": event.code, "message": event.message}
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self.terminal = kind
            self.model = event.response.model
            self.final = summary("responses", event.response)

    def _chat_chunk(self, chunk: Any) -> None:
        self.types.append("chunk")
        self.model = chunk.model or self.model
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                self.text += delta.content
            for call in delta.tool_calls or []:
                entry = self.calls.setdefault(call.index, {"name": None, "call_id": None, "arguments": ""})
                if call.id:
                    entry["call_id"] = call.id
                if call.function is not None:
                    if call.function.name:
                        entry["name"] = call.function.name
                    entry["arguments"] += call.function.arguments or ""
            if choice.finish_reason:
                self.terminal = f"finish_reason:{choice.finish_reason}"

    def report(self) -> Dict[str, Any]:
        fields = {
            "events": self.events,
            "event_types": self.types,
            "model": self.model,
            "text": self.text,
            "calls": [self.calls[index] for index in sorted(self.calls)],
            "terminal": self.terminal,
            "completed": self.terminal in ("response.completed", "finish_reason:stop", "finish_reason:tool_calls"),
            "first_event_ms": self.first_event_ms,
            "max_gap_ms": self.max_gap_ms,
        }
        if self.final is not None:
            fields["final"] = self.final
        if self.error_event is not None:
            fields["error_event"] = self.error_event
        return fields


def streamed(client: openai.OpenAI, api: str, params: Dict[str, Any]) -> Dict[str, Any]:
    """One streamed call, read to its end: its outcome with the reassembly (also when iterating raised)."""
    started = time.monotonic()
    assembly = Reassembly(api, started)
    fields: Dict[str, Any] = {}
    try:
        raw = resource(client, api).with_raw_response.create(stream=True, **params)
        fields["status"] = raw.status_code
        fields["headers"] = select_headers(raw.headers)
        stream = raw.parse()
        try:
            for item in stream:
                assembly.feed(item)
        finally:
            stream.close()
        fields["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - the exception is the outcome
        fields["ok"] = False
        fields["error"] = error_report(exc)
    fields.update(assembly.report())
    fields["elapsed_ms"] = now_ms(started)
    return fields


# --- the scenarios -------------------------------------------------------------------------------------------------


def tool_call(ctx: Context, api: str) -> None:
    """The three-turn agent loop on model `agent`: lookup_order, create_refund, then the final text."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, timeout=HAPPY_TIMEOUT, max_retries=0, http=http)
    op = ctx.op()
    turns: List[Dict[str, Any]] = []
    ctx.out.update({"op": op, "turns": turns, "http": http})
    params = request(api, "agent", op)
    for _ in range(MAX_TURNS):
        turn, answer = answered(client, api, params)
        turns.append(turn)
        if answer is None or not turn["calls"]:
            break
        if api == "responses":
            outputs = [
                {"type": "function_call_output", "call_id": call["call_id"], "output": tool_output(call["name"])}
                for call in turn["calls"]
            ]
            params = {"model": "agent", "previous_response_id": answer.id, "input": outputs, "tools": RESPONSES_TOOLS}
        else:
            messages = params["messages"] + [
                {
                    "role": "assistant",
                    "content": turn["text"] or None,
                    "tool_calls": [
                        {"id": call["call_id"], "type": "function",
                         "function": {"name": call["name"], "arguments": call["arguments"]}}
                        for call in turn["calls"]
                    ],
                }
            ]
            messages += [
                {"role": "tool", "tool_call_id": call["call_id"], "content": tool_output(call["name"])}
                for call in turn["calls"]
            ]
            params = {**params, "messages": messages}
    ctx.out["final_text"] = turns[-1].get("text") if turns and turns[-1]["ok"] else None


def stream(ctx: Context, api: str) -> None:
    """The first turn (a call) and the last turn (text), each streamed and reassembled, then not streamed."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, timeout=HAPPY_TIMEOUT, max_retries=0, http=http)
    ctx.out["op"] = ctx.op()
    params = request(api, "agent", ctx.op())
    ctx.out["stream"] = streamed(client, api, params)
    ctx.out["json"], _ = answered(client, api, params)
    params = final_request(api, "agent", ctx.op())
    ctx.out["final_stream"] = streamed(client, api, params)
    ctx.out["final_json"], _ = answered(client, api, params)
    ctx.out["http"] = http


def quota_fallback(ctx: Context, api: str) -> None:
    """Model `quota`: the last turn (text) streamed, then not streamed; both answered by the fallback."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, timeout=HAPPY_TIMEOUT, max_retries=0, http=http)
    ctx.out["op"] = ctx.op()
    params = final_request(api, "quota", ctx.op())
    ctx.out["stream"] = streamed(client, api, params)
    ctx.out["json"], _ = answered(client, api, params)
    ctx.out["http"] = http


def single(ctx: Context, api: str, *, model: str, timeout: float, max_retries: int, stream: bool = False,
           params: Optional[Dict[str, Any]] = None) -> None:
    """One call; its outcome is the scenario's result."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, timeout=timeout, max_retries=max_retries, http=http)
    params = params or request(api, model, ctx.op())
    ctx.out["op"] = ctx.op()
    call = streamed(client, api, params) if stream else answered(client, api, params)[0]
    call.pop("ok")
    ctx.out.update(call)
    ctx.out.update(sdk_attempts(http))


def shed(ctx: Context, api: str) -> None:
    """Two calls at once on model `shed` (one slot, no queue), default max_retries: both outcomes."""
    barrier = threading.Barrier(2, timeout=SHED_TIMEOUT)
    outcomes: List[Dict[str, Any]] = [{}, {}]

    def one(index: int) -> None:
        http: List[Dict[str, Any]] = []
        client = make_client(ctx, timeout=SHED_TIMEOUT, max_retries=openai.DEFAULT_MAX_RETRIES, http=http)
        barrier.wait()
        call, _ = answered(client, api, request(api, "shed", ctx.op(f"-{index + 1}")))
        call.update(sdk_attempts(http))
        outcomes[index] = call

    threads = [threading.Thread(target=one, args=(index,), daemon=True) for index in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SHED_TIMEOUT + 5)
    ctx.out["outcomes"] = [call or {"ok": False, "error": {"class": "NotFinished"}} for call in outcomes]


def previous_response(ctx: Context) -> None:
    """Model `stateful`, op `op-state`: turn 1, then turn 2 continuing it with `previous_response_id`."""
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, timeout=HAPPY_TIMEOUT, max_retries=0, http=http)
    ctx.out.update({"op": "op-state", "http": http})
    first, answer = answered(client, "responses", request("responses", "stateful", "op-state"))
    ctx.out["turn1"] = first
    if answer is None:
        return
    outputs = [
        {"type": "function_call_output", "call_id": call["call_id"], "output": tool_output(call["name"])}
        for call in first["calls"]
    ]
    ctx.out["turn2"], _ = answered(
        client,
        "responses",
        {"model": "stateful", "previous_response_id": answer.id, "input": outputs, "tools": RESPONSES_TOOLS},
    )


def context(ctx: Context, api: str, model: str) -> None:
    """A long history then `Refund order 1234, op=op-ctx`, on a model whose route truncates or moves up."""
    messages = long_history("op-ctx")
    params = (
        {"model": model, "input": messages, "tools": RESPONSES_TOOLS}
        if api == "responses"
        else {"model": model, "messages": messages, "tools": CHAT_TOOLS}
    )
    ctx.out["history_chars"] = sum(len(message["content"]) for message in messages)
    single(ctx, api, model=model, timeout=HAPPY_TIMEOUT, max_retries=0, params=params)
    ctx.out["op"] = "op-ctx"


def embeddings(ctx: Context) -> None:
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, timeout=HAPPY_TIMEOUT, max_retries=0, http=http)
    ctx.out["http"] = http
    raw = client.embeddings.with_raw_response.create(model="embed", input=["a", "b"])
    answer = raw.parse()
    ctx.out.update(
        {
            "status": raw.status_code,
            "headers": select_headers(raw.headers),
            "model": answer.model,
            "count": len(answer.data),
            "lengths": [len(item.embedding) for item in answer.data],
        }
    )


def models(ctx: Context) -> None:
    http: List[Dict[str, Any]] = []
    client = make_client(ctx, timeout=HAPPY_TIMEOUT, max_retries=0, http=http)
    ctx.out["http"] = http
    raw = client.models.with_raw_response.list()
    ctx.out.update(
        {"status": raw.status_code, "headers": select_headers(raw.headers), "ids": [m.id for m in raw.parse()]}
    )
    # `models.retrieve`: a route, then a name no route has (the SDK's NotFoundError, with the gateway's message).
    ctx.out["retrieved"] = outcome(lambda: {"id": client.models.retrieve("agent").id})
    ctx.out["unknown"] = outcome(lambda: {"id": client.models.retrieve("no-such-model").id})
    ctx.out["unknown_path"] = outcome(lambda: {"body": client.get("/no-such-path", cast_to=object)})


def scenarios() -> Dict[str, Callable[[Context], None]]:
    table: Dict[str, Callable[[Context], None]] = {}
    for api in ("responses", "chat"):
        table[f"{api}.tool_call"] = functools.partial(tool_call, api=api)
        table[f"{api}.stream"] = functools.partial(stream, api=api)
        table[f"{api}.failing"] = functools.partial(
            single, api=api, model="failing", timeout=HAPPY_TIMEOUT, max_retries=openai.DEFAULT_MAX_RETRIES
        )
        table[f"{api}.shed"] = functools.partial(shed, api=api)
        table[f"{api}.timeout"] = functools.partial(
            single, api=api, model="slow", timeout=SHORT_TIMEOUT, max_retries=0
        )
        table[f"{api}.long_stream"] = functools.partial(
            single, api=api, model="slow-stream", timeout=SHORT_TIMEOUT, max_retries=0, stream=True
        )
        table[f"{api}.quota_fallback"] = functools.partial(quota_fallback, api=api)
        if api == "responses":
            table["responses.previous_response"] = previous_response
        table[f"{api}.cut"] = functools.partial(
            single, api=api, model="cut", timeout=HAPPY_TIMEOUT, max_retries=0, stream=True
        )
        table[f"{api}.context_truncate"] = functools.partial(context, api=api, model="small")
        table[f"{api}.context_fallback"] = functools.partial(context, api=api, model="small-fallback")
    table["embeddings"] = embeddings
    table["models"] = models
    return table


def main() -> None:
    table = scenarios()
    args = parse_args(__doc__.splitlines()[0], list(table))
    run(args, "py", table, setup=lambda: None)


if __name__ == "__main__":
    main()
