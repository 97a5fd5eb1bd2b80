//! Protocol statistics, per node: counts of protocol events (where time
//! goes is `times`).

use std::fmt;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub read_faults: u64,
    pub write_faults: u64,
    /// Pages fetched from a remote home by request/reply.
    pub page_transfers: u64,
    /// Pages a home copied from its own master copy.
    pub home_refreshes: u64,
    pub twins: u64,
    pub diffs: u64,
    pub diff_bytes: u64,
    /// Of `diffs`, those a home made of its own writes into its own master
    /// copy. The paper's home writes its master copy directly and makes none
    /// (seed 000 s.2.3.2); here its working copy is separate memory from its
    /// receive mapping, so its writes to a shared page reach the master copy
    /// as diffs by loopback. Subtract them to compare with Table IV.
    pub home_diffs: u64,
    /// Pages this node is home of whose master copy (its receive mapping)
    /// it maps as its working copy, writing it directly: no twins or diffs
    /// at the home for them.
    pub direct_home_pages: u64,
    pub write_notices_sent: u64,
    pub write_notices_received: u64,
    pub invalidations: u64,
    /// Write-noticed pages with local writers updated in place by an
    /// incoming diff instead of being invalidated.
    pub incoming_diffs: u64,
    /// Words those incoming diffs wrote.
    pub incoming_diff_words: u64,
    pub exclusive_entries: u64,
    pub exclusive_exits: u64,
    pub lock_acquires: u64,
    pub barriers: u64,
    pub flag_waits: u64,
    pub acquires: u64,
    pub releases: u64,
    /// Request messages sent (page fetches and null requests).
    pub messages_sent: u64,
    /// Bytes this node stored into other nodes' mailboxes: its explicit
    /// message traffic (requests, page replies, diffs and write notices
    /// sent as messages, synchronisation messages, wake-ups). Table IV's
    /// data volume is this plus the diffs written remotely (`diff_bytes`
    /// where diffs are not messages) and the broadcast placements.
    pub message_bytes: u64,
    /// Requests this node answered.
    pub messages_served: u64,
    /// Requests sent again because no reply came in time.
    pub request_timeouts: u64,
    /// Replies that failed the end-to-end check (a packet lost or discarded).
    pub damaged_replies: u64,
    /// Waits for this node's own echo (at a release, or before a home reads
    /// its own master copy while its own store into it is on its way back).
    pub echo_waits: u64,
    /// Requests to a receiver to drain its full write-notice bin.
    pub drain_requests: u64,
    /// Diff messages this node applied as a home (CSM-MS).
    pub diffs_applied: u64,
    /// Diff messages this node sent while another of the same release was
    /// in flight to another home (pipelined, seed 002 s.3.3).
    pub diffs_pipelined: u64,
    /// Diff messages that failed their check and were asked for again.
    pub damaged_diffs: u64,
    /// Requests answered "moved" (the node asked is no longer the page's
    /// home) and sent to the home named.
    pub moved_replies: u64,
    /// Migration requests this node sent at write faults (CSM-MS-Mg).
    pub migration_attempts: u64,
    /// Of those, granted: this node became the page's home.
    pub migrations: u64,
    /// Migration requests this node granted as a home.
    pub migrations_granted: u64,
    /// CSM-ADB: pages this node, as their home, placed in the broadcast
    /// buffers (Table IV's "ADB placements").
    pub adb_placements: u64,
    /// Page updates this node took from the broadcast buffers instead of
    /// asking the home (Table IV's "ADB hits").
    pub adb_hits: u64,
    /// Broadcast copies this node killed as a home whose page changed.
    pub adb_invalidations: u64,
}

/// Every counter by its field name ([`Stats::fields`], for records), and
/// their sum (`+=`: a machine's processors' counts in 1L, a cluster's
/// total). The destructuring names every field, so a field added to
/// `Stats` does not compile until it is listed here.
macro_rules! all_fields {
    ($($f:ident),* $(,)?) => {
        impl Stats {
            /// Every counter, by its field name, in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                let Stats { $($f),* } = *self;
                vec![$((stringify!($f), $f)),*]
            }
        }

        impl std::ops::AddAssign for Stats {
            fn add_assign(&mut self, o: Stats) {
                let Stats { $($f),* } = o;
                $(self.$f += $f;)*
            }
        }
    };
}

all_fields!(
    read_faults,
    write_faults,
    page_transfers,
    home_refreshes,
    twins,
    diffs,
    diff_bytes,
    home_diffs,
    direct_home_pages,
    write_notices_sent,
    write_notices_received,
    invalidations,
    incoming_diffs,
    incoming_diff_words,
    exclusive_entries,
    exclusive_exits,
    lock_acquires,
    barriers,
    flag_waits,
    acquires,
    releases,
    messages_sent,
    message_bytes,
    messages_served,
    request_timeouts,
    damaged_replies,
    echo_waits,
    drain_requests,
    diffs_applied,
    diffs_pipelined,
    damaged_diffs,
    moved_replies,
    migration_attempts,
    migrations,
    migrations_granted,
    adb_placements,
    adb_hits,
    adb_invalidations,
);

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "faults r/w {}/{}, page transfers {} (+{} home refreshes), twins {}, diffs {} ({} B, {} at the home), direct home pages {}, \
             write notices sent/received {}/{}, invalidations {}, incoming diffs {} ({} words), exclusive in/out {}/{}, \
             locks {}, barriers {}, flag waits {}, acquires/releases {}/{}, messages sent/served {}/{} ({} B to mailboxes), \
             retries after timeout/damage {}/{}, echo waits {}, drain requests {}, diff messages applied {} (damaged {}, {} sent pipelined), \
             moved replies {}, migrations {} of {} attempts ({} granted here), \
             broadcast placements/hits/kills {}/{}/{}",
            self.read_faults,
            self.write_faults,
            self.page_transfers,
            self.home_refreshes,
            self.twins,
            self.diffs,
            self.diff_bytes,
            self.home_diffs,
            self.direct_home_pages,
            self.write_notices_sent,
            self.write_notices_received,
            self.invalidations,
            self.incoming_diffs,
            self.incoming_diff_words,
            self.exclusive_entries,
            self.exclusive_exits,
            self.lock_acquires,
            self.barriers,
            self.flag_waits,
            self.acquires,
            self.releases,
            self.messages_sent,
            self.messages_served,
            self.message_bytes,
            self.request_timeouts,
            self.damaged_replies,
            self.echo_waits,
            self.drain_requests,
            self.diffs_applied,
            self.damaged_diffs,
            self.diffs_pipelined,
            self.moved_replies,
            self.migrations,
            self.migration_attempts,
            self.migrations_granted,
            self.adb_placements,
            self.adb_hits,
            self.adb_invalidations
        )
    }
}
