//! The PCI transport: a user-space virtio 1.x driver for the adapter inside a
//! QEMU guest, with no kernel module.
//!
//! - The adapter is found under `/sys/bus/pci/devices` by vendor/device
//!   (`abi::PCI_VENDOR_ID`, `abi::PCI_DEVICE_ID`); a kernel driver bound to it
//!   is unbound, the function is enabled (`enable`) and Bus Master is set in
//!   its command register (through the `config` file).
//! - The virtio vendor capabilities (0x09) in config space name the common,
//!   notify, ISR and device configuration structures; the BARs holding them are
//!   mapped through `resourceN` (`MAP_SHARED`) and accessed volatilely, with
//!   accesses of the field's own width.
//! - DMA memory is hugepages (2 MiB, each physically contiguous) from a
//!   `MFD_HUGETLB` memfd, re-mapped one page at a time so that virtual order is
//!   guest-physical order: the region is contiguous in guest-physical space.
//!   Frame numbers come from `/proc/self/pagemap` (root only).
//! - No interrupts: the driver polls used rings and the status page.
//!
//! docs/qemu.md describes how the guest image and QEMU are set up for this.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::abi::{self, Registers, CONFIG_SIZE, NUM_QUEUES};
use log::{debug, info, warn};

use super::{Transport, TransportError};
use crate::dma::{DmaBacking, DmaRegion};
use crate::virtqueue::RingLayout;

/// VIRTIO_RING_F_EVENT_IDX.
pub const F_EVENT_IDX: u64 = 1 << 29;
/// VIRTIO_F_VERSION_1.
pub const F_VERSION_1: u64 = 1 << 32;

/// Where the kernel lists PCI functions.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";
/// Size of one hugepage (x86-64 default).
pub const HUGEPAGE_SIZE: usize = 2 << 20;

// Device status bits (virtio 1.x, 2.1).
const S_ACKNOWLEDGE: u8 = 1;
const S_DRIVER: u8 = 2;
const S_DRIVER_OK: u8 = 4;
const S_FEATURES_OK: u8 = 8;
const S_NEEDS_RESET: u8 = 0x40;
const S_FAILED: u8 = 0x80;

// struct virtio_pci_common_cfg offsets (4.1.4.3).
const C_DFSELECT: usize = 0x00;
const C_DF: usize = 0x04;
const C_GFSELECT: usize = 0x08;
const C_GF: usize = 0x0c;
const C_NUM_QUEUES: usize = 0x12;
const C_STATUS: usize = 0x14;
const C_CFGGENERATION: usize = 0x15;
const C_Q_SELECT: usize = 0x16;
const C_Q_SIZE: usize = 0x18;
const C_Q_MSIX: usize = 0x1a;
const C_Q_ENABLE: usize = 0x1c;
const C_Q_NOFF: usize = 0x1e;
const C_Q_DESC: usize = 0x20;
const C_Q_AVAIL: usize = 0x28;
const C_Q_USED: usize = 0x30;
const COMMON_CFG_LEN: usize = 0x38;

/// virtio_pci_cap.cfg_type values.
pub mod cap_type {
    pub const COMMON: u8 = 1;
    pub const NOTIFY: u8 = 2;
    pub const ISR: u8 = 3;
    pub const DEVICE: u8 = 4;
}

/// How the PCI transport is set up.
#[derive(Clone, Debug)]
pub struct PciOptions {
    /// Bytes of DMA memory (rounded up to whole 2 MiB hugepages).
    pub dma_size: usize,
    /// Where to look for PCI functions.
    pub sysfs: PathBuf,
}

impl Default for PciOptions {
    fn default() -> Self {
        PciOptions {
            dma_size: 16 << 20,
            sysfs: PathBuf::from(SYSFS_PCI_DEVICES),
        }
    }
}

fn pci_err(msg: impl Into<String>) -> TransportError {
    TransportError::Pci(msg.into())
}

fn io_err(what: String) -> impl FnOnce(io::Error) -> TransportError {
    move |e| TransportError::Pci(format!("{what}: {e}"))
}

/// One virtio PCI capability (struct virtio_pci_cap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtioCap {
    pub cfg_type: u8,
    pub bar: u8,
    pub offset: u32,
    pub length: u32,
    /// notify_off_multiplier (notify capability only).
    pub notify_off_multiplier: u32,
}

/// Walk the capability list of a type-0 config space and return the virtio
/// vendor capabilities (id 0x09). Loops and out-of-range pointers are errors.
pub fn parse_virtio_caps(config: &[u8]) -> Result<Vec<VirtioCap>, String> {
    if config.len() < 0x40 {
        return Err(format!(
            "config space is {} bytes, need at least 64",
            config.len()
        ));
    }
    let status = u16::from_le_bytes([config[6], config[7]]);
    if status & 0x10 == 0 {
        return Err("the function has no capability list (status bit 4 clear)".into());
    }
    let u32_at =
        |o: usize| u32::from_le_bytes([config[o], config[o + 1], config[o + 2], config[o + 3]]);
    let mut caps = Vec::new();
    let mut ptr = usize::from(config[0x34] & 0xfc);
    let mut hops = 0;
    while ptr != 0 {
        hops += 1;
        if hops > 48 || ptr < 0x40 || ptr + 2 > config.len() {
            return Err(format!("bad capability pointer {ptr:#x}"));
        }
        let id = config[ptr];
        let next = usize::from(config[ptr + 1] & 0xfc);
        if id == 0x09 {
            if ptr + 16 > config.len() {
                return Err(format!(
                    "virtio capability at {ptr:#x} runs past config space"
                ));
            }
            let cfg_type = config[ptr + 3];
            let notify_off_multiplier = if cfg_type == cap_type::NOTIFY {
                if ptr + 20 > config.len() {
                    return Err(format!("notify capability at {ptr:#x} is short"));
                }
                u32_at(ptr + 16)
            } else {
                0
            };
            caps.push(VirtioCap {
                cfg_type,
                bar: config[ptr + 4],
                offset: u32_at(ptr + 8),
                length: u32_at(ptr + 12),
                notify_off_multiplier,
            });
        }
        ptr = next;
    }
    Ok(caps)
}

/// A BAR mapped through sysfs `resourceN`.
#[derive(Debug)]
struct BarMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a device mapping owned by this value, only accessed volatilely.
unsafe impl Send for BarMap {}
// SAFETY: as above.
unsafe impl Sync for BarMap {}

impl BarMap {
    fn map(path: &Path) -> Result<BarMap, TransportError> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_err(format!("opening {}", path.display())))?;
        let len = f
            .metadata()
            .map_err(io_err(format!("stat {}", path.display())))?
            .len() as usize;
        if len == 0 {
            return Err(pci_err(format!(
                "{} is empty (BAR not assigned?)",
                path.display()
            )));
        }
        let ptr = crate::dma::map_shared(&f, len)
            .map_err(|e| pci_err(format!("mmap {}: {e}", path.display())))?;
        Ok(BarMap { ptr, len })
    }
}

impl Drop for BarMap {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `map`.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// A window of a mapped BAR (one virtio structure).
#[derive(Clone, Debug)]
struct Mmio {
    bar: Arc<BarMap>,
    offset: usize,
    len: usize,
}

impl Mmio {
    fn new(bar: Arc<BarMap>, offset: usize, len: usize) -> Result<Mmio, TransportError> {
        if offset.checked_add(len).is_none_or(|e| e > bar.len) {
            return Err(pci_err(format!(
                "capability range {offset:#x}+{len:#x} is outside its BAR of {:#x} bytes",
                bar.len
            )));
        }
        Ok(Mmio { bar, offset, len })
    }

    fn at(&self, off: usize, size: usize) -> *mut u8 {
        assert!(
            off + size <= self.len && off % size == 0,
            "MMIO access {off:#x}/{size} outside {:#x} bytes",
            self.len
        );
        // SAFETY: in bounds of the window, which is in bounds of the mapping.
        unsafe { self.bar.ptr.add(self.offset + off) }
    }

    fn r8(&self, off: usize) -> u8 {
        // SAFETY: `at` checks bounds and alignment.
        unsafe { self.at(off, 1).read_volatile() }
    }
    fn r16(&self, off: usize) -> u16 {
        // SAFETY: as in r8.
        u16::from_le(unsafe { self.at(off, 2).cast::<u16>().read_volatile() })
    }
    fn r32(&self, off: usize) -> u32 {
        // SAFETY: as in r8.
        u32::from_le(unsafe { self.at(off, 4).cast::<u32>().read_volatile() })
    }
    fn w8(&self, off: usize, v: u8) {
        // SAFETY: as in r8.
        unsafe { self.at(off, 1).write_volatile(v) }
    }
    fn w16(&self, off: usize, v: u16) {
        // SAFETY: as in r8.
        unsafe { self.at(off, 2).cast::<u16>().write_volatile(v.to_le()) }
    }
    fn w32(&self, off: usize, v: u32) {
        // SAFETY: as in r8.
        unsafe { self.at(off, 4).cast::<u32>().write_volatile(v.to_le()) }
    }
    /// A 64-bit field as two 32-bit writes, low half first (allowed by 4.1.3.1).
    fn w64(&self, off: usize, v: u64) {
        self.w32(off, v as u32);
        self.w32(off + 4, (v >> 32) as u32);
    }
}

/// Hugepage DMA memory, contiguous in guest-physical space.
#[derive(Debug)]
pub struct HugepageMemory {
    ptr: *mut u8,
    len: usize,
    gpa: u64,
}

// SAFETY: plain shared memory owned by this value; DmaRegion accesses it
// volatilely or atomically.
unsafe impl Send for HugepageMemory {}
// SAFETY: as above.
unsafe impl Sync for HugepageMemory {}

// SAFETY: `ptr` is a live mapping of `len` bytes (2 MiB aligned) until drop.
unsafe impl DmaBacking for HugepageMemory {
    fn host_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn gpa(&self) -> u64 {
        self.gpa
    }
}

impl Drop for HugepageMemory {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping built in `allocate`.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
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

fn read_trim(p: &Path) -> Result<String, TransportError> {
    fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .map_err(io_err(format!("reading {}", p.display())))
}

fn free_hugepages() -> Option<usize> {
    fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The frame number of the page mapped at `vaddr` (needs root).
fn pagemap_pfn(pagemap: &File, vaddr: usize) -> Result<u64, TransportError> {
    let mut b = [0u8; 8];
    pagemap
        .read_exact_at(&mut b, (vaddr / 4096 * 8) as u64)
        .map_err(io_err("reading /proc/self/pagemap".into()))?;
    let e = u64::from_le_bytes(b);
    if e & (1 << 63) == 0 {
        return Err(pci_err(format!(
            "/proc/self/pagemap: page at {vaddr:#x} is not present"
        )));
    }
    let pfn = e & ((1 << 55) - 1);
    if pfn == 0 {
        return Err(pci_err(
            "/proc/self/pagemap shows frame 0: frame numbers need root (CAP_SYS_ADMIN)",
        ));
    }
    Ok(pfn)
}

/// `pages` hugepages of a hugetlb memfd, mapped at the kernel's choice and
/// populated; returns the mapping and each page's frame number.
fn map_hugetlb_file(file: &File, pages: usize) -> Result<(*mut u8, Vec<u64>), TransportError> {
    let len = pages * HUGEPAGE_SIZE;
    file.set_len(len as u64).map_err(io_err(format!(
        "sizing a hugetlb memfd to {pages} hugepages"
    )))?;
    // SAFETY: mapping a file we own; checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE | libc::MAP_LOCKED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        return Err(pci_err(format!(
            "cannot map {pages} hugepages of 2 MiB ({e}); {} free: the guest needs \
             `echo 64 > /proc/sys/vm/nr_hugepages` (the mc-host image's /init does it)",
            free_hugepages().map_or("unknown".into(), |n| n.to_string())
        )));
    }
    let p: *mut u8 = p.cast();
    let pagemap =
        File::open("/proc/self/pagemap").map_err(io_err("opening /proc/self/pagemap".into()))?;
    let mut pfns = Vec::with_capacity(pages);
    for i in 0..pages {
        let va = p as usize + i * HUGEPAGE_SIZE;
        // Touch it (MAP_POPULATE should have), so that it is surely present.
        // SAFETY: inside the mapping just made.
        unsafe { (va as *mut u8).write_volatile(0) };
        match pagemap_pfn(&pagemap, va) {
            Ok(pfn) => pfns.push(pfn),
            Err(e) => {
                // SAFETY: the mapping made above.
                unsafe { libc::munmap(p.cast(), len) };
                return Err(e);
            }
        }
    }
    Ok((p, pfns))
}

impl HugepageMemory {
    /// At least `size` bytes of DMA memory, contiguous in guest-physical space.
    pub fn allocate(size: usize) -> Result<HugepageMemory, TransportError> {
        let need = size.div_ceil(HUGEPAGE_SIZE).max(1);
        // SAFETY: a plain syscall with a valid NUL-terminated name.
        let fd = unsafe {
            libc::memfd_create(
                c"mc-guest-dma".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_HUGETLB,
            )
        };
        if fd < 0 {
            return Err(pci_err(format!(
                "memfd_create(MFD_HUGETLB): {}: the kernel needs hugetlbfs support",
                io::Error::last_os_error()
            )));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        let step = (HUGEPAGE_SIZE / 4096) as u64;
        // First just what is needed; if the pool hands out pages that are not
        // adjacent, take every free page and look for a run among them.
        let (mut base, mut pfns) = map_hugetlb_file(&file, need)?;
        let mut pages = need;
        let mut run = contiguous_run(&pfns, need, step);
        if run.is_none() {
            let free = free_hugepages().unwrap_or(0);
            debug!("hugepages: first {need} not contiguous ({pfns:x?}); trying {free} more");
            if free > 0 {
                // SAFETY: the mapping made by map_hugetlb_file.
                unsafe { libc::munmap(base.cast(), pages * HUGEPAGE_SIZE) };
                pages = need + free;
                (base, pfns) = map_hugetlb_file(&file, pages)?;
                run = contiguous_run(&pfns, need, step);
            }
        }
        let Some(run) = run else {
            let mut sorted = pfns.clone();
            sorted.sort_unstable();
            // SAFETY: the mapping made by map_hugetlb_file.
            unsafe { libc::munmap(base.cast(), pages * HUGEPAGE_SIZE) };
            return Err(pci_err(format!(
                "no {need} physically contiguous hugepages ({} MiB) among the {pages} \
                 the kernel gave (frames {sorted:#x?}); ask for less DMA memory \
                 (--dma-mib) or boot with a fresh hugepage pool",
                need * 2
            )));
        };
        let len = need * HUGEPAGE_SIZE;
        // Reserve a 2 MiB-aligned virtual range, then map the chosen file pages
        // into it in frame order.
        // SAFETY: an anonymous PROT_NONE reservation, checked below.
        let resv = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + HUGEPAGE_SIZE,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if resv == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: the mapping made by map_hugetlb_file.
            unsafe { libc::munmap(base.cast(), pages * HUGEPAGE_SIZE) };
            return Err(pci_err(format!(
                "reserving {len:#x} bytes of address space: {e}"
            )));
        }
        let target = (resv as usize).next_multiple_of(HUGEPAGE_SIZE);
        for (k, &page) in run.iter().enumerate() {
            let at = target + k * HUGEPAGE_SIZE;
            // SAFETY: MAP_FIXED inside our own reservation; the file page
            // exists (it was populated above).
            let p = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    HUGEPAGE_SIZE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_FIXED | libc::MAP_POPULATE | libc::MAP_LOCKED,
                    file.as_raw_fd(),
                    (page * HUGEPAGE_SIZE) as libc::off_t,
                )
            };
            if p == libc::MAP_FAILED {
                let e = io::Error::last_os_error();
                // SAFETY: our reservation and the first mapping.
                unsafe {
                    libc::munmap(resv, len + HUGEPAGE_SIZE);
                    libc::munmap(base.cast(), pages * HUGEPAGE_SIZE);
                }
                return Err(pci_err(format!("re-mapping hugepage {page}: {e}")));
            }
        }
        // Trim the reservation's unused ends, drop the first mapping and give
        // the pages not used back to the pool.
        // SAFETY: all ranges are parts of mappings made here and not otherwise used.
        unsafe {
            let head = target - resv as usize;
            if head > 0 {
                libc::munmap(resv, head);
            }
            let tail = HUGEPAGE_SIZE - head;
            if tail > 0 {
                libc::munmap((target + len) as *mut libc::c_void, tail);
            }
            libc::munmap(base.cast(), pages * HUGEPAGE_SIZE);
            for i in (0..pages).filter(|i| !run.contains(i)) {
                libc::fallocate(
                    file.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    (i * HUGEPAGE_SIZE) as libc::off_t,
                    HUGEPAGE_SIZE as libc::off_t,
                );
            }
        }
        // Check what the device will see: every page where it should be.
        let pagemap = File::open("/proc/self/pagemap")
            .map_err(io_err("opening /proc/self/pagemap".into()))?;
        let first = pagemap_pfn(&pagemap, target)?;
        let mem = HugepageMemory {
            ptr: target as *mut u8,
            len,
            gpa: first * 4096,
        };
        for k in 0..need {
            let pfn = pagemap_pfn(&pagemap, target + k * HUGEPAGE_SIZE)?;
            if pfn != first + k as u64 * step {
                return Err(pci_err(format!(
                    "hugepage {k} is at frame {pfn:#x} after re-mapping, expected {:#x}",
                    first + k as u64 * step
                )));
            }
        }
        // SAFETY: the whole mapping is ours.
        unsafe { std::ptr::write_bytes(mem.ptr, 0, len) };
        info!(
            "DMA memory: {} MiB of hugepages at gpa {:#x} (picked from {pages})",
            len >> 20,
            mem.gpa
        );
        Ok(mem)
    }
}

/// A PCI function's identity as sysfs lists it.
#[derive(Clone, Debug)]
struct Function {
    path: PathBuf,
    bdf: String,
    vendor: u16,
    device: u16,
}

fn parse_hex16(s: &str) -> Option<u16> {
    u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

fn list_functions(root: &Path) -> Result<Vec<Function>, TransportError> {
    let mut v = Vec::new();
    let rd = fs::read_dir(root).map_err(io_err(format!(
        "listing {} (is sysfs mounted?)",
        root.display()
    )))?;
    for e in rd.flatten() {
        let path = e.path();
        let bdf = e.file_name().to_string_lossy().into_owned();
        let vendor = fs::read_to_string(path.join("vendor"))
            .ok()
            .and_then(|s| parse_hex16(&s));
        let device = fs::read_to_string(path.join("device"))
            .ok()
            .and_then(|s| parse_hex16(&s));
        if let (Some(vendor), Some(device)) = (vendor, device) {
            v.push(Function {
                path,
                bdf,
                vendor,
                device,
            });
        }
    }
    v.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(v)
}

/// The PCI functions of Memory Channel adapters under `root`, by BDF.
pub fn find_adapters(root: &Path) -> Result<Vec<PathBuf>, TransportError> {
    Ok(list_functions(root)?
        .into_iter()
        .filter(|f| f.vendor == abi::PCI_VENDOR_ID && f.device == abi::PCI_DEVICE_ID)
        .map(|f| f.path)
        .collect())
}

/// The adapter driven from user space through sysfs.
pub struct PciTransport {
    bdf: String,
    common: Mmio,
    notify: Mmio,
    notify_mult: u32,
    device_cfg: Mmio,
    dma: DmaRegion,
    features: u64,
    notify_off: Vec<u16>,
    max_sizes: Vec<u16>,
    configured: Vec<bool>,
    started: bool,
}

impl std::fmt::Debug for PciTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PciTransport")
            .field("bdf", &self.bdf)
            .field("dma", &self.dma)
            .field("features", &format_args!("{:#x}", self.features))
            .field("started", &self.started)
            .finish()
    }
}

impl PciTransport {
    /// Find the adapter, take it from any kernel driver, enable it, run the
    /// virtio initialisation up to FEATURES_OK and allocate DMA memory.
    pub fn open(opts: &PciOptions) -> Result<PciTransport, TransportError> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(pci_err(
                "the PCI transport needs root: it writes PCI config space through sysfs, \
                 maps BARs and reads frame numbers from /proc/self/pagemap",
            ));
        }
        let all = list_functions(&opts.sysfs)?;
        let found: Vec<&Function> = all
            .iter()
            .filter(|f| f.vendor == abi::PCI_VENDOR_ID && f.device == abi::PCI_DEVICE_ID)
            .collect();
        let func = match found.as_slice() {
            [] => {
                let listed: Vec<String> = all
                    .iter()
                    .map(|f| format!("{} {:04x}:{:04x}", f.bdf, f.vendor, f.device))
                    .collect();
                return Err(pci_err(format!(
                    "no Memory Channel adapter (PCI {:04x}:{:04x}) under {}; found: {}. \
                     Attach one with -device vhost-user-test-device-pci,virtio-id={},num_vqs={},config_size={} \
                     (or give --socket for a virtual guest)",
                    abi::PCI_VENDOR_ID,
                    abi::PCI_DEVICE_ID,
                    opts.sysfs.display(),
                    if listed.is_empty() { "nothing".into() } else { listed.join(", ") },
                    abi::VIRTIO_ID,
                    NUM_QUEUES,
                    CONFIG_SIZE
                )));
            }
            [one] => (*one).clone(),
            [first, ..] => {
                warn!(
                    "{} Memory Channel adapters found; using the first, {}",
                    found.len(),
                    first.bdf
                );
                (*first).clone()
            }
        };
        let dev = &func.path;
        info!("adapter at {}", func.bdf);

        // Take it from a kernel driver (virtio-pci, if loaded).
        let driver = dev.join("driver");
        if let Ok(target) = fs::read_link(&driver) {
            let name = target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            info!("unbinding {} from kernel driver {name}", func.bdf);
            fs::write(driver.join("unbind"), &func.bdf)
                .map_err(io_err(format!("unbinding {} from {name}", func.bdf)))?;
        }
        // Enable (memory decoding) and Bus Master.
        let enable = dev.join("enable");
        if read_trim(&enable)? != "1" {
            fs::write(&enable, "1")
                .map_err(io_err(format!("writing 1 to {}", enable.display())))?;
        }
        let cfg_path = dev.join("config");
        let mut cfg_file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&cfg_path)
            .map_err(io_err(format!("opening {}", cfg_path.display())))?;
        let mut config = Vec::new();
        cfg_file
            .read_to_end(&mut config)
            .map_err(io_err(format!("reading {}", cfg_path.display())))?;
        if config.len() < 0x40 {
            return Err(pci_err(format!(
                "{} gave {} bytes: not root?",
                cfg_path.display(),
                config.len()
            )));
        }
        let cmd = u16::from_le_bytes([config[4], config[5]]);
        let want = cmd | 0x2 | 0x4;
        if want != cmd {
            cfg_file
                .seek(SeekFrom::Start(4))
                .and_then(|_| cfg_file.write_all(&want.to_le_bytes()))
                .map_err(io_err(format!(
                    "setting Bus Master in {}",
                    cfg_path.display()
                )))?;
            let mut b = [0u8; 2];
            cfg_file
                .read_exact_at(&mut b, 4)
                .map_err(io_err(format!("reading {}", cfg_path.display())))?;
            if u16::from_le_bytes(b) & 0x6 != 0x6 {
                return Err(pci_err(format!(
                    "command register of {} reads {:#x} after setting memory and Bus Master",
                    func.bdf,
                    u16::from_le_bytes(b)
                )));
            }
        }

        // The virtio structures and the BARs holding them.
        let caps = parse_virtio_caps(&config).map_err(|e| pci_err(format!("{}: {e}", func.bdf)))?;
        let mut bars: Vec<Option<Arc<BarMap>>> = vec![None; 6];
        let mut window = |ty: u8, what: &str| -> Result<(Mmio, VirtioCap), TransportError> {
            let cap = *caps.iter().find(|c| c.cfg_type == ty).ok_or_else(|| {
                pci_err(format!(
                    "{} has no virtio {what} capability: not a virtio 1.x device",
                    func.bdf
                ))
            })?;
            let b = usize::from(cap.bar);
            if b > 5 {
                return Err(pci_err(format!("{what} capability names BAR {b}")));
            }
            if bars[b].is_none() {
                let path = dev.join(format!("resource{b}"));
                bars[b] = Some(Arc::new(BarMap::map(&path)?));
                debug!(
                    "mapped {} ({:#x} bytes)",
                    path.display(),
                    bars[b].as_ref().map_or(0, |m| m.len)
                );
            }
            let bar = bars[b].clone().expect("mapped above");
            Ok((
                Mmio::new(bar, cap.offset as usize, cap.length as usize)?,
                cap,
            ))
        };
        let (common, _) = window(cap_type::COMMON, "common configuration")?;
        let (notify, ncap) = window(cap_type::NOTIFY, "notification")?;
        let (_isr, _) = window(cap_type::ISR, "ISR")?;
        let (device_cfg, _) = window(cap_type::DEVICE, "device configuration")?;
        if common.len < COMMON_CFG_LEN {
            return Err(pci_err(format!(
                "common configuration is only {} bytes",
                common.len
            )));
        }
        if device_cfg.len < CONFIG_SIZE {
            return Err(pci_err(format!(
                "the adapter's config space is {} bytes, the register file needs {CONFIG_SIZE}: \
                 give QEMU's device config_size={CONFIG_SIZE}",
                device_cfg.len
            )));
        }

        // virtio 1.x initialisation (3.1.1).
        reset(&common)?;
        common.w8(C_STATUS, S_ACKNOWLEDGE);
        common.w8(C_STATUS, S_ACKNOWLEDGE | S_DRIVER);
        common.w32(C_DFSELECT, 0);
        let lo = common.r32(C_DF);
        common.w32(C_DFSELECT, 1);
        let hi = common.r32(C_DF);
        let offered = u64::from(lo) | (u64::from(hi) << 32);
        if offered & F_VERSION_1 == 0 {
            common.w8(C_STATUS, S_FAILED);
            return Err(TransportError::MissingFeature("VIRTIO_F_VERSION_1"));
        }
        let features = offered & (F_VERSION_1 | F_EVENT_IDX);
        common.w32(C_GFSELECT, 0);
        common.w32(C_GF, features as u32);
        common.w32(C_GFSELECT, 1);
        common.w32(C_GF, (features >> 32) as u32);
        common.w8(C_STATUS, S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK);
        if common.r8(C_STATUS) & S_FEATURES_OK == 0 {
            common.w8(C_STATUS, S_FAILED);
            return Err(pci_err(format!(
                "the device refused features {features:#x} (FEATURES_OK did not stick)"
            )));
        }
        let nq = common.r16(C_NUM_QUEUES);
        if usize::from(nq) < NUM_QUEUES {
            common.w8(C_STATUS, S_FAILED);
            return Err(TransportError::QueueCount {
                have: u64::from(nq),
                need: NUM_QUEUES,
            });
        }
        let mut notify_off = Vec::with_capacity(NUM_QUEUES);
        let mut max_sizes = Vec::with_capacity(NUM_QUEUES);
        for q in 0..NUM_QUEUES as u16 {
            common.w16(C_Q_SELECT, q);
            notify_off.push(common.r16(C_Q_NOFF));
            max_sizes.push(common.r16(C_Q_SIZE));
        }
        debug!(
            "offered {offered:#x}, acked {features:#x}; {nq} queues, max sizes {max_sizes:?}, \
             notify offsets {notify_off:?} x {}",
            ncap.notify_off_multiplier
        );

        let memory = HugepageMemory::allocate(opts.dma_size)?;
        let mut t = PciTransport {
            bdf: func.bdf.clone(),
            common,
            notify,
            notify_mult: ncap.notify_off_multiplier,
            device_cfg,
            dma: DmaRegion::new(Arc::new(memory)),
            features,
            notify_off,
            max_sizes,
            configured: vec![false; NUM_QUEUES],
            started: false,
        };
        let regs = t.registers()?;
        info!(
            "{}: node {} of {}, {} B pages, features {features:#x}",
            t.bdf, regs.node_id, regs.nodes, regs.page_size
        );
        Ok(t)
    }

    /// The PCI address of the adapter.
    pub fn bdf(&self) -> &str {
        &self.bdf
    }

    /// The virtio features acked.
    pub fn features(&self) -> u64 {
        self.features
    }
}

/// Write 0 to device_status and wait until it reads 0 (4.1.4.3.2).
fn reset(common: &Mmio) -> Result<(), TransportError> {
    common.w8(C_STATUS, 0);
    let start = Instant::now();
    while common.r8(C_STATUS) != 0 {
        if start.elapsed() > Duration::from_secs(5) {
            return Err(pci_err("the device did not complete its reset within 5 s"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

impl Transport for PciTransport {
    fn registers(&mut self) -> Result<Registers, TransportError> {
        // Each load is a GET_CONFIG round trip in QEMU; retry if the
        // generation changed while reading (4.1.4.3.1).
        for _ in 0..16 {
            let gen = self.common.r8(C_CFGGENERATION);
            let mut b = [0u8; CONFIG_SIZE];
            for i in (0..CONFIG_SIZE).step_by(4) {
                b[i..i + 4].copy_from_slice(&self.device_cfg.r32(i).to_le_bytes());
            }
            if self.common.r8(C_CFGGENERATION) == gen {
                return Registers::from_bytes(&b).ok_or(TransportError::BadRegisters);
            }
        }
        Err(pci_err(
            "the config generation kept changing while reading the register file",
        ))
    }

    fn dma(&self) -> &DmaRegion {
        &self.dma
    }

    fn event_idx(&self) -> bool {
        self.features & F_EVENT_IDX != 0
    }

    fn max_queue_size(&self, queue: u16) -> u16 {
        self.max_sizes
            .get(usize::from(queue))
            .copied()
            .unwrap_or(0)
            .min(abi::MAX_QUEUE_SIZE)
    }

    fn setup_queue(
        &mut self,
        queue: u16,
        size: u16,
        rings: &RingLayout,
    ) -> Result<(), TransportError> {
        let q = super::check_queue(queue, size, self.max_queue_size(queue))?;
        if self.started {
            return Err(TransportError::NotReady("queues are set up before start"));
        }
        let c = &self.common;
        c.w16(C_Q_SELECT, queue);
        c.w16(C_Q_SIZE, size);
        c.w16(C_Q_MSIX, 0xffff);
        c.w64(C_Q_DESC, rings.desc.gpa());
        c.w64(C_Q_AVAIL, rings.avail.gpa());
        c.w64(C_Q_USED, rings.used.gpa());
        fence(Ordering::SeqCst);
        c.w16(C_Q_ENABLE, 1);
        if c.r16(C_Q_ENABLE) != 1 {
            return Err(pci_err(format!("queue {queue} did not enable")));
        }
        self.configured[q] = true;
        debug!("queue {queue}: {size} entries, {rings}");
        Ok(())
    }

    fn start(&mut self) -> Result<(), TransportError> {
        if self.configured.iter().any(|c| !c) {
            return Err(TransportError::NotReady("every queue must be set up first"));
        }
        fence(Ordering::SeqCst);
        self.common.w8(
            C_STATUS,
            S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK,
        );
        let s = self.common.r8(C_STATUS);
        if s & (S_NEEDS_RESET | S_FAILED) != 0 || s & S_DRIVER_OK == 0 {
            return Err(pci_err(format!("device status {s:#x} after DRIVER_OK")));
        }
        self.started = true;
        Ok(())
    }

    fn notify(&self, queue: u16) -> Result<(), TransportError> {
        let off = *self
            .notify_off
            .get(usize::from(queue))
            .ok_or(TransportError::NoSuchQueue(queue))?;
        let at = usize::from(off) * self.notify_mult as usize;
        if at + 2 > self.notify.len {
            return Err(pci_err(format!(
                "notify offset {at:#x} of queue {queue} is outside the notify window"
            )));
        }
        // Descriptors and indices are visible before the device is told.
        fence(Ordering::SeqCst);
        self.notify.w16(at, queue);
        Ok(())
    }
}

impl Drop for PciTransport {
    fn drop(&mut self) {
        // Stop the device before the DMA memory goes back to the kernel.
        self.common.w8(C_STATUS, 0);
        let start = Instant::now();
        while self.common.r8(C_STATUS) != 0 && start.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_walk() {
        let mut c = vec![0u8; 256];
        c[6] = 0x10;
        c[0x34] = 0x40;
        // An MSI-X cap, then two virtio caps.
        c[0x40..0x44].copy_from_slice(&[0x11, 0x50, 0, 0]);
        let cap = |c: &mut Vec<u8>, at: usize, next: u8, ty: u8, bar: u8, off: u32, len: u32| {
            c[at] = 0x09;
            c[at + 1] = next;
            c[at + 2] = 16;
            c[at + 3] = ty;
            c[at + 4] = bar;
            c[at + 8..at + 12].copy_from_slice(&off.to_le_bytes());
            c[at + 12..at + 16].copy_from_slice(&len.to_le_bytes());
        };
        cap(&mut c, 0x50, 0x64, 1, 4, 0, 0x1000);
        cap(&mut c, 0x64, 0, 2, 4, 0x3000, 0x1000);
        c[0x64 + 16..0x64 + 20].copy_from_slice(&4u32.to_le_bytes());
        let caps = parse_virtio_caps(&c).unwrap();
        assert_eq!(caps.len(), 2);
        assert_eq!(caps[0].cfg_type, cap_type::COMMON);
        assert_eq!(
            (caps[1].bar, caps[1].offset, caps[1].notify_off_multiplier),
            (4, 0x3000, 4)
        );
        // A loop is an error, not a hang.
        c[0x65] = 0x50;
        assert!(parse_virtio_caps(&c).is_err());
        c[6] = 0;
        assert!(parse_virtio_caps(&c).is_err());
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

    #[test]
    fn no_adapter_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("0000:00:1f.0");
        fs::create_dir(&f).unwrap();
        fs::write(f.join("vendor"), "0x8086\n").unwrap();
        fs::write(f.join("device"), "0x2918\n").unwrap();
        assert!(find_adapters(d.path()).unwrap().is_empty());
        let a = d.path().join("0000:00:01.0");
        fs::create_dir(&a).unwrap();
        fs::write(a.join("vendor"), "0x1af4\n").unwrap();
        fs::write(a.join("device"), "0x106d\n").unwrap();
        assert_eq!(find_adapters(d.path()).unwrap(), vec![a]);
    }
}
