//! The plain-text table of a [`Plan`], for people; `--json` serialises the `Plan` itself for machines.

use std::fmt::Write as _;

use super::{DeferredPlan, Plan, PlanRow, TargetKind, fmt};

const HEADERS: [&str; 9] = [
    "TARGET",
    "PER TRY",
    "TRIES",
    "BACKOFF CAP",
    "NAIVE WORST",
    "BALLAST",
    "NAIVE CALLS",
    "BALLAST CALLS",
    "RETRY LOAD",
];

// Writing to a String cannot fail; `let _ =` keeps that visible without unwraps.

/// The plan as an aligned table, then the fallback chains and the warnings.
pub fn render_table(plan: &Plan) -> String {
    let mut out = String::new();
    write_legend(&mut out, plan);
    if plan.rows.is_empty() {
        out.push_str("No model routes or tools are configured.\n");
    } else {
        write_rows(&mut out, plan);
    }
    write_fallbacks(&mut out, plan);
    if let Some(deferred) = &plan.deferred {
        write_deferred(&mut out, deferred);
    }
    if let Some(traces) = &plan.traces {
        let _ = writeln!(
            out,
            "\nTraces: OTLP {} to {} as service {:?}; {} % of the traces that start here are recorded (a caller's \
             traceparent decides for its own).",
            traces.protocol,
            traces.url,
            traces.service_name,
            traces.sampling * 100.0
        );
    }
    write_undescribed(&mut out, plan);
    write_warnings(&mut out, plan);
    out
}

/// The deadline and what each column means.
fn write_legend(out: &mut String, plan: &Plan) {
    let d = &plan.deadline;
    let (default, max) = (fmt(d.default_timeout), fmt(d.max_timeout));
    let _ = writeln!(
        out,
        "Deadline: {default} per request when the caller sends none; {} reserve, {} minimum attempt.\n\
         Callers that send a deadline (the OpenAI SDKs always do) get at most max_timeout: {max}.",
        fmt(d.reserve),
        fmt(d.min_attempt)
    );
    let _ = writeln!(
        out,
        "NAIVE WORST: every try times out and every backoff sleep is at its cap, fallbacks included. BALLAST: the same, \
         cut at the {default} default deadline (at {max} for a caller that sends its own).\nNAIVE CALLS: calls \
         reaching the upstream per request if {} layers each retry like this; BALLAST CALLS: retries at one layer \
         only.\nRETRY LOAD: the most retries the budget lets through: a share of the requests + a floor per second \
         (ratio budget: the floor is allowed whatever the traffic), or a burst + a refill per second (token bucket).\n",
        plan.layers
    );
}

/// The aligned table and the in-sequence total.
fn write_rows(out: &mut String, plan: &Plan) {
    let rows: Vec<[String; 9]> = plan.rows.iter().map(cells).collect();
    let mut widths = HEADERS.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    write_row(out, &HEADERS.map(str::to_owned), &widths);
    for row in &rows {
        write_row(out, row, &widths);
    }
    let _ = writeln!(
        out,
        "\nOne request calling each of these once, in sequence: naive worst {}; with Ballast (one deadline per run: \
         ballast-run-id or the Rust library) {}, or at most {} for a caller that sends its own deadline.",
        fmt(plan.sequence_naive_worst_case),
        fmt(plan.sequence_ballast_bound),
        fmt(plan.sequence_ballast_bound_caller_deadline)
    );
}

/// One row's cells, in the order of [`HEADERS`].
fn cells(r: &PlanRow) -> [String; 9] {
    let kind = match r.kind {
        TargetKind::Model => "model",
        TargetKind::Tool => "tool",
        TargetKind::McpServer => "mcp",
    };
    [
        format!("{kind} {}", r.name),
        fmt(r.per_try_timeout),
        r.attempts.to_string(),
        fmt(r.backoff_cap),
        fmt(r.naive_worst_case),
        fmt(r.ballast_bound),
        format_calls(r.naive_amplification),
        r.ballast_amplification.to_string(),
        r.retry_budget.to_string(),
    ]
}

fn write_fallbacks(out: &mut String, plan: &Plan) {
    let chains: Vec<_> = plan.rows.iter().filter(|r| !r.fallbacks.is_empty()).collect();
    if chains.is_empty() {
        return;
    }
    out.push_str("\nFallbacks (in order, all inside the same deadline):\n");
    for r in chains {
        let _ = writeln!(out, "  {}: {}", r.name, r.fallbacks.join(" -> "));
    }
}

/// The gateway's deferral, then one line per side-effecting tool. Never the callback's secret.
fn write_deferred(out: &mut String, deferred: &DeferredPlan) {
    let callback = match &deferred.callback_url {
        Some(url) => format!("each one's end is posted, signed, to {url}"),
        None => "no callback".to_owned(),
    };
    let _ = writeln!(
        out,
        "\nDeferred operations (answered 202, then worked in the background at the lowest admission class): {} at \
         a time on each instance, over every tool, attempts apart by a jittered backoff from {} to {}; {callback}.",
        deferred.concurrency,
        fmt(deferred.base),
        fmt(deferred.cap)
    );
    for tool in &deferred.tools {
        let when = if tool.accepted {
            "whenever it cannot run now (callers accept it)"
        } else {
            "when it cannot run now and the caller sends Prefer: respond-async"
        };
        let _ = writeln!(
            out,
            "  {}: deferred {when}, up to {} attempts within {}, {} at a time",
            tool.name,
            tool.max_attempts,
            fmt(tool.ttl),
            tool.concurrency
        );
    }
}

/// The tools an MCP client is shown without a description or a schema.
fn write_undescribed(out: &mut String, plan: &Plan) {
    if plan.undescribed.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nServed at /mcp without a description or an input_schema (a model picks tools by them): {}.",
        plan.undescribed.join(", ")
    );
}

fn write_warnings(out: &mut String, plan: &Plan) {
    if plan.warnings.is_empty() {
        out.push_str("\nNo warnings.\n");
        return;
    }
    let _ = writeln!(out, "\nWarnings ({}):", plan.warnings.len());
    for w in &plan.warnings {
        let _ = writeln!(out, "  {}: {}", w.path, w.message);
    }
}

fn write_row(out: &mut String, cells: &[String; 9], widths: &[usize; 9]) {
    let mut line = String::new();
    for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
        if i == 0 {
            let _ = write!(line, "{cell:<width$}");
        } else {
            let _ = write!(line, "  {cell:>width$}");
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

fn format_calls(calls: f64) -> String {
    if calls < 1e6 {
        format!("{calls:.0}")
    } else {
        format!("{calls:.2e}")
    }
}
