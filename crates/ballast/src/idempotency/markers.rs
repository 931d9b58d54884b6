//! The extension types the layer reads: who is calling (request), and what to do with a response (response).

use std::sync::Arc;

/// Who sent the request: the configured name of the caller's API key, never the key itself (so a key rotation
/// keeps replays). Idempotency records are scoped by principal + route + key, so one principal can never read
/// another's replay or status.
///
/// An authentication middleware in front of the layer inserts it into the request's extensions once it knows
/// the caller. A request without one is scoped to the layer's default principal
/// ([`IdempotencyLayerBuilder::default_principal`](crate::idempotency::IdempotencyLayerBuilder::default_principal),
/// `anonymous` unless set) — right for a service with a single caller, wrong for a shared one: there, put the
/// auth middleware outside this layer.
///
/// ```
/// use ballast::idempotency::Principal;
///
/// let mut request = http::Request::new(());
/// request.extensions_mut().insert(Principal::new("agents"));
/// assert_eq!(request.extensions().get::<Principal>().unwrap().name(), "agents");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal(Arc<str>);

/// The principal of requests without a [`Principal`] extension, unless the layer is configured with another.
pub(crate) const DEFAULT_PRINCIPAL: &str = "anonymous";

impl Principal {
    /// The principal named `name`.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Principal(name.into())
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// Put into a response's extensions by the handler: "I refused this before acting" (validation, auth, a local
/// limit). The layer releases the key instead of storing the response, so a retry with the same key runs.
/// The response still goes to the caller as it is.
///
/// ```
/// use ballast::idempotency::NotStored;
///
/// let mut response = http::Response::new("amount must be positive");
/// *response.status_mut() = http::StatusCode::BAD_REQUEST;
/// response.extensions_mut().insert(NotStored);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NotStored;

/// Put into a response's extensions by the handler: "I started the side effect and do not know how it ended"
/// (an upstream timed out after the request left). The layer records the key as `outcome_unknown`: a retry
/// with the same key gets 502 `outcome_unknown` and nothing runs again. The response still goes to the caller
/// as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OutcomeUnknown;
