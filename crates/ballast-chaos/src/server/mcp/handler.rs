//! The MCP server rmcp serves: the tools' list, and a call's result from what reached the tool.

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerCapabilities, ServerConfig,
    Tool as McpTool,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::json;

use super::catalog;
use super::door::PendingCall;
use crate::Fault;
use crate::server::answer::Answer;
use crate::server::state::App;
use crate::server::stats::Outcome;
use crate::server::tools::Tool;

/// The chaos tools over MCP (one per request: rmcp's service factory makes it).
#[derive(Clone, Debug)]
pub(super) struct ChaosTools {
    app: App,
}

impl ChaosTools {
    pub(super) fn new(app: App) -> ChaosTools {
        ChaosTools { app }
    }

    fn lying_annotations(&self) -> bool {
        self.app.epoch().profile.mcp.lying_annotations
    }
}

impl ServerHandler for ChaosTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ballast-chaos", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Mock shop tools of the Ballast chaos upstream: lookup_order reads, create_refund and \
                 process_payment act on every call.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(catalog::tools(
            self.lying_annotations(),
        )))
    }

    fn get_tool(&self, name: &str) -> Option<McpTool> {
        Tool::named(name).map(|tool| catalog::describe(tool, self.lying_annotations()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = Tool::named(&request.name) else {
            let message = format!(
                "no tool named {:?}; the tools are lookup_order, create_refund, process_payment",
                request.name
            );
            return Err(McpError::invalid_params(message, None));
        };
        let reached = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.extensions.get::<PendingCall>())
            .and_then(PendingCall::take)
            .ok_or_else(|| McpError::internal_error("the call did not pass the chaos front door", None))?;
        let progress = context.meta.get_progress_token();
        if let Some(token) = &progress {
            notify(&context.peer, token, 0.0, "started").await;
        }
        let result = match reached.fault() {
            Fault::IsError => {
                reached.skip(Outcome::IsError);
                injected_tool_error(tool)
            }
            _ => result_of(reached.answer()),
        };
        if let Some(token) = &progress {
            notify(&context.peer, token, 1.0, "done").await;
        }
        Ok(result.into())
    }
}

/// Sends `notifications/progress` (of a total of 1); a client that went away is not an error here.
async fn notify(peer: &Peer<RoleServer>, token: &ProgressToken, progress: f64, message: &str) {
    let param = ProgressNotificationParam::new(token.clone(), progress)
        .with_total(1.0)
        .with_message(message);
    let _gone = peer.notify_progress(param).await;
}

/// The tool's answer as MCP's result: a success with the JSON as structured content and as text, or, for the
/// tool's own errors (400, 409, 422), the same with `isError: true`.
pub(super) fn result_of(answer: Answer) -> CallToolResult {
    if answer.status.is_success() {
        CallToolResult::structured(answer.body)
    } else {
        CallToolResult::structured_error(answer.body)
    }
}

/// The `is_error` fault: the tool's own error, nothing done.
fn injected_tool_error(tool: Tool) -> CallToolResult {
    CallToolResult::structured_error(json!({"error": {
        "type": "tool_error",
        "code": "injected_tool_error",
        "message": format!("{} failed and did nothing (chaos fault is_error); a retry may succeed", tool.name()),
    }}))
}
