//! `[telemetry]`: where the gateway's traces go, and how many of them.

use std::fmt;
use std::str::FromStr;

use ballast_core::UnknownName;

/// The `service.name` of the spans when the config names none.
pub const DEFAULT_SERVICE_NAME: &str = "ballast";

/// The share of new traces recorded when the config says nothing: every one.
pub const DEFAULT_SAMPLING: f64 = 1.0;

/// `[telemetry]`, validated: present only with an `endpoint` (no endpoint, no traces).
#[derive(Clone, Debug, PartialEq)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL; spans are posted to `{endpoint}/v1/traces` (an endpoint that ends
    /// in `/v1/traces` already is used as it is).
    pub endpoint: String,
    /// How the spans are encoded.
    pub protocol: OtlpProtocol,
    /// The share of traces that start here which are recorded, 0 to 1 (default 1). A request that carries a
    /// `traceparent` is recorded when its sampled flag is set, whatever this says (parent-based sampling).
    pub sampling: f64,
    /// The spans' `service.name` (default `ballast`).
    pub service_name: String,
}

impl TelemetryConfig {
    /// Where the spans are posted: the endpoint with OTLP's `/v1/traces` path.
    pub fn traces_url(&self) -> String {
        let base = self.endpoint.trim_end_matches('/');
        if base.ends_with("/v1/traces") {
            base.to_owned()
        } else {
            format!("{base}/v1/traces")
        }
    }
}

/// OTLP's encodings over HTTP (OTLP's `OTEL_EXPORTER_OTLP_PROTOCOL` words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// Protobuf over HTTP: every collector's default.
    #[default]
    HttpProtobuf,
    /// JSON over HTTP.
    HttpJson,
}

impl OtlpProtocol {
    /// The word, as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::HttpProtobuf => "http/protobuf",
            OtlpProtocol::HttpJson => "http/json",
        }
    }
}

impl fmt::Display for OtlpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OtlpProtocol {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [OtlpProtocol::HttpProtobuf, OtlpProtocol::HttpJson]
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownName {
                value: s.to_owned(),
                expected: &["http/protobuf", "http/json"],
            })
    }
}
