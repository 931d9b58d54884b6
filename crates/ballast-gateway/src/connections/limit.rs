//! The cap on `listen`'s connections, set below the process's file limit (`RLIMIT_NOFILE`), read at start.

/// Descriptors the process keeps for itself beyond its listeners' connections: stdio, the listeners, the
/// runtime's epoll and timers, DNS, the store's files.
const PROCESS_FILES: u64 = 64;

/// Connections of the admin listener at most (counted apart from `listen`'s).
pub(crate) const ADMIN_CONNECTIONS: usize = 64;

/// The least cap the file limit is allowed to force: below it the gateway serves next to nothing, so it takes
/// half the file limit instead and says that its upstream calls may run out of descriptors.
const FLOOR: u64 = 64;

/// The cap on `listen`'s connections: `max_connections`, lowered to what the file limit leaves after the
/// process's own descriptors, one per concurrent upstream call (`upstream_calls`) and the admin listener's
/// connections — the soft limit first raised as far as needed and the hard limit allows. With it, what to say
/// about it when it was lowered.
pub(crate) fn limit(max_connections: u32, upstream_calls: u64, admin: bool) -> (usize, Option<String>) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let wanted = u64::from(max_connections);
    let kept = PROCESS_FILES + upstream_calls + if admin { ADMIN_CONNECTIONS as u64 } else { 0 };
    let mut files = getrlimit(Resource::Nofile);
    let needed = wanted.saturating_add(kept);
    if files.current.is_some_and(|soft| soft < needed) {
        let raised = files.maximum.map_or(needed, |hard| hard.min(needed));
        let new = Rlimit {
            current: Some(raised),
            maximum: files.maximum,
        };
        if setrlimit(Resource::Nofile, new).is_ok() {
            files = getrlimit(Resource::Nofile);
        }
    }
    let Some(soft) = files.current else {
        return (max_connections as usize, None);
    };
    let (cap, why) = lowered(wanted, soft, kept);
    let hard = files
        .maximum
        .map_or_else(|| "unlimited".to_owned(), |hard| hard.to_string());
    let why = why.map(|why| format!("{why} (ulimit -n {soft}, hard limit {hard})"));
    (usize::try_from(cap).unwrap_or(usize::MAX), why)
}

/// The cap for `wanted` connections when the process may open `soft` files and keeps `kept` of them, and why it is
/// lower than wanted, when it is.
fn lowered(wanted: u64, soft: u64, kept: u64) -> (u64, Option<String>) {
    let room = soft.saturating_sub(kept);
    if room >= wanted {
        return (wanted, None);
    }
    if room >= FLOOR {
        return (
            room,
            Some(format!(
                "server.max_connections lowered from {wanted} to {room}: the process may open {soft} files and keeps \
                 {kept} for itself, its upstream calls (one per slot of every tool's and deployment's \
                 `concurrency`) and the admin listener; raise the file limit (LimitNOFILE= in systemd) to serve more"
            )),
        );
    }
    let cap = (soft / 2).clamp(1, wanted);
    (
        cap,
        Some(format!(
            "server.max_connections lowered from {wanted} to {cap}, half the files the process may open ({soft}): it \
             needs {kept} for itself, its upstream calls (one per slot of every tool's and deployment's \
             `concurrency`) and the admin listener, so under load upstream calls may fail with 'too many open \
             files'; raise the file limit (LimitNOFILE= in systemd) or lower the concurrency"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_what_the_file_limit_leaves_and_never_falls_to_nothing() {
        assert_eq!(lowered(4096, 1_048_576, 200), (4096, None));
        let (cap, why) = lowered(4096, 1024, 200);
        assert_eq!(cap, 824);
        assert!(why.unwrap().contains("lowered from 4096 to 824"));
        // Sixteen tools of 64 slots under 1024 files: half the limit, said loudly, rather than one connection.
        let (cap, why) = lowered(4096, 1024, 64 + 16 * 64);
        assert_eq!(cap, 512);
        assert!(why.unwrap().contains("too many open files"));
        assert_eq!(lowered(10, 1024, 2000).0, 10, "never above what was asked");
    }
}
