//! What a request (a tool call, a model call) says about itself in its headers, read once and checked: its
//! deadlines (the smallest deadline header of each kind, capped; DESIGN.md, "Deadline"), its run, step and call
//! ordinal, its key (the caller's, or derived), its priority, the hops it made, its trace. A header that is present
//! and unreadable is a 400 naming the header and the value: guessing could give a call more time, or another key,
//! than the caller meant.

use std::time::Duration;

use ballast_config::ServerConfig;
use ballast_core::{DeadlineHeader, IdempotencyKey, Priority, TraceContext, inbound_timeout};
use http::HeaderMap;

use crate::error::AppError;
use ballast::headers::{
    BALLAST_CALL_ORDINAL, BALLAST_HOP, BALLAST_PRIORITY, BALLAST_RUN_ID, BALLAST_STEP_ID, IDEMPOTENCY_KEY,
    TRACEPARENT, X_STAINLESS_RETRY_COUNT,
};

/// The headers of one request, read.
#[derive(Clone, Debug)]
pub(crate) struct Inbound {
    /// The smallest deadline header of any kind, capped by `max_timeout`; `None`: none was sent.
    pub(crate) timeout: Option<Duration>,
    /// The smallest explicit one (`ballast-timeout-ms`, `grpc-timeout`), capped: the only kind that becomes a
    /// run's deadline. SDK timeout headers bound one HTTP call, never the agent request.
    pub(crate) explicit_timeout: Option<Duration>,
    /// The smallest bound of the whole HTTP call that is not an SDK's: the explicit ones and Envoy's
    /// `x-envoy-expected-rq-timeout-ms` (a stream's total is bounded by these, not by an SDK's timeout).
    pub(crate) whole_call_timeout: Option<Duration>,
    /// The smallest SDK timeout (`x-stainless-timeout`, `x-stainless-read-timeout`): for a streamed answer, the
    /// time to its first byte — the commit point.
    pub(crate) sdk_timeout: Option<Duration>,
    /// The Python SDK's read timeout (`x-stainless-read-timeout`): for a streamed answer, the longest gap too.
    pub(crate) read_timeout: Option<Duration>,
    pub(crate) run_id: Option<String>,
    pub(crate) step: Option<(String, u32)>,
    /// The caller's `Idempotency-Key`.
    pub(crate) key: Option<IdempotencyKey>,
    pub(crate) priority: Option<Priority>,
    pub(crate) hops: Option<u32>,
    pub(crate) trace: Option<TraceContext>,
    /// `x-stainless-retry-count`: the SDK's own retry number (counted in metrics).
    pub(crate) sdk_retry: Option<u32>,
}

/// `call` (a `ToolCall` or a `ModelCall`: the library gives both the same setters) with what the caller's
/// headers `inbound` say of it beyond its deadline and run: its priority, its hops and its trace.
macro_rules! with_inbound {
    ($call:expr, $inbound:expr) => {{
        let (mut call, inbound) = ($call, $inbound);
        if let Some(priority) = inbound.priority {
            call = call.priority(priority);
        }
        if let Some(hops) = inbound.hops {
            call = call.hops(hops);
        }
        if let Some(trace) = inbound.trace {
            call = call.trace(trace);
        }
        call
    }};
}
pub(crate) use with_inbound;

/// The caller's headers as a model route's handler takes them; a header that does not parse is refused
/// OpenAI-style. (The tool route, a service of its own, reads them with [`Inbound::read`] and answers
/// problem+json.)
impl axum::extract::FromRequestParts<crate::Gateway> for Inbound {
    type Rejection = crate::error::OpenAiRefused;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        gateway: &crate::Gateway,
    ) -> Result<Self, Self::Rejection> {
        Ok(Inbound::read(&parts.headers, &gateway.inner.config.server)?)
    }
}

impl Inbound {
    /// Reads and checks the headers of a request.
    pub(crate) fn read(headers: &HeaderMap, server: &ServerConfig) -> Result<Inbound, AppError> {
        let timeouts = timeouts(headers, server)?;
        let run_id = text(headers, &BALLAST_RUN_ID, "ballast-run-id")?;
        let step_id = text(headers, &BALLAST_STEP_ID, "ballast-step-id")?;
        let ordinal = number(headers, &BALLAST_CALL_ORDINAL, "ballast-call-ordinal")?;
        if step_id.is_some() && run_id.is_none() {
            return Err(AppError::StepWithoutRun);
        }
        let step = step_id.map(|step| (step, ordinal.unwrap_or(0)));
        let key = read_key(headers)?;
        let priority = match one(headers, &BALLAST_PRIORITY, "ballast-priority")? {
            None => None,
            Some(value) => Some(value.parse::<Priority>().map_err(|_| AppError::BadHeader {
                header: "ballast-priority",
                value: value.to_owned(),
                expected: "a priority (critical_plus, critical, sheddable_plus or sheddable)".to_owned(),
            })?),
        };
        let hops = number(headers, &BALLAST_HOP, "ballast-hop")?;
        let trace = match one(headers, &TRACEPARENT, "traceparent")? {
            None => None,
            // W3C trace context: a malformed traceparent is ignored (a new trace starts), never refused.
            Some(value) => TraceContext::parse(value).ok(),
        };
        let sdk_retry = number(headers, &X_STAINLESS_RETRY_COUNT, "x-stainless-retry-count")?;
        Ok(Inbound {
            timeout: timeouts.any,
            explicit_timeout: timeouts.explicit,
            whole_call_timeout: timeouts.whole_call,
            sdk_timeout: timeouts.sdk,
            read_timeout: timeouts.read,
            run_id,
            step,
            key,
            priority,
            hops,
            trace,
            sdk_retry,
        })
    }

    /// The operation's key: the caller's, else derived from (run, step, tool, ordinal) — so a re-run step
    /// re-sends the same key and two calls of one step (ordinals 0 and 1) do not collide.
    pub(crate) fn key_for(&self, tool: &str) -> Option<IdempotencyKey> {
        self.key.clone().or_else(|| match (&self.run_id, &self.step) {
            (Some(run), Some((step, ordinal))) => Some(IdempotencyKey::derived(run, step, tool, *ordinal)),
            _ => None,
        })
    }
}

/// A call's deadline, as every route settles it, by the library's one rule
/// ([`ballast::context::call_deadline`]): `bound` (the deadline headers that bound this kind of call) from
/// `now`, never later than the deadline of the caller's run (`owner`'s run of that id); `fallback` from `now`
/// when neither is set. With it, whether this call started its run again after the run was evicted for room
/// (its answer says so: `ballast-run: restarted`).
///
/// With a store many instances share, the run is brought in step with it first (`Runs::visit`): the deadline
/// another instance was given for the run holds here too, and this call's explicit deadline, when earlier, is
/// written there for the others.
pub(crate) async fn call_deadline(
    gateway: &crate::Gateway,
    owner: &str,
    inbound: &Inbound,
    bound: Option<Duration>,
    fallback: Duration,
    now: ballast_core::Instant,
) -> (ballast_core::Deadline, bool) {
    use ballast_core::Deadline;
    let server = &gateway.inner.config.server;
    let run = match inbound.run_id.as_ref() {
        Some(id) => {
            let offer = (inbound.explicit_timeout).map(|t| Deadline::after(now, t));
            Some(
                gateway
                    .inner
                    .runs
                    .visit(Some(owner), id, offer, server, now)
                    .await,
            )
        }
        None => None,
    };
    let restarted = run
        .as_ref()
        .is_some_and(|(_, origin)| *origin == ballast::RunOrigin::Restarted);
    let deadline = ballast::context::call_deadline(
        run.as_ref().map(|(run, _)| &**run),
        None,
        bound.map(|t| Deadline::after(now, t)),
        fallback,
        &gateway.inner.config.server,
        now,
    );
    (deadline, restarted)
}

/// The deadline of a call that is not streamed — its deadline headers' (`timeout`), else its run's, else
/// `server.default_timeout` — as every route settles it before it reads the body ([`call_deadline`]), with
/// whether its run started again; and the refusal of anything found wrong before the call, which says both.
pub(crate) async fn unary_deadline(
    gateway: &crate::Gateway,
    owner: &str,
    inbound: &Inbound,
    now: ballast_core::Instant,
) -> (
    ballast_core::Deadline,
    bool,
    impl Fn(crate::error::AppError) -> crate::error::Refused + Copy,
) {
    let default = gateway.inner.config.server.default_timeout;
    let (deadline, run_restarted) =
        call_deadline(gateway, owner, inbound, inbound.timeout, default, now).await;
    let refused = move |error| crate::error::Refused {
        error,
        deadline: Some(deadline),
        run_restarted,
    };
    (deadline, run_restarted, refused)
}

/// The smallest deadline header of each kind, each capped by `max_timeout`.
struct Timeouts {
    any: Option<Duration>,
    explicit: Option<Duration>,
    whole_call: Option<Duration>,
    sdk: Option<Duration>,
    read: Option<Duration>,
}

/// The deadline headers present, each kind's smallest; a malformed one is a 400 naming it — but an SDK's own
/// (`x-stainless-timeout`, `x-stainless-read-timeout`), which its caller never wrote and cannot fix, is read as
/// absent when it is not a time (Anthropic's Python SDK sends `NOT_GIVEN` for a stream or a client-wide timeout).
fn timeouts(headers: &HeaderMap, server: &ServerConfig) -> Result<Timeouts, AppError> {
    let mut present: Vec<(DeadlineHeader, &str)> = Vec::new();
    for (name, value) in headers {
        let Some(header) = DeadlineHeader::from_name(name.as_str()) else {
            continue;
        };
        if is_sdks(header) && value.to_str().map_or(true, |v| header.parse(v).is_err()) {
            tracing::debug!(
                header = header.name(),
                ?value,
                "an SDK's deadline header that is not a time: ignored"
            );
            continue;
        }
        let value = value.to_str().map_err(|_| AppError::BadHeader {
            header: header.name(),
            value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
            expected: "printable ASCII".to_owned(),
        })?;
        present.push((header, value));
    }
    let smallest = |kind: fn(DeadlineHeader) -> bool| -> Result<Option<Duration>, AppError> {
        let chosen: Vec<(&str, &str)> = present
            .iter()
            .filter(|(header, _)| kind(*header))
            .map(|(header, value)| (header.name(), *value))
            .collect();
        if chosen.is_empty() {
            return Ok(None);
        }
        let timeout = inbound_timeout(chosen, server.default_timeout, server.max_timeout).map_err(|e| {
            AppError::BadHeader {
                header: e.header(),
                value: present
                    .iter()
                    .find(|(h, _)| h.name() == e.header())
                    .map_or_else(String::new, |(_, v)| (*v).to_owned()),
                expected: e.expected().to_owned(),
            }
        })?;
        Ok(Some(timeout.timeout))
    };
    Ok(Timeouts {
        any: smallest(|_| true)?,
        explicit: smallest(bounds_run)?,
        whole_call: smallest(|h| !is_sdks(h))?,
        sdk: smallest(is_sdks)?,
        read: smallest(|h| h == DeadlineHeader::StainlessReadTimeout)?,
    })
}

/// Whether a deadline header is an OpenAI SDK's (its timeout for one HTTP request).
fn is_sdks(header: DeadlineHeader) -> bool {
    matches!(
        header,
        DeadlineHeader::StainlessTimeout | DeadlineHeader::StainlessReadTimeout
    )
}

/// Whether a deadline header names the agent request's deadline (and so a run's), not one HTTP call's.
fn bounds_run(header: DeadlineHeader) -> bool {
    matches!(
        header,
        DeadlineHeader::BallastTimeoutMs | DeadlineHeader::GrpcTimeout
    )
}

/// The caller's `Idempotency-Key`: any way it breaks the rules — non-ASCII, too long, empty, sent twice — is
/// `idempotency_key_invalid`, as docs/gateway.md says, saying which.
fn read_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, AppError> {
    let mut values = headers.get_all(&IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(AppError::KeyInvalid {
            reason: "Idempotency-Key came more than once".to_owned(),
        });
    }
    // A value with bytes outside visible ASCII is not a `str`: read lossily, the key's rule names the character.
    IdempotencyKey::parse(&String::from_utf8_lossy(value.as_bytes()))
        .map(Some)
        .map_err(|e| AppError::KeyInvalid {
            reason: e.to_string(),
        })
}

/// A header sent at most once, as text.
fn one<'a>(
    headers: &'a HeaderMap,
    name: &http::HeaderName,
    shown: &'static str,
) -> Result<Option<&'a str>, AppError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| AppError::BadHeader {
        header: shown,
        value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
        expected: "printable ASCII".to_owned(),
    })?;
    if values.next().is_some() {
        return Err(AppError::BadHeader {
            header: shown,
            value: text.to_owned(),
            expected: "sent once (the header came more than once)".to_owned(),
        });
    }
    Ok(Some(text))
}

/// A run or step id: 1 to 255 printable ASCII characters (the rule of idempotency keys, since keys derive from
/// them).
fn text(
    headers: &HeaderMap,
    name: &http::HeaderName,
    shown: &'static str,
) -> Result<Option<String>, AppError> {
    let Some(value) = one(headers, name, shown)? else {
        return Ok(None);
    };
    if IdempotencyKey::parse(value).is_err() {
        return Err(AppError::BadHeader {
            header: shown,
            value: value.to_owned(),
            expected: "1 to 255 printable ASCII characters without spaces".to_owned(),
        });
    }
    Ok(Some(value.to_owned()))
}

/// A whole number header.
fn number(
    headers: &HeaderMap,
    name: &http::HeaderName,
    shown: &'static str,
) -> Result<Option<u32>, AppError> {
    let Some(value) = one(headers, name, shown)? else {
        return Ok(None);
    };
    value
        .trim()
        .parse::<u32>()
        .map(Some)
        .map_err(|_| AppError::BadHeader {
            header: shown,
            value: value.to_owned(),
            expected: "a whole number".to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn read(pairs: &[(&'static str, &str)]) -> Result<Inbound, AppError> {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_str(value).unwrap());
        }
        Inbound::read(&headers, &ServerConfig::default())
    }

    #[test]
    fn only_explicit_deadline_headers_bound_a_run() {
        let inbound = read(&[
            ("x-stainless-read-timeout", "2.5"),
            ("ballast-timeout-ms", "9000"),
        ])
        .unwrap();
        assert_eq!(inbound.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(inbound.explicit_timeout, Some(Duration::from_secs(9)));
        let inbound = read(&[("x-stainless-timeout", "20")]).unwrap();
        assert_eq!(
            (inbound.timeout, inbound.explicit_timeout),
            (Some(Duration::from_secs(20)), None)
        );
        // Capped by max_timeout (300 s).
        let inbound = read(&[("grpc-timeout", "1H")]).unwrap();
        assert_eq!(inbound.explicit_timeout, Some(Duration::from_secs(300)));
    }

    #[test]
    fn a_malformed_header_is_refused_naming_it_and_its_value() {
        let err = read(&[("ballast-timeout-ms", "soon")]).unwrap_err();
        assert!(
            matches!(&err, AppError::BadHeader { header: "ballast-timeout-ms", value, .. } if value == "soon")
        );
        assert!(matches!(
            read(&[("ballast-priority", "urgent")]),
            Err(AppError::BadHeader { .. })
        ));
        assert!(matches!(
            read(&[("ballast-call-ordinal", "-1")]),
            Err(AppError::BadHeader { .. })
        ));
        assert!(matches!(
            read(&[("idempotency-key", "has space")]),
            Err(AppError::KeyInvalid { .. })
        ));
        assert!(matches!(
            read(&[("idempotency-key", "a"), ("idempotency-key", "b")]),
            Err(AppError::KeyInvalid { .. })
        ));
    }

    /// Regression: a key with a byte outside ASCII answered `invalid_header`, where docs/gateway.md says
    /// `idempotency_key_invalid`.
    #[test]
    fn every_malformed_key_is_idempotency_key_invalid() {
        let mut headers = HeaderMap::new();
        headers.insert("idempotency-key", HeaderValue::from_bytes(b"k\xe9y").unwrap());
        let err = Inbound::read(&headers, &ServerConfig::default()).unwrap_err();
        assert!(
            matches!(&err, AppError::KeyInvalid { reason } if reason.contains("U+FFFD")),
            "{err:?}"
        );
        for value in ["", "has space", &"k".repeat(256)] {
            let mut headers = HeaderMap::new();
            headers.insert("idempotency-key", HeaderValue::from_str(value).unwrap());
            let err = Inbound::read(&headers, &ServerConfig::default()).unwrap_err();
            assert!(matches!(err, AppError::KeyInvalid { .. }), "{value:?}: {err:?}");
        }
    }

    #[test]
    fn a_step_needs_a_run_and_keys_derive_from_run_step_tool_and_ordinal() {
        assert!(matches!(
            read(&[("ballast-step-id", "s1")]),
            Err(AppError::StepWithoutRun)
        ));
        let first = read(&[("ballast-run-id", "r1"), ("ballast-step-id", "s1")]).unwrap();
        let second = read(&[
            ("ballast-run-id", "r1"),
            ("ballast-step-id", "s1"),
            ("ballast-call-ordinal", "1"),
        ])
        .unwrap();
        let (a, b) = (
            first.key_for("create_refund").unwrap(),
            second.key_for("create_refund").unwrap(),
        );
        assert_ne!(a, b, "two calls of one step do not collide");
        assert_eq!(a, IdempotencyKey::derived("r1", "s1", "create_refund", 0));
        assert_ne!(
            a,
            first.key_for("process_payment").unwrap(),
            "the tool is part of the key"
        );
        // The caller's own key wins.
        let keyed = read(&[
            ("ballast-run-id", "r1"),
            ("ballast-step-id", "s1"),
            ("idempotency-key", "k-1"),
        ])
        .unwrap();
        assert_eq!(keyed.key_for("create_refund").unwrap().as_str(), "k-1");
        assert!(read(&[]).unwrap().key_for("create_refund").is_none());
    }
}
