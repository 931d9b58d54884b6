//! `/mcp`: the gateway as an MCP server (Streamable HTTP; docs/mcp.md, DESIGN.md "MCP").
//!
//! rmcp serves the protocol — both versions in use: 2026-07-28 (stateless, the version in each request's
//! `_meta`) and 2025-11-25 (`initialize` first; no session is kept, so any instance answers any request). This
//! module is thin: `tools/list` lists the `[[tools]]` and every upstream MCP server's tools; `tools/call` becomes
//! the tool's own route (`tools::route`: prepare, the idempotency layer, the tool's client) called in process
//! with the call's run, step, key and deadline as headers, and the route's answer becomes the MCP result
//! (`answer.rs`). So a call over MCP is the same operation, under the same key and policy, as over HTTP.
//!
//! What a call carries comes from its `_meta` (`ballast/run_id`, `ballast/step_id`, `ballast/idempotency_key`,
//! `ballast/timeout_ms`, `ballast/priority`, `traceparent`) over the transport's headers (`ballast-run-id`...).
//! A side-effecting call with a run and no step is keyed by its arguments: the same call in the same run is the
//! same operation.
//!
//! Disconnects: closing the stream drops the call's future. A read-only call is cancelled with it, upstream
//! included; a side-effecting call was claimed by the idempotency layer, which runs it in a task of its own: it
//! runs on to its answer and is stored under its key for the retry.

mod answer;
mod cancel;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};
use ballast::tool::ToolClient;
use http::{HeaderName, HeaderValue};
use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use crate::Gateway;
use crate::tools::ToolRoute;
use ballast::headers::{
    BALLAST_PRIORITY, BALLAST_RUN_ID, BALLAST_STEP_ID, BALLAST_TIMEOUT_MS, IDEMPOTENCY_KEY, TRACEPARENT,
};
use cancel::Cancels;

/// `_meta` keys a call may carry, and the header each stands for.
const META_HEADERS: [(&str, HeaderName); 6] = [
    ("ballast/run_id", BALLAST_RUN_ID),
    ("ballast/step_id", BALLAST_STEP_ID),
    (ballast::mcp::META_IDEMPOTENCY_KEY, IDEMPOTENCY_KEY),
    ("ballast/timeout_ms", BALLAST_TIMEOUT_MS),
    ("ballast/priority", BALLAST_PRIORITY),
    ("traceparent", TRACEPARENT),
];

/// The MCP route's state, shared by every request's handler.
struct Shared {
    gateway: Gateway,
    /// The `[[tools]]`' routes, by name, built once.
    routes: HashMap<String, (ToolClient, ToolRoute)>,
    /// Upstream MCP tools' routes, by served name, built the first time each is called.
    upstream: tokio::sync::Mutex<HashMap<String, (ToolClient, ToolRoute)>>,
    /// Read-only calls in flight that a 2025-11-25 client's `notifications/cancelled` can find.
    cancels: Arc<Cancels>,
}

/// The `/mcp` service: rmcp's Streamable HTTP server over [`Handler`], stateless (any instance answers any
/// request), answering JSON unless a call sends notifications first. It stops when `closing` is cancelled.
pub(crate) fn service(gateway: &Gateway) -> Result<ToolRoute, crate::StartError> {
    let mut routes = HashMap::new();
    for tool in &gateway.inner.config.tools {
        if let Some(client) = gateway.inner.tools.get(&tool.name) {
            let route = ToolRoute::new(crate::tools::route(gateway, client)?);
            routes.insert(tool.name.clone(), (client.clone(), route));
        }
    }
    let shared = Arc::new(Shared {
        gateway: gateway.clone(),
        routes,
        upstream: tokio::sync::Mutex::new(HashMap::new()),
        cancels: Arc::default(),
    });
    let server = &gateway.inner.config.server;
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        // The gateway's own auth and listener decide who may call; the DNS-rebinding guard is for servers on a
        // developer's machine without either.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(usize::try_from(server.body_limit).unwrap_or(usize::MAX))
        .with_cancellation_token(gateway.inner.closing.child_token());
    let limit = config.max_request_body_bytes;
    let handlers = Arc::clone(&shared);
    let rmcp = StreamableHttpService::new(
        move || Ok(Handler(Arc::clone(&handlers))),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Ok(ToolRoute::new(tower::service_fn(move |request: Request| {
        let (rmcp, shared) = (rmcp.clone(), Arc::clone(&shared));
        async move { Ok::<_, Infallible>(serve(rmcp, &shared, request, limit).await) }
    })))
}

/// One request to `/mcp`: a `notifications/cancelled` is the gateway's (rmcp's stateless server ignores
/// notifications: no session ties one to the call it names); everything else is rmcp's.
async fn serve(
    rmcp: StreamableHttpService<Handler, NeverSessionManager>,
    shared: &Shared,
    request: Request,
    limit: usize,
) -> Response {
    let request = if request.method() == http::Method::POST {
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
            return (
                http::StatusCode::PAYLOAD_TOO_LARGE,
                "the MCP message is over the body limit",
            )
                .into_response();
        };
        if shared.cancels.notified(&parts, &bytes) {
            return http::StatusCode::ACCEPTED.into_response();
        }
        Request::from_parts(parts, Body::from(bytes))
    } else {
        request
    };
    match rmcp.oneshot(request).await {
        Ok(response) => response.map(Body::new),
        Err(never) => match never {},
    }
}

/// One request's handler (rmcp makes one per request).
#[derive(Clone)]
pub(crate) struct Handler(Arc<Shared>);

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ballast", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools behind Ballast: every call has one deadline, is retried only when safe, and a call with \
                 side effects runs once per operation. Send `ballast-run-id` (a header per client, or \
                 `_meta.ballast/run_id`) so that a call re-issued after a lost answer gets the first one's result.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let config = &self.0.gateway.inner.config;
        let mut tools: Vec<Tool> = config.tools.iter().map(answer::own_tool).collect();
        let listings = futures::future::join_all(self.0.gateway.inner.mcp.iter().map(|s| s.tools())).await;
        for (server, listing) in self.0.gateway.inner.mcp.iter().zip(listings) {
            let Ok(listed) = listing else {
                // Its tools are missing from the list until it answers; `/status` and the log say why.
                continue;
            };
            for tool in listed {
                if config.tools.iter().any(|t| t.name == tool.name) {
                    tracing::warn!(server = %server.name(), tool = %tool.name, "an upstream MCP tool has the name of a [[tools]] entry: not served");
                    continue;
                }
                match serde_json::from_value::<Tool>(tool.definition) {
                    Ok(definition) => tools.push(definition),
                    Err(error) => {
                        tracing::warn!(server = %server.name(), tool = %tool.name, %error, "an upstream MCP tool's definition is not MCP's: not served");
                    }
                }
            }
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let Some((client, route)) = self.route(&name).await else {
            return Err(self.unknown_tool(&name).await);
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let mut http = match self.request(&client, &arguments, &context) {
            Ok(http) => http,
            Err(refused) => return Ok(CallToolResponse::Complete(refused)),
        };
        if let Some(progress) = progress(&context) {
            http.extensions_mut().insert(progress);
        }
        let cancel = CancellationToken::new();
        let _cancellable = (!client.config().side_effects)
            .then(|| self.0.cancels.register(&http, &context.id, &cancel))
            .flatten();
        let answered = tokio::select! {
            answered = route.oneshot(http) => answered,
            // A 2025-11-25 client's `notifications/cancelled` for this read-only call.
            () = cancel.cancelled() => return Err(ErrorData::internal_error("cancelled by the client", None)),
            // The client closed the stream: a read-only call ends here, its upstream call dropped with it; a
            // side-effecting one runs on in the idempotency layer's task, stored for the retry.
            () = context.ct.cancelled() => return Err(ErrorData::internal_error("cancelled: the client closed the request", None)),
        };
        let response = answered.unwrap_or_else(|never: Infallible| match never {});
        answer::result(&client, response)
            .await
            .map(CallToolResponse::Complete)
    }
}

impl Handler {
    /// The route of the tool served as `name`: a `[[tools]]` entry's, else an upstream MCP server's (listed
    /// again when no listing names it: a client may call a tool it listed before the gateway restarted).
    async fn route(&self, name: &str) -> Option<(ToolClient, ToolRoute)> {
        if let Some(route) = self.0.routes.get(name) {
            return Some(route.clone());
        }
        let mut upstream = self.0.upstream.lock().await;
        if let Some(route) = upstream.get(name) {
            return Some(route.clone());
        }
        let client = self.upstream_client(name).await?;
        let route = ToolRoute::new(crate::tools::route(&self.0.gateway, &client).ok()?);
        upstream.insert(name.to_owned(), (client.clone(), route.clone()));
        Some((client, route))
    }

    async fn upstream_client(&self, name: &str) -> Option<ToolClient> {
        let servers = &self.0.gateway.inner.mcp;
        for server in servers.iter() {
            if let Some(client) = server.tool(name).await {
                return Some(client);
            }
        }
        for server in servers.iter() {
            if server
                .tools()
                .await
                .is_ok_and(|tools| tools.iter().any(|t| t.name == name))
                && let Some(client) = server.tool(name).await
            {
                return Some(client);
            }
        }
        None
    }

    /// A JSON-RPC error naming the tools there are, and the upstream MCP servers that could not be listed (the tool
    /// may be one of theirs).
    async fn unknown_tool(&self, name: &str) -> ErrorData {
        let inner = &self.0.gateway.inner;
        let mut names: Vec<String> = inner.config.tools.iter().map(|t| t.name.clone()).collect();
        let mut unlisted = Vec::new();
        for server in inner.mcp.iter() {
            match server.tools().await {
                Ok(tools) => names.extend(tools.into_iter().map(|t| t.name)),
                Err(error) => unlisted.push(format!("{} ({error})", server.name())),
            }
        }
        names.sort();
        let mut message = format!("unknown tool {name:?}: this gateway serves {}", names.join(", "));
        if !unlisted.is_empty() {
            message.push_str(&format!(
                "; these MCP servers could not be listed, and the tool may be theirs: {}",
                unlisted.join("; ")
            ));
        }
        ErrorData::invalid_params(message, Some(json!({"code": "unknown_tool", "tools": names})))
    }

    /// The HTTP request of the call to the tool's route: the transport's headers and principal, the call's
    /// `_meta` over them, and — for a side-effecting call with a run but no step or key — a step named by the
    /// arguments' fingerprint. A side-effecting call with nothing to key it on is refused here, with advice.
    fn request(
        &self,
        client: &ToolClient,
        arguments: &Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<Request, CallToolResult> {
        let body = serde_json::to_vec(arguments).unwrap_or_default();
        let mut request = Request::new(Body::from(body.clone()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = format!("/v1/tools/{}", client.name()).parse().unwrap_or_default();
        if let Some(parts) = context.extensions.get::<http::request::Parts>() {
            for (name, value) in &parts.headers {
                if !matches!(
                    name.as_str(),
                    "content-length" | "content-type" | "accept" | "transfer-encoding"
                ) {
                    request.headers_mut().append(name.clone(), value.clone());
                }
            }
            if let Some(principal) = parts.extensions.get::<ballast::idempotency::Principal>() {
                request.extensions_mut().insert(principal.clone());
            }
        }
        let headers = request.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (key, header) in &META_HEADERS {
            let value = match context.meta.get(*key) {
                Some(Value::String(text)) => HeaderValue::from_str(text).ok(),
                Some(Value::Number(number)) => HeaderValue::from_str(&number.to_string()).ok(),
                _ => None,
            };
            if let Some(value) = value {
                headers.insert(header.clone(), value);
            }
        }
        if client.config().side_effects
            && !headers.contains_key(&IDEMPOTENCY_KEY)
            && !headers.contains_key(&BALLAST_STEP_ID)
        {
            if !headers.contains_key(&BALLAST_RUN_ID) {
                return Err(answer::key_missing(client.name()));
            }
            // The same call with the same arguments in the same run is one operation.
            let route = format!("/mcp/{}", client.name());
            if let Ok(print) = ballast_core::fingerprint("POST", &route, Some("application/json"), &body)
                && let Ok(step) = HeaderValue::from_str(&format!("mcp-args-{}", &print.to_hex()[..32]))
            {
                headers.insert(BALLAST_STEP_ID, step);
            }
        }
        Ok(request)
    }
}

/// Where an upstream MCP tool's progress goes when the caller asked for it (a `progressToken` in its `_meta`): to
/// the caller, on the request's own stream, in order (one task forwards them; it ends with the call).
fn progress(context: &RequestContext<RoleServer>) -> Option<ballast::mcp::Progress> {
    let token = context.meta.get_progress_token()?;
    let (sender, mut received) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let peer = context.peer.clone();
    tokio::spawn(async move {
        while let Some(params) = received.recv().await {
            let Some(progress) = params.get("progress").and_then(Value::as_f64) else {
                continue;
            };
            let mut notification = ProgressNotificationParam::new(token.clone(), progress);
            if let Some(total) = params.get("total").and_then(Value::as_f64) {
                notification = notification.with_total(total);
            }
            if let Some(message) = params.get("message").and_then(Value::as_str) {
                notification = notification.with_message(message);
            }
            // A caller that left gets none; the call runs on regardless.
            let _ = peer.notify_progress(notification).await;
        }
    });
    Some(ballast::mcp::Progress::new(move |params| {
        let _ = sender.send(params);
    }))
}

/// Reads an answer's body, whole (the route's answers are whole bytes).
pub(crate) async fn body_bytes(response: Response) -> (http::response::Parts, bytes::Bytes) {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    (parts, bytes)
}

/// What the MCP tools of a `JsonObject` look like when a definition has none.
pub(crate) fn object_schema() -> Arc<JsonObject> {
    let mut schema = JsonObject::new();
    schema.insert("type".to_owned(), Value::from("object"));
    Arc::new(schema)
}
