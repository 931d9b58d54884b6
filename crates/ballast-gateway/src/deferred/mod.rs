//! Deferred tool calls (DESIGN.md, "Deferred operations"): a side-effecting call that cannot be served now —
//! shed, throttled, breaker open, retries or the run's allowance spent, no time left for an attempt — whose
//! caller can wait (`Prefer: respond-async`, or a tool whose `defer` says its callers accept it) is answered
//! `202 Accepted` with `Location: /v1/operations/{key}` and worked later by the library's
//! [`Deferred`](ballast::deferred::Deferred) workers, each attempt through the tool's own pipeline at the
//! lowest class, with the operation's one key.
//!
//! - `ask` — what the caller asked (`Prefer`, `ballast-defer-ttl`) and whether a failure is one to defer;
//! - `callback` — the signed callback to `[deferred] callback_url` when an operation ends;
//! - here — the queue with a handler per side-effecting tool, and one deferred attempt.

mod ask;
mod callback;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use ballast::deferred::{Deferred, DeferredAttempt, Ended, Handler};
use ballast::idempotency::Principal;
use ballast::idempotency::store::IdempotencyStore;
use ballast::policy::{IdempotencyKey, Priority};
use ballast::tool::{ToolCall, ToolClient, ToolClients};
use ballast_config::Config;
use serde_json::{Value, json};

pub(crate) use ask::{Ask, marker};

use crate::error::AppError;
use ballast::headers::{BALLAST_CODE, BALLAST_FALLBACK, IDEMPOTENCY_KEY};

/// The gateway's queue of deferred calls, its workers, and what this process ended of it (for `/status`).
#[derive(Clone, Debug)]
pub(crate) struct Queue {
    pub(crate) deferred: Deferred,
    /// Operations this process ended, per queue and how they ended.
    pub(crate) ended: Arc<Mutex<BTreeMap<(String, &'static str), u64>>>,
    /// This process's workers, from the gateway's opening until it drains (however it is served: `serve`, or
    /// `app` on a listener of one's own).
    workers: Arc<Mutex<Option<ballast::deferred::Workers>>>,
}

impl Queue {
    /// Stops taking deferred work (a shutdown began); attempts already running end and write their end.
    pub(crate) fn stop(&self) {
        drop(self.workers.lock().expect("never poisoned").take());
    }
}

/// The queue of `store` with a handler per side-effecting tool of `config`; `None` when the store keeps none or
/// no tool has side effects.
pub(crate) fn build(
    config: &Config,
    tools: &ToolClients,
    store: Arc<dyn IdempotencyStore>,
    callback: Option<callback::Callback>,
) -> Option<Queue> {
    let mut builder = Deferred::builder(store)
        .ok()?
        .concurrency(usize::try_from(config.deferred.concurrency).unwrap_or(1))
        .attempt_timeout(config.server.default_timeout)
        .backoff(ballast_core::Backoff::full_jitter(config.deferred.base, config.deferred.cap).ok()?)
        .operations_path("/v1/operations")
        .store_header(BALLAST_CODE)
        .store_header(BALLAST_FALLBACK);
    let mut any = false;
    for tool in config.tools.iter().filter(|tool| tool.side_effects) {
        let Some(client) = tools.get(&tool.name) else {
            continue;
        };
        let client = ToolClient::clone(client);
        let service = tower::service_fn(move |request: Request| {
            let client = ToolClient::clone(&client);
            async move { Ok::<_, std::convert::Infallible>(attempt(client, request).await) }
        });
        let handler = Handler::new(service)
            .concurrency(usize::try_from(tool.defer.concurrency).unwrap_or(1))
            .deduplicates(tool.upstream_idempotency.deduplicates());
        builder = builder.handler(tool.name.clone(), handler);
        any = true;
    }
    if !any {
        return None;
    }
    let ended: Arc<Mutex<BTreeMap<(String, &'static str), u64>>> = Arc::default();
    let counts = Arc::clone(&ended);
    let builder = builder.on_end(move |end: Ended| {
        let key = (end.operation.tool.clone(), end.operation.state.as_str());
        *counts.lock().expect("never poisoned").entry(key).or_default() += 1;
        if let Some(callback) = &callback {
            callback.send(&end.operation);
        }
    });
    let deferred = builder.build();
    let workers = Arc::new(Mutex::new(Some(deferred.start())));
    Some(Queue {
        deferred,
        ended,
        workers,
    })
}

pub(crate) use callback::Callback;

/// One deferred attempt of the tool `client` calls: the stored arguments with the operation's key (the
/// principal's own, as on the live route), at the lowest class, by the attempt's deadline.
async fn attempt(client: ToolClient, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let (Some(attempt), Some(principal)) = (
        parts.extensions.get::<DeferredAttempt>(),
        parts.extensions.get::<Principal>(),
    ) else {
        // Only the workers call this, always with both.
        return AppError::BodyUnreadable.into_response();
    };
    let key = (parts.headers.get(IDEMPOTENCY_KEY))
        .and_then(|value| value.to_str().ok())
        .and_then(|value| IdempotencyKey::parse(value).ok());
    let Some(key) = key else {
        return AppError::BodyUnreadable.into_response();
    };
    let Ok(arguments) = axum::body::to_bytes(body, usize::MAX).await else {
        return AppError::BodyUnreadable.into_response();
    };
    // Live traffic before deferred work: every attempt queues at the lowest class.
    let call = ToolCall::from_json(arguments)
        .call_deadline(attempt.deadline)
        .priority(Priority::Sheddable)
        .idempotency_key(key.for_principal(principal.name()));
    let result = client.call(call).await;
    let mut response = crate::tool_answer::answer(client.name(), Some(&key), result);
    // A fallback tool answered: its side effect happened, so the operation is done with its answer — not
    // refused-before-acting, as a live call's fallback answer is (whose caller's retry asks the upstream again).
    if response.status().is_success() && response.headers().contains_key(BALLAST_FALLBACK) {
        response
            .extensions_mut()
            .remove::<ballast::idempotency::NotStored>();
    }
    response
}

/// `/status`'s `deferred`: per queue and class, what waits and the oldest one's age; what this process ended.
pub(crate) async fn status(queue: Option<&Queue>) -> Value {
    let Some(queue) = queue else {
        return json!({"enabled": false});
    };
    let depth = tokio::time::timeout(std::time::Duration::from_secs(1), queue.deferred.queue().depth()).await;
    let mut queues = serde_json::Map::new();
    let waiting = match depth {
        Ok(Ok(depth)) => {
            for entry in depth {
                let class = ballast::deferred::priority_name(entry.priority);
                let tool = queues
                    .entry(entry.tool.clone())
                    .or_insert_with(|| json!({"classes": {}}));
                tool["classes"][class] = json!({
                    "queued": entry.queued,
                    "in_progress": entry.in_progress,
                    "oldest_ms": u64::try_from(entry.oldest.as_millis()).unwrap_or(u64::MAX),
                });
            }
            Value::Object(queues)
        }
        Ok(Err(error)) => json!({"error": error.to_string()}),
        Err(_) => json!({"error": "the store did not answer within 1 s"}),
    };
    let mut ended = serde_json::Map::new();
    for ((tool, state), count) in queue.ended.lock().expect("never poisoned").iter() {
        let entry = ended.entry(tool.clone()).or_insert_with(|| json!({}));
        entry[*state] = json!(count);
    }
    json!({"enabled": true, "queues": waiting, "ended_here": ended})
}

/// Keeps `ballast_deferred_depth{queue,priority}` and `ballast_deferred_oldest_seconds{queue}` up to date while
/// the gateway serves (every 5 s: a store query, not a per-request cost).
pub(crate) async fn gauges(queue: Queue) {
    let mut known: Vec<(String, &'static str)> = Vec::new();
    loop {
        if let Ok(Ok(depth)) =
            tokio::time::timeout(std::time::Duration::from_secs(2), queue.deferred.queue().depth()).await
        {
            let mut seen = Vec::new();
            let mut oldest: BTreeMap<String, f64> = BTreeMap::new();
            for entry in &depth {
                let class = ballast::deferred::priority_name(entry.priority);
                crate::metrics::deferred_depth(&entry.tool, class, (entry.queued + entry.in_progress) as f64);
                seen.push((entry.tool.clone(), class));
                let age = oldest.entry(entry.tool.clone()).or_default();
                *age = age.max(entry.oldest.as_secs_f64());
            }
            for gone in known.iter().filter(|k| !seen.contains(k)) {
                crate::metrics::deferred_depth(&gone.0, gone.1, 0.0);
            }
            for tool in queue.deferred.queues() {
                crate::metrics::deferred_oldest(tool, oldest.get(tool).copied().unwrap_or(0.0));
            }
            known = seen;
        }
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
}
