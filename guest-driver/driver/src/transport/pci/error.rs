//! The errors of the PCI transport.

use std::time::Duration;

use firmware_model::abi::CONFIG_SIZE;

use super::caps::CapError;
use super::mmio::MmioError;
use super::sysfs::SysfsError;

/// Errors of the PCI transport.
#[derive(Debug, thiserror::Error)]
pub enum PciError {
    #[error(
        "the PCI transport needs root: it writes PCI config space through sysfs, \
         maps BARs and reads frame numbers from /proc/self/pagemap"
    )]
    NotRoot,
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    #[error("{bdf}")]
    Caps {
        bdf: String,
        #[source]
        source: CapError,
    },
    #[error("{bdf} has no virtio {what} capability: not a virtio 1.x device")]
    MissingCapability { bdf: String, what: &'static str },
    #[error("{what} capability")]
    Structure {
        what: &'static str,
        #[source]
        source: MmioError,
    },
    #[error("common configuration is only {len} bytes")]
    CommonConfigShort { len: usize },
    #[error(
        "the adapter's config space is {len} bytes, the register file needs {CONFIG_SIZE}: \
         give QEMU's device config_size={CONFIG_SIZE}"
    )]
    DeviceConfigShort { len: usize },
    #[error("the device did not complete its reset within {0:?}")]
    ResetTimeout(Duration),
    #[error("the device refused features {features:#x} (FEATURES_OK did not stick)")]
    FeaturesRefused { features: u64 },
    #[error("queue {queue} did not enable")]
    QueueNotEnabled { queue: u16 },
    #[error("device status {status:#x} after DRIVER_OK")]
    DeviceStatus { status: u8 },
    #[error("the config generation kept changing while reading the register file")]
    ConfigUnstable,
    #[error("notify offset {at:#x} of queue {queue} is outside the notify window")]
    NotifyOutsideWindow { queue: u16, at: usize },
}
