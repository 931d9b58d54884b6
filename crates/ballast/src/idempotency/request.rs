//! Reading an inbound request: its key, scope, deadline and fingerprint, with the body buffered under a limit.

use axum::body::Body;
use axum::extract::MatchedPath;
use ballast_core::{AmbiguousJson, Deadline, DeadlineHeader, IdempotencyKey, fingerprint, inbound_timeout};
use ballast_store::{ClaimRequest, OwnerToken, Scope};
use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, Request, header};
use http_body::Body as HttpBody;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};

use super::Principal;
use super::layer::Settings;
use super::problem::Problem;
use crate::headers::IDEMPOTENCY_KEY;
use crate::{BoxError, CallContext, clock};

/// A keyed request, read and ready to claim.
#[derive(Debug)]
pub(crate) struct Incoming {
    /// Principal + route + key.
    pub(crate) scope: Scope,
    /// The claim to make (fingerprint, a fresh owner token, the lease).
    pub(crate) claim: ClaimRequest,
    /// The caller's deadline: every wait on the store before the answer ends by it, minus its reserve.
    pub(crate) deadline: Deadline,
    /// The request again, its body buffered, for the handler; with what a deferral keeps of it (a
    /// `StoredRequest` extension) when the layer has a queue.
    pub(crate) request: Request<Body>,
}

/// The request's `Idempotency-Key`: `None` when absent, a problem when malformed or repeated.
pub(crate) fn read_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, Problem> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(Problem::KeyRepeated);
    }
    // A value with bytes outside visible ASCII is not a `str`; read it lossily so the key check names it.
    let text = String::from_utf8_lossy(value.as_bytes());
    IdempotencyKey::parse(&text)
        .map(Some)
        .map_err(Problem::KeyInvalid)
}

/// Reads `request` (keyed with `key`) under the layer's settings.
pub(crate) async fn read<B>(
    request: Request<B>,
    key: IdempotencyKey,
    settings: &Settings,
) -> Result<Incoming, Problem>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let deadline = deadline(&parts, settings)?;
    let body = buffer(body, settings.body_limit).await?;
    let pattern = parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path(), MatchedPath::as_str);
    let route = format!("{} {pattern}", parts.method);
    let principal = parts
        .extensions
        .get::<Principal>()
        .map_or(settings.default_principal.as_str(), Principal::name);
    let scope = Scope::new(principal, route, key);
    let claim = ClaimRequest {
        fingerprint: request_fingerprint(&parts, &body).map_err(Problem::AmbiguousJson)?,
        owner: OwnerToken::random(),
        lease: settings.lease,
        expired_dispatch: settings.expired_dispatch,
    };
    let kept = settings
        .deferred
        .as_ref()
        .map(|_| super::deferred::StoredRequest {
            target: parts
                .uri
                .path_and_query()
                .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
            content_type: (parts.headers.get(header::CONTENT_TYPE))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: body.clone(),
        });
    let mut request = Request::from_parts(parts, Body::from(body));
    if let Some(kept) = kept {
        request.extensions_mut().insert(kept);
    }
    Ok(Incoming {
        scope,
        claim,
        deadline,
        request,
    })
}

/// The fingerprint: method, the path as sent (with the query), media type and body. The path, not the route's
/// pattern: the scope already holds the pattern, and a key reused on `/orders/2` after `/orders/1` is another
/// request (422), never a replay of the first. A JSON body that names a member twice is no one request.
fn request_fingerprint(parts: &Parts, body: &[u8]) -> Result<ballast_core::Fingerprint, AmbiguousJson> {
    let target = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path(), |pq| pq.as_str());
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    fingerprint(parts.method.as_str(), target, content_type, body)
}

/// The request's deadline: the [`CallContext`]'s when an outer layer set one, else the smallest deadline header
/// (capped), else the default timeout, from now.
fn deadline(parts: &Parts, settings: &Settings) -> Result<Deadline, Problem> {
    if let Some(context) = parts.extensions.get::<CallContext>() {
        return Ok(context.effective_deadline());
    }
    // Deadline headers only, their values read lossily: a non-ASCII value is malformed, not absent.
    let deadline_headers: Vec<(&str, String)> = parts
        .headers
        .iter()
        .filter(|(name, _)| DeadlineHeader::from_name(name.as_str()).is_some())
        .map(|(name, value)| {
            (
                name.as_str(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let timeout = inbound_timeout(
        deadline_headers.iter().map(|(n, v)| (*n, v.as_str())),
        settings.default_timeout,
        settings.max_timeout,
    )
    .map_err(Problem::BadDeadline)?
    .timeout;
    Ok(Deadline::after(clock::now(), timeout))
}

/// The whole body, or 413 when it is (or announces itself) over `limit`.
async fn buffer<B>(body: B, limit: usize) -> Result<Bytes, Problem>
where
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    if body.size_hint().lower() > limit as u64 {
        return Err(Problem::BodyTooLarge { limit });
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(Problem::BodyTooLarge { limit }),
        Err(_) => Err(Problem::BodyUnreadable),
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(IDEMPOTENCY_KEY, HeaderValue::from_bytes(value).unwrap());
        }
        map
    }

    #[test]
    fn keys_are_read_checked_and_never_guessed() {
        assert!(matches!(read_key(&HeaderMap::new()), Ok(None)));
        let key = read_key(&headers(&[b"order-1"])).unwrap().unwrap();
        assert_eq!(key.as_str(), "order-1");
        assert!(matches!(read_key(&headers(&[b""])), Err(Problem::KeyInvalid(_))));
        assert!(matches!(
            read_key(&headers(&["ключ".as_bytes()])),
            Err(Problem::KeyInvalid(_))
        ));
        assert!(matches!(
            read_key(&headers(&[b"a", b"b"])),
            Err(Problem::KeyRepeated)
        ));
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused_announced_or_not() {
        assert_eq!(buffer(Body::from("12345"), 5).await.unwrap(), "12345");
        assert!(matches!(
            buffer(Body::from("123456"), 5).await,
            Err(Problem::BodyTooLarge { limit: 5 })
        ));
        let chunks = futures::stream::iter(["123", "456"].map(Ok::<_, std::io::Error>));
        assert!(matches!(
            buffer(Body::from_stream(chunks), 5).await,
            Err(Problem::BodyTooLarge { limit: 5 })
        ));
    }
}
