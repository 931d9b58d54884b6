//! The environment, passed in, and the check that the secrets a config names are there.
//!
//! Secrets never sit in the config file, only the names of the variables that hold them (DESIGN.md, "Gateway
//! HTTP interface"). Whether they are set is a question for the process that will use them (`ballast serve`),
//! not for validation: `ballast plan` must work on a laptop that holds no production keys. So validation checks
//! the names' form, and [`Config::missing_secrets`] checks their presence, against an [`Env`] the caller passes.

use std::collections::HashMap;

use crate::typed::{
    Config, HeaderValueSource, PrincipalKey, StoreConfig, StoreKind, StoreLocation, UpstreamHeader,
};

/// Where environment variables come from. The binary passes the process environment ([`ProcessEnv`]); tests
/// pass a `HashMap` or a closure.
pub trait Env {
    /// The variable's value, if set.
    fn var(&self, name: &str) -> Option<String>;
}

impl<F: Fn(&str) -> Option<String>> Env for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

/// The process environment (`std::env::var`): what a program gives a loader that reads secrets, at its edge.
/// A variable that is not set, or not Unicode, reads as unset.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// A secret the config names but the environment does not hold (or holds in the wrong form). Its value is never
/// part of the message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: environment variable {var} {problem}")]
pub struct MissingSecret {
    /// The field that names the variable: `principals[0].key_env`.
    pub path: String,
    /// The variable.
    pub var: String,
    /// What is wrong with it.
    pub problem: SecretProblem,
}

/// What is wrong with a secret's variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretProblem {
    /// Not set.
    #[error("is not set")]
    Unset,
    /// Set to the empty string.
    #[error("is empty")]
    Empty,
    /// A `key_hash_env` value that is not 64 hex digits.
    #[error("does not hold a SHA-256 hash (64 hex digits)")]
    NotSha256Hex,
    /// A `store.url_env` value with an unsupported scheme.
    #[error("does not hold a supported store URL (sqlite://, sqlite::memory:, redis://, postgres://)")]
    UnsupportedStoreUrl,
    /// A value that cannot be sent in an HTTP header (an API key with a line break or a control character), with
    /// its header's prefix when it has one.
    #[error("holds characters an HTTP header cannot carry")]
    NotHeaderValue,
}

impl UpstreamHeader {
    /// The value to send: a literal as written; an environment one read from `env`, after its prefix, and marked
    /// sensitive (`HeaderValue::set_sensitive`: HTTP/2 never indexes it; Debug hides it). Read once, when the
    /// tool's client is built. The error says what is wrong, never the value.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use ballast_config::{HeaderValueSource, SecretProblem, UpstreamHeader};
    ///
    /// let header = UpstreamHeader {
    ///     name: "authorization".into(),
    ///     value: HeaderValueSource::Env { env: "TOKEN".into(), prefix: "Bearer ".into() },
    /// };
    /// let env = HashMap::from([("TOKEN".to_owned(), "t0ken".to_owned())]);
    /// let value = header.value(&env).unwrap();
    /// assert_eq!(value, "Bearer t0ken");
    /// assert!(value.is_sensitive());
    /// assert_eq!(header.value(&HashMap::new()), Err(SecretProblem::Unset));
    /// ```
    pub fn value(&self, env: &dyn Env) -> Result<http::HeaderValue, SecretProblem> {
        match &self.value {
            HeaderValueSource::Literal(text) => header_value(text),
            HeaderValueSource::Env { env: var, prefix } => {
                let secret = env.var(var).ok_or(SecretProblem::Unset)?;
                if secret.is_empty() {
                    return Err(SecretProblem::Empty);
                }
                let mut value = header_value(&format!("{prefix}{secret}"))?;
                value.set_sensitive(true);
                Ok(value)
            }
        }
    }
}

/// Whether `text` can be (part of) a header value as configured: visible ASCII, spaces and tabs (RFC 9110's
/// field-vchar without obs-text, which `http` would accept but no credential or setting needs).
pub(crate) fn is_header_text(text: &str) -> bool {
    text.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// `text` as a header value, when it [`is_header_text`].
fn header_value(text: &str) -> Result<http::HeaderValue, SecretProblem> {
    if !is_header_text(text) {
        return Err(SecretProblem::NotHeaderValue);
    }
    http::HeaderValue::from_str(text).map_err(|_| SecretProblem::NotHeaderValue)
}

fn lookup(env: &dyn Env, path: String, var: &str) -> Result<String, MissingSecret> {
    let missing = |problem| MissingSecret {
        path: path.clone(),
        var: var.to_owned(),
        problem,
    };
    match env.var(var) {
        None => Err(missing(SecretProblem::Unset)),
        Some(value) if value.is_empty() => Err(missing(SecretProblem::Empty)),
        Some(value) => Ok(value),
    }
}

impl StoreConfig {
    /// The store's URL and backend: as written, or read from `store.url_env`.
    pub fn url(&self, env: &dyn Env) -> Result<(String, StoreKind), MissingSecret> {
        match &self.location {
            StoreLocation::Url { url, kind } => Ok((url.clone(), *kind)),
            StoreLocation::Env { env: var } => {
                let url = lookup(env, "store.url_env".into(), var)?;
                match StoreKind::of_url(&url) {
                    Some(kind) => Ok((url, kind)),
                    None => Err(MissingSecret {
                        path: "store.url_env".into(),
                        var: var.clone(),
                        problem: SecretProblem::UnsupportedStoreUrl,
                    }),
                }
            }
        }
    }
}

impl Config {
    /// Every secret the config names that `env` does not hold in a usable form: principals' keys, deployments'
    /// API keys, tool upstreams' headers (`tools[0].upstream.headers.authorization.env`; a value that, after its
    /// prefix, is no header value too), the deferred callbacks' signing key (`deferred.callback_secret_env`),
    /// `store.url_env`. Empty when the server can start. Values are never returned or printed.
    pub fn missing_secrets(&self, env: &dyn Env) -> Vec<MissingSecret> {
        let mut missing = Vec::new();
        for (i, principal) in self.principals.iter().enumerate() {
            let (field, var) = match &principal.key {
                PrincipalKey::Plain { env } => ("key_env", env),
                PrincipalKey::Sha256 { env } => ("key_hash_env", env),
            };
            let path = format!("principals[{i}].{field}");
            match lookup(env, path.clone(), var) {
                Err(e) => missing.push(e),
                Ok(value)
                    if matches!(principal.key, PrincipalKey::Sha256 { .. }) && !is_sha256_hex(&value) =>
                {
                    missing.push(MissingSecret {
                        path,
                        var: var.clone(),
                        problem: SecretProblem::NotSha256Hex,
                    });
                }
                Ok(_) => {}
            }
        }
        for (i, model) in self.models.iter().enumerate() {
            for (j, deployment) in model.deployments.iter().enumerate() {
                if let Some(var) = &deployment.api_key_env {
                    let path = format!("models[{i}].deployments[{j}].api_key_env");
                    missing.extend(lookup(env, path, var).err());
                }
            }
        }
        for (i, tool) in self.tools.iter().enumerate() {
            for header in &tool.upstream.headers {
                let HeaderValueSource::Env { env: var, .. } = &header.value else {
                    continue;
                };
                if let Err(problem) = header.value(env) {
                    missing.push(MissingSecret {
                        path: format!("tools[{i}].upstream.headers.{}.env", header.name),
                        var: var.clone(),
                        problem,
                    });
                }
            }
        }
        if let Some(callback) = &self.deferred.callback {
            let path = "deferred.callback_secret_env".to_owned();
            missing.extend(lookup(env, path, &callback.secret_env).err());
        }
        missing.extend(self.store.url(env).err());
        missing
    }
}

fn is_sha256_hex(value: &str) -> bool {
    value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests;
