//! A tool upstream's `headers`: names and values an HTTP request can carry, none that Ballast sets itself, and no
//! credential written in the file.
//!
//! Why refuse some names: what goes upstream is an allow-list (DESIGN.md, "Gateway HTTP interface"). The
//! framing headers come from the request Ballast builds (a configured `content-length` would lie about the body),
//! and `Idempotency-Key`, `traceparent`, the `ballast-*` headers and Envoy's timeout header carry the call's own
//! key, trace and deadline: a fixed value from the config would silently replace them on every call. Why refuse
//! literal credentials: the file is shared, reviewed and checked in; a token in it is a leaked token.

use http::HeaderName;

use super::check::{Checker, join};
use crate::error::Problem;
use crate::raw::{RawHeaderValue, RawHeaders};
use crate::secrets::is_header_text;
use crate::typed::{HeaderValueSource, UpstreamHeader};

/// Headers whose value is a credential: a literal value for them is refused.
pub(crate) const SECRET_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "api-key",
    "x-api-key",
    "cookie",
];

/// Why `name` (lower case) cannot be configured, if it cannot.
pub(crate) fn reserved(name: &str) -> Option<&'static str> {
    Some(match name {
        "host" | "content-length" | "content-type" | "transfer-encoding" | "connection" => {
            "Ballast sets it from the request it sends (the upstream's URL and the call's body)"
        }
        "idempotency-key" => "Ballast sends the call's own idempotency key",
        "traceparent" | "tracestate" => "Ballast sends the call's own trace context",
        "x-envoy-expected-rq-timeout-ms" => "Ballast sends what is left of the call's deadline",
        "mcp-session-id" | "mcp-protocol-version" | "mcp-method" | "mcp-name" => {
            "Ballast sets it for the MCP request it sends"
        }
        _ if name.starts_with("ballast-") => {
            "ballast- headers are Ballast's own (attempt, deadline, run, step, priority)"
        }
        _ => return None,
    })
}

impl Checker {
    /// `headers` at `path` (`tools[1].upstream.headers`), each reported at `path.NAME` as written.
    pub(crate) fn upstream_headers(&mut self, path: &str, raw: &RawHeaders) -> Vec<UpstreamHeader> {
        let mut headers: Vec<UpstreamHeader> = Vec::with_capacity(raw.0.len());
        let mut written: Vec<&str> = Vec::with_capacity(raw.0.len());
        for (as_written, value) in &raw.0 {
            let header_path = join(path, as_written);
            let name = self.header_name(&header_path, as_written, value);
            let value = self.header_value(&header_path, name.as_deref(), value);
            let (Some(name), Some(value)) = (name, value) else {
                continue;
            };
            if let Some(first) = headers.iter().position(|h| h.name == name) {
                let first = join(path, written[first]);
                self.report(header_path, Problem::Duplicate { name, first });
                continue;
            }
            written.push(as_written);
            headers.push(UpstreamHeader { name, value });
        }
        headers
    }

    /// The name, lower case, when it is a header name that may be configured.
    fn header_name(&mut self, path: &str, name: &str, value: &RawHeaderValue) -> Option<String> {
        let Ok(parsed) = HeaderName::from_bytes(name.as_bytes()) else {
            let value = name.to_owned();
            self.report(path, Problem::InvalidHeaderName { value });
            return None;
        };
        let name = parsed.as_str().to_owned();
        if let Some(reason) = reserved(&name) {
            self.report(path, Problem::ReservedHeader { name, reason });
            return None;
        }
        if matches!(value, RawHeaderValue::Literal(_)) && SECRET_HEADERS.contains(&name.as_str()) {
            self.report(path, Problem::SecretHeaderLiteral { name });
            return None;
        }
        Some(name)
    }

    /// The value's source. A literal for a credential's header was refused with the name (`name` is `None`).
    fn header_value(
        &mut self,
        path: &str,
        name: Option<&str>,
        raw: &RawHeaderValue,
    ) -> Option<HeaderValueSource> {
        match raw {
            RawHeaderValue::Literal(_) if name.is_none() => None,
            RawHeaderValue::Literal(text) => {
                if !is_header_text(text) {
                    self.report(path, Problem::InvalidHeaderValue);
                    return None;
                }
                Some(HeaderValueSource::Literal(text.clone()))
            }
            RawHeaderValue::Env(table) => {
                let env = match &table.env {
                    None => {
                        self.report(join(path, "env"), Problem::Required);
                        None
                    }
                    Some(env) => self.env_name(&join(path, "env"), env),
                };
                let prefix = table.prefix.clone().unwrap_or_default();
                if !is_header_text(&prefix) {
                    let value = prefix.clone();
                    self.report(join(path, "prefix"), Problem::InvalidHeaderPrefix { value });
                    return None;
                }
                Some(HeaderValueSource::Env { env: env?, prefix })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names() {
        for name in [
            "host",
            "content-type",
            "idempotency-key",
            "traceparent",
            "ballast-attempt",
        ] {
            assert!(reserved(name).is_some(), "{name}");
        }
        for name in ["authorization", "x-api-version", "ballast"] {
            assert_eq!(reserved(name), None, "{name}");
        }
    }
}
