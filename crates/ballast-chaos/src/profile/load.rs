//! From TOML text (or a file) to a [`Profile`]: phase one (the `raw` structs) then phase two (`validate`).
//!
//! Phase one goes through `serde_path_to_error`, so an unknown key or a wrong type names its full path
//! (`endpoints.create_refund.hnag`) as well as the line and column `toml` reports. It stops at the first such
//! error, since what follows a syntax error cannot be trusted; phase two reports every broken rule.

use std::path::Path;

use ballast_human::line_column;

use super::error::ProfileError;
use super::raw::RawProfile;
use super::{Profile, validate};

impl Profile {
    /// Parses and validates a profile written in TOML (the schema: docs/chaos.md). Every broken rule is
    /// reported, each with its path.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ballast_chaos::{KeyMode, Profile};
    ///
    /// let profile = Profile::from_toml_str(r#"
    ///     seed = 7
    ///     [default]
    ///     errors = { 503 = 0.1 }
    ///     [endpoints.create_refund]
    ///     latency = { p50 = "40ms", p99 = "200ms" }
    ///     key_mode = "keyed"
    /// "#).unwrap();
    /// assert_eq!(profile.endpoint("create_refund").latency.unwrap().p99, Duration::from_millis(200));
    /// assert_eq!(profile.endpoint("create_refund").errors[0].status, 503, "inherited from [default]");
    /// assert_eq!(profile.endpoint("create_refund").key_mode, KeyMode::Keyed);
    ///
    /// let err = Profile::from_toml_str("[endpoints.model]\nhang = 1.5\nreset = 0.2\n").unwrap_err();
    /// assert_eq!(err.to_string(), "endpoints.model.hang: 1.5 is not a rate (0..=1)");
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Profile, ProfileError> {
        validate::validate(&parse(text)?)
    }

    /// Reads, parses and validates a profile file.
    pub fn load(file: impl AsRef<Path>) -> Result<Profile, ProfileError> {
        let file = file.as_ref();
        let text = std::fs::read_to_string(file).map_err(|source| ProfileError::Read {
            file: file.to_owned(),
            source,
        })?;
        Profile::from_toml_str(&text)
    }
}

/// Phase one: TOML text to the raw structs.
fn parse(text: &str) -> Result<RawProfile, ProfileError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|e| syntax(text, String::new(), &e))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        syntax(text, path, e.inner())
    })
}

fn syntax(text: &str, path: String, error: &toml::de::Error) -> ProfileError {
    let (line, column) = error.span().map(|span| line_column(text, span.start)).unzip();
    ProfileError::Syntax {
        path,
        message: error.message().trim().replace('\n', "; "),
        line,
        column,
    }
}
