//! `[telemetry]`: an endpoint that is an http(s) URL without credentials, a known protocol, a sampling ratio in
//! 0..=1 and a service name that is not empty. Any other key without an endpoint is an error: it would do
//! nothing, and whoever wrote it meant traces.

use super::check::Checker;
use crate::error::Problem;
use crate::raw::RawTelemetry;
use crate::typed::{DEFAULT_SAMPLING, DEFAULT_SERVICE_NAME, OtlpProtocol, TelemetryConfig};

const NO_CREDENTIALS: &str = "the OTLP exporter sends no credentials; put an authenticating collector on \
     loopback in front of a remote one";

impl Checker {
    pub(crate) fn telemetry(&mut self, raw: &RawTelemetry) -> Option<TelemetryConfig> {
        let protocol = self.word(
            "telemetry.protocol",
            raw.protocol.as_ref(),
            OtlpProtocol::default(),
        );
        let sampling = self.float(
            "telemetry.sampling",
            raw.sampling,
            DEFAULT_SAMPLING,
            |ratio| (0.0..=1.0).contains(&ratio),
            "between 0 and 1",
        );
        let service_name = match raw.service_name.as_deref() {
            None => Some(DEFAULT_SERVICE_NAME.to_owned()),
            Some(name) if name.trim().is_empty() => {
                self.report("telemetry.service_name", Problem::Empty);
                None
            }
            Some(name) => Some(name.to_owned()),
        };
        let Some(endpoint) = &raw.endpoint else {
            if *raw != RawTelemetry::default() {
                self.report("telemetry.endpoint", Problem::Required);
            }
            return None;
        };
        let endpoint = self.http_url("telemetry.endpoint", Some(endpoint), NO_CREDENTIALS)?;
        Some(TelemetryConfig {
            endpoint,
            protocol: protocol?,
            sampling: sampling?,
            service_name: service_name?,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;
    use crate::typed::OtlpProtocol;

    fn errors(text: &str) -> String {
        Config::from_toml_str(text).unwrap_err().to_string()
    }

    #[test]
    fn no_table_or_no_endpoint_is_no_telemetry() {
        let config = Config::from_toml_str("version = 1\n").unwrap();
        assert_eq!(config.telemetry, None);
        let config = Config::from_toml_str("version = 1\n[telemetry]\n").unwrap();
        assert_eq!(config.telemetry, None);
    }

    #[test]
    fn an_endpoint_alone_takes_every_default() {
        let config =
            Config::from_toml_str("version = 1\n[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\n")
                .unwrap();
        let telemetry = config.telemetry.unwrap();
        assert_eq!(telemetry.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(telemetry.sampling, 1.0);
        assert_eq!(telemetry.service_name, "ballast");
        assert_eq!(telemetry.traces_url(), "http://127.0.0.1:4318/v1/traces");
    }

    #[test]
    fn every_setting_is_read() {
        let config = Config::from_toml_str(
            "version = 1\n[telemetry]\nendpoint = \"http://collector:4318/v1/traces\"\nprotocol = \"http/json\"\n\
             sampling = 0.25\nservice_name = \"gateway-eu\"\n",
        )
        .unwrap();
        let telemetry = config.telemetry.unwrap();
        assert_eq!(telemetry.protocol, OtlpProtocol::HttpJson);
        assert_eq!(telemetry.sampling, 0.25);
        assert_eq!(telemetry.service_name, "gateway-eu");
        assert_eq!(telemetry.traces_url(), "http://collector:4318/v1/traces");
    }

    #[test]
    fn every_broken_setting_is_named_with_its_value() {
        let text = errors(
            "version = 1\n[telemetry]\nendpoint = \"grpc://127.0.0.1:4317\"\nprotocol = \"grpc\"\n\
             sampling = 1.5\nservice_name = \" \"\n",
        );
        assert!(text.contains("telemetry.endpoint"), "{text}");
        assert!(text.contains("telemetry.protocol: \"grpc\""), "{text}");
        assert!(text.contains("http/protobuf"), "{text}");
        assert!(
            text.contains("telemetry.sampling: 1.5 must be between 0 and 1"),
            "{text}"
        );
        assert!(
            text.contains("telemetry.service_name: must not be empty"),
            "{text}"
        );
    }

    #[test]
    fn settings_without_an_endpoint_are_refused() {
        let text = errors("version = 1\n[telemetry]\nsampling = 0.5\n");
        assert!(text.contains("telemetry.endpoint: is required"), "{text}");
    }

    #[test]
    fn credentials_in_the_endpoint_are_refused_and_hidden() {
        let text = errors("version = 1\n[telemetry]\nendpoint = \"http://user:hunter2@127.0.0.1:4318\"\n");
        assert!(text.contains("telemetry.endpoint"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
