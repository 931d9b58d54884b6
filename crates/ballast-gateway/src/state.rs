//! The gateway's state: the config, a client per tool, the store, the runs, the principals — built once at start,
//! shared by every request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ballast::idempotency::store::{self as stores, CheckedStore, IdempotencyStore, StoreOptions};
use ballast::model::{ModelClients, StoreStateRecords};
use ballast::transport::Transport;
use ballast::{Clients, Runs, tool::ToolClients};
use ballast_config::{Config, Env, StoreLocation};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::StartError;
use crate::auth::Principals;

/// A gateway's state: cheap to clone (clones share everything).
#[derive(Clone, Debug)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) tools: ToolClients,
    /// A client per model route (its deployments' API keys read at start), sharing the tools' runs.
    pub(crate) models: ModelClients,
    /// A client per upstream MCP server (`/mcp` serves their tools beside `tools`'), sharing the runs.
    pub(crate) mcp: ballast::mcp::McpServers,
    pub(crate) store: Arc<dyn IdempotencyStore>,
    /// The same store, with the result of its last probe: claims are refused while it failed (`/status`,
    /// `/readyz` say so).
    pub(crate) checked_store: Arc<CheckedStore>,
    pub(crate) store_url: String,
    pub(crate) runs: Arc<Runs>,
    /// The final failures answered lately: what a status-only client's retry is answered with.
    pub(crate) repeats: crate::repeats::Repeats,
    pub(crate) principals: Principals,
    pub(crate) metrics: Option<PrometheusHandle>,
    /// The last 15 minutes of the recorder's counters, per interval (`/status`'s `history`; the dashboard's charts).
    pub(crate) history: crate::history::History,
    pub(crate) draining: AtomicBool,
    /// Cancelled when the grace period of a shutdown ends: the streams still open end with their error event.
    pub(crate) closing: CancellationToken,
    /// What `listen`'s connections did (open, the cap, evicted, refused, timed out), and the admin listener's.
    pub(crate) connections: Arc<crate::connections::ConnectionStats>,
    pub(crate) admin_connections: Arc<crate::connections::ConnectionStats>,
    /// The queue of deferred tool calls (`deferred/`): none when no tool has side effects.
    pub(crate) deferred: Option<crate::deferred::Queue>,
    /// Traces over OTLP (`[telemetry]`): none when off.
    pub(crate) telemetry: Option<crate::telemetry::Telemetry>,
}

impl Gateway {
    /// The gateway of `config`: its principals' keys, the tools' upstream secrets and the model deployments' API
    /// keys read from `env`, the store it names opened (and, for SQLite, held by this process), tool and model
    /// calls sent over HTTP: `http://` upstreams with hyper-util's pooled client, `https://` ones with reqwest.
    /// Neither follows redirects: an upstream's URL comes only from the configuration, and its 3xx is its answer.
    pub async fn open(config: Config, env: &dyn Env) -> Result<Gateway, StartError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| StartError::Http(e.to_string()))?;
        let https = ballast::transport::HttpTransport::new(client).with_body_limit(config.server.body_limit);
        // `http://` upstreams through hyper-util's client directly: reqwest's own layers cost a tool call more
        // than the rest of the gateway's stack (BENCHMARKS.md, "What the gateway costs").
        let transport = ballast::transport::HyperTransport::new(https);
        Gateway::open_with_transport(config, env, transport).await
    }

    /// [`Gateway::open`], sending tool calls through `transport` (in tests, a `ServiceTransport` over the chaos
    /// router).
    pub async fn open_with_transport<T>(
        config: Config,
        env: &dyn Env,
        transport: T,
    ) -> Result<Gateway, StartError>
    where
        T: Transport,
    {
        let principals = Principals::from_config(&config, env)?;
        let store_url = match &config.store.location {
            StoreLocation::Url { url, .. } => url.clone(),
            StoreLocation::Env { env: var } => env.var(var).ok_or_else(|| StartError::Secret {
                what: "store.url_env".to_owned(),
                var: var.clone(),
                problem: "is not set".to_owned(),
            })?,
        };
        let options = StoreOptions {
            retention: config.store.retention,
        };
        let opened = stores::open(&store_url, options)
            .await
            .map_err(|source| StartError::Store {
                url: redacted(&store_url),
                source,
            })?;
        let checked_store = Arc::new(CheckedStore::new(opened));
        let store: Arc<dyn IdempotencyStore> = Arc::clone(&checked_store) as Arc<dyn IdempotencyStore>;
        // Which deployment keeps which response, in the store: for its retention, across restarts and instances.
        let records = Arc::new(StoreStateRecords::new(Arc::clone(&store)));
        // On a store many instances share (Redis, PostgreSQL), runs and account limits live there too.
        let mut runs = Runs::of(&config.run);
        if let Some(shared) = store.shared_state() {
            runs = runs.with_sharing(Arc::new(ballast::sharing::Sharing::new(shared)));
        }
        let Clients {
            tools,
            models,
            mcp,
            runs,
            ..
        } = Clients::from_config(&config)
            .env(env)
            .state_records(records)
            .runs(Arc::new(runs))
            .build(transport)?;
        let repeats = crate::repeats::Repeats::new(config.server.repeat_window);
        let callback = crate::deferred::Callback::from_config(&config, env)?;
        let deferred = crate::deferred::build(&config, &tools, Arc::clone(&store), callback);
        let telemetry = (config.telemetry.as_ref())
            .map(|telemetry| crate::telemetry::Telemetry::start(telemetry, &config))
            .transpose()
            .map_err(StartError::Telemetry)?;
        Ok(Gateway {
            inner: Arc::new(Inner {
                store_url: redacted(&store_url),
                config,
                tools,
                models,
                mcp,
                store,
                checked_store,
                runs,
                repeats,
                principals,
                metrics: None,
                history: Default::default(),
                draining: AtomicBool::new(false),
                closing: CancellationToken::new(),
                connections: Arc::default(),
                admin_connections: Arc::default(),
                deferred,
                telemetry,
            }),
        })
    }

    /// The same gateway rendering `handle` at `/metrics` (the recorder it belongs to must be installed).
    pub fn with_metrics(self, handle: PrometheusHandle) -> Gateway {
        let inner = Arc::try_unwrap(self.inner).unwrap_or_else(|_| {
            panic!("Gateway::with_metrics is called once, right after the gateway is opened")
        });
        Gateway {
            inner: Arc::new(Inner {
                metrics: Some(handle),
                ..inner
            }),
        }
    }

    /// The configuration it serves.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Ends the streams still open: each ends with its error event (the last step of a graceful shutdown, when
    /// its grace is over).
    pub fn close_streams(&self) {
        self.inner.closing.cancel();
    }

    /// Starts draining: `/readyz` fails from now on, and deferred work is no longer taken (the first step of a
    /// graceful shutdown; attempts already running end and write their end).
    pub fn start_draining(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
        if let Some(queue) = &self.inner.deferred {
            queue.stop();
        }
    }

    /// Exports the spans of every request that has ended and stops the exporter (the last step of a graceful
    /// shutdown; nothing without `[telemetry]`).
    pub async fn flush_traces(&self) {
        if let Some(telemetry) = &self.inner.telemetry {
            telemetry.shutdown().await;
        }
    }

    /// Whether it is draining.
    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::SeqCst)
    }
}

/// A URL without its password, for messages and `/status`.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_never_leave_a_store_url() {
        assert_eq!(
            super::redacted("postgres://app:s3cret@db:5432/x"),
            "postgres://app:***@db:5432/x"
        );
        assert_eq!(super::redacted("sqlite://ballast.db"), "sqlite://ballast.db");
    }
}
