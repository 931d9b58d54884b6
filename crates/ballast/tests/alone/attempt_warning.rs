//! A side-effecting attempt that finishes after its caller left is logged as a warning naming its idempotency
//! key and outcome, so an operator can find the refund that happened while nobody waited.
//!
//! Alone: a thread-local `tracing` subscriber sees every event only while no other test registers callsites
//! concurrently.

use crate::support;

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast::{clock, context::CallContext, layer::DeadlineLayer};
use ballast_core::{CallKind, Deadline, UpstreamIdempotency};
use serde_json::json;
use support::*;
use tower::ServiceExt as _;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber, span};

const SECOND: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn an_attempt_finishing_after_its_caller_left_is_logged_with_its_key_and_outcome() {
    let _alone = crate::alone().await;
    let warnings = Warnings::default();
    let _logging = tracing::subscriber::set_default(warnings.clone());
    let router = ballast_chaos::router(scripted("create_refund", slow(2 * SECOND), &[]));
    let service = stack(
        router.clone(),
        DeadlineLayer::new(30 * SECOND).target("create_refund"),
        10 * SECOND,
    );
    let ctx = CallContext::new(
        CallKind::SideEffectingTool(UpstreamIdempotency::Keyed),
        Deadline::after(clock::now(), 30 * SECOND),
    );
    let mut refund = tool_request(
        "create_refund",
        &json!({"op": "refund-7", "order_id": "A-7", "amount": 100}),
    );
    refund
        .headers_mut()
        .insert("idempotency-key", "key-7".parse().unwrap());

    let call = service.clone().oneshot(with_context(refund, &ctx));
    assert!(tokio::time::timeout(SECOND, call).await.is_err());
    assert!(
        warnings.lines().is_empty(),
        "nothing to say while the attempt runs"
    );
    tokio::time::sleep(2 * SECOND).await;

    let logged = warnings.lines();
    assert_eq!(logged.len(), 1, "{logged:?}");
    for field in [
        "call=create_refund",
        "attempt=1",
        "idempotency_key=key-7",
        "outcome=200",
    ] {
        assert!(logged[0].contains(field), "{field} in {logged:?}");
    }

    // A caller that waits for its answer is not warned about.
    let mut again = tool_request(
        "create_refund",
        &json!({"op": "refund-8", "order_id": "A-8", "amount": 100}),
    );
    again
        .headers_mut()
        .insert("idempotency-key", "key-8".parse().unwrap());
    let ctx = CallContext::new(
        CallKind::SideEffectingTool(UpstreamIdempotency::Keyed),
        Deadline::after(clock::now(), 30 * SECOND),
    );
    service
        .oneshot(with_context(again, &ctx))
        .await
        .expect("answered");
    assert_eq!(warnings.lines().len(), 1);
}

/// A subscriber keeping every warning as `name=value` pairs.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

struct Fields(String);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, "{}={value} ", field.name());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, _metadata: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _span: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _span: &span::Id, _values: &span::Record<'_>) {}

    fn record_follows_from(&self, _span: &span::Id, _follows: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() == Level::WARN {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            self.0.lock().unwrap().push(fields.0);
        }
    }

    fn enter(&self, _span: &span::Id) {}

    fn exit(&self, _span: &span::Id) {}
}
