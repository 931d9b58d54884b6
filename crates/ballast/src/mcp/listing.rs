//! A server's `tools/list`: every page, within [`LIST_TIMEOUT`] and the breaker's say, each tool as served
//! (its name prefixed, its description overridden, its configuration decided by the config and the trusted
//! annotations).

use serde_json::{Value, json};

use super::{LIST_TIMEOUT, ListedTool, Listing, McpServerClient, transport, wire};
use http::Response;

use crate::{Body, Error, clock};

impl McpServerClient {
    /// `tools/list`, every page, within [`LIST_TIMEOUT`] and the breaker's say.
    pub(super) async fn list(&self) -> Result<Vec<ListedTool>, Error> {
        let inner = &self.inner;
        if let Some(open) = inner.parts.breaker.open_remaining(clock::now()) {
            return Err(Error::CircuitOpen { retry_in: Some(open) });
        }
        let listed = tokio::time::timeout(LIST_TIMEOUT, self.list_pages()).await;
        let listed = listed.unwrap_or(Err(Error::Timeout {
            after: LIST_TIMEOUT,
            by_deadline: false,
        }));
        Ok(listed?
            .into_iter()
            .filter_map(|definition| self.served(definition))
            .collect())
    }

    async fn list_pages(&self) -> Result<Vec<Value>, Error> {
        let session = &self.inner.session;
        let agreed = match session.agreed(&self.inner.transport).await? {
            Ok(agreed) => agreed,
            Err(answer) => return Err(refused(session, &answer)),
        };
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        // A server that pages for ever is cut off: 100 pages is more tools than any model can be given.
        for _ in 0..100 {
            let id = wire::next_id();
            let mut params = json!({"_meta": wire::request_meta(&agreed.version, serde_json::Map::new())});
            if let Some(cursor) = cursor.take() {
                params["cursor"] = cursor;
            }
            let request = session.post(
                wire::request(id, "tools/list", params),
                Some(&agreed),
                "tools/list",
            );
            let answer = transport::send(&self.inner.transport, request).await?;
            if !answer.status().is_success() {
                return Err(refused(session, &answer));
            }
            let bytes = answer.body().as_bytes().cloned().unwrap_or_default();
            let ct = answer.headers().get(http::header::CONTENT_TYPE);
            let result = match wire::reply(ct, &bytes, id) {
                Ok(wire::Reply::Result(result)) => result,
                Ok(wire::Reply::Error(error)) => {
                    return Err(Error::transport(
                        true,
                        format!("MCP server {} refused tools/list: {error}", session.name),
                    ));
                }
                Err(wire::Garbled(why)) => {
                    return Err(Error::transport(
                        true,
                        format!(
                            "MCP server {} answered tools/list with garbage: {why}",
                            session.name
                        ),
                    ));
                }
            };
            if let Some(page) = result.get("tools").and_then(Value::as_array) {
                tools.extend(page.iter().cloned());
            }
            match result.get("nextCursor") {
                Some(next) if !next.is_null() => cursor = Some(next.clone()),
                _ => return Ok(tools),
            }
        }
        Ok(tools)
    }

    /// A listed tool as served, or `None` (hidden, nameless, a name no served name may be).
    fn served(&self, mut definition: Value) -> Option<ListedTool> {
        let server = &self.inner.server;
        let upstream_name = definition.get("name")?.as_str()?.to_owned();
        let overrides = server.override_of(&upstream_name);
        if overrides.is_some_and(|o| o.hidden) {
            return None;
        }
        let read_only = (definition.pointer("/annotations/readOnlyHint")).and_then(Value::as_bool);
        let config = server.tool_config(&upstream_name, read_only);
        let object = definition.as_object_mut()?;
        object.insert("name".to_owned(), Value::from(config.name.as_str()));
        if let Some(description) = &config.description {
            object.insert("description".to_owned(), Value::from(description.as_str()));
        }
        if !object.get("inputSchema").is_some_and(Value::is_object) {
            object.insert("inputSchema".to_owned(), json!({"type": "object"}));
        }
        Some(ListedTool {
            name: config.name.clone(),
            upstream_name,
            definition,
            config,
        })
    }
}

/// The last good listing, or why there is none.
pub(super) fn stale_or(listing: &Listing, why: String) -> Result<Vec<ListedTool>, Error> {
    if listing.read_at.is_some() {
        Ok(listing.tools.clone())
    } else {
        Err(Error::transport(true, why))
    }
}

/// An HTTP answer that is no MCP answer, as an error.
fn refused(session: &transport::Session, answer: &Response<Body>) -> Error {
    Error::transport(
        true,
        format!("MCP server {} answered HTTP {}", session.name, answer.status()),
    )
}
