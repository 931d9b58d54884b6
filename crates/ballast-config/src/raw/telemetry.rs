//! `[telemetry]`, as written.

use serde::{Deserialize, Serialize};

/// `[telemetry]`: traces over OTLP. Absent, or without `endpoint`: no traces.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); none: telemetry off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `"http/protobuf"` or `"http/json"` (`"http/protobuf"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The share of new traces recorded, 0 to 1 (`1.0`); a caller's `traceparent` decides for its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<f64>,
    /// `service.name` of the spans (`"ballast"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
}
