//! A model call's end: a 2xx read as its API's answer (its tokens counted), or the last failure as the caller's
//! error (the tokens of an error answer are spent too, on the deployment that gave it).

use ballast_core::ErrorCode;
use serde::de::DeserializeOwned;

use super::api::Protocol;
use super::call::ModelAnswer;
use super::client::ModelClient;
use super::route::{Committed, Tried};
use super::usage::record_tokens;
use crate::client::{CallError, Failure, json_body};

impl ModelClient {
    /// A 2xx answer of API `P` read as a `T`, its tokens recorded as the answer's when `count_tokens`.
    pub(super) fn answer<P: Protocol, T: DeserializeOwned>(
        &self,
        committed: Committed,
        tried: &Tried,
        count_tokens: bool,
    ) -> Result<ModelAnswer<T>, CallError> {
        let Committed { index, response } = committed;
        let report = tried.report_of(index);
        let (parts, body) = response.into_parts();
        let bytes = body.as_bytes().cloned().unwrap_or_default();
        match serde_json::from_slice::<T>(&bytes) {
            Ok(parsed) => {
                if count_tokens {
                    record_tokens(report, P::usage(&bytes), true);
                }
                Ok(ModelAnswer {
                    response: parsed,
                    body: bytes,
                    status: parts.status.as_u16(),
                    headers: parts.headers,
                    deployment: self.route.deployments[index].name.clone(),
                    truncated: tried.truncated,
                    report: tried.report(),
                })
            }
            Err(error) => {
                // Tokens the upstream reported are spent, whatever became of the answer.
                record_tokens(report, P::usage(&bytes), false);
                report.update(|r| r.code = Some(ErrorCode::UpstreamError));
                Err(CallError::Malformed {
                    target: self.name().to_owned(),
                    reason: format!("not a {} answer: {error}", P::API.title()),
                    report: Box::new(tried.report()),
                })
            }
        }
    }

    /// The last failure as the caller's error (the tokens of an error answer are the last deployment's, spent).
    pub(super) fn failed<P: Protocol>(&self, failure: Failure, tried: &Tried) -> CallError {
        let target = self.name().to_owned();
        match failure {
            Failure::Answer(response) => {
                let bytes = response.body().as_bytes().map_or(&[][..], |b| &b[..]);
                if let Some(answered) = tried.failed_at.map(|index| tried.report_of(index)) {
                    record_tokens(answered, P::usage(bytes), false);
                }
                CallError::Upstream {
                    target,
                    status: response.status().as_u16(),
                    body: json_body(response.body()),
                    bytes: crate::client::body_bytes(response.body()),
                    asked_wait: crate::headers::retry_after(response.headers()),
                    headers: Box::new(response.headers().clone()),
                    report: Box::new(tried.report()),
                }
            }
            Failure::Error(error) => CallError::Failed {
                target,
                error,
                report: Box::new(tried.report()),
            },
        }
    }
}
