//! From text (or a file) to [`RawConfig`] and on to [`Config`].
//!
//! The version is read first, on its own: a file written for another schema version would otherwise fail on its
//! first unfamiliar key, and the user would be told about a typo instead of a version. Then the whole file is
//! deserialised through `serde_path_to_error`, so an unknown key or a wrong type names its full path
//! (`tools[1].upstream.urll`) as well as the line and column `toml` reports.

use std::path::Path;

use ballast_human::line_column;

use serde::Deserialize;

use crate::error::{ConfigError, ConfigErrors, Problem};
use crate::lines::line_of;
use crate::raw::{RawConfig, SCHEMA_VERSION};
use crate::typed::Config;
use crate::validate;

/// Phase one: TOML text to the raw structs. Stops at the first syntax error, unknown key or wrong type.
///
/// ```
/// let raw = ballast_config::parse("version = 1\n[server]\nlisten = \"0.0.0.0:8080\"\n").unwrap();
/// assert_eq!(raw.server.listen.as_deref(), Some("0.0.0.0:8080"));
///
/// let err = ballast_config::parse("version = 1\n[server]\nlisen = \"x\"\n").unwrap_err();
/// assert!(err.to_string().starts_with("server.lisen: unknown field `lisen`"));
/// ```
pub fn parse(text: &str) -> Result<RawConfig, ConfigErrors> {
    check_version(text)?;
    let deserializer = toml::Deserializer::parse(text).map_err(|e| syntax(text, String::new(), &e))?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        syntax(text, path, e.inner())
    })
}

/// The keys every version of the schema keeps: only `version`.
#[derive(Deserialize)]
struct VersionProbe {
    version: Option<toml::Value>,
}

fn check_version(text: &str) -> Result<(), ConfigErrors> {
    let probe: VersionProbe = toml::from_str(text).map_err(|e| syntax(text, String::new(), &e))?;
    let problem = match probe.version {
        Some(toml::Value::Integer(SCHEMA_VERSION)) => return Ok(()),
        None => Problem::MissingVersion,
        Some(toml::Value::String(s)) => Problem::UnsupportedVersion {
            found: format!("{s:?}"),
        },
        Some(other) => Problem::UnsupportedVersion {
            found: other.to_string(),
        },
    };
    let line = line_of(text, "version");
    Err(ConfigErrors::one(ConfigError::Invalid {
        path: "version".into(),
        problem,
        line,
    }))
}

fn syntax(text: &str, path: String, error: &toml::de::Error) -> ConfigErrors {
    let (line, column) = match error.span() {
        Some(span) => {
            let (line, column) = line_column(text, span.start);
            (Some(line), Some(column))
        }
        None => (None, None),
    };
    let mut message = error.message().trim().replace('\n', "; ");
    // toml says only "duplicate key"; its span is the key, so name it.
    if message == "duplicate key"
        && let Some(key) = error.span().and_then(|span| text.get(span))
    {
        message = format!("duplicate key `{key}`");
    }
    ConfigErrors::one(ConfigError::Syntax {
        path,
        message,
        line,
        column,
    })
}

impl Config {
    /// Parses and validates a configuration. Every validation error is reported, each with its path.
    pub fn from_toml_str(text: &str) -> Result<Config, ConfigErrors> {
        validate(&parse(text)?).map_err(|errors| errors.located(text))
    }

    /// Reads, parses and validates a configuration file.
    pub fn load(file: impl AsRef<Path>) -> Result<Config, ConfigErrors> {
        let file = file.as_ref();
        let text = std::fs::read_to_string(file).map_err(|source| {
            ConfigErrors::one(ConfigError::Read {
                file: file.to_owned(),
                source,
            })
        })?;
        Config::from_toml_str(&text)
    }

    /// The configuration of an empty file (`version = 1` and nothing else): every default, no principals, no
    /// models, no tools. Valid.
    pub fn embedded_default() -> Config {
        Config::default()
    }

    /// The model route clients call `name`.
    pub fn model(&self, name: &str) -> Option<&crate::ModelRoute> {
        self.models.iter().find(|m| m.name == name)
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&crate::ToolConfig> {
        self.tools.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::lines::tests::TEXT;

    /// A rule's error points at the line of the value that broke it, as a syntax error points at its own.
    #[test]
    fn rule_errors_carry_the_line_of_their_value() {
        let errors = Config::from_toml_str(TEXT).unwrap_err();
        let lines: Vec<_> = errors.errors().iter().map(|e| (e.path(), e.line())).collect();
        assert!(
            lines.contains(&(Some("tools[1].retry.max_attempts"), Some(11))),
            "{lines:?}"
        );
        // A required key that is missing: the line of its table.
        assert!(lines.contains(&(Some("tools[0].upstream"), Some(6))), "{lines:?}");
        assert!(
            errors
                .to_string()
                .lines()
                .any(|l| l.starts_with("tools[1].retry.max_attempts: ") && l.ends_with(" (line 11)")),
            "{errors}"
        );
    }
}
