//! Who is calling: the configured principals, their keys from the environment, and the check of a request's key.
//!
//! Keys are never kept: each principal's SHA-256 digest is (from `key_env`, hashed at start; from `key_hash_env`,
//! as given), and a presented key is hashed and compared with every digest in constant time (`subtle`), so
//! neither the comparison's time nor which principals exist leaks. A 401 says only that the key is missing or
//! unknown. With no principals configured, every caller is the one anonymous principal — and the gateway then
//! serves on a loopback address only (checked when it starts).

use std::sync::Arc;

use ballast::idempotency::Principal;
use ballast_config::{Config, Env, PrincipalKey};
use http::HeaderMap;
use http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::StartError;

/// The principal of every request when none is configured.
pub(crate) const ANONYMOUS: &str = "anonymous";

/// The configured principals, by key digest.
#[derive(Debug)]
pub(crate) struct Principals {
    keys: Vec<Known>,
}

#[derive(Debug)]
struct Known {
    principal: Principal,
    digest: [u8; 32],
    admin: bool,
}

/// A caller the gateway knows.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    pub(crate) principal: Principal,
    pub(crate) admin: bool,
}

/// Why a request was not authenticated.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unauthenticated {
    /// No key, or a key no principal has: 401, and the answer does not say which.
    Refused,
    /// A credential header came more than once: which one counts is the reader's guess (a proxy may add one,
    /// another reader may take the last), so the request is refused (400) rather than answered as either.
    Repeated {
        /// The header.
        header: &'static str,
    },
}

impl Principals {
    /// The principals of `config`, their keys read from `env`.
    pub(crate) fn from_config(config: &Config, env: &dyn Env) -> Result<Self, StartError> {
        let mut keys = Vec::with_capacity(config.principals.len());
        for (index, principal) in config.principals.iter().enumerate() {
            let var = principal.key.env();
            let missing = |problem: &str| StartError::Secret {
                what: format!("principals[{index}] ({})", principal.name),
                var: var.to_owned(),
                problem: problem.to_owned(),
            };
            let value = env
                .var(var)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| missing("is not set"))?;
            let digest = match &principal.key {
                PrincipalKey::Plain { .. } => Sha256::digest(value.as_bytes()).into(),
                PrincipalKey::Sha256 { .. } => {
                    hex_digest(value.trim()).ok_or_else(|| missing("is not 64 hex digits (a SHA-256)"))?
                }
            };
            keys.push(Known {
                principal: Principal::new(principal.name.as_str()),
                digest,
                admin: principal.admin,
            });
        }
        Ok(Principals { keys })
    }

    /// Whether any principal is configured (without, the gateway is loopback-only and anonymous).
    pub(crate) fn any(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Whether any principal is an admin (then `/metrics` and `/status` need one).
    pub(crate) fn any_admin(&self) -> bool {
        self.keys.iter().any(|k| k.admin)
    }

    /// The caller of a request with `headers`.
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Unauthenticated> {
        if self.keys.is_empty() {
            return Ok(Caller {
                principal: Principal::new(ANONYMOUS),
                admin: true,
            });
        }
        let presented = presented_key(headers)?;
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        // Every digest is compared, whatever matched first: the time taken says nothing.
        let mut found: Option<&Known> = None;
        for known in &self.keys {
            if bool::from(known.digest.ct_eq(&digest)) {
                found = Some(known);
            }
        }
        found
            .map(|known| Caller {
                principal: known.principal.clone(),
                admin: known.admin,
            })
            .ok_or(Unauthenticated::Refused)
    }
}

/// The headers a key may come in, in the order they are read.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "api-key", "x-api-key"];

/// The key a request presents: `Authorization: Bearer <key>`, else `api-key` (Azure OpenAI's), else `x-api-key`.
/// Any of them sent twice is refused, whatever the values.
fn presented_key(headers: &HeaderMap) -> Result<Arc<str>, Unauthenticated> {
    if let Some(header) = CREDENTIAL_HEADERS
        .into_iter()
        .find(|name| headers.get_all(*name).iter().nth(1).is_some())
    {
        return Err(Unauthenticated::Repeated { header });
    }
    if let Some(value) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        let (scheme, key) = value.trim().split_once(' ').ok_or(Unauthenticated::Refused)?;
        return (scheme.eq_ignore_ascii_case("bearer") && !key.trim().is_empty())
            .then(|| Arc::from(key.trim()))
            .ok_or(Unauthenticated::Refused);
    }
    CREDENTIAL_HEADERS[1..]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|key| !key.is_empty())
        .map(Arc::from)
        .ok_or(Unauthenticated::Refused)
}

/// 64 hex digits as 32 bytes.
fn hex_digest(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(digest)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use http::HeaderValue;

    use super::*;

    fn principals() -> Principals {
        let config = Config::from_toml_str(
            r#"
            version = 1
            [[principals]]
            name = "agents"
            key_env = "AGENTS_KEY"
            [[principals]]
            name = "ops"
            key_hash_env = "OPS_KEY_HASH"
            admin = true
            "#,
        )
        .unwrap();
        let ops_hash: String = Sha256::digest(b"ops-secret")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let env: HashMap<String, String> = [
            ("AGENTS_KEY".to_owned(), "agents-secret".to_owned()),
            ("OPS_KEY_HASH".to_owned(), ops_hash),
        ]
        .into();
        Principals::from_config(&config, &env).unwrap()
    }

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn a_key_names_its_principal_and_anything_else_is_refused() {
        let principals = principals();
        let caller = principals
            .authenticate(&headers("authorization", "Bearer agents-secret"))
            .unwrap();
        assert_eq!((caller.principal.name(), caller.admin), ("agents", false));
        let caller = principals
            .authenticate(&headers("x-api-key", "ops-secret"))
            .unwrap();
        assert_eq!((caller.principal.name(), caller.admin), ("ops", true));
        assert!(
            principals
                .authenticate(&headers("api-key", "agents-secret"))
                .is_ok()
        );
        for (name, value) in [
            ("authorization", "Bearer wrong"),
            ("authorization", "Basic agents-secret"),
            ("authorization", "Bearer "),
            ("x-api-key", "agents-secret-"),
        ] {
            assert!(
                principals.authenticate(&headers(name, value)).is_err(),
                "{name}: {value}"
            );
        }
        assert!(principals.authenticate(&HeaderMap::new()).is_err());
    }

    /// Regression: with two `Authorization` headers the first counted.
    #[test]
    fn a_credential_header_sent_twice_is_refused_whatever_its_values() {
        let principals = principals();
        for (name, first, second) in [
            ("authorization", "Bearer agents-secret", "Bearer wrong"),
            ("authorization", "Bearer wrong", "Bearer agents-secret"),
            ("x-api-key", "agents-secret", "agents-secret"),
        ] {
            let mut headers = HeaderMap::new();
            headers.append(name, HeaderValue::from_str(first).unwrap());
            headers.append(name, HeaderValue::from_str(second).unwrap());
            assert!(matches!(
                principals.authenticate(&headers),
                Err(Unauthenticated::Repeated { header }) if header == name
            ));
        }
    }

    #[test]
    fn a_missing_or_malformed_secret_stops_the_start_naming_the_variable_only() {
        let config = Config::from_toml_str(
            "version = 1\n[[principals]]\nname = \"ops\"\nkey_hash_env = \"OPS_KEY_HASH\"\n",
        )
        .unwrap();
        let empty: HashMap<String, String> = HashMap::new();
        let err = Principals::from_config(&config, &empty).unwrap_err().to_string();
        assert!(err.contains("OPS_KEY_HASH is not set"), "{err}");
        let env: HashMap<String, String> = [("OPS_KEY_HASH".to_owned(), "not-hex-secret".to_owned())].into();
        let err = Principals::from_config(&config, &env).unwrap_err().to_string();
        assert!(
            err.contains("64 hex digits") && !err.contains("not-hex-secret"),
            "{err}"
        );
    }

    #[test]
    fn without_principals_everyone_is_the_anonymous_principal() {
        let principals = Principals { keys: Vec::new() };
        assert!(!principals.any());
        let caller = principals.authenticate(&HeaderMap::new()).unwrap();
        assert_eq!(caller.principal.name(), ANONYMOUS);
    }
}
