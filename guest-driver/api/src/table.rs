//! The region and lock-set tables, as bytes in Memory Channel space.
//!
//! Each table has two copies and a toggle (seed 004: "two copies (old and new)
//! and a toggle that indicates which of the two copies is valid. The toggle is
//! switched ... only when the new copy is known to be consistent"). The toggle
//! holds a generation number; its low bit names the valid copy; 0 = never
//! written (empty table). A table is changed only under the meta lock (a
//! cluster spinlock), by writing the new copy and the toggle in one transmit
//! chain; total order makes the copy visible everywhere before the toggle.
//!
//! That write is posted: it reaches this node's own copy by loopback, a
//! while after the update returned. So the node remembers the generation it
//! wrote last, and its own reads wait until its copy has caught up with it
//! (read your own writes); other nodes see the update once it arrives, in
//! the total order, as they see any store.

use std::sync::atomic::{fence, AtomicU64, Ordering};

/// Which table (named in errors).
pub use crate::error::TableKind;
use crate::error::{McError, Shortage, WaitFor};
use crate::layout::{
    LOCKSET_TABLE_PAGE, LOCKSET_TOGGLE, META_LOCK, REGION_TABLE_PAGE, REGION_TOGGLE,
};
use crate::node::{wait_for_loopback, Node, OP_TIMEOUT};
use crate::spinlock::ClusterLock;

const MAGIC: u32 = u32::from_le_bytes(*b"MCTB");
const HEADER: usize = 16;

/// A region of Memory Channel space allocated by key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionEntry {
    pub key: u32,
    pub id: u32,
    pub first_page: u32,
    pub pages: u32,
    pub size: u64,
    pub coherent: bool,
    pub creator: u8,
    /// Nodes attached for transmit / receive.
    pub tx_mask: u64,
    pub rx_mask: u64,
    /// Node holding an exclusive transmit / receive attachment.
    pub tx_exclusive: Option<u8>,
    pub rx_exclusive: Option<u8>,
    /// What nodes other than the creator may do.
    pub permissions: Permissions,
}

/// Who may attach a region: the creating node always may; others as these say
/// (the TruCluster API's region permissions, at node granularity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permissions {
    pub others_transmit: bool,
    pub others_receive: bool,
}

impl Permissions {
    /// Every node may transmit and receive.
    pub const ALL: Permissions = Permissions {
        others_transmit: true,
        others_receive: true,
    };
    /// Only the creator writes; everyone may read.
    pub const PUBLISH: Permissions = Permissions {
        others_transmit: false,
        others_receive: true,
    };

    fn bits(self) -> u32 {
        u32::from(self.others_transmit) | u32::from(self.others_receive) << 1
    }

    fn from_bits(b: u32) -> Self {
        Permissions {
            others_transmit: b & 1 != 0,
            others_receive: b & 2 != 0,
        }
    }
}

/// A set of cluster spinlocks allocated by key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockSetEntry {
    pub key: u32,
    pub id: u32,
    pub first_lock: u32,
    pub count: u32,
    pub creator: u8,
    pub attached: u64,
}

/// Fixed-size encoding of a table entry.
pub trait TableEntry: Sized + Copy {
    /// The table entries of this kind are kept in.
    const KIND: TableKind;
    const SIZE: usize;
    fn encode(&self, b: &mut [u8]);
    fn decode(b: &[u8]) -> Option<Self>;
    fn id(&self) -> u32;
    fn key(&self) -> u32;
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

fn put(b: &mut [u8], o: usize, v: &[u8]) {
    b[o..o + v.len()].copy_from_slice(v);
}

const NONE: u32 = u32::MAX;

fn opt(v: Option<u8>) -> u32 {
    v.map_or(NONE, u32::from)
}

/// The node `opt` wrote, or `None` (outer) for a word that is neither a
/// node nor `NONE`: a damaged table.
fn unopt(v: u32) -> Option<Option<u8>> {
    if v == NONE {
        Some(None)
    } else {
        u8::try_from(v).ok().map(Some)
    }
}

impl TableEntry for RegionEntry {
    const KIND: TableKind = TableKind::Region;
    const SIZE: usize = 64;
    fn encode(&self, b: &mut [u8]) {
        put(b, 0, &self.key.to_le_bytes());
        put(b, 4, &self.id.to_le_bytes());
        put(b, 8, &self.first_page.to_le_bytes());
        put(b, 12, &self.pages.to_le_bytes());
        put(b, 16, &self.size.to_le_bytes());
        put(b, 24, &u32::from(self.coherent).to_le_bytes());
        put(b, 28, &u32::from(self.creator).to_le_bytes());
        put(b, 32, &self.tx_mask.to_le_bytes());
        put(b, 40, &self.rx_mask.to_le_bytes());
        put(b, 48, &opt(self.tx_exclusive).to_le_bytes());
        put(b, 52, &opt(self.rx_exclusive).to_le_bytes());
        put(b, 56, &self.permissions.bits().to_le_bytes());
    }
    fn decode(b: &[u8]) -> Option<Self> {
        let (pages, size) = (u32_at(b, 12)?, u64_at(b, 16)?);
        // No node writes a region of no bytes or pages: such a record is
        // torn (a packet of the table lost here, or two writers at once
        // after a lost lock entry), and the table is unreadable.
        if size == 0 || pages == 0 {
            return None;
        }
        Some(RegionEntry {
            key: u32_at(b, 0)?,
            id: u32_at(b, 4)?,
            first_page: u32_at(b, 8)?,
            pages,
            size,
            coherent: u32_at(b, 24)? != 0,
            creator: u8::try_from(u32_at(b, 28)?).ok()?,
            tx_mask: u64_at(b, 32)?,
            rx_mask: u64_at(b, 40)?,
            tx_exclusive: unopt(u32_at(b, 48)?)?,
            rx_exclusive: unopt(u32_at(b, 52)?)?,
            permissions: Permissions::from_bits(u32_at(b, 56)?),
        })
    }
    fn id(&self) -> u32 {
        self.id
    }
    fn key(&self) -> u32 {
        self.key
    }
}

impl TableEntry for LockSetEntry {
    const KIND: TableKind = TableKind::LockSet;
    const SIZE: usize = 32;
    fn encode(&self, b: &mut [u8]) {
        put(b, 0, &self.key.to_le_bytes());
        put(b, 4, &self.id.to_le_bytes());
        put(b, 8, &self.first_lock.to_le_bytes());
        put(b, 12, &self.count.to_le_bytes());
        put(b, 16, &u32::from(self.creator).to_le_bytes());
        put(b, 24, &self.attached.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Option<Self> {
        Some(LockSetEntry {
            key: u32_at(b, 0)?,
            id: u32_at(b, 4)?,
            first_lock: u32_at(b, 8)?,
            count: u32_at(b, 12)?,
            creator: u8::try_from(u32_at(b, 16)?).ok()?,
            attached: u64_at(b, 24)?,
        })
    }
    fn id(&self) -> u32 {
        self.id
    }
    fn key(&self) -> u32 {
        self.key
    }
}

/// A decoded table: its entries and the next id to hand out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table<E> {
    pub next_id: u32,
    pub entries: Vec<E>,
}

impl<E: TableEntry> Table<E> {
    pub fn empty() -> Self {
        Table {
            next_id: 1,
            entries: Vec::new(),
        }
    }

    pub fn capacity(page_size: usize) -> usize {
        (page_size - HEADER) / E::SIZE
    }

    pub fn encode(&self, page_size: usize) -> Result<Vec<u8>, McError> {
        if self.entries.len() > Self::capacity(page_size) {
            return Err(McError::NoSpace(Shortage::TableEntry {
                table: E::KIND,
                capacity: Self::capacity(page_size),
            }));
        }
        let mut b = vec![0u8; HEADER + self.entries.len() * E::SIZE];
        put(&mut b, 0, &MAGIC.to_le_bytes());
        let len =
            u32::try_from(self.entries.len()).expect("at most `capacity` entries, checked above");
        put(&mut b, 4, &len.to_le_bytes());
        put(&mut b, 8, &self.next_id.to_le_bytes());
        for (i, e) in self.entries.iter().enumerate() {
            e.encode(&mut b[HEADER + i * E::SIZE..HEADER + (i + 1) * E::SIZE]);
        }
        Ok(b)
    }

    pub fn decode(b: &[u8]) -> Result<Self, McError> {
        let bad = || McError::CorruptTable(E::KIND);
        if u32_at(b, 0).ok_or_else(bad)? != MAGIC {
            return Err(bad());
        }
        let n = u32_at(b, 4).ok_or_else(bad)? as usize;
        let next_id = u32_at(b, 8).ok_or_else(bad)?;
        let entries = (0..n)
            .map(|i| {
                b.get(HEADER + i * E::SIZE..HEADER + (i + 1) * E::SIZE)
                    .and_then(E::decode)
            })
            .collect::<Option<Vec<E>>>()
            .ok_or_else(bad)?;
        Ok(Table { next_id, entries })
    }

    pub fn by_key(&self, key: u32) -> Option<&E> {
        self.entries.iter().find(|e| e.key() == key)
    }

    pub fn by_id(&self, id: u32) -> Option<&E> {
        self.entries.iter().find(|e| e.id() == id)
    }

    pub fn by_id_mut(&mut self, id: u32) -> Option<&mut E> {
        self.entries.iter_mut().find(|e| e.id() == id)
    }
}

/// The table generations this node wrote last, one per table: its own reads
/// wait until its copy shows them.
#[derive(Debug, Default)]
struct WrittenGenerations {
    region: AtomicU64,
    lockset: AtomicU64,
}

impl WrittenGenerations {
    fn of(&self, toggle: usize) -> &AtomicU64 {
        if toggle == REGION_TOGGLE {
            &self.region
        } else {
            &self.lockset
        }
    }

    /// After a catch-up this node's copy is the cluster's: a write it made
    /// before its adapter crashed may never have gone out.
    fn forget(&self) {
        self.region.store(0, Ordering::Release);
        self.lockset.store(0, Ordering::Release);
    }
}

/// First free run of `want` units in `[start, end)` given used `(first, len)` runs.
pub fn first_fit(used: &mut [(u32, u32)], start: u32, end: u32, want: u32) -> Option<u32> {
    used.sort_unstable();
    let mut cur = start;
    for &(first, len) in used.iter() {
        if first >= end {
            break;
        }
        if first >= cur && first - cur >= want {
            return Some(cur);
        }
        cur = cur.max(first.saturating_add(len));
    }
    (end.saturating_sub(cur) >= want && cur < end).then_some(cur)
}

/// The region and lock-set tables as this node reads and updates them: the
/// one owner of the generations this node wrote last (read your own writes).
#[derive(Default)]
pub(crate) struct Tables {
    written: WrittenGenerations,
}

impl Tables {
    /// After a catch-up this node's copy is the cluster's: a write it made
    /// before its adapter crashed may never have gone out.
    pub(crate) fn forget_written(&self) {
        self.written.forget();
    }

    fn read_table<E: TableEntry>(
        &self,
        node: &Node,
        toggle: usize,
        page: u32,
    ) -> Result<(u64, Table<E>), McError> {
        // A node catching up after a rejoin has stale tables.
        node.coherence.gate(OP_TIMEOUT)?;
        let ps = node.layout.page_size as usize;
        let c = &node.control;
        // This node's last update of the table, posted, may still be on its
        // way back to its own copy.
        let mine = self.written.of(toggle).load(Ordering::Acquire);
        if c.load_u64(toggle) < mine {
            wait_for_loopback(
                node,
                WaitFor::OwnTableUpdate(E::KIND),
                || (c.load_u64(toggle) >= mine).then_some(()),
                || node.arrival(node.control_addr(toggle), 8),
            )?;
        }
        for _ in 0..1000 {
            let g1 = c.load_u64(toggle);
            if g1 == 0 {
                return Ok((0, Table::empty()));
            }
            let mut b = vec![0u8; ps];
            c.read((page + (g1 & 1) as u32) as usize * ps, &mut b);
            // The copy is read before the toggle is read again.
            fence(Ordering::Acquire);
            if c.load_u64(toggle) == g1 {
                return Table::decode(&b).map(|t| (g1, t));
            }
        }
        Err(McError::UnstableTable(E::KIND))
    }

    /// The region table as this node's copy holds it now.
    pub(crate) fn region_table(&self, node: &Node) -> Result<Table<RegionEntry>, McError> {
        self.read_table(node, REGION_TOGGLE, REGION_TABLE_PAGE)
            .map(|(_, t)| t)
    }

    /// Write a new copy into the slot the toggle does not name, then flip the
    /// toggle; total order makes the copy visible everywhere before the toggle.
    fn write_table<E: TableEntry>(
        &self,
        node: &Node,
        toggle: usize,
        page: u32,
        gen: u64,
        t: &Table<E>,
    ) -> Result<(), McError> {
        let l = node.layout;
        let new_gen = gen + 1;
        let bytes = t.encode(l.page_size as usize)?;
        let copy_addr = l.page_addr(page + (new_gen & 1) as u32);
        let toggle_addr = l.page_addr(0) + toggle as u64;
        let g = new_gen.to_le_bytes();
        node.store_batch(&[(copy_addr, &bytes), (toggle_addr, &g)])?;
        self.written.of(toggle).fetch_max(new_gen, Ordering::AcqRel);
        Ok(())
    }

    /// Run `f` on the region table under the meta lock; write it back if `f`
    /// says it changed.
    pub(crate) fn with_regions<T>(
        &self,
        node: &Node,
        f: impl FnOnce(&mut Table<RegionEntry>) -> Result<(T, bool), McError>,
    ) -> Result<T, McError> {
        self.with_table(node, REGION_TOGGLE, REGION_TABLE_PAGE, f)
    }

    /// Run `f` on the lock-set table under the meta lock, as
    /// [`Tables::with_regions`].
    pub(crate) fn with_locksets<T>(
        &self,
        node: &Node,
        f: impl FnOnce(&mut Table<LockSetEntry>) -> Result<(T, bool), McError>,
    ) -> Result<T, McError> {
        self.with_table(node, LOCKSET_TOGGLE, LOCKSET_TABLE_PAGE, f)
    }

    fn with_table<E: TableEntry, T>(
        &self,
        node: &Node,
        toggle: usize,
        page: u32,
        f: impl FnOnce(&mut Table<E>) -> Result<(T, bool), McError>,
    ) -> Result<T, McError> {
        let _local = node.meta.lock().unwrap_or_else(|p| p.into_inner());
        let meta = ClusterLock { offset: META_LOCK };
        meta.acquire(node, false)?;
        let r = (|| {
            let (gen, mut t) = self.read_table::<E>(node, toggle, page)?;
            let (v, changed) = f(&mut t)?;
            if changed {
                self.write_table(node, toggle, page, gen, &t)?;
            }
            Ok(v)
        })();
        meta.release(node)?;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_round_trip() {
        let mut t = Table::<RegionEntry>::empty();
        t.entries.push(RegionEntry {
            key: 7,
            id: 1,
            first_page: 200,
            pages: 3,
            size: 20000,
            coherent: true,
            creator: 2,
            tx_mask: 0b101,
            rx_mask: 0b11,
            tx_exclusive: None,
            rx_exclusive: Some(1),
            permissions: Permissions::PUBLISH,
        });
        t.next_id = 2;
        let b = t.encode(8192).unwrap();
        assert_eq!(Table::<RegionEntry>::decode(&b).unwrap(), t);
        let mut l = Table::<LockSetEntry>::empty();
        l.entries.push(LockSetEntry {
            key: 1,
            id: 1,
            first_lock: 4,
            count: 2,
            creator: 0,
            attached: 3,
        });
        assert_eq!(
            Table::<LockSetEntry>::decode(&l.encode(4096).unwrap()).unwrap(),
            l
        );
        assert!(Table::<RegionEntry>::decode(&[0u8; 64]).is_err());
    }

    #[test]
    fn first_fit_finds_holes() {
        assert_eq!(first_fit(&mut [], 10, 20, 5), Some(10));
        assert_eq!(first_fit(&mut [(10, 3), (15, 2)], 10, 20, 2), Some(13));
        assert_eq!(first_fit(&mut [(10, 3), (15, 2)], 10, 20, 3), Some(17));
        assert_eq!(first_fit(&mut [(10, 3), (15, 2)], 10, 20, 4), None);
        assert_eq!(first_fit(&mut [(12, 8)], 10, 20, 2), Some(10));
    }
}
