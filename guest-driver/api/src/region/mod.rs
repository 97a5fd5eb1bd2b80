//! Regions of Memory Channel space allocated by cluster-wide key (imc_asalloc,
//! imc_asdealloc), kept in the region table. Attaching them is `attach`; the
//! handles an attachment returns are `handle`; what the part needs of its
//! node, and the attachments it owns, are `host`.

mod attach;
mod handle;
mod host;

pub use attach::Sharing;
pub(crate) use attach::{attach_receive, attach_transmit, attach_transmit_to};
pub use handle::{RxRegion, TxRegion};
pub(crate) use host::{Attachments, RegionHost};

use firmware_model::NodeSet;
use log::debug;

use crate::error::{Conflict, McError, RegionArea, RegionRef, Shortage};
use crate::layout::ARENA_PAGE;
use crate::node::Node;
use crate::table::{first_fit, Permissions, RegionEntry, Tables};

/// Allocate `size` bytes of Memory Channel space under cluster-wide `key`,
/// or find the region another node allocated under it (imc_asalloc). A
/// coherent region is received by every node from the start, so a node that
/// attaches late sees its current contents.
pub(crate) fn alloc(
    node: &Node,
    tables: &Tables,
    key: u32,
    size: u64,
    coherent: bool,
) -> Result<u32, McError> {
    alloc_with(node, tables, key, size, coherent, Permissions::ALL)
}

/// [`alloc`] with permissions for the other nodes
/// (they apply if this call creates the region).
pub(crate) fn alloc_with(
    node: &Node,
    tables: &Tables,
    key: u32,
    size: u64,
    coherent: bool,
    permissions: Permissions,
) -> Result<u32, McError> {
    if size == 0 {
        return Err(McError::EmptyRegion);
    }
    let l = node.layout;
    let area = if coherent {
        RegionArea::Coherent
    } else {
        RegionArea::Ordinary
    };
    let pages = size.div_ceil(u64::from(l.page_size));
    let short = |pages| McError::NoSpace(Shortage::Pages { pages, area });
    let pages = u32::try_from(pages).map_err(|_| short(pages))?;
    let me = node.id().0;
    tables.with_regions(node, |t| {
        if let Some(e) = t.by_key(key) {
            if e.size != size {
                return Err(McError::RegionSize {
                    key,
                    size: e.size,
                    wanted: size,
                });
            }
            return Ok((e.id, false));
        }
        let (start, end) = if coherent {
            (ARENA_PAGE, l.arena_end())
        } else {
            (l.arena_end(), l.ordinary_end())
        };
        let mut used: Vec<(u32, u32)> = t.entries.iter().map(|e| (e.first_page, e.pages)).collect();
        let first = first_fit(&mut used, start, end, pages).ok_or_else(|| short(pages.into()))?;
        let id = t.next_id;
        t.next_id += 1;
        t.entries.push(RegionEntry {
            key,
            id,
            first_page: first,
            pages,
            size,
            coherent,
            creator: me,
            tx_mask: 0,
            rx_mask: 0,
            tx_exclusive: None,
            rx_exclusive: None,
            permissions,
        });
        debug!(
            "node{me}: region key {key} id {id}: pages {first}..{}",
            first + pages
        );
        Ok((id, true))
    })
}

/// The id of the region allocated under `key`.
pub(crate) fn lookup(node: &Node, tables: &Tables, key: u32) -> Result<u32, McError> {
    tables
        .region_table(node)?
        .by_key(key)
        .map(|e| e.id)
        .ok_or(McError::NoSuchRegion(RegionRef::Key(key)))
}

/// Deallocate region `id` (imc_asdealloc). Refused while any node has it
/// attached.
pub(crate) fn dealloc(node: &Node, tables: &Tables, id: u32) -> Result<(), McError> {
    tables.with_regions(node, |t| {
        let e = t
            .by_id(id)
            .ok_or(McError::NoSuchRegion(RegionRef::Id(id)))?;
        if e.tx_mask | e.rx_mask != 0 {
            return Err(McError::Busy {
                region: id,
                conflict: Conflict::Attached {
                    nodes: NodeSet(e.tx_mask | e.rx_mask),
                },
            });
        }
        t.entries.retain(|e| e.id != id);
        Ok(((), true))
    })
}
