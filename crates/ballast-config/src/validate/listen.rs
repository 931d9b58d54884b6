//! `[server]`'s addresses and shutdown: `listen`, `admin_listen`, `drain_delay`, and the rule that a gateway
//! reachable from other machines authenticates its callers.
//!
//! Why the loopback rule: with no `[[principals]]` the gateway serves one anonymous principal, which is fine on
//! a developer's machine and a hole anywhere else — every tool, refunds and payments included, callable by
//! whoever reaches the port. So an address off loopback needs a principal (DESIGN.md, "Gateway HTTP
//! interface"). `admin_listen` is exempt: it serves only `/metrics` and `/status`, which scrapers on other
//! machines must reach without a key (docs/config.md warns that it is unauthenticated).

use std::net::SocketAddr;
use std::time::Duration;

use super::check::{Checker, DurationRule, written};
use crate::error::Problem;
use crate::raw::{RawConfig, RawServer};
use crate::typed::ServerConfig;

/// Whether `addr` is on loopback (127.0.0.0/8, ::1, or ::ffff:127.x.y.z).
pub(crate) fn is_loopback(addr: SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// Whether binding both addresses would collide: the same port on the same address, or on the unspecified
/// address (`0.0.0.0`, `::`) and any other. Port 0 (any free port) never collides.
fn overlap(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port()
        && a.port() != 0
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

impl Checker {
    /// `listen` (`None` when it was reported) and `admin_listen` (`None` when unset or reported).
    pub(super) fn listen_addresses(
        &mut self,
        raw: &RawServer,
        d: &ServerConfig,
    ) -> (Option<SocketAddr>, Option<SocketAddr>) {
        let listen = match &raw.listen {
            None => Some(d.listen),
            Some(text) => self.address("server.listen", text),
        };
        let admin = raw
            .admin_listen
            .as_ref()
            .and_then(|text| self.address("server.admin_listen", text));
        if let (Some(listen), Some(admin)) = (listen, admin)
            && overlap(listen, admin)
        {
            let problem = Problem::SharedListen {
                value: admin.to_string(),
                listen: listen.to_string(),
            };
            self.report("server.admin_listen", problem);
            return (Some(listen), None);
        }
        (listen, admin)
    }

    fn address(&mut self, path: &str, text: &str) -> Option<SocketAddr> {
        let parsed = text.parse::<SocketAddr>().ok();
        if parsed.is_none() {
            let value = text.to_owned();
            self.report(path, Problem::InvalidListen { value });
        }
        parsed
    }

    /// `drain_delay`, at most `grace` (when `grace` was read). Omitted, the default or `grace` if that is shorter:
    /// a file that shortens `grace` need not shorten the delay too.
    pub(super) fn drain_delay(
        &mut self,
        raw: &RawServer,
        d: &ServerConfig,
        grace: Option<Duration>,
    ) -> Option<Duration> {
        let path = "server.drain_delay";
        let default = grace.map_or(d.drain_delay, |grace| d.drain_delay.min(grace));
        let delay = self.duration(path, raw.drain_delay.as_ref(), default, DurationRule::Any)?;
        if let Some(grace) = grace
            && delay > grace
        {
            let value = written(raw.drain_delay.as_ref(), delay);
            let grace = written(raw.grace.as_ref(), grace);
            self.relation(path, value, "at most", "server.grace", grace);
            return None;
        }
        Some(delay)
    }

    /// A `listen` off loopback with no `[[principals]]` written (a broken principal is reported on its own). The
    /// address as validated: a `listen` already reported is left alone.
    pub(super) fn open_listen(&mut self, server: &ServerConfig, raw: &RawConfig) {
        if raw.principals.is_empty() && !is_loopback(server.listen) {
            let value = server.listen.to_string();
            self.report("server.listen", Problem::OpenListen { value });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn loopback_addresses() {
        for a in [
            "127.0.0.1:80",
            "127.8.9.10:80",
            "[::1]:80",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(is_loopback(addr(a)), "{a}");
        }
        for a in ["0.0.0.0:80", "10.0.0.1:80", "[::]:80", "[::ffff:10.0.0.1]:80"] {
            assert!(!is_loopback(addr(a)), "{a}");
        }
    }

    #[test]
    fn overlapping_addresses() {
        assert!(overlap(addr("127.0.0.1:80"), addr("127.0.0.1:80")));
        assert!(overlap(addr("0.0.0.0:80"), addr("127.0.0.1:80")));
        assert!(overlap(addr("127.0.0.1:80"), addr("[::]:80")));
        assert!(!overlap(addr("127.0.0.1:80"), addr("127.0.0.1:81")));
        assert!(!overlap(addr("127.0.0.1:80"), addr("10.0.0.1:80")));
        assert!(!overlap(addr("127.0.0.1:0"), addr("127.0.0.1:0")));
    }
}
