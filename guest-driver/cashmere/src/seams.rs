//! The places where Cashmere's protocol variants differ (seed 000 s.2.3.1):
//! how data moves (diffs and page fetches), how metadata is kept (page
//! directory and write notices), and how programs synchronise. The protocol
//! core talks only to these traits; CSM-DMS implements all three with Memory
//! Channel remote writes, broadcast and total order; CSM-MS implements
//! `DataPropagation` with diff messages (`ms_data`); CSM-S implements
//! `Metadata` with explicit messages too (`msg_meta`, the core sends them
//! through [`MetadataMessages`]), and CSM-None `Synchronization`
//! (`msg_sync`).

use super::messages::ReplySlot;
use super::twin::Diff;
use super::CsmError;

/// Sharing state of a page on one node, as the global directory records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum DirectoryState {
    Invalid = 0,
    Read = 1,
    ReadWrite = 2,
}

impl DirectoryState {
    pub fn from_word(w: u32) -> DirectoryState {
        match w & 3 {
            1 => DirectoryState::Read,
            2 => DirectoryState::ReadWrite,
            _ => DirectoryState::Invalid,
        }
    }
}

/// Data propagation: diffs to the master copy, page fetches from the home.
pub trait DataPropagation: Send + Sync {
    /// Apply `diff`'s changed bytes of `current` to the master copy of
    /// `page` at `home`; returns the bytes sent.
    fn write_diff(
        &self,
        home: u32,
        page: u32,
        current: &[u32],
        diff: &Diff,
    ) -> Result<usize, CsmError>;
    /// Whether `write_diff` sends a message the home applies and
    /// acknowledges (CSM-MS, seed 000 s.2.3.1.2): the caller then sends the
    /// request that delivers it and waits for the acknowledgement, which is
    /// what orders the diff before the write notices. Otherwise the remote
    /// writes themselves are the diff (CSM-DMS).
    fn diffs_are_messages(&self) -> bool {
        false
    }
    /// Post the body of the last diff message written for `home` (by
    /// `write_diff`) again, to node `to` (its request is being retried, at
    /// the home or, the page's home having moved, at the new one).
    fn repost_diff(&self, _home: u32, _to: u32) -> Result<(), CsmError> {
        Ok(())
    }
    /// At the home: apply the diff message node `from` sent for `page` to
    /// the master copy, with `buf` (two pages) as scratch; `false` when the
    /// message is damaged (the sender asks again).
    fn take_diff(&self, from: u32, page: u32, _buf: &mut [u8]) -> Result<bool, CsmError> {
        Err(CsmError::BadRequest { from, page })
    }
    /// Whether the home's working copy in the heap is the master copy
    /// itself (CSM-MS: shared data outside Memory Channel space), so the
    /// home writes it directly without mapping anything.
    fn master_in_heap(&self) -> bool {
        false
    }
    /// This node is about to claim `page`'s home (first touch): take the
    /// stores into its master copy from now on. Before the claim is
    /// published, so no diff for the page can arrive before its home
    /// receives it.
    fn prepare_home(&self, _page: u32) -> Result<(), CsmError> {
        Ok(())
    }
    /// Overwrite the master copy of a page this node is home of.
    fn write_page(&self, page: u32, data: &[u8]) -> Result<(), CsmError>;
    /// Where in this process the master copy of `page` is, if this node is
    /// its home and the master copy is memory the node can take as its
    /// working copy (CSM-DMS: the home's receive mapping). The home's
    /// threads then write it directly (seed 000 s.2.3.2).
    fn master_addr(&self, page: u32) -> Option<*const u8>;
    /// Read the master copy of a page (meaningful at its home).
    fn read_master(&self, page: u32, out: &mut [u8]) -> Result<(), CsmError>;
    /// Ask `home` for `page` (or a null request: `page == u32::MAX`).
    fn send_request(&self, home: u32, seq: u32, page: u32) -> Result<(), CsmError>;
    /// The newest request from node `from`: (sequence, page).
    fn poll_request(&self, from: u32) -> (u32, u32);
    /// Answer request `seq` of node `to` for `page`, with the page's data or
    /// none (a null request), into `slot` of its mailbox
    /// (`ReplySlot::for_request`).
    fn send_reply(
        &self,
        to: u32,
        slot: ReplySlot,
        seq: u32,
        page: u32,
        data: Option<&[u8]>,
    ) -> Result<(), CsmError>;
    /// Sequence number of the newest reply to this node in `slot`.
    fn reply_seq(&self, slot: ReplySlot) -> u32;
    /// The word the newest reply in `slot` answers
    /// (`messages::Request::word`, or a "moved" or migration answer).
    fn reply_word(&self, slot: ReplySlot) -> u32;
    /// Copy out the newest reply's data in `slot` (`out` empty for a null
    /// request) and say whether it is reply `seq` for `page`, whole: `false`
    /// when a packet of it was lost or discarded on the way (the caller asks
    /// again).
    fn read_reply(
        &self,
        slot: ReplySlot,
        seq: u32,
        page: u32,
        out: &mut [u8],
    ) -> Result<bool, CsmError>;
    /// Mark this point in what the node has sent: returns a number that
    /// [`DataPropagation::echo_seen`] reaches once everything sent before
    /// has arrived back at this node (its own loopback).
    fn post_echo(&self) -> Result<u64, CsmError>;
    /// The highest mark back so far.
    fn echo_seen(&self) -> u64;
    /// The last mark posted (the next one is higher, and follows every store
    /// this node has made so far).
    fn echo_posted(&self) -> u64;
}

/// Metadata: the global page directory and write notices.
pub trait Metadata: Send + Sync {
    /// The page's home, if it has been touched.
    fn home(&self, page: u32) -> Option<u32>;
    /// Make this node the home unless another node got there first; returns
    /// the home. `failed` is asked while it waits, and ends the wait with its
    /// error.
    fn claim_home(
        &self,
        page: u32,
        failed: &dyn Fn() -> Result<(), CsmError>,
    ) -> Result<u32, CsmError>;
    /// Only the home calls this (it owns the page's shared word).
    fn set_exclusive(&self, page: u32, home: u32, on: bool) -> Result<(), CsmError>;
    /// The home hands the page to `new_home` (migration): only the home
    /// calls this.
    fn set_home(&self, page: u32, new_home: u32) -> Result<(), CsmError>;
    /// Node `node`'s word of the page's entry, as this node's replica has it.
    fn state_of(&self, page: u32, node: u32) -> DirectoryState;
    /// This node's own word of the page's entry.
    fn set_state(&self, page: u32, state: DirectoryState) -> Result<(), CsmError>;
    /// Deliver as many of `pages` to node `to` as its bin has room for;
    /// returns how many went.
    fn send_notices(&self, to: u32, pages: &[u32]) -> Result<usize, CsmError>;
    /// Hand every write notice that has arrived to `take`.
    fn drain_notices(&self, take: &mut dyn FnMut(u32)) -> Result<(), CsmError>;
    /// The message side of metadata kept by explicit messages (CSM-S), if
    /// this is such: the protocol core then sends the messages it names.
    fn messages(&self) -> Option<&dyn MetadataMessages> {
        None
    }
}

/// Bytes of a directory entry packed for a message (seed 002 s.4.1's
/// `_csm_packed_entry_t`): the sharing set and the writers, a bit per node.
pub const ENTRY_BYTES: usize = 16;

/// Metadata by explicit messages (seed 000 s.2.3.1.3, seed 002 s.4.1,
/// s.4.3): the master copy of a page's directory entry is at its home,
/// other nodes cache it. A node joins the sharing set with its page
/// request, leaves it with a message to the home, and learns the sharing
/// set from its diff's acknowledgement; homes are assigned at first touch
/// by each page's directory manager; write notices are messages. These are
/// the parts of it the protocol core drives, as it holds the node's state
/// and answers requests while it waits.
pub trait MetadataMessages: Send + Sync {
    /// The node that assigns the page's home at first touch.
    fn manager(&self, page: u32) -> u32;
    /// At the manager: the page's home; `claimer` if it has none yet.
    fn assign_home(&self, page: u32, claimer: u32) -> u32;
    /// Remember the home the manager named.
    fn learn_home(&self, page: u32, home: u32);
    /// At the home: node `from` asked for the page (its join, piggybacked
    /// on the fetch).
    fn joined(&self, page: u32, from: u32);
    /// At the home: node `from` no longer holds a copy.
    fn left(&self, page: u32, from: u32);
    /// At the home: the page's entry, packed ([`ENTRY_BYTES`]), for a
    /// diff's acknowledgement.
    fn entry(&self, page: u32, out: &mut [u8]);
    /// The entry the home piggybacked: this node's cache of it.
    fn learn_entry(&self, page: u32, entry: &[u8]);
    /// This node became the page's home by migration. Its old home's entry
    /// did not come along: every other node counts as a sharer until it
    /// says it is not (more notices than needed, never fewer).
    fn became_home(&self, page: u32);
    /// Post the last notices message to `to` again (its request is being
    /// retried).
    fn repost_notices(&self, to: u32) -> Result<(), CsmError>;
    /// Take the `count` notices node `from` sent (its message slot), with
    /// `buf` (two pages) as scratch; `false` when the message is damaged
    /// (the sender posts it again).
    fn take_notices(
        &self,
        from: u32,
        count: u32,
        buf: &mut [u8],
        take: &mut dyn FnMut(u32),
    ) -> Result<bool, CsmError>;
}

/// Synchronisation between nodes (the node-level part lives in the core).
pub trait Synchronization: Send + Sync {
    fn lock_acquire(&self, lock: u32) -> Result<(), CsmError>;
    fn lock_release(&self, lock: u32) -> Result<(), CsmError>;
    /// The barrier at start-up, before the nodes' mailboxes may be used.
    fn start_barrier(&self) -> Result<(), CsmError>;
    /// This node has arrived at barrier episode `episode`; returns when every
    /// node has. `meanwhile` runs while it waits (answering requests) and
    /// ends the wait with its error.
    fn barrier(
        &self,
        episode: u64,
        meanwhile: &mut dyn FnMut() -> Result<(), CsmError>,
    ) -> Result<(), CsmError>;
    fn flag_set(&self, flag: u32, value: u64) -> Result<(), CsmError>;
    fn flag_get(&self, flag: u32) -> Result<u64, CsmError>;
    /// The virtual arrival of `flag`'s value (virtual time on), for a
    /// waiter that saw it set.
    fn flag_arrival(&self, _flag: u32) -> Option<u64> {
        None
    }
    /// Tell every node this one has failed, so nobody waits for it forever.
    fn abort(&self);
    /// The node that failed, if one has.
    fn aborted(&self) -> Option<u32>;
    /// Look at the cluster's membership again (a lost node counts as
    /// failed); returns whether one is lost. Not for the fault path.
    fn refresh_members(&self) -> bool;
    /// Take the synchronisation messages that have arrived (CSM-None's
    /// handler; the protocol thread calls it whenever it wakes).
    fn serve(&self) -> Result<(), CsmError> {
        Ok(())
    }
}
