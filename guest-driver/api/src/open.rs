//! Bringing the API up on a node: map the control pages, the coherent arena
//! and the ACK page, then the start-up rendezvous, so no node writes the
//! control pages before every member listens.

use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::{NodeSet, PctEntry};
use log::{info, warn};

use crate::channel::{Inner, MemoryChannel};
use crate::error::{McError, WaitFor};
use crate::join;
use crate::layout::{Layout, ARENA_PAGE, CONTROL_PAGES, HELLO};
use crate::loss::LossWatch;
use crate::lost::LostPacket;
use crate::node::Node;
use crate::pct_log::RecordingPort;
use crate::port::{McPort, ReceiveMemory};

/// How often the rendezvous says what it is still waiting for.
const RENDEZVOUS_NOTE: Duration = Duration::from_secs(5);

/// Options for [`MemoryChannel::open`].
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Bytes of the coherent arena (coherent regions are allocated there).
    pub arena_bytes: u64,
    /// How long to wait for every member to open the API.
    pub rendezvous_timeout: Duration,
    /// Check every store with the ACK page and send it again until it went
    /// through clean: "save count, write, check, retry" (seed 004, Error
    /// Management) applied to everything, so programs survive corrupted packets
    /// and link flaps, more slowly. Silent drops are not detected.
    pub reliable: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            arena_bytes: 4 << 20,
            rendezvous_timeout: Duration::from_secs(60),
            reliable: false,
        }
    }
}

impl MemoryChannel {
    /// Bring up the API on this node: map the control pages and the coherent
    /// arena (broadcast, loopback, receive), this node's ACK page and status
    /// page, then wait until every cluster member has done the same. Starts
    /// the node's management thread, which brings the node up to date if its
    /// adapter crashes and rejoins (see [`MemoryChannel::wait_coherent`]).
    pub fn open(port: Box<dyn McPort>, opts: &OpenOptions) -> Result<MemoryChannel, McError> {
        // Every PCT entry is recorded, to be programmed again after a rejoin.
        let mut port = RecordingPort::new(port);
        let regs = port.registers();
        let page_size = regs.page_size;
        let layout = Layout {
            page_size,
            nodes: regs.nodes,
            // Saturated: a space past 2^32 pages fails `fits` like any too large.
            pages: firmware_model::saturating_u32(regs.address_space / u64::from(page_size)),
            // Saturated, not truncated: a huge arena must not wrap into one that fits.
            arena_pages: u32::try_from(opts.arena_bytes / u64::from(page_size)).unwrap_or(u32::MAX),
        };
        if !layout.fits() {
            return Err(McError::LayoutDoesNotFit(layout));
        }
        // Node numbers index bit masks of 64 and become `NodeId`s (`node_id`).
        if regs.node_id >= regs.nodes {
            return Err(McError::NodeOutOfRange {
                node: regs.node_id,
                nodes: regs.nodes,
            });
        }
        let me = regs.node_id;
        let coherent = PctEntry::transmit_broadcast()
            .with_loopback()
            .with_receive();
        let control = port.alloc_receive(CONTROL_PAGES)?;
        port.set_pct(0, CONTROL_PAGES, coherent, &control.frames())?;
        let arena: Arc<dyn ReceiveMemory> = Arc::from(port.alloc_receive(layout.arena_pages)?);
        port.set_pct(ARENA_PAGE, layout.arena_pages, coherent, &arena.frames())?;
        let ack = port.alloc_receive(1)?;
        port.set_pct(layout.ack_page(me), 1, PctEntry::ack_page(), &ack.frames())?;
        let node = Node::new(port, regs, layout, control, arena, ack, opts.reliable);
        let mc = MemoryChannel::from_inner(Arc::new(Inner::new(node)));
        mc.rendezvous(opts.rendezvous_timeout)?;
        join::start(&mc.join_host())?;
        info!("node{me}: Memory Channel API open ({} nodes)", regs.nodes);
        Ok(mc)
    }

    /// Start-up rendezvous: each node broadcasts the set of nodes it has heard
    /// from, until every member reports every member. A node that maps the
    /// control pages late would otherwise miss writes made before it listened.
    fn rendezvous(&self, timeout: Duration) -> Result<(), McError> {
        let me = self.node().me;
        let start = Instant::now();
        let mut said = Duration::ZERO;
        // A node stops announcing once it has heard from every member: its
        // last announcement lost on the way here is never repeated, and
        // with evidence of loss (`loss`) the wait says so in seconds. (A
        // member that has not announced at all may just be late.)
        let mut watch = LossWatch::new(self.node());
        loop {
            // A node that leaves the cluster meanwhile (its adapter crashed) is
            // no longer waited for.
            let members = self.members_mask();
            let mut seen = 1u64 << me;
            let mut all_full = true;
            for n in 0..self.node().regs.nodes {
                if members & (1 << n) == 0 {
                    continue;
                }
                let w = self.node().control.load_u64(HELLO + 8 * n as usize);
                if w != 0 {
                    seen |= 1 << n;
                }
                if w & members != members {
                    all_full = false;
                }
            }
            let mine = if seen & members == members {
                members
            } else {
                seen
            };
            let was = self.node().control.load_u64(HELLO + 8 * me as usize);
            if was != mine || !all_full {
                self.node().store(
                    self.node().layout.page_addr(0) + (HELLO + 8 * me as usize) as u64,
                    &mine.to_le_bytes(),
                )?;
            }
            if all_full && mine == members {
                return Ok(());
            }
            // Only once every member has been heard from: a member that
            // has not started yet is not a lost packet.
            if let Some(evidence) = (seen & members == members).then(|| watch.check()).flatten() {
                let missing = NodeSet(not_full(self.node(), members));
                return Err(McError::LostPacket {
                    waiting_for: WaitFor::Rendezvous { missing },
                    lost: LostPacket::Hello { missing },
                    evidence,
                });
            }
            let waited = start.elapsed();
            if waited > timeout {
                return Err(McError::Timeout {
                    after: timeout,
                    waiting_for: WaitFor::Rendezvous {
                        missing: NodeSet(members & !seen),
                    },
                });
            }
            // Say what it waits for, every few seconds: a program started
            // without its cluster would otherwise look hung.
            if waited >= said + RENDEZVOUS_NOTE {
                said = waited;
                warn!(
                    "node{me}: waiting for nodes {} to open the Memory Channel API \
                     ({}s of {}s; is every node's program running?)",
                    NodeSet(members & !seen),
                    waited.as_secs(),
                    timeout.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Members whose announcement here does not yet say it heard from every
/// member.
fn not_full(node: &Node, members: u64) -> u64 {
    (0..node.regs.nodes)
        .filter(|&n| members & (1 << n) != 0 && n != node.me)
        .filter(|&n| node.control.load_u64(HELLO + 8 * n as usize) & members != members)
        .fold(0, |m, n| m | 1 << n)
}
