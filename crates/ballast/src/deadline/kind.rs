//! The kind of a call nobody described: read from its HTTP method, on the safe side.

use ballast_core::{CallKind, UpstreamIdempotency};
use http::Method;

/// `GET`, `HEAD`, `OPTIONS` and `TRACE` are read-only (RFC 9110's safe methods); anything else may act, and
/// without a word about the upstream's deduplication it is taken not to deduplicate: a sent attempt whose answer
/// is lost is never repeated. The one rule for every layer that meets a call nobody described.
pub(crate) fn kind_for_method(method: &Method) -> CallKind {
    if method.is_safe() {
        CallKind::ReadOnlyTool
    } else {
        CallKind::SideEffectingTool(UpstreamIdempotency::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_methods_are_read_only_and_the_rest_side_effecting_without_deduplication() {
        for method in [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE] {
            assert_eq!(kind_for_method(&method), CallKind::ReadOnlyTool, "{method}");
        }
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert_eq!(
                kind_for_method(&method),
                CallKind::SideEffectingTool(UpstreamIdempotency::None),
                "{method}"
            );
        }
    }
}
