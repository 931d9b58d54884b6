//! Spans (DESIGN.md, "Observability"), seen through a subscriber installed for the test: a span per call
//! (`ballast.call`: kind, target, run id, request id, then its code and stop reason) and per attempt
//! (`ballast.attempt`: its number and timeout, inside its call's span). Alone: tracing caches a
//! callsite's interest for every thread, so a test without a subscriber running beside it could hide the spans.

use crate::support;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use ballast::policy::TraceContext;
use ballast::tool::ToolCall;
use ballast_chaos::{EndpointProfile, ScriptStep};
use serde_json::json;
use support::scripted;
use support::tools::{LOOKUP, clients};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

/// One span as the subscriber saw it: its name, its fields as text, and its parent's name.
#[derive(Clone, Debug, Default)]
struct Seen {
    name: String,
    fields: HashMap<String, String>,
    parent: Option<String>,
}

/// Records every span's fields (at creation and when recorded later), in creation order.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<(u64, Seen)>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut seen = Seen {
            name: attrs.metadata().name().to_owned(),
            parent: ctx
                .span(id)
                .and_then(|span| span.parent())
                .map(|p| p.name().to_owned()),
            ..Seen::default()
        };
        attrs.record(&mut Fields(&mut seen.fields));
        self.0.lock().unwrap().push((id.into_u64(), seen));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut spans = self.0.lock().unwrap();
        if let Some((_, seen)) = spans.iter_mut().rev().find(|(span, _)| *span == id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
}

impl Spans {
    fn named(&self, name: &str) -> Vec<Seen> {
        let spans = self.0.lock().unwrap();
        spans
            .iter()
            .filter(|(_, s)| s.name == name)
            .map(|(_, s)| s.clone())
            .collect()
    }
}

/// The W3C example value.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test(start_paused = true)]
async fn a_call_and_its_attempts_have_spans_with_what_happened_and_the_request_id() {
    let _alone = crate::alone().await;
    let spans = Spans::default();
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let router = ballast_chaos::router(scripted(
        "lookup_order",
        EndpointProfile::default(),
        &[
            ("op-ok", &[ScriptStep::Status(503), ScriptStep::Ok]),
            ("op-down", &[ScriptStep::Status(503), ScriptStep::Status(503)]),
        ],
    ));
    let tools = clients(LOOKUP, &router);
    let tool = tools.get("lookup_order").unwrap();
    let trace = TraceContext::parse(TRACEPARENT).unwrap();
    tool.call(
        ToolCall::new(json!({"order_id": "1", "op": "op-ok"}))
            .run("run-7")
            .trace(trace),
    )
    .await
    .expect("the retry succeeds");
    let failed = tool
        .call(ToolCall::new(json!({"order_id": "2", "op": "op-down"})))
        .await
        .expect_err("both attempts fail");

    let calls = spans.named("ballast.call");
    assert_eq!(calls.len(), 2, "{calls:?}");
    let field = |seen: &Seen, name: &str| seen.fields.get(name).cloned();
    assert_eq!(field(&calls[0], "kind").as_deref(), Some("tool"));
    assert_eq!(field(&calls[0], "target").as_deref(), Some("lookup_order"));
    assert_eq!(field(&calls[0], "run_id").as_deref(), Some("run-7"));
    assert_eq!(field(&calls[0], "code").as_deref(), Some("ok"));
    assert_eq!(field(&calls[0], "stop"), None);
    // The caller's trace id is the call's request id.
    assert_eq!(
        field(&calls[0], "request_id").as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    assert_eq!(field(&calls[1], "run_id"), None);
    let other = field(&calls[1], "request_id").expect("every call has a request id");
    assert_eq!(other.len(), 32, "{other}");
    assert_ne!(
        other, "4bf92f3577b34da6a3ce929d0e0e4736",
        "a call without a trace gets its own"
    );
    assert_eq!(field(&calls[1], "code").as_deref(), Some(failed.code().as_str()));
    let stop = failed.stop_reason().expect("a stop reason").to_string();
    assert_eq!(field(&calls[1], "stop"), Some(stop));

    let attempts = spans.named("ballast.attempt");
    assert_eq!(attempts.len(), 4, "two per call: {attempts:?}");
    let numbers: Vec<_> = attempts.iter().map(|a| field(a, "attempt").unwrap()).collect();
    assert_eq!(numbers, ["1", "2", "1", "2"]);
    assert!(
        attempts
            .iter()
            .all(|a| a.parent.as_deref() == Some("ballast.call")),
        "every attempt inside its call: {attempts:?}"
    );
    assert!(attempts.iter().all(|a| field(a, "timeout_ms").is_some()));
}
