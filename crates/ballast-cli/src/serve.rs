//! `ballast serve`: load the config, check it (`--check` stops there), bind, print what is served, serve until
//! SIGTERM or Ctrl-C, then stop gracefully.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context as _;
use ballast_config::{Config, Plan, ProcessEnv};

/// Runs `ballast serve`.
pub(crate) fn run(config_path: &Path, listen: Option<SocketAddr>, check: bool) -> anyhow::Result<()> {
    let mut config = Config::load(config_path)
        .with_context(|| format!("{} is not a valid Ballast configuration", config_path.display()))?;
    if let Some(listen) = listen {
        config.server.listen = listen;
    }
    let plan = Plan::new(&config, 3);
    for warning in &plan.warnings {
        eprintln!("warning: {}: {}", warning.path, warning.message);
    }
    let missing = config.missing_secrets(&ProcessEnv);
    if !missing.is_empty() {
        for secret in &missing {
            eprintln!("error: {secret}");
        }
        anyhow::bail!(
            "{} secret(s) the config names are missing from the environment",
            missing.len()
        );
    }
    if check {
        println!(
            "{}: valid; {} tool(s), {} model route(s), store {}; {} warning(s)",
            config_path.display(),
            config.tools.len(),
            config.models.len(),
            store_name(&config),
            plan.warnings.len()
        );
        return Ok(());
    }
    init_logs();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let listen = config.server.listen;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        println!("ballast serve listening on http://{addr}");
        let admin = match config.server.admin_listen {
            Some(admin) => {
                let listener = tokio::net::TcpListener::bind(admin)
                    .await
                    .with_context(|| format!("cannot listen on {admin} (server.admin_listen)"))?;
                println!(
                    "admin endpoints (/metrics, /status) on http://{}",
                    listener.local_addr()?
                );
                Some(listener)
            }
            None => None,
        };
        let names = |names: Vec<&str>| -> String {
            let mut names = names;
            names.sort_unstable();
            if names.is_empty() {
                "(none)".to_owned()
            } else {
                names.join(", ")
            }
        };
        println!(
            "models: {}",
            names(config.models.iter().map(|m| m.name.as_str()).collect())
        );
        println!(
            "tools: {}",
            names(config.tools.iter().map(|t| t.name.as_str()).collect())
        );
        println!("store: {}", store_name(&config));
        ballast_gateway::run_on(listener, admin, config, crate::signal::shutdown()).await?;
        eprintln!("ballast serve stopped");
        Ok(())
    })
}

/// The store's URL as printed (a URL from the environment is not shown).
fn store_name(config: &Config) -> String {
    match &config.store.location {
        ballast_config::StoreLocation::Url { url, .. } => url.clone(),
        ballast_config::StoreLocation::Env { env } => format!("from ${env}"),
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`, with rmcp's own lines at `error`: it logs every MCP
/// request's start and end at `info` and every JSON-RPC error answered at `warn`, which the gateway's request
/// log already says once).
fn init_logs() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=error"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
