//! How large the shared heap may be, and why: the largest heap the model
//! allows for the run's variant, cluster and executable. It is the heap a
//! program gets unless `CSM_HEAP_MIB` asks for less, so a program whose
//! `G_MALLOC`s fit it needs no setting, and one whose `G_MALLOC`s do not
//! fails at the `G_MALLOC` that goes past it, saying which bound it met.
//!
//! The bounds, the smallest of which holds (docs/c-programs.md, "Heap
//! limits"):
//!
//! - **Memory Channel space.** Everything Cashmere and the API keep in
//!   Memory Channel space must fit the cluster's address space
//!   (`mc-host run --address-space`, 512 MiB by default, at most 1 GiB:
//!   docs/device.md s.1): the API's control pages and its coherent arena
//!   (which the API's layout takes twice, for its resync window) with
//!   Cashmere's directory and write-notice bins in it (a share per heap
//!   page, growing with the nodes; not under CSM-S and CSM-None, whose
//!   metadata travels by message), and the ordinary regions: every node's
//!   mailbox, CSM-ADB's broadcast buffers and, under CSM-DMS only, the home
//!   region, which is the heap itself (once for the cluster). So under
//!   CSM-DMS the heap is the address space less the rest; under the other
//!   variants the heap is in each node's own memory and this bound holds
//!   only where the metadata outgrows the space (many nodes).
//! - **Cashmere.** `cashmere::MAX_HEAP_BYTES` (1 GiB, the largest address
//!   space, so that the heap that runs under one variant runs under all).
//! - **The address range.** The heap ends at the program's globals
//!   ([`GLOBALS_AT`], mc-cc's linker script) and starts above the
//!   executable.
//!
//! Reserving the largest heap costs what is touched: the heap is a memfd
//! mapped twice, twins are `MAP_NORESERVE`, and the guest RAM a memfd; what
//! grows with the heap's size whether or not the program uses it is
//! Cashmere's per-page state (tens of bytes a page), the directory and
//! bins in the coherent arena, and, under CSM-DMS, the home region's
//! receive memory, which the driver zeroes when the region is attached
//! (measured in docs/c-programs.md).

use std::fmt;

use cashmere::{Config, CsmVariant, MAX_HEAP_BYTES};

use crate::connect::Cluster;
use crate::globals::GLOBALS_AT;

/// API control pages before the coherent arena (`mc_api` layout's
/// `ARENA_PAGE`) and after it, the resync window's alias of the control
/// pages (`CONTROL_PAGES`).
const API_PAGES: u64 = 128 + 16;
/// Room in the coherent arena besides Cashmere's regions, and the factor
/// the regions are taken with (slack for rounding and for regions found
/// from an earlier run).
const ARENA_SLACK: u64 = 4 << 20;

/// The coherent arena libcsm opens the API with, for `cfg`'s heap on
/// `cluster`.
pub fn arena_bytes(cfg: &Config, cluster: &Cluster) -> u64 {
    let space = cfg.space(cluster.nodes);
    ARENA_SLACK + 2 * space.coherent_bytes(cfg.variant, u64::from(cluster.page_size))
}

/// Memory Channel pages the whole run takes with `cfg`'s heap: the API's
/// control pages, its arena twice (the resync window), and the ordinary
/// regions.
fn mc_pages(cfg: &Config, cluster: &Cluster) -> u64 {
    let mp = u64::from(cluster.page_size);
    let arena = arena_bytes(cfg, cluster) / mp;
    let ordinary = cfg
        .space(cluster.nodes)
        .ordinary_bytes(cfg.variant, cluster.page_size)
        / mp;
    API_PAGES + 2 * arena + ordinary
}

/// What the Memory Channel space leaves for everything but the heap's own
/// pages.
fn fits(cfg: &Config, cluster: &Cluster) -> bool {
    // The API's layout wants the control pages and arenas strictly inside.
    mc_pages(cfg, cluster) < cluster.address_space / u64::from(cluster.page_size)
}

/// Which bound sets the largest heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The cluster's Memory Channel space: `other` bytes of it are taken
    /// by the rest of the run at the largest heap.
    McSpace {
        variant: CsmVariant,
        nodes: u32,
        address_space: u64,
        other: u64,
    },
    /// `cashmere::MAX_HEAP_BYTES`.
    Cashmere { variant: CsmVariant },
    /// The executable ends at `floor`, the globals start at [`GLOBALS_AT`].
    Range { floor: usize },
}

/// The largest heap for a run, and the bound that sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapLimit {
    /// The whole heap: control block, `G_MALLOC` space and globals.
    pub heap: usize,
    /// Of it, what `G_MALLOC` may have.
    pub user: usize,
    pub bound: Bound,
}

/// The largest heap for `cfg` (its variant, page size and flags; its heap
/// size is ignored) on `cluster`, around `fixed` bytes of control block
/// and globals, in an executable that ends at `floor`. None when not even
/// `fixed` and one page for `G_MALLOC` fit.
pub fn limit(cfg: &Config, cluster: &Cluster, fixed: usize, floor: usize) -> Option<HeapLimit> {
    let page = cfg.page_size as usize;
    let with = |pages: usize| Config {
        heap_bytes: pages * page,
        ..cfg.clone()
    };
    let mut candidates = Vec::with_capacity(3);
    // The Memory Channel space: the most pages that fit (monotone in pages:
    // the regions only grow with them).
    let (mut lo, mut hi) = (0usize, MAX_HEAP_BYTES / page);
    if !fits(&with(hi), cluster) {
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if fits(&with(mid), cluster) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let mp = u64::from(cluster.page_size);
        let taken = mc_pages(&with(lo), cluster) * mp;
        // The home region, where the variant keeps shared data in Memory
        // Channel space (CSM-DMS).
        let home = if !cfg.variant.data_by_messages() {
            (lo * page) as u64
        } else {
            0
        };
        candidates.push((
            lo * page,
            Bound::McSpace {
                variant: cfg.variant,
                nodes: cluster.nodes,
                address_space: cluster.address_space,
                other: taken.saturating_sub(home),
            },
        ));
    }
    candidates.push((
        MAX_HEAP_BYTES / page * page,
        Bound::Cashmere {
            variant: cfg.variant,
        },
    ));
    let range = GLOBALS_AT.saturating_sub(floor) / page * page;
    candidates.push((range, Bound::Range { floor }));
    let (heap, bound) = candidates.into_iter().min_by_key(|c| c.0)?;
    let user = heap.checked_sub(fixed).filter(|&u| u >= page)?;
    Some(HeapLimit { heap, user, bound })
}

fn mib(bytes: u64) -> String {
    if bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    }
}

impl fmt::Display for HeapLimit {
    /// Why the heap can be no larger (after "the most ... is N bytes").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.bound {
            Bound::McSpace {
                variant: CsmVariant::Dms,
                nodes,
                address_space,
                other,
            } => write!(
                f,
                "CSM-DMS keeps the heap in Memory Channel space (its home region, once for the \
                 cluster), and this cluster's space is {} (mc-host run --address-space; at most \
                 1 GiB, docs/device.md), of which {} go to the API's control pages and \
                 coherent arena, Cashmere's directory, write-notice bins and {nodes} nodes' \
                 mailboxes",
                mib(address_space),
                mib(other),
            ),
            Bound::McSpace {
                variant,
                nodes,
                address_space,
                other,
            } => write!(
                f,
                "{} keeps the heap in each node's memory, but its directory and write-notice \
                 bins in Memory Channel space take a share per heap page that grows with the \
                 nodes: with {nodes} nodes they and the rest take {} of this cluster's {} \
                 (mc-host run --address-space; at most 1 GiB, docs/device.md)",
                variant_name(variant),
                mib(other),
                mib(address_space),
            ),
            Bound::Cashmere { variant } => write!(
                f,
                "{} keeps the heap in each node's memory, not in Memory Channel space, and \
                 Cashmere takes a heap of at most {} (cashmere::MAX_HEAP_BYTES: the largest \
                 Memory Channel address space, docs/device.md, so that a heap that runs under \
                 one variant runs under every one)",
                variant_name(variant),
                mib(MAX_HEAP_BYTES as u64),
            ),
            Bound::Range { floor } => write!(
                f,
                "the heap lies between the end of the executable ({floor:#x}) and the \
                 program's globals at {GLOBALS_AT:#x} (scripts/mc-cc's linker script)"
            ),
        }
    }
}

fn variant_name(v: CsmVariant) -> String {
    format!("CSM-{}", v.name().to_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(nodes: u32, mib: u64) -> Cluster {
        Cluster {
            nodes,
            page_size: 8192,
            address_space: mib << 20,
        }
    }

    fn cfg(variant: CsmVariant) -> Config {
        Config {
            variant,
            flags: 4,
            ..Config::default()
        }
    }

    const FIXED: usize = 64 << 10;
    const FLOOR: usize = 0x50_0000;

    #[test]
    fn dms_gets_what_the_memory_channel_space_leaves_and_no_more() {
        for (nodes, space) in [(1, 512), (2, 512), (4, 512), (8, 1024), (4, 64)] {
            let c = cluster(nodes, space);
            let l = limit(&cfg(CsmVariant::Dms), &c, FIXED, FLOOR).expect("a heap fits");
            let Bound::McSpace { other, .. } = l.bound else {
                panic!("{nodes} x {space} MiB: {:?}", l.bound);
            };
            assert_eq!(l.heap as u64 + other, mc_pages(&cfg_of(&l), &c) * 8192);
            assert!(fits(&cfg_of(&l), &c));
            let more = Config {
                heap_bytes: l.heap + 8192,
                ..cfg(CsmVariant::Dms)
            };
            assert!(!fits(&more, &c), "{nodes} x {space} MiB");
            // Most of the space is heap.
            assert!(l.heap as u64 > (space << 20) * 3 / 4, "{l:?}");
            assert_eq!(l.user, l.heap - FIXED);
            let why = l.to_string();
            assert!(why.contains(&format!("space is {space} MiB")), "{why}");
        }
    }

    fn cfg_of(l: &HeapLimit) -> Config {
        Config {
            heap_bytes: l.heap,
            ..cfg(CsmVariant::Dms)
        }
    }

    #[test]
    fn the_message_variants_get_cashmeres_largest_heap_unless_metadata_fills_the_space() {
        for v in [CsmVariant::Ms, CsmVariant::None, CsmVariant::S] {
            let l = limit(&cfg(v), &cluster(4, 512), FIXED, FLOOR).expect("a heap fits");
            assert_eq!(l.heap, MAX_HEAP_BYTES);
            assert_eq!(l.bound, Bound::Cashmere { variant: v });
            assert!(l.to_string().contains("MAX_HEAP_BYTES"), "{l}");
        }
        // 64 nodes: MS's write-notice bins (a word per page per pair of
        // nodes) no longer fit beside a 1 GiB heap; None's metadata is
        // messages.
        let l = limit(&cfg(CsmVariant::Ms), &cluster(64, 1024), FIXED, FLOOR).unwrap();
        assert!(matches!(l.bound, Bound::McSpace { .. }), "{l:?}");
        assert!(l.heap < MAX_HEAP_BYTES);
        assert!(l.to_string().contains("grows with the nodes"), "{l}");
        let l = limit(&cfg(CsmVariant::None), &cluster(64, 1024), FIXED, FLOOR).unwrap();
        assert_eq!(l.heap, MAX_HEAP_BYTES);
    }

    #[test]
    fn an_executable_reaching_near_the_globals_bounds_the_heap() {
        let floor = GLOBALS_AT - (100 << 20);
        let l = limit(&cfg(CsmVariant::None), &cluster(2, 512), FIXED, floor).unwrap();
        assert_eq!(l.heap, 100 << 20);
        assert_eq!(l.bound, Bound::Range { floor });
        assert!(limit(&cfg(CsmVariant::None), &cluster(2, 512), FIXED, GLOBALS_AT).is_none());
    }
}
