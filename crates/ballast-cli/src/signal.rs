//! The signals that stop a command: SIGINT (Ctrl-C) and SIGTERM, watched from the moment [`Signals::watch`]
//! returns — so a command that starts processes watches before it starts them, and an interrupt always reaches
//! the code that stops them.

use anyhow::Context as _;

/// SIGINT and SIGTERM, watched.
pub(crate) struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    /// Starts watching (inside a tokio runtime).
    pub(crate) fn watch() -> anyhow::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                interrupt: signal(SignalKind::interrupt()).context("cannot watch for SIGINT")?,
                terminate: signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// Completes on the next SIGINT or SIGTERM, naming it.
    pub(crate) async fn received(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "SIGINT",
                _ = self.terminate.recv() => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            "Ctrl-C"
        }
    }
}

/// Completes on SIGTERM or Ctrl-C. When they cannot be watched it never completes (the process is then stopped
/// by a kill), which is said on stderr.
pub(crate) async fn shutdown() {
    match Signals::watch() {
        Ok(mut signals) => {
            signals.received().await;
        }
        Err(err) => {
            eprintln!("warning: {err:#}; stop this process with a kill");
            std::future::pending::<()>().await;
        }
    }
}
