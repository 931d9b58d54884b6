//! `GET /dashboard`: the operator's page. One HTML file (`dashboard.html`, compiled in) with its style and script
//! inline — no build step, no asset fetched from anywhere — that reads `/status` every 2 s and draws it: what is
//! wrong first, then a card per model deployment, tool and MCP server.
//!
//! The page holds no data, so it is served without auth; what it shows, it fetches from `/status` with the key the
//! operator types when `/status` answers 401 or 403 (kept in the tab's `sessionStorage`), so it sees exactly what
//! `/status` lets that key see. A strict Content-Security-Policy allows the page's own script and style by their
//! SHA-256 (no `unsafe-inline`), connections to the same origin only, and nothing else: whatever `/status`
//! holds — a tool's name, an upstream's error text — is written into the page as text, never as markup, and could
//! not run even if it were.

use std::sync::LazyLock;

use axum::response::{IntoResponse, Response};
use base64::Engine;
use http::{HeaderValue, header};
use sha2::{Digest, Sha256};

/// The page.
const PAGE: &str = include_str!("dashboard.html");

/// The page's Content-Security-Policy, with the hashes of its inline `<script>` and `<style>`.
static POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    let policy = format!(
        "default-src 'none'; script-src '{}'; style-src '{}'; connect-src 'self'; img-src 'self' data:; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        hash_of(inline(PAGE, "script")),
        hash_of(inline(PAGE, "style")),
    );
    HeaderValue::from_str(&policy).expect("a policy is ASCII")
});

/// The dashboard page.
pub(crate) async fn page() -> Response {
    let mut response = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        PAGE,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, POLICY.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

/// The text between `<tag>` and `</tag>` (the page has one of each).
fn inline<'a>(page: &'a str, tag: &str) -> &'a str {
    let open = format!("<{tag}>");
    let start = page.find(&open).map(|at| at + open.len());
    let end = page.find(&format!("</{tag}>"));
    match (start, end) {
        (Some(start), Some(end)) if start <= end => &page[start..end],
        _ => panic!("dashboard.html has one <{tag}> element"),
    }
}

/// A CSP source for an inline element: `sha256-` and the base64 of its text's SHA-256.
fn hash_of(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_exactly_the_pages_own_script_and_style() {
        let policy = POLICY.to_str().unwrap();
        assert!(policy.starts_with("default-src 'none'; script-src 'sha256-"));
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(PAGE.matches("<script>").count(), 1, "one inline script, hashed");
        assert_eq!(PAGE.matches("<style>").count(), 1, "one inline style, hashed");
        assert!(
            !PAGE.contains(" style=\""),
            "a style attribute would be refused by the policy"
        );
        assert!(!PAGE.contains("innerHTML"), "data goes into the page as text");
        let page = PAGE.replace("\"http://www.w3.org/2000/svg\"", "");
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "no external asset"
        );
    }

    #[test]
    fn a_hash_is_the_base64_sha256_csp_expects() {
        // The SHA-256 of "" is well known: 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=.
        assert_eq!(hash_of(""), "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
        assert_eq!(inline("<p><style>a{}</style>", "style"), "a{}");
    }
}
