//! Configuration errors: every one names the field's path and the offending value.

mod problem;

use std::fmt;
use std::path::PathBuf;

pub use problem::Problem;

/// Everything wrong with a configuration, in file order where it has one. Never empty.
///
/// Displays one error per line: `tools[2].per_try_timeout: "12x" is not a duration: ...`.
#[derive(Debug)]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// Wraps errors; `None` when there are none.
    pub(crate) fn from_vec(errors: Vec<ConfigError>) -> Option<Self> {
        (!errors.is_empty()).then_some(ConfigErrors { errors })
    }

    pub(crate) fn one(error: ConfigError) -> Self {
        ConfigErrors { errors: vec![error] }
    }

    /// The errors.
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }

    /// The errors, owned.
    pub fn into_vec(self) -> Vec<ConfigError> {
        self.errors
    }

    /// The same errors with each path rewritten by `rename`: a config built in code names its fields as its
    /// builder does (`tools[0].concurrency` -> `concurrency`).
    pub fn map_paths(mut self, rename: impl Fn(&str) -> String) -> Self {
        for error in &mut self.errors {
            if let ConfigError::Syntax { path, .. } | ConfigError::Invalid { path, .. } = error {
                *path = rename(path);
            }
        }
        self
    }

    /// Gives each rule error the line its path names in `text`, the file the config was read from.
    pub(crate) fn located(mut self, text: &str) -> Self {
        let lines = crate::lines::Lines::of(text);
        for error in &mut self.errors {
            if let ConfigError::Invalid { path, line, .. } = error
                && line.is_none()
            {
                *line = lines.line(path);
            }
        }
        self
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// One thing wrong with a configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, an unknown key, or a value of the wrong type. Parsing stops at the first of these.
    #[error("{}", SyntaxDisplay { path, message, line: *line, column: *column })]
    Syntax {
        /// The key's path (`tools[1].upstream.urll`), empty when the error is not inside a key.
        path: String,
        /// What the parser said, on one line.
        message: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// 1-based column (in characters), when known.
        column: Option<usize>,
    },
    /// A value that breaks a rule.
    #[error("{path}: {problem}{}", line.map(|line| format!(" (line {line})")).unwrap_or_default())]
    Invalid {
        /// The field's path: `models[0].deployments[1].base_url`.
        path: String,
        /// What is wrong.
        problem: Problem,
        /// The 1-based line of the value in the file (of its table, for a key that is missing), when the config
        /// came from text ([`Config::from_toml_str`](crate::Config::from_toml_str), [`Config::load`](crate::Config::load)).
        line: Option<usize>,
    },
}

impl ConfigError {
    /// The 1-based line in the file it points at, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { line, .. } | ConfigError::Invalid { line, .. } => *line,
        }
    }

    /// The field's path, when the error has one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { path, .. } | ConfigError::Invalid { path, .. } => {
                (!path.is_empty()).then_some(path.as_str())
            }
        }
    }
}

struct SyntaxDisplay<'a> {
    path: &'a str,
    message: &'a str,
    line: Option<usize>,
    column: Option<usize>,
}

impl fmt::Display for SyntaxDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let location = match (self.line, self.column) {
            (Some(line), Some(column)) => format!("line {line}, column {column}"),
            (Some(line), None) => format!("line {line}"),
            _ => String::new(),
        };
        match (self.path.is_empty(), location.is_empty()) {
            (false, false) => write!(f, "{}: {} ({location})", self.path, self.message),
            (false, true) => write!(f, "{}: {}", self.path, self.message),
            (true, false) => write!(f, "{location}: {}", self.message),
            (true, true) => f.write_str(self.message),
        }
    }
}
