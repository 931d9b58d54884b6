//! The URLs an [`HttpTransport`](super::HttpTransport) has parsed, by URI.
//!
//! Why: reqwest takes an `http::Request` by printing its URI and parsing the text into a `Url` on every request —
//! measured, the largest single cost a call adds over a bare reqwest call (a tool's upstream is the same URI
//! every time). The parse is done once per URI and its result reused: the same text gives the same `Url`.

use std::sync::{Mutex, PoisonError};

use http::Uri;
use reqwest::Url;

/// How many URIs are remembered: a configuration has a few upstreams; past that the oldest is forgotten.
const REMEMBERED: usize = 64;

/// Parsed URLs by URI, most recent last.
#[derive(Debug, Default)]
pub(super) struct Urls {
    parsed: Mutex<Vec<(Uri, Url)>>,
}

impl Urls {
    /// The `Url` reqwest would make of `uri` (`Url::parse` of its text), or `None` when it does not parse (the
    /// caller lets reqwest report why).
    pub(super) fn url_for(&self, uri: &Uri) -> Option<Url> {
        if let Some(url) = self
            .lock()
            .iter()
            .find(|(known, _)| known == uri)
            .map(|(_, url)| url.clone())
        {
            return Some(url);
        }
        let url = Url::parse(&uri.to_string()).ok()?;
        let mut parsed = self.lock();
        if parsed.len() >= REMEMBERED {
            parsed.remove(0);
        }
        parsed.push((uri.clone(), url.clone()));
        Some(url)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Uri, Url)>> {
        // A plain list of parsed values: a panic elsewhere cannot leave it inconsistent.
        self.parsed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_parsed_once_per_uri_and_reads_as_reqwest_would() {
        let urls = Urls::default();
        let uri: Uri = "http://Tools.Internal:8080/tools/lookup_order?x=1"
            .parse()
            .unwrap();
        let first = urls.url_for(&uri).unwrap();
        assert_eq!(first, Url::parse(&uri.to_string()).unwrap());
        assert_eq!(urls.url_for(&uri), Some(first));
        assert_eq!(urls.lock().len(), 1, "remembered once");
        let other: Uri = "http://tools.internal:8080/tools/create_refund".parse().unwrap();
        assert_eq!(urls.url_for(&other).unwrap().path(), "/tools/create_refund");
        assert!(
            urls.url_for(&"/relative".parse().unwrap()).is_none(),
            "left to reqwest to refuse"
        );
    }

    #[test]
    fn past_the_limit_the_oldest_is_forgotten() {
        let urls = Urls::default();
        for n in 0..=REMEMBERED {
            let uri: Uri = format!("http://host/{n}").parse().unwrap();
            assert_eq!(urls.url_for(&uri).unwrap().path(), format!("/{n}"));
        }
        let parsed = urls.lock();
        assert_eq!(parsed.len(), REMEMBERED);
        assert_eq!(parsed[0].0.path(), "/1");
    }
}
