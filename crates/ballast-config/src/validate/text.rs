//! Rules for strings: names, environment variable names, URLs, and `fallback_response` as JSON.

use super::check::{Checker, index, join};
use crate::error::Problem;

/// Tool and principal names: OpenAI's function-name rule, so a tool's name is what the model calls.
pub(crate) const IDENT_RULE: &str = "use 1 to 64 of A-Z, a-z, 0-9, _ and -";
/// Model names (`gpt-4.1`, `meta-llama/Llama-3.1-8B`, `llama3:8b`).
pub(crate) const MODEL_RULE: &str = "use 1 to 256 printable ASCII characters, no spaces";

/// Whether `name` is 1-64 of `A-Z a-z 0-9 _ -`.
pub(crate) fn is_ident(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `name` is 1-256 printable ASCII characters without spaces.
pub(crate) fn is_model_name(name: &str) -> bool {
    (1..=256).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_graphic())
}

/// Whether `name` is a portable environment variable name (POSIX: letters, digits, `_`, no leading digit).
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Checker {
    /// A required name that `is_valid` accepts.
    pub(crate) fn name(
        &mut self,
        path: &str,
        raw: Option<&String>,
        is_valid: fn(&str) -> bool,
        rule: &'static str,
    ) -> Option<String> {
        let Some(name) = raw else {
            self.report(path, Problem::Required);
            return None;
        };
        if !is_valid(name) {
            self.report(
                path,
                Problem::InvalidName {
                    value: name.clone(),
                    rule,
                },
            );
            return None;
        }
        Some(name.clone())
    }

    /// An environment variable's name.
    pub(crate) fn env_name(&mut self, path: &str, raw: &str) -> Option<String> {
        if is_env_name(raw) {
            return Some(raw.to_owned());
        }
        self.report(
            path,
            Problem::InvalidEnvName {
                value: raw.to_owned(),
            },
        );
        None
    }

    /// A required `http`/`https` URL with a host and no credentials; `instead` says where credentials go.
    pub(crate) fn http_url(
        &mut self,
        path: &str,
        raw: Option<&String>,
        instead: &'static str,
    ) -> Option<String> {
        let Some(url) = raw else {
            self.report(path, Problem::Required);
            return None;
        };
        match check_http_url(url) {
            Ok(()) => Some(url.clone()),
            Err(UrlFault::Credentials) => {
                self.report(
                    path,
                    Problem::CredentialsInUrl {
                        value: redact(url),
                        instead,
                    },
                );
                None
            }
            Err(UrlFault::Invalid(reason)) => {
                self.report(
                    path,
                    Problem::InvalidUrl {
                        value: redact(url),
                        reason,
                    },
                );
                None
            }
        }
    }

    /// `fallback_response` as the JSON body it will be answered as.
    pub(crate) fn json(&mut self, path: &str, value: &toml::Value) -> Option<serde_json::Value> {
        use serde_json::Value as Json;
        Some(match value {
            toml::Value::String(s) => Json::String(s.clone()),
            toml::Value::Integer(n) => Json::from(*n),
            toml::Value::Boolean(b) => Json::Bool(*b),
            toml::Value::Datetime(d) => Json::String(d.to_string()),
            toml::Value::Float(x) => match serde_json::Number::from_f64(*x) {
                Some(number) => Json::Number(number),
                None => {
                    self.report(path, Problem::NotJson { value: x.to_string() });
                    return None;
                }
            },
            toml::Value::Array(items) => {
                let items: Vec<_> = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.json(&index(path, i), item))
                    .collect();
                Json::Array(items.into_iter().collect::<Option<_>>()?)
            }
            toml::Value::Table(table) => {
                let entries: Vec<_> = table
                    .iter()
                    .map(|(key, item)| Some((key.clone(), self.json(&join(path, key), item)?)))
                    .collect();
                Json::Object(entries.into_iter().collect::<Option<_>>()?)
            }
        })
    }
}

/// What is wrong with a URL.
#[derive(Debug, PartialEq)]
pub(crate) enum UrlFault {
    /// `user:password@` or `user@` in an upstream URL.
    Credentials,
    /// Anything else, with the reason.
    Invalid(&'static str),
}

/// Minimal `http(s)://host[:port][/path][?query]` check: enough to catch typos, not a full RFC 3986 parser.
pub(crate) fn check_http_url(url: &str) -> Result<(), UrlFault> {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlFault::Invalid("it contains a space or a control character"));
    }
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or(UrlFault::Invalid("it must start with http:// or https://"))?;
    if url.contains('#') {
        return Err(UrlFault::Invalid("it has a #fragment, which is never sent"));
    }
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(UrlFault::Credentials);
    }
    let (host, port) = split_host_port(authority)?;
    if host.is_empty() {
        return Err(UrlFault::Invalid("it has no host"));
    }
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(UrlFault::Invalid("its port is not a number from 1 to 65535"));
    }
    Ok(())
}

/// `host` and the optional port of an authority; IPv6 hosts in brackets.
fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), UrlFault> {
    if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or(UrlFault::Invalid("its IPv6 host has no closing ]"))?;
        return match after {
            "" => Ok((host, None)),
            _ => after
                .strip_prefix(':')
                .map(|port| (host, Some(port)))
                .ok_or(UrlFault::Invalid("unexpected text after its IPv6 host")),
        };
    }
    Ok(match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

/// Whether a store URL carries a password (`scheme://user:password@` or `scheme://:password@`).
pub(crate) fn has_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// The URL with any userinfo replaced by `***`, safe to print.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_len].rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://***@{host}{}", &rest[authority_len..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_ident("process_payment") && is_ident("a-b_C9") && is_ident(&"x".repeat(64)));
        assert!(!is_ident("") && !is_ident("a.b") && !is_ident("a b") && !is_ident(&"x".repeat(65)));
        assert!(
            is_model_name("gpt-4.1") && is_model_name("meta-llama/Llama-3.1-8B") && is_model_name("l:8b")
        );
        assert!(!is_model_name("") && !is_model_name("gpt 4") && !is_model_name("gpté"));
        assert!(is_env_name("OPENAI_API_KEY") && is_env_name("_X1"));
        assert!(!is_env_name("") && !is_env_name("1X") && !is_env_name("MY-KEY") && !is_env_name("A B"));
    }

    #[test]
    fn urls() {
        for ok in [
            "http://127.0.0.1:9000/v1",
            "https://api.openai.com/v1",
            "http://[::1]:9000/tools/x?y=1",
            "http://localhost",
            "https://host/",
        ] {
            assert_eq!(check_http_url(ok), Ok(()), "{ok}");
        }
        let invalid = |reason| Err(UrlFault::Invalid(reason));
        let cases = [
            ("ftp://host", invalid("it must start with http:// or https://")),
            (
                "127.0.0.1:9000",
                invalid("it must start with http:// or https://"),
            ),
            ("HTTP://host", invalid("it must start with http:// or https://")),
            ("http://", invalid("it has no host")),
            ("http:///path", invalid("it has no host")),
            ("http://:80/", invalid("it has no host")),
            (
                "http://host:0/",
                invalid("its port is not a number from 1 to 65535"),
            ),
            (
                "http://host:99999",
                invalid("its port is not a number from 1 to 65535"),
            ),
            (
                "http://host:x",
                invalid("its port is not a number from 1 to 65535"),
            ),
            ("http://[::1/", invalid("its IPv6 host has no closing ]")),
            ("http://[::1]x/", invalid("unexpected text after its IPv6 host")),
            (
                "http://host/a b",
                invalid("it contains a space or a control character"),
            ),
            (
                "http://host/#top",
                invalid("it has a #fragment, which is never sent"),
            ),
            ("http://user:pw@host/", Err(UrlFault::Credentials)),
            ("http://user@host/", Err(UrlFault::Credentials)),
        ];
        for (url, expected) in cases {
            assert_eq!(check_http_url(url), expected, "{url}");
        }
    }

    #[test]
    fn passwords_are_found_and_hidden() {
        assert!(has_password("postgres://app:s3cret@db:5432/ballast"));
        assert!(has_password("redis://:s3cret@127.0.0.1:6379"));
        assert!(!has_password("postgres://app@db/ballast"));
        assert!(!has_password("sqlite://ballast.db"));
        assert!(!has_password("sqlite::memory:"));
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/x"),
            "postgres://***@db:5432/x"
        );
        assert_eq!(redact("https://host/v1"), "https://host/v1");
    }
}
