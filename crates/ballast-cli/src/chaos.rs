//! `ballast chaos`: load the fault profile, bind, print what is served, serve until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context as _;
use ballast_chaos::Profile;

/// What the chaos upstream serves, printed at start.
const ENDPOINTS: &str = "endpoints:
  POST /v1/chat/completions   the mock model (JSON or SSE with \"stream\": true)
  GET  /v1/models
  POST /tools/{name}          lookup_order (read-only), create_refund, process_payment (side effects)
  POST /mcp                   the same tools over MCP (Streamable HTTP, stateless; 2025-11-25 and 2026-07-28)
  GET  /ledger                side-effect executions per op, duplicates
  GET  /stats                 requests per endpoint and outcome, in flight
  POST /admin/profile         swap the profile (TOML, or JSON {\"preset\": NAME, \"seed\": N}) and reset
  POST /echo                  what arrived (headers and body), for checking what a gateway forwards
  GET  /healthz";

/// Serves the chaos upstream on `listen` until Ctrl-C or SIGTERM.
pub(crate) fn run(
    listen: SocketAddr,
    file: Option<&Path>,
    preset: Option<&str>,
    seed: Option<u64>,
) -> anyhow::Result<()> {
    let profile = load(file, preset, seed)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        println!("ballast chaos listening on http://{addr}");
        println!("{ENDPOINTS}");
        println!("profile: {}", profile.summary());
        ballast_chaos::serve(listener, profile, crate::signal::shutdown()).await?;
        eprintln!("ballast chaos stopped");
        Ok(())
    })
}

/// The profile from `file`, or the preset (`none` by default), with `seed` overriding its seed.
fn load(file: Option<&Path>, preset: Option<&str>, seed: Option<u64>) -> anyhow::Result<Profile> {
    let mut profile = match file {
        Some(path) => {
            Profile::load(path).with_context(|| format!("{} is not a valid fault profile", path.display()))?
        }
        None => Profile::preset(preset.unwrap_or("none"), seed.unwrap_or(0))?,
    };
    if let Some(seed) = seed {
        profile.seed = seed;
    }
    Ok(profile)
}
