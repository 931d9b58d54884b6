//! Streams: the chunks of every answer, merged the way the OpenAI SDKs merge deltas, give the completion's
//! message exactly.

use serde_json::{Map, Value, json};

use super::{message, request, settings, user};
use crate::model::{Reply, SSE_DONE, reply, sse_data};

/// Merges `delta` into `snapshot` the way the OpenAI SDKs accumulate stream deltas: a new key is taken as is, a
/// null is replaced, strings are appended, objects merged key by key, and arrays of objects merged entry by
/// entry by their `index` (entries past the end are pushed); `index` and `type` are replaced, never appended.
fn accumulate(snapshot: &mut Map<String, Value>, delta: &Map<String, Value>) {
    for (key, value) in delta {
        let Some(existing) = snapshot.get_mut(key) else {
            snapshot.insert(key.clone(), value.clone());
            continue;
        };
        match (existing, value) {
            (existing, value) if existing.is_null() || key == "index" || key == "type" => {
                *existing = value.clone()
            }
            (Value::String(text), Value::String(more)) => text.push_str(more),
            (Value::Object(inner), Value::Object(more)) => accumulate(inner, more),
            (Value::Array(entries), Value::Array(more)) => {
                for entry in more {
                    let index = entry["index"].as_u64().expect("array deltas carry an index") as usize;
                    match (entries.get_mut(index), entry) {
                        (Some(Value::Object(old)), Value::Object(new)) => accumulate(old, new),
                        _ => entries.push(entry.clone()),
                    }
                }
            }
            (_, Value::Null) => {}
            (existing, value) => panic!("cannot merge {value} into {existing} at {key:?}"),
        }
    }
}

/// A stream merged: the message (tool calls without their stream-only `index`), the finish reason and the
/// usage — what an SDK's final completion of a stream holds.
struct Merged {
    message: Value,
    finish_reason: Value,
    usage: Value,
}

fn merge(chunks: &[Value]) -> Merged {
    let (mut message, mut finish_reason, mut usage) = (Map::new(), Value::Null, Value::Null);
    for chunk in chunks {
        for choice in chunk["choices"].as_array().expect("choices") {
            assert_eq!(choice["index"], 0);
            accumulate(&mut message, choice["delta"].as_object().expect("a delta object"));
            if !choice["finish_reason"].is_null() {
                finish_reason = choice["finish_reason"].clone();
            }
        }
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
    }
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        calls
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .for_each(|call| {
                call.remove("index");
            });
    }
    Merged {
        message: Value::Object(message),
        finish_reason,
        usage,
    }
}

/// Every kind of answer the script gives: a call, a call with a fractional amount, text (final, asking, greeting).
fn every_answer(include_usage: bool) -> Vec<Reply> {
    let lookup = vec![
        user("Refund order 1234, op=op-77"),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_lookup_op-77", "type": "function",
               "function": {"name": "lookup_order", "arguments": "{}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_lookup_op-77", "content": "{\"amount\": 12.5}"}),
    ];
    let mut done = lookup.clone();
    done.push(json!({"role": "tool", "name": "create_refund", "content": "{}"}));
    let conversations = [
        vec![user("Refund order 1234, op=op-77")],
        lookup,
        done,
        vec![user("Refund order 5")],
        vec![json!({"role": "system", "content": "hi"})],
        vec![user("Zahlung für order 7 — op=zahl-7; pay it")],
    ];
    conversations
        .iter()
        .map(|messages| {
            let mut body = request(messages);
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": include_usage});
            reply(&body, &settings()).expect("a reply")
        })
        .collect()
}

#[test]
fn chunks_reassemble_into_the_completion() {
    for include_usage in [false, true] {
        for answer in every_answer(include_usage) {
            let merged = merge(&answer.chunks);
            assert_eq!(&merged.message, message(&answer), "{:#?}", answer.chunks);
            assert_eq!(
                merged.finish_reason,
                answer.completion["choices"][0]["finish_reason"]
            );
            let expected_usage = if include_usage {
                answer.completion["usage"].clone()
            } else {
                Value::Null
            };
            assert_eq!(merged.usage, expected_usage);
        }
    }
}

#[test]
fn every_answer_streams_in_at_least_four_chunks_before_the_finish() {
    for answer in every_answer(false) {
        assert!(answer.chunks.len() >= 4, "{:#?}", answer.chunks);
        let (last, content) = answer.chunks.split_last().expect("chunks");
        assert_eq!(last["choices"][0]["delta"], json!({}));
        assert!(!last["choices"][0]["finish_reason"].is_null());
        assert!(content.iter().all(|c| c["choices"][0]["finish_reason"].is_null()));
        // Content and arguments come in several pieces.
        assert!(content.len() >= 3, "{content:#?}");
    }
}

#[test]
fn chunks_share_the_completions_envelope() {
    for answer in every_answer(true) {
        for chunk in &answer.chunks {
            assert_eq!(chunk["object"], "chat.completion.chunk");
            for key in ["id", "created", "model", "system_fingerprint"] {
                assert_eq!(chunk[key], answer.completion[key], "{key}");
            }
        }
    }
}

#[test]
fn include_usage_adds_a_usage_chunk_and_null_usage_elsewhere() {
    for (without, with) in every_answer(false).into_iter().zip(every_answer(true)) {
        assert_eq!(with.chunks.len(), without.chunks.len() + 1);
        assert!(without.chunks.iter().all(|c| c.get("usage").is_none()));
        let (usage, rest) = with.chunks.split_last().expect("chunks");
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"], with.completion["usage"]);
        assert!(rest.iter().all(|c| c.get("usage") == Some(&Value::Null)));
    }
}

#[test]
fn include_usage_needs_a_true_boolean() {
    let mut body = request(&[user("Refund order 1, op=a")]);
    let plain = reply(&body, &settings()).expect("a reply").chunks.len();
    for not_true in [
        json!({}),
        json!({"include_usage": false}),
        json!({"include_usage": "true"}),
        json!(null),
    ] {
        body["stream_options"] = not_true;
        assert_eq!(reply(&body, &settings()).expect("a reply").chunks.len(), plain);
    }
}

#[test]
fn the_first_chunk_opens_the_message_the_way_openai_does() {
    let answers = every_answer(false);
    let call_start = &answers[0].chunks[0]["choices"][0]["delta"];
    assert_eq!(call_start["role"], "assistant");
    assert_eq!(call_start["tool_calls"][0]["id"], "call_lookup_op-77");
    assert_eq!(call_start["tool_calls"][0]["function"]["arguments"], "");
    let text_start = &answers[2].chunks[0]["choices"][0]["delta"];
    assert_eq!(text_start["role"], "assistant");
    assert_eq!(text_start["content"], "");
}

#[test]
fn sse_framing() {
    let chunk = json!({"object": "chat.completion.chunk", "choices": []});
    assert_eq!(
        sse_data(&chunk),
        "data: {\"choices\":[],\"object\":\"chat.completion.chunk\"}\n\n"
    );
    assert_eq!(SSE_DONE, "data: [DONE]\n\n");
}
