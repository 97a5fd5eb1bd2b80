//! Attaching regions (imc_asattach) and detaching them: the region table's
//! record of who is attached how, this node's PCT entries for the region,
//! and the pool of receive memory detached regions leave behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use firmware_model::{Destination, NodeId, NodeSet, PctEntry};

use super::handle::{RxRegion, TxRegion};
use crate::channel::MemoryChannel;
use crate::error::{Conflict, Direction, McError, RegionRef};
use crate::layout::ARENA_PAGE;
use crate::port::{McPort, ReceiveMemory};
use crate::table::RegionEntry;

/// How a region is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    Shared,
    /// No other node may attach in the same direction.
    Exclusive,
}

/// Detached receive memories kept for reuse, at most.
const RX_POOL_MAX: usize = 64;

/// This node's attachments of one region.
#[derive(Default)]
struct LocalAttach {
    /// Loopback, and the destination (None = broadcast).
    tx: Option<(bool, Option<NodeId>)>,
    rx: Option<(Arc<dyn ReceiveMemory>, bool)>,
}

/// This node's attachments of every region, and the receive memory detached
/// regions left behind.
#[derive(Default)]
pub(crate) struct Attachments {
    by_region: Mutex<HashMap<u32, LocalAttach>>,
    /// Receive memory of detached ordinary regions, unbound from the PCT,
    /// kept for the next attachment of the same size: the driver's DMA
    /// allocator never frees, so attach/detach cycles would otherwise use
    /// up the guest's DMA memory.
    rx_pool: Mutex<Vec<(u32, Arc<dyn ReceiveMemory>)>>,
}

impl Attachments {
    fn local(&self) -> std::sync::MutexGuard<'_, HashMap<u32, LocalAttach>> {
        self.by_region.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pool(&self) -> std::sync::MutexGuard<'_, Vec<(u32, Arc<dyn ReceiveMemory>)>> {
        self.rx_pool.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl MemoryChannel {
    fn attach_bookkeeping(
        &self,
        id: u32,
        transmit: bool,
        sharing: Sharing,
        attach: bool,
    ) -> Result<RegionEntry, McError> {
        let me = self.inner.me as u8;
        let bit = 1u64 << me;
        self.with_regions(|t| {
            let e = t
                .by_id_mut(id)
                .ok_or(McError::NoSuchRegion(RegionRef::Id(id)))?;
            let direction = if transmit {
                Direction::Transmit
            } else {
                Direction::Receive
            };
            let allowed = e.creator == me
                || if transmit {
                    e.permissions.others_transmit
                } else {
                    e.permissions.others_receive
                };
            if attach && !allowed {
                return Err(McError::PermissionDenied {
                    node: me,
                    id,
                    direction,
                });
            }
            let (mask, excl) = if transmit {
                (&mut e.tx_mask, &mut e.tx_exclusive)
            } else {
                (&mut e.rx_mask, &mut e.rx_exclusive)
            };
            if attach {
                if let Some(x) = *excl {
                    if x != me {
                        return Err(McError::Busy {
                            region: id,
                            conflict: Conflict::HeldExclusively {
                                holder: NodeId(x),
                                direction,
                            },
                        });
                    }
                }
                if sharing == Sharing::Exclusive && *mask & !bit != 0 {
                    return Err(McError::Busy {
                        region: id,
                        conflict: Conflict::AttachedElsewhere {
                            direction,
                            nodes: NodeSet(*mask & !bit),
                        },
                    });
                }
                *mask |= bit;
                if sharing == Sharing::Exclusive {
                    *excl = Some(me);
                }
            } else {
                *mask &= !bit;
                if *excl == Some(me) {
                    *excl = None;
                }
            }
            Ok((*e, true))
        })
    }

    /// Program this node's PCT for region `e` from its local attachments.
    fn reprogram(&self, e: &RegionEntry) -> Result<(), McError> {
        if e.coherent {
            // The arena is mapped for everything at open.
            return Ok(());
        }
        // The port first, held until the entry is programmed: two threads
        // attaching one region at once (one for transmit, one for receive)
        // would otherwise each read the attachments, and the one that read
        // first could program last, dropping the other's half.
        let mut port = self.port();
        let attach = self.inner.attachments.local();
        let a = attach.get(&e.id);
        let tx = a.and_then(|a| a.tx);
        let rx = a.and_then(|a| a.rx.as_ref());
        let mut entry = PctEntry::DISABLED;
        if let Some((lb, dest)) = tx {
            entry.transmit = Some(match dest {
                None => Destination::Broadcast,
                Some(n) => Destination::Node(n),
            });
            entry.loopback = lb;
        }
        let mut frames = Vec::new();
        if let Some((mem, notify)) = rx {
            entry.receive = true;
            entry.interrupt = *notify;
            frames = mem.frames();
        }
        // Loopback without a receive mapping reflects nothing, and is allowed.
        drop(attach);
        port.set_pct(e.first_page, e.pages, entry, &frames)
    }

    /// Attach region `id` for transmit (imc_asattach with IMC_TRANSMIT). With
    /// `loopback`, this node's writes also reach its own receive mapping.
    pub fn attach_transmit(
        &self,
        id: u32,
        sharing: Sharing,
        loopback: bool,
    ) -> Result<TxRegion, McError> {
        self.attach_tx(id, sharing, loopback, None)
    }

    /// Attach region `id` for transmit to one node only (Memory Channel 2's
    /// point-to-point mode): other nodes' receive mappings see nothing. Only
    /// ordinary regions: a coherent region goes to every node by definition.
    pub fn attach_transmit_to(
        &self,
        id: u32,
        sharing: Sharing,
        dest: NodeId,
    ) -> Result<TxRegion, McError> {
        self.attach_tx(id, sharing, false, Some(dest))
    }

    fn attach_tx(
        &self,
        id: u32,
        sharing: Sharing,
        loopback: bool,
        dest: Option<NodeId>,
    ) -> Result<TxRegion, McError> {
        if let Some(d) = dest {
            if u32::from(d.0) >= self.nodes() || d == self.node_id() {
                return Err(McError::BadDestination(d));
            }
            if self.region_table()?.by_id(id).is_some_and(|e| e.coherent) {
                return Err(McError::BadDestination(d));
            }
        }
        let e = self.attach_bookkeeping(id, true, sharing, true)?;
        self.inner.attachments.local().entry(id).or_default().tx = Some((loopback, dest));
        if let Err(err) = self.reprogram(&e) {
            let _ = self.detach(&e, true);
            return Err(err);
        }
        Ok(TxRegion::new(self.clone(), e))
    }

    /// Attach region `id` for receive (imc_asattach with IMC_RECEIVE). With
    /// `notify`, every store into it raises a notification
    /// ([`MemoryChannel::wait_notification`]).
    pub fn attach_receive(
        &self,
        id: u32,
        sharing: Sharing,
        notify: bool,
    ) -> Result<RxRegion, McError> {
        let e = self.attach_bookkeeping(id, false, sharing, true)?;
        let l = self.inner.layout;
        let (mem, offset): (Arc<dyn ReceiveMemory>, usize) = if e.coherent {
            (
                self.inner.arena.clone(),
                ((e.first_page - ARENA_PAGE) * l.page_size) as usize,
            )
        } else if let Some(m) = self.reuse_receive(e.pages) {
            (m, 0)
        } else {
            match self.port().alloc_receive(e.pages) {
                Ok(m) => (Arc::from(m), 0),
                Err(err) => {
                    let _ = self.attach_bookkeeping(id, false, sharing, false);
                    return Err(err);
                }
            }
        };
        self.inner.attachments.local().entry(id).or_default().rx = Some((mem.clone(), notify));
        if let Err(err) = self.reprogram(&e) {
            let _ = self.detach(&e, false);
            return Err(err);
        }
        Ok(RxRegion::new(self.clone(), e, mem, offset))
    }

    /// Receive memory of `pages` pages from the pool, zeroed, if one that
    /// nobody else still holds is there.
    fn reuse_receive(&self, pages: u32) -> Option<Arc<dyn ReceiveMemory>> {
        let mut pool = self.inner.attachments.pool();
        let i = pool
            .iter()
            .position(|(n, m)| *n == pages && Arc::strong_count(m) == 1)?;
        let (_, m) = pool.swap_remove(i);
        let bytes = pages as usize * self.inner.layout.page_size as usize;
        m.write_local(0, &vec![0u8; bytes]);
        Some(m)
    }

    /// Undo one attachment (called when a region handle is dropped).
    pub(crate) fn detach(&self, e: &RegionEntry, transmit: bool) -> Result<(), McError> {
        let mut freed = None;
        {
            let mut attach = self.inner.attachments.local();
            if let Some(a) = attach.get_mut(&e.id) {
                if transmit {
                    a.tx = None;
                } else {
                    freed = a.rx.take().map(|(m, _)| m);
                }
                if a.tx.is_none() && a.rx.is_none() {
                    attach.remove(&e.id);
                }
            }
        }
        self.reprogram(e)?;
        // Unbound now: the adapter no longer writes these frames.
        if let Some(m) = freed.filter(|_| !e.coherent) {
            let mut pool = self.inner.attachments.pool();
            if pool.len() < RX_POOL_MAX {
                pool.push((e.pages, m));
            }
        }
        self.attach_bookkeeping(e.id, transmit, Sharing::Shared, false)
            .map(|_| ())
    }
}
