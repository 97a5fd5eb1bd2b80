//! [`HugepageMemory`]: DMA memory for the PCI user-space driver inside a real
//! guest, where the device reaches guest-physical addresses and nothing
//! translates them (no IOMMU, no kernel driver).
//!
//! The memory is 2 MiB hugepages (each physically contiguous) of an
//! `MFD_HUGETLB` memfd, re-mapped one page at a time into a reserved range so
//! that virtual order is guest-physical order: the whole region is then
//! contiguous in guest-physical space, as a [`DmaBacking`] must be.
//! Frame numbers come from `/proc/self/pagemap` (root only). The mappings are
//! vm-memory [`MmapRegion`]s, so they are unmapped on every error path and on
//! drop.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use log::{debug, info};
use vm_memory::mmap::MmapRegionError;
use vm_memory::{FileOffset, MmapRegion, VolatileMemory, VolatileMemoryError};
use vmm_sys_util::fallocate::{fallocate, FallocateMode};

use super::backing::{fill_slice, memfd, DmaBacking};

/// Size of one hugepage (x86-64 default).
pub const HUGEPAGE_SIZE: usize = 2 << 20;
/// Size of the frames `/proc/self/pagemap` numbers.
const FRAME: usize = 4096;
/// 4 KiB frames in one hugepage.
const FRAMES_PER_HUGEPAGE: u64 = (HUGEPAGE_SIZE / FRAME) as u64;

/// Why hugepage DMA memory could not be had.
#[derive(Debug, thiserror::Error)]
pub enum HugepageError {
    #[error("memfd_create(MFD_HUGETLB) failed (the kernel needs hugetlbfs support)")]
    Memfd(#[source] io::Error),
    #[error("sizing a hugetlb memfd to {pages} hugepages")]
    Size {
        pages: usize,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot map {pages} hugepages of 2 MiB ({} free: the guest needs \
         `echo 64 > /proc/sys/vm/nr_hugepages`; the mc-host image's /init does it)",
        free.map_or("unknown".to_string(), |n| n.to_string())
    )]
    Map {
        pages: usize,
        /// Free hugepages in the pool when the mapping failed, if known.
        free: Option<usize>,
        #[source]
        source: MmapRegionError,
    },
    #[error("touching hugepage {page}")]
    Touch {
        page: usize,
        #[source]
        source: VolatileMemoryError,
    },
    #[error("zeroing the hugepages")]
    Zero(#[source] VolatileMemoryError),
    #[error("reading /proc/self/pagemap")]
    Pagemap(#[source] io::Error),
    #[error("/proc/self/pagemap: page at {vaddr:#x} is not present")]
    NotPresent { vaddr: usize },
    #[error("/proc/self/pagemap shows frame 0: frame numbers need root (CAP_SYS_ADMIN)")]
    NoFrameNumbers,
    #[error(
        "no {need} physically contiguous hugepages ({} MiB) among the {pages} the kernel gave \
         (frames {frames:#x?}); ask for less DMA memory (--dma-mib) or boot with a fresh \
         hugepage pool",
        need * 2
    )]
    NotContiguous {
        need: usize,
        pages: usize,
        /// The frames the kernel gave, sorted.
        frames: Vec<u64>,
    },
    #[error("reserving {len:#x} bytes of address space")]
    Reserve {
        len: usize,
        #[source]
        source: MmapRegionError,
    },
    #[error("re-mapping hugepage {page}")]
    Remap {
        page: usize,
        #[source]
        source: io::Error,
    },
    #[error("hugepage {index} is at frame {pfn:#x} after re-mapping, expected {expected:#x}")]
    Moved {
        index: usize,
        pfn: u64,
        expected: u64,
    },
}

/// Hugepage DMA memory, contiguous in guest-physical space.
#[derive(Debug)]
pub struct HugepageMemory {
    /// The reserved range the hugepages are mapped into (its unused ends are
    /// `PROT_NONE` and never accessed); unmapping it unmaps them all.
    mapping: Arc<MmapRegion>,
    /// Offset of the first hugepage in `mapping` (2 MiB aligned in memory).
    start: usize,
    len: usize,
    gpa: u64,
}

impl DmaBacking for HugepageMemory {
    fn mapping(&self) -> &Arc<MmapRegion> {
        &self.mapping
    }
    fn start(&self) -> usize {
        self.start
    }
    fn len(&self) -> usize {
        self.len
    }
    fn gpa(&self) -> u64 {
        self.gpa
    }
}

/// Find `need` pages among `pfns` (index = page number in the file, value =
/// frame number of its first 4 KiB frame) whose frames follow one another
/// (each `step` frames after the previous) once sorted. Returns the page
/// indices in frame order.
pub fn contiguous_run(pfns: &[u64], need: usize, step: u64) -> Option<Vec<usize>> {
    if need == 0 || pfns.len() < need {
        return None;
    }
    let mut order: Vec<usize> = (0..pfns.len()).collect();
    order.sort_by_key(|&i| pfns[i]);
    let mut start = 0;
    for k in 1..=order.len() {
        if k - start >= need {
            return Some(order[start..start + need].to_vec());
        }
        if k == order.len() {
            break;
        }
        if pfns[order[k]] != pfns[order[k - 1]] + step {
            start = k;
        }
    }
    None
}

fn free_hugepages() -> Option<usize> {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `/proc/self/pagemap`: which frame backs a virtual page.
struct Pagemap(File);

impl Pagemap {
    fn open() -> Result<Pagemap, HugepageError> {
        File::open("/proc/self/pagemap")
            .map(Pagemap)
            .map_err(HugepageError::Pagemap)
    }

    /// The frame number of the page mapped at `vaddr` (needs root).
    fn pfn(&self, vaddr: usize) -> Result<u64, HugepageError> {
        let mut b = [0u8; 8];
        self.0
            .read_exact_at(&mut b, (vaddr / FRAME * 8) as u64)
            .map_err(HugepageError::Pagemap)?;
        let e = u64::from_le_bytes(b);
        if e & (1 << 63) == 0 {
            return Err(HugepageError::NotPresent { vaddr });
        }
        let pfn = e & ((1 << 55) - 1);
        if pfn == 0 {
            return Err(HugepageError::NoFrameNumbers);
        }
        Ok(pfn)
    }
}

/// `pages` hugepages of a hugetlb memfd, mapped at the kernel's choice and
/// populated; returns the mapping and each page's frame number.
fn map_hugetlb_file(
    file: &Arc<File>,
    pages: usize,
) -> Result<(MmapRegion, Vec<u64>), HugepageError> {
    let len = pages * HUGEPAGE_SIZE;
    file.set_len(len as u64)
        .map_err(|source| HugepageError::Size { pages, source })?;
    let mapping = MmapRegion::build(
        Some(FileOffset::from_arc(file.clone(), 0)),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_SHARED | libc::MAP_POPULATE | libc::MAP_LOCKED,
    )
    .map_err(|source| HugepageError::Map {
        pages,
        free: free_hugepages(),
        source,
    })?;
    let pagemap = Pagemap::open()?;
    let mut pfns = Vec::with_capacity(pages);
    for page in 0..pages {
        let at = page * HUGEPAGE_SIZE;
        // Touch it (MAP_POPULATE should have), so that it is surely present.
        mapping
            .get_ref::<u8>(at)
            .map_err(|source| HugepageError::Touch { page, source })?
            .store(0);
        pfns.push(pagemap.pfn(mapping.as_ptr() as usize + at)?);
    }
    Ok((mapping, pfns))
}

impl HugepageMemory {
    /// At least `size` bytes of DMA memory, contiguous in guest-physical space.
    pub fn allocate(size: usize) -> Result<HugepageMemory, HugepageError> {
        let need = size.div_ceil(HUGEPAGE_SIZE).max(1);
        let file =
            Arc::new(memfd(c"mc-guest-dma", libc::MFD_HUGETLB).map_err(HugepageError::Memfd)?);
        let (first_mapping, pages, run) = pick_contiguous(&file, need)?;
        let len = need * HUGEPAGE_SIZE;
        let (mapping, start) = map_in_frame_order(&file, &run)?;
        // Drop the first mapping (the file keeps its pages) and give the
        // pages not used back to the pool.
        drop(first_mapping);
        for page in (0..pages).filter(|p| !run.contains(p)) {
            let offset = (page * HUGEPAGE_SIZE) as u64;
            if let Err(e) = fallocate(
                &*file,
                FallocateMode::PunchHole,
                true,
                offset,
                HUGEPAGE_SIZE as u64,
            ) {
                debug!("hugepages: returning page {page} to the pool: {e}");
            }
        }
        // Check what the device will see: every page where it should be.
        let pagemap = Pagemap::open()?;
        let base = mapping.as_ptr() as usize + start;
        let first = pagemap.pfn(base)?;
        for index in 0..need {
            let pfn = pagemap.pfn(base + index * HUGEPAGE_SIZE)?;
            let expected = first + index as u64 * FRAMES_PER_HUGEPAGE;
            if pfn != expected {
                return Err(HugepageError::Moved {
                    index,
                    pfn,
                    expected,
                });
            }
        }
        let mem = HugepageMemory {
            mapping: Arc::new(mapping),
            start,
            len,
            gpa: first * FRAME as u64,
        };
        mem.mapping
            .get_slice(start, len)
            .and_then(|whole| fill_slice(&whole, 0))
            .map_err(HugepageError::Zero)?;
        info!(
            "DMA memory: {} MiB of hugepages at gpa {:#x} (picked from {pages})",
            len >> 20,
            mem.gpa
        );
        Ok(mem)
    }
}

/// Map hugepages of `file` until `need` of them are physically contiguous:
/// first just `need`; if the pool hands out pages that are not adjacent,
/// every free page, to look for a run among them. Returns the mapping of the
/// file's pages, how many there are, and the run's page indices in frame
/// order.
fn pick_contiguous(
    file: &Arc<File>,
    need: usize,
) -> Result<(MmapRegion, usize, Vec<usize>), HugepageError> {
    let (mapping, pfns) = map_hugetlb_file(file, need)?;
    if let Some(run) = contiguous_run(&pfns, need, FRAMES_PER_HUGEPAGE) {
        return Ok((mapping, need, run));
    }
    let free = free_hugepages().unwrap_or(0);
    debug!("hugepages: first {need} not contiguous ({pfns:x?}); trying {free} more");
    let (pages, pfns) = if free > 0 {
        drop(mapping);
        let pages = need + free;
        let (mapping, pfns) = map_hugetlb_file(file, pages)?;
        if let Some(run) = contiguous_run(&pfns, need, FRAMES_PER_HUGEPAGE) {
            return Ok((mapping, pages, run));
        }
        (pages, pfns)
    } else {
        (need, pfns)
    };
    let mut frames = pfns;
    frames.sort_unstable();
    Err(HugepageError::NotContiguous {
        need,
        pages,
        frames,
    })
}

/// Reserve a 2 MiB-aligned virtual range and map the file pages `run` into it
/// in that order. Returns the reservation and the offset of the first page.
fn map_in_frame_order(file: &File, run: &[usize]) -> Result<(MmapRegion, usize), HugepageError> {
    let len = run.len() * HUGEPAGE_SIZE;
    let resv_len = len + HUGEPAGE_SIZE;
    let reservation = MmapRegion::build(
        None,
        resv_len,
        libc::PROT_NONE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
    )
    .map_err(|source| HugepageError::Reserve {
        len: resv_len,
        source,
    })?;
    let resv = reservation.as_ptr() as usize;
    let start = resv.next_multiple_of(HUGEPAGE_SIZE) - resv;
    for (k, &page) in run.iter().enumerate() {
        let at = resv + start + k * HUGEPAGE_SIZE;
        // SAFETY: [at, at + HUGEPAGE_SIZE) lies inside `reservation`
        // (start < HUGEPAGE_SIZE and start + len <= resv_len), a PROT_NONE
        // mapping this function owns and of which no slice or reference has
        // been handed out, so MAP_FIXED replaces only pages nothing uses; the
        // reservation unmaps the replaced range with the rest on drop. The
        // file page exists (the file was sized and populated before).
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                HUGEPAGE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE | libc::MAP_LOCKED,
                file.as_raw_fd(),
                libc::off_t::try_from(page * HUGEPAGE_SIZE)
                    .expect("a page of the file lies within off_t (the file was sized to it)"),
            )
        };
        if p == libc::MAP_FAILED {
            return Err(HugepageError::Remap {
                page,
                source: io::Error::last_os_error(),
            });
        }
    }
    Ok((reservation, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The re-mapping in frame order, over an ordinary memfd (hugetlbfs and
    /// frame numbers need a guest with hugepages and root): each 2 MiB page
    /// of the file lands where the run puts it, inside an aligned range.
    #[test]
    fn pages_are_mapped_in_the_order_of_the_run() {
        let file = crate::dma::backing::memfd(c"hugepage-test", 0).unwrap();
        file.set_len(2 * HUGEPAGE_SIZE as u64).unwrap();
        for page in 0..2u64 {
            file.write_all_at(
                &[0xa0 + u8::try_from(page).unwrap(); 8],
                page * HUGEPAGE_SIZE as u64 + 8,
            )
            .unwrap();
        }
        let (mapping, start) = map_in_frame_order(&file, &[1, 0]).unwrap();
        assert_eq!((mapping.as_ptr() as usize + start) % HUGEPAGE_SIZE, 0);
        assert!(start + 2 * HUGEPAGE_SIZE <= mapping.size());
        let at = |page: usize| start + page * HUGEPAGE_SIZE + 8;
        let word = |off: usize| mapping.get_ref::<u64>(off).unwrap().load();
        assert_eq!(word(at(0)), 0xa1a1_a1a1_a1a1_a1a1);
        assert_eq!(word(at(1)), 0xa0a0_a0a0_a0a0_a0a0);
        // Shared with the file: a store through the mapping reaches it.
        mapping.get_ref::<u8>(at(1) + 8).unwrap().store(0x5a);
        let mut b = [0u8; 1];
        file.read_exact_at(&mut b, 16).unwrap();
        assert_eq!(b, [0x5a]);
    }

    #[test]
    fn contiguous_runs() {
        let s = 512;
        // Descending frames: contiguous once sorted, in reverse page order.
        assert_eq!(
            contiguous_run(&[3 * s, 2 * s, s], 3, s),
            Some(vec![2, 1, 0])
        );
        assert_eq!(
            contiguous_run(&[0x1000, 0x1000 + s], 2, s),
            Some(vec![0, 1])
        );
        // A gap: the run of two after it.
        assert_eq!(
            contiguous_run(&[0x1000, 0x5000, 0x5000 + s], 2, s),
            Some(vec![1, 2])
        );
        assert_eq!(contiguous_run(&[0x1000, 0x5000, 0x9000], 2, s), None);
        assert_eq!(contiguous_run(&[0x1000], 2, s), None);
        assert_eq!(contiguous_run(&[0x1000, 0x1000 + s], 0, s), None);
    }
}
