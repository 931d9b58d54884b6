//! One row per model route and tool: what it tries, in order, and its naive worst case.

use std::time::Duration;

use super::{Plan, PlanRow, RetryLoad, TargetKind, naive_worst_case, saturating_sum};
use crate::{BudgetConfig, Config, McpServerConfig, ModelRoute, RetryConfig, ToolConfig, ToolFallback};

impl Plan {
    /// A row with the settings every target has; the caller fills in its fallbacks and worst case.
    fn row(
        &self,
        kind: TargetKind,
        name: &str,
        path: &str,
        per_try: Duration,
        retry: &RetryConfig,
        budget: &BudgetConfig,
    ) -> PlanRow {
        PlanRow {
            kind,
            name: name.to_owned(),
            path: path.to_owned(),
            per_try_timeout: per_try,
            attempts: retry.max_attempts,
            backoff_cap: retry.backoff.cap(),
            fallbacks: Vec::new(),
            naive_worst_case: Duration::ZERO,
            ballast_bound: self.deadline.default_timeout,
            ballast_bound_caller_deadline: self.deadline.max_timeout,
            naive_amplification: f64::from(retry.max_attempts)
                .powi(self.layers.try_into().unwrap_or(i32::MAX)),
            ballast_amplification: retry.max_attempts,
            retry_budget: RetryLoad::of(budget),
        }
    }

    /// A model route's row: every deployment in order, each with the route's retries.
    pub(super) fn add_model(&mut self, path: &str, model: &ModelRoute) {
        let primary_per_try = model
            .deployments
            .first()
            .map_or(model.per_try_timeout, |d| d.per_try_timeout);
        let mut row = self.row(
            TargetKind::Model,
            &model.name,
            path,
            primary_per_try,
            &model.retry,
            &model.budget,
        );
        row.fallbacks = model
            .deployments
            .iter()
            .skip(1)
            .map(|d| format!("{} at {}", d.model, d.base_url))
            .collect();
        row.naive_worst_case = saturating_sum(
            model
                .deployments
                .iter()
                .map(|d| naive_worst_case(d.per_try_timeout, &model.retry)),
        );
        self.warn_model(path, model, primary_per_try);
        self.rows.push(row);
    }

    /// A tool's row: the tool, then its fallback chain.
    pub(super) fn add_tool(&mut self, config: &Config, path: &str, tool: &ToolConfig) {
        let mut row = self.row(
            TargetKind::Tool,
            &tool.name,
            path,
            tool.per_try_timeout,
            &tool.retry,
            &tool.budget,
        );
        let (fallbacks, fallback_worst) = fallback_chain(config, tool);
        row.fallbacks = fallbacks;
        row.naive_worst_case =
            naive_worst_case(tool.per_try_timeout, &tool.retry).saturating_add(fallback_worst);
        self.warn_tool(config, path, tool);
        if tool.description.is_none() || tool.input_schema.is_none() {
            self.undescribed.push(tool.name.clone());
        }
        self.rows.push(row);
    }

    /// An upstream MCP server's tools: one row for the server's settings (`shop/*`), and one for each tool whose
    /// override changes its per-try timeout (`shop/lookup_order`).
    pub(super) fn add_mcp_server(&mut self, config: &Config, path: &str, server: &McpServerConfig) {
        let mut tools: Vec<(String, ToolConfig, String)> =
            vec![(format!("{}/*", server.name), server.tool.clone(), path.to_owned())];
        for o in server.overrides.iter().filter(|o| o.per_try_timeout.is_some()) {
            let tool = server.tool_config(&o.name, None);
            tools.push((
                format!("{}/{}", server.name, o.name),
                tool,
                format!("{path}.tools.{}", o.name),
            ));
        }
        for (name, tool, path) in tools {
            let mut row = self.row(
                TargetKind::McpServer,
                &name,
                &path,
                tool.per_try_timeout,
                &tool.retry,
                &tool.budget,
            );
            row.naive_worst_case = naive_worst_case(tool.per_try_timeout, &tool.retry);
            self.warn_tool(config, &path, &tool);
            self.rows.push(row);
        }
    }
}

/// What `tool` falls back to, in order, and the naive worst case of the fallback tools together.
///
/// Validation guarantees the chain names existing tools without cycles; the walk stops after as many steps as
/// there are tools all the same.
fn fallback_chain(config: &Config, tool: &ToolConfig) -> (Vec<String>, Duration) {
    let (mut names, mut worst) = (Vec::new(), Duration::ZERO);
    let mut next = tool.fallback.as_ref();
    while let Some(fallback) = next {
        next = None;
        match fallback {
            ToolFallback::Response(_) => names.push("static response".to_owned()),
            ToolFallback::Tool(name) => {
                let Some(fallback_tool) = config.tools.iter().find(|t| &t.name == name) else {
                    break;
                };
                names.push(format!("tool {name}"));
                let its_worst = naive_worst_case(fallback_tool.per_try_timeout, &fallback_tool.retry);
                worst = worst.saturating_add(its_worst);
                if names.len() <= config.tools.len() {
                    next = fallback_tool.fallback.as_ref();
                }
            }
        }
    }
    (names, worst)
}
