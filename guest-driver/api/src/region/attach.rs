//! Attaching regions (imc_asattach) and detaching them: the region table's
//! record of who is attached how, this node's PCT entries for the region,
//! and the pool of receive memory detached regions leave behind.

use std::sync::Arc;

use firmware_model::{Destination, NodeId, NodeSet, PctEntry};

use super::handle::{RxRegion, TxRegion};
use super::host::RegionHost;
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

/// What a node does with its regions (through the narrow [`RegionHost`]).
impl dyn RegionHost + '_ {
    fn attach_bookkeeping(
        &self,
        id: u32,
        transmit: bool,
        sharing: Sharing,
        attach: bool,
    ) -> Result<RegionEntry, McError> {
        let me = self.node().id().0;
        let bit = 1u64 << me;
        self.tables().with_regions(self.node(), |t| {
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
        self.reprogram_pages(e, 0, e.pages)
    }

    /// Program this node's PCT for pages `[first, end)` of region `e` from
    /// its local attachments, in runs of pages alike (receiving with their
    /// frames, or not).
    fn reprogram_pages(&self, e: &RegionEntry, first: u32, end: u32) -> Result<(), McError> {
        if e.coherent {
            // The arena is mapped for everything at open.
            return Ok(());
        }
        // The port first, held until the entry is programmed: two threads
        // attaching one region at once (one for transmit, one for receive)
        // would otherwise each read the attachments, and the one that read
        // first could program last, dropping the other's half.
        let mut port = self.node().port();
        let attach = self.attachments().local();
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
        let off = a.and_then(|a| a.rx_off.clone()).filter(|_| entry.receive);
        // Loopback without a receive mapping reflects nothing, and is allowed.
        drop(attach);
        let receiving = |p: u32| entry.receive && !off.as_ref().is_some_and(|o| o[p as usize]);
        let per_page = frames.len() / e.pages.max(1) as usize;
        let mut i = first;
        while i < end {
            let on = receiving(i);
            let mut j = i + 1;
            while j < end && receiving(j) == on {
                j += 1;
            }
            if on {
                let f = &frames[i as usize * per_page..j as usize * per_page];
                port.set_pct(e.first_page + i, j - i, entry, f)?;
            } else {
                let mut x = entry;
                x.receive = false;
                x.interrupt = false;
                port.set_pct(e.first_page + i, j - i, x, &[])?;
            }
            i = j;
        }
        Ok(())
    }

    /// Turn receive on or off for `count` pages of region `e` from its page
    /// `first` (an attached receive mapping), and program them.
    pub(crate) fn set_receiving(
        &self,
        e: &RegionEntry,
        first: u32,
        count: u32,
        on: bool,
    ) -> Result<(), McError> {
        let end = first.checked_add(count).filter(|&end| end <= e.pages);
        let Some(end) = end else {
            return Err(McError::OutOfBounds {
                offset: first as usize,
                len: count as usize,
                size: e.pages as usize,
            });
        };
        {
            let mut attach = self.attachments().local();
            let Some(a) = attach.get_mut(&e.id).filter(|a| a.rx.is_some()) else {
                return Err(McError::NoSuchRegion(RegionRef::Id(e.id)));
            };
            let off = a
                .rx_off
                .get_or_insert_with(|| vec![false; e.pages as usize]);
            off[first as usize..end as usize].fill(!on);
        }
        self.reprogram_pages(e, first, end)
    }

    /// Receive memory of `pages` pages from the pool, zeroed, if one that
    /// nobody else still holds is there.
    fn reuse_receive(&self, pages: u32) -> Option<Arc<dyn ReceiveMemory>> {
        let mut pool = self.attachments().pool();
        let i = pool
            .iter()
            .position(|(n, m)| *n == pages && Arc::strong_count(m) == 1)?;
        let (_, m) = pool.swap_remove(i);
        let bytes = pages as usize * self.node().layout.page_size as usize;
        m.write_local(0, &vec![0u8; bytes]);
        Some(m)
    }

    /// Undo one attachment (called when a region handle is dropped).
    pub(crate) fn detach(&self, e: &RegionEntry, transmit: bool) -> Result<(), McError> {
        let mut freed = None;
        {
            let mut attach = self.attachments().local();
            if let Some(a) = attach.get_mut(&e.id) {
                if transmit {
                    a.tx = None;
                } else {
                    freed = a.rx.take().map(|(m, _)| m);
                    a.rx_off = None;
                }
                if a.tx.is_none() && a.rx.is_none() {
                    attach.remove(&e.id);
                }
            }
        }
        self.reprogram(e)?;
        // Unbound now: the adapter no longer writes these frames.
        if let Some(m) = freed.filter(|_| !e.coherent) {
            let mut pool = self.attachments().pool();
            if pool.len() < RX_POOL_MAX {
                pool.push((e.pages, m));
            }
        }
        self.attach_bookkeeping(e.id, transmit, Sharing::Shared, false)
            .map(|_| ())
    }
}

/// Attach region `id` for transmit (imc_asattach with IMC_TRANSMIT). With
/// `loopback`, this node's writes also reach its own receive mapping.
pub(crate) fn attach_transmit(
    host: &Arc<dyn RegionHost>,
    id: u32,
    sharing: Sharing,
    loopback: bool,
) -> Result<TxRegion, McError> {
    attach_tx(host, id, sharing, loopback, None)
}

/// Attach region `id` for transmit to one node only (Memory Channel 2's
/// point-to-point mode): other nodes' receive mappings see nothing. Only
/// ordinary regions: a coherent region goes to every node by definition.
pub(crate) fn attach_transmit_to(
    host: &Arc<dyn RegionHost>,
    id: u32,
    sharing: Sharing,
    dest: NodeId,
) -> Result<TxRegion, McError> {
    attach_tx(host, id, sharing, false, Some(dest))
}

fn attach_tx(
    host: &Arc<dyn RegionHost>,
    id: u32,
    sharing: Sharing,
    loopback: bool,
    dest: Option<NodeId>,
) -> Result<TxRegion, McError> {
    if let Some(d) = dest {
        if u32::from(d.0) >= host.node().regs.nodes || u32::from(d.0) == host.node().me {
            return Err(McError::BadDestination(d));
        }
        if host
            .tables()
            .region_table(host.node())?
            .by_id(id)
            .is_some_and(|e| e.coherent)
        {
            return Err(McError::BadDestination(d));
        }
    }
    let e = host.attach_bookkeeping(id, true, sharing, true)?;
    host.attachments().local().entry(id).or_default().tx = Some((loopback, dest));
    if let Err(err) = host.reprogram(&e) {
        let _ = host.detach(&e, true);
        return Err(err);
    }
    Ok(TxRegion::new(host.clone(), e))
}

/// Attach region `id` for receive (imc_asattach with IMC_RECEIVE). With
/// `notify`, every store into it raises a notification
/// (`MemoryChannel::wait_notification`).
pub(crate) fn attach_receive(
    host: &Arc<dyn RegionHost>,
    id: u32,
    sharing: Sharing,
    notify: bool,
) -> Result<RxRegion, McError> {
    let e = host.attach_bookkeeping(id, false, sharing, true)?;
    let l = host.node().layout;
    let (mem, offset): (Arc<dyn ReceiveMemory>, usize) = if e.coherent {
        (
            host.node().arena.clone(),
            ((e.first_page - ARENA_PAGE) * l.page_size) as usize,
        )
    } else if let Some(m) = host.reuse_receive(e.pages) {
        (m, 0)
    } else {
        match host.node().port().alloc_receive(e.pages) {
            Ok(m) => (Arc::from(m), 0),
            Err(err) => {
                let _ = host.attach_bookkeeping(id, false, sharing, false);
                return Err(err);
            }
        }
    };
    host.attachments().local().entry(id).or_default().rx = Some((mem.clone(), notify));
    if let Err(err) = host.reprogram(&e) {
        let _ = host.detach(&e, false);
        return Err(err);
    }
    Ok(RxRegion::new(host.clone(), e, mem, offset))
}
