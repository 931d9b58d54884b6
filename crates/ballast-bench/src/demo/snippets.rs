//! What `ballast demo` prints to try the gateway: a curl, a Python and a TypeScript agent with the official SDKs,
//! each working as printed against the demo's gateway (its address and key filled in). A test runs them.

/// A refund with curl, under an explicit key: sent twice, the second answer is the first one replayed.
const CURL: &str = r#"curl -s -i {url}/v1/tools/create_refund -H 'Authorization: Bearer {key}' \
  -H 'Idempotency-Key: demo-refund-1' -H 'ballast-timeout-ms: 20000' \
  -H 'content-type: application/json' -d '{"order_id": "1234", "amount": 42.5, "op": "demo-curl"}'"#;

/// An agent loop through the Responses API, its tool calls through the gateway.
const PYTHON: &str = r#"import urllib.request, uuid
from openai import OpenAI

GATEWAY, KEY = "{url}", "{key}"
run = {"ballast-run-id": str(uuid.uuid4()), "ballast-timeout-ms": "30000"}  # one agent request, one deadline
model = OpenAI(base_url=f"{GATEWAY}/v1", api_key=KEY, default_headers=run)

def call_tool(call, turn):  # the side effect's key derives from the run and the step: a re-sent step is replayed
    headers = {"Authorization": f"Bearer {KEY}", "content-type": "application/json", "ballast-step-id": f"turn-{turn}"}
    request = urllib.request.Request(f"{GATEWAY}/v1/tools/{call.name}", call.arguments.encode(), {**headers, **run})
    with urllib.request.urlopen(request) as answer:
        return {"type": "function_call_output", "call_id": call.call_id, "output": answer.read().decode()}

response = model.responses.create(model="agent", input="Refund order 1234, op=demo-py")
for turn in range(1, 5):
    calls = [item for item in response.output if item.type == "function_call"]
    if not calls:
        break
    outputs = [call_tool(call, turn) for call in calls]
    response = model.responses.create(model="agent", previous_response_id=response.id, input=outputs)
print(response.output_text)"#;

/// The same agent through Chat Completions.
const TYPESCRIPT: &str = r#"import OpenAI from "openai";

const GATEWAY = "{url}", KEY = "{key}";
const run = { "ballast-run-id": crypto.randomUUID(), "ballast-timeout-ms": "30000" }; // one agent request, one deadline
const model = new OpenAI({ baseURL: `${GATEWAY}/v1`, apiKey: KEY, defaultHeaders: run });
// CommonJS, what `npm install openai` sets up, has no top-level await: the loop is in a function.
async function main() {
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Refund order 1234, op=demo-ts" }];
  for (let turn = 1; turn <= 4; turn++) {
    const message = (await model.chat.completions.create({ model: "agent", messages })).choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) {
      console.log(message.content);
      break;
    }
    for (const call of message.tool_calls) {
      if (call.type !== "function") continue;
      // The side effect's key derives from the run and the step: a re-sent step is replayed.
      const headers = { Authorization: `Bearer ${KEY}`, "content-type": "application/json", "ballast-step-id": `turn-${turn}` };
      const answer = await fetch(`${GATEWAY}/v1/tools/${call.function.name}`, {
        method: "POST",
        body: call.function.arguments,
        headers: { ...headers, ...run },
      });
      messages.push({ role: "tool", tool_call_id: call.id, content: await answer.text() });
    }
  }
}

main();"#;

/// The snippets with the gateway's root URL (`http://HOST:PORT`) and key filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snippets {
    /// A refund with curl.
    pub curl: String,
    /// A Python agent (openai-python).
    pub python: String,
    /// A TypeScript agent (openai-node, run with `npx tsx`).
    pub typescript: String,
}

impl Snippets {
    /// For the gateway at `url` with the principal's `key`.
    pub fn new(url: &str, key: &str) -> Snippets {
        let fill = |template: &str| template.replace("{url}", url).replace("{key}", key);
        Snippets {
            curl: fill(CURL),
            python: fill(PYTHON),
            typescript: fill(TYPESCRIPT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_snippet_names_the_gateway_and_its_key_and_nothing_is_left_unfilled() {
        let snippets = Snippets::new("http://127.0.0.1:4321", "k-1");
        for text in [&snippets.curl, &snippets.python, &snippets.typescript] {
            assert!(
                text.contains("http://127.0.0.1:4321") && text.contains("k-1"),
                "{text}"
            );
            assert!(!text.contains("{url}") && !text.contains("{key}"), "{text}");
        }
    }
}
