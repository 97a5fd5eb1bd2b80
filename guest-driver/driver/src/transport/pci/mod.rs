//! The PCI transport: a user-space virtio 1.x driver for the adapter inside a
//! QEMU guest, with no kernel module.
//!
//! - [`sysfs`]: the adapter is found under `/sys/bus/pci/devices` by
//!   vendor/device (`abi::PCI_VENDOR_ID`, `abi::PCI_DEVICE_ID`); a kernel
//!   driver bound to it is unbound, the function is enabled and Bus Master is
//!   set in its command register.
//! - [`caps`]: the virtio vendor capabilities in config space name the
//!   common, notify, ISR and device configuration structures;
//! - [`mmio`]: the BARs holding them are mapped through `resourceN` and
//!   accessed volatilely, with accesses of the field's own width.
//! - This module: the virtio initialisation (3.1.1) over the common
//!   configuration, queue set-up, notifications and the register file.
//! - DMA memory is hugepages, contiguous in guest-physical space
//!   ([`crate::dma::hugepage`]).
//! - No interrupts: the driver polls used rings and the status page.
//!
//! docs/qemu.md describes how the guest image and QEMU are set up for this.

pub mod caps;
pub(super) mod error;
pub mod mmio;
pub mod sysfs;

pub use error::PciError;

use std::path::PathBuf;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use firmware_model::abi::{self, Registers, CONFIG_SIZE, NUM_QUEUES};
use log::{debug, info};
use virtio_bindings::virtio_config::{
    VIRTIO_CONFIG_S_ACKNOWLEDGE, VIRTIO_CONFIG_S_DRIVER, VIRTIO_CONFIG_S_DRIVER_OK,
    VIRTIO_CONFIG_S_FAILED, VIRTIO_CONFIG_S_FEATURES_OK, VIRTIO_CONFIG_S_NEEDS_RESET,
};

use super::error::TransportError;
use super::link::{check_queue, Doorbell, Transport, F_EVENT_IDX, F_VERSION_1};
use crate::dma::{DmaError, DmaRegion, HugepageMemory};
use crate::virtqueue::RingLayout;
use mmio::{Bars, Mmio};
use sysfs::Function;

pub use caps::{cap_type, parse_virtio_caps, VirtioCap};
pub use sysfs::{find_adapters, SYSFS_PCI_DEVICES};

// Device status bits (virtio 1.x, 2.1), one byte in the common configuration
// (the bindings give them as u32; the mask keeps the byte).
const S_ACKNOWLEDGE: u8 = (VIRTIO_CONFIG_S_ACKNOWLEDGE & 0xff) as u8;
const S_DRIVER: u8 = (VIRTIO_CONFIG_S_DRIVER & 0xff) as u8;
const S_DRIVER_OK: u8 = (VIRTIO_CONFIG_S_DRIVER_OK & 0xff) as u8;
const S_FEATURES_OK: u8 = (VIRTIO_CONFIG_S_FEATURES_OK & 0xff) as u8;
const S_NEEDS_RESET: u8 = (VIRTIO_CONFIG_S_NEEDS_RESET & 0xff) as u8;
const S_FAILED: u8 = (VIRTIO_CONFIG_S_FAILED & 0xff) as u8;

// struct virtio_pci_common_cfg offsets (4.1.4.3); virtio-bindings has no
// virtio_pci module to take them from.
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
/// VIRTIO_MSI_NO_VECTOR: this driver takes no interrupts.
const NO_VECTOR: u16 = 0xffff;

/// How long the device may take to reset when the driver starts, and when
/// it stops before its DMA memory goes back to the kernel.
const RESET_TIMEOUT: Duration = Duration::from_secs(5);
const STOP_TIMEOUT: Duration = Duration::from_secs(2);
/// Reads of the register file before a changing config generation is an error.
const CONFIG_READ_TRIES: usize = 16;

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

/// The adapter's virtio structures, mapped.
struct Structures {
    common: Mmio,
    notify: Mmio,
    notify_mult: u32,
    device_cfg: Mmio,
}

/// What the device said during initialisation.
struct Negotiated {
    features: u64,
    notify_off: Vec<u16>,
    max_sizes: Vec<u16>,
}

impl PciTransport {
    /// Find the adapter, take it from any kernel driver, enable it, run the
    /// virtio initialisation up to FEATURES_OK and allocate DMA memory.
    pub fn open(opts: &PciOptions) -> Result<PciTransport, TransportError> {
        require_root()?;
        let func = take_adapter(opts)?;
        let config = func.enable_bus_master().map_err(PciError::from)?;
        let s = map_structures(&func, &config)?;
        let negotiated = initialise(&s.common)?;
        debug!(
            "notify offsets {:?} x {}",
            negotiated.notify_off, s.notify_mult
        );
        let memory = HugepageMemory::allocate(opts.dma_size).map_err(DmaError::from)?;
        let mut t = PciTransport {
            bdf: func.bdf,
            common: s.common,
            notify: s.notify,
            notify_mult: s.notify_mult,
            device_cfg: s.device_cfg,
            dma: DmaRegion::new(Arc::new(memory)),
            features: negotiated.features,
            notify_off: negotiated.notify_off,
            max_sizes: negotiated.max_sizes,
            configured: vec![false; NUM_QUEUES],
            started: false,
        };
        let regs = t.registers()?;
        info!(
            "{}: node {} of {}, {} B pages, features {:#x}",
            t.bdf, regs.node_id, regs.nodes, regs.page_size, t.features
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

fn require_root() -> Result<(), PciError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(PciError::NotRoot);
    }
    Ok(())
}

/// Find the adapter's function, unbind any kernel driver and enable it.
fn take_adapter(opts: &PciOptions) -> Result<Function, PciError> {
    let func = sysfs::find_adapter(&opts.sysfs)?;
    info!("adapter at {}", func.bdf);
    func.unbind_kernel_driver()?;
    func.enable()?;
    Ok(func)
}

/// Find the virtio structures in `config`'s capabilities and map the BARs
/// holding them.
fn map_structures(func: &Function, config: &[u8]) -> Result<Structures, PciError> {
    let caps = parse_virtio_caps(config).map_err(|source| PciError::Caps {
        bdf: func.bdf.clone(),
        source,
    })?;
    let mut bars = Bars::new(&func.path);
    let mut window = |ty: u8, what: &'static str| -> Result<(Mmio, VirtioCap), PciError> {
        let cap = caps::find(&caps, ty).ok_or_else(|| PciError::MissingCapability {
            bdf: func.bdf.clone(),
            what,
        })?;
        let w = bars
            .window(cap.bar, cap.offset as usize, cap.length as usize)
            .map_err(|source| PciError::Structure { what, source })?;
        Ok((w, cap))
    };
    let (common, _) = window(cap_type::COMMON, "common configuration")?;
    let (notify, ncap) = window(cap_type::NOTIFY, "notification")?;
    let (_isr, _) = window(cap_type::ISR, "ISR")?;
    let (device_cfg, _) = window(cap_type::DEVICE, "device configuration")?;
    if common.len() < COMMON_CFG_LEN {
        return Err(PciError::CommonConfigShort { len: common.len() });
    }
    if device_cfg.len() < CONFIG_SIZE {
        return Err(PciError::DeviceConfigShort {
            len: device_cfg.len(),
        });
    }
    Ok(Structures {
        common,
        notify,
        notify_mult: ncap.notify_off_multiplier,
        device_cfg,
    })
}

/// virtio 1.x initialisation (3.1.1) up to FEATURES_OK, then what the device
/// says about its queues.
fn initialise(common: &Mmio) -> Result<Negotiated, TransportError> {
    reset(common)?;
    common.w8(C_STATUS, S_ACKNOWLEDGE);
    common.w8(C_STATUS, S_ACKNOWLEDGE | S_DRIVER);
    let features = negotiate_features(common)?;
    let (notify_off, max_sizes) = queue_limits(common)?;
    Ok(Negotiated {
        features,
        notify_off,
        max_sizes,
    })
}

/// Accept VERSION_1 (required) and EVENT_IDX (if offered); set FEATURES_OK.
fn negotiate_features(common: &Mmio) -> Result<u64, TransportError> {
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
    common.w32(C_GF, (features & 0xffff_ffff) as u32);
    common.w32(C_GFSELECT, 1);
    common.w32(C_GF, (features >> 32) as u32);
    common.w8(C_STATUS, S_ACKNOWLEDGE | S_DRIVER | S_FEATURES_OK);
    if common.r8(C_STATUS) & S_FEATURES_OK == 0 {
        common.w8(C_STATUS, S_FAILED);
        return Err(PciError::FeaturesRefused { features }.into());
    }
    debug!("offered {offered:#x}, acked {features:#x}");
    Ok(features)
}

/// Each queue's notify offset and largest size.
fn queue_limits(common: &Mmio) -> Result<(Vec<u16>, Vec<u16>), TransportError> {
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
    for q in 0..u16::try_from(NUM_QUEUES).expect("a few queues") {
        common.w16(C_Q_SELECT, q);
        notify_off.push(common.r16(C_Q_NOFF));
        max_sizes.push(common.r16(C_Q_SIZE));
    }
    debug!("{nq} queues, max sizes {max_sizes:?}");
    Ok((notify_off, max_sizes))
}

/// Write 0 to device_status and wait until it reads 0 (4.1.4.3.2).
fn reset(common: &Mmio) -> Result<(), PciError> {
    common.w8(C_STATUS, 0);
    let start = Instant::now();
    while common.r8(C_STATUS) != 0 {
        if start.elapsed() > RESET_TIMEOUT {
            return Err(PciError::ResetTimeout(RESET_TIMEOUT));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

impl Transport for PciTransport {
    fn registers(&mut self) -> Result<Registers, TransportError> {
        // Each load is a GET_CONFIG round trip in QEMU; retry if the
        // generation changed while reading (4.1.4.3.1).
        for _ in 0..CONFIG_READ_TRIES {
            let gen = self.common.r8(C_CFGGENERATION);
            let mut b = [0u8; CONFIG_SIZE];
            for i in (0..CONFIG_SIZE).step_by(4) {
                b[i..i + 4].copy_from_slice(&self.device_cfg.r32(i).to_le_bytes());
            }
            if self.common.r8(C_CFGGENERATION) == gen {
                return Registers::from_bytes(&b).ok_or(TransportError::BadRegisters);
            }
        }
        Err(PciError::ConfigUnstable.into())
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
        let q = check_queue(queue, size, self.max_queue_size(queue))?;
        if self.started {
            return Err(TransportError::NotReady("queues are set up before start"));
        }
        let c = &self.common;
        c.w16(C_Q_SELECT, queue);
        c.w16(C_Q_SIZE, size);
        c.w16(C_Q_MSIX, NO_VECTOR);
        c.w64(C_Q_DESC, rings.desc.gpa());
        c.w64(C_Q_AVAIL, rings.avail.gpa());
        c.w64(C_Q_USED, rings.used.gpa());
        fence(Ordering::SeqCst);
        c.w16(C_Q_ENABLE, 1);
        if c.r16(C_Q_ENABLE) != 1 {
            return Err(PciError::QueueNotEnabled { queue }.into());
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
        let status = self.common.r8(C_STATUS);
        if status & (S_NEEDS_RESET | S_FAILED) != 0 || status & S_DRIVER_OK == 0 {
            return Err(PciError::DeviceStatus { status }.into());
        }
        self.started = true;
        Ok(())
    }

    fn notify(&self, queue: u16) -> Result<(), TransportError> {
        self.doorbell_of(queue)?.ring()
    }

    fn doorbell(&self, queue: u16) -> Result<Arc<dyn Doorbell>, TransportError> {
        Ok(Arc::new(self.doorbell_of(queue)?))
    }
}

impl PciTransport {
    fn doorbell_of(&self, queue: u16) -> Result<NotifyDoorbell, TransportError> {
        let off = *self
            .notify_off
            .get(usize::from(queue))
            .ok_or(TransportError::NoSuchQueue(queue))?;
        let at = usize::from(off) * self.notify_mult as usize;
        if at + 2 > self.notify.len() {
            return Err(PciError::NotifyOutsideWindow { queue, at }.into());
        }
        Ok(NotifyDoorbell {
            window: self.notify.clone(),
            at,
            queue,
        })
    }
}

/// A queue's notification register in the notify structure (virtio 1.x
/// 4.1.4.4): writing the queue index there notifies the device.
#[derive(Debug)]
struct NotifyDoorbell {
    window: Mmio,
    at: usize,
    queue: u16,
}

impl Doorbell for NotifyDoorbell {
    fn ring(&self) -> Result<(), TransportError> {
        // Everything written before is visible before the device is told.
        fence(Ordering::SeqCst);
        self.window.w16(self.at, self.queue);
        Ok(())
    }
}

impl Drop for PciTransport {
    fn drop(&mut self) {
        // Stop the device before the DMA memory goes back to the kernel.
        self.common.w8(C_STATUS, 0);
        let start = Instant::now();
        while self.common.r8(C_STATUS) != 0 && start.elapsed() < STOP_TIMEOUT {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
