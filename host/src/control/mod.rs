//! The control socket of a running cluster (`DIR/control.sock`).
//!
//! One request per connection, one line of text; the answer is text ending in a
//! line `ok` or `error: REASON`. Requests: `stats`, `status`, `fault COMMAND`
//! (the syntax of [`firmware_model::FaultCommand`]'s parser).
//!
//! [`server`] serves it from one thread that sleeps in epoll until a client
//! connects ([`event_handler`]) and answers each request ([`requests`]);
//! [`client`] is what `mc-host fault`, `stats` and `cluster status` send;
//! [`report`] formats the counters.

mod client;
mod event_handler;
mod report;
mod requests;
mod server;

pub use client::{request, ControlError, CONTROL_SOCKET};
pub use report::format_snapshot;
pub use server::{ControlServer, ControlServerError};

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use firmware_model::ClusterConfig;
    use mc_device::{Cluster, ClusterOptions};

    use super::*;

    /// Voluntary context switches of every thread of this process named
    /// `mc-control`: how often the control threads woke up.
    fn control_thread_wakeups() -> u64 {
        let mut total = 0;
        for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.trim() != "mc-control" {
                continue;
            }
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            total += status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
        total
    }

    fn refused(dir: &Path, req: &str) -> String {
        match request(dir, req) {
            Err(ControlError::Refused { reason }) => reason,
            other => panic!("{req:?}: expected a refusal, got {other:?}"),
        }
    }

    // One test: the idle check counts the wake-ups of every `mc-control`
    // thread in the process, so no other control server may run meanwhile.
    #[test]
    fn answers_each_request_sleeps_while_idle_and_stops_on_drop() {
        let d = tempfile::tempdir().unwrap();
        let cluster =
            Arc::new(Cluster::start(ClusterOptions::new(ClusterConfig::new(2), d.path())).unwrap());
        let server = ControlServer::start(d.path(), cluster.clone()).unwrap();

        let stats = request(d.path(), "stats").unwrap();
        assert!(stats.starts_with("membership epoch "), "{stats}");
        assert!(stats.contains("\nnode0 "), "{stats}");
        assert_eq!(
            request(d.path(), "fault drop 1% node 1").unwrap(),
            "applied: drop 1% node1\n"
        );
        let status = request(d.path(), "status").unwrap();
        assert!(status.contains("packet fault: drop 1% node1"), "{status}");
        assert!(refused(d.path(), "explode").starts_with("unknown request \"explode\""));
        assert_eq!(refused(d.path(), ""), "empty request");
        assert!(refused(d.path(), "fault crash 9").contains("not in the cluster"));
        assert!(refused(d.path(), "fault jump").contains("unknown fault"));

        // Clients at once: each gets its answer.
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| request(d.path(), "stats")))
                .collect();
            for h in hs {
                assert!(h.join().unwrap().unwrap().starts_with("membership"));
            }
        });

        // Idle, the thread sleeps in epoll: no wake-ups (a 20 ms poll would
        // make about 25 in this time).
        let before = control_thread_wakeups();
        std::thread::sleep(Duration::from_millis(500));
        let idle = control_thread_wakeups() - before;
        assert!(idle <= 1, "{idle} wake-ups of an idle control thread");

        let start = Instant::now();
        drop(server);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        assert!(!d.path().join(CONTROL_SOCKET).exists());
        assert!(matches!(
            request(d.path(), "stats"),
            Err(ControlError::Unreachable { .. })
        ));
        assert_eq!(control_thread_wakeups(), 0, "the thread ended");
    }
}
