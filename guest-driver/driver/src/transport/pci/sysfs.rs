//! Finding the adapter's PCI function under `/sys/bus/pci/devices` and taking
//! it for a user-space driver: unbind any kernel driver, enable it (memory
//! decoding), set Bus Master in its command register (through the `config`
//! file), and read its configuration space.
//!
//! The adapter is the function with vendor `abi::PCI_VENDOR_ID` and device
//! `abi::PCI_DEVICE_ID` (virtio 1.x: 0x1040 + the virtio device id).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use firmware_model::abi::{self, CONFIG_SIZE, NUM_QUEUES};
use log::{info, warn};

/// Where the kernel lists PCI functions.
pub const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// Command register bits (PCI 3.0, 6.2.2): memory space and Bus Master.
const COMMAND_MEMORY: u16 = 0x2;
const COMMAND_BUS_MASTER: u16 = 0x4;
/// Offset of the command register in configuration space.
const COMMAND: u64 = 4;
/// Bytes of the type-0 header every function has.
pub(super) const CONFIG_HEADER: usize = 0x40;

/// Errors of finding and taking the adapter's PCI function.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    #[error("listing {} (is sysfs mounted?)", path.display())]
    List {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "no Memory Channel adapter (PCI {:04x}:{:04x}) under {}; found: {}. \
         Attach one with -device vhost-user-test-device-pci,virtio-id={},num_vqs={},config_size={} \
         (or give --socket for a virtual guest)",
        abi::PCI_VENDOR_ID,
        abi::PCI_DEVICE_ID,
        root.display(),
        if found.is_empty() { "nothing".to_string() } else { found.join(", ") },
        abi::VIRTIO_ID,
        NUM_QUEUES,
        CONFIG_SIZE
    )]
    NoAdapter {
        root: PathBuf,
        /// Every function listed, as "BDF vendor:device".
        found: Vec<String>,
    },
    #[error("{op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("unbinding {bdf} from {driver}")]
    Unbind {
        bdf: String,
        driver: String,
        #[source]
        source: io::Error,
    },
    #[error("{} gave {len} bytes: not root?", path.display())]
    ShortConfig { path: PathBuf, len: usize },
    #[error("command register of {bdf} reads {command:#x} after setting memory and Bus Master")]
    BusMaster { bdf: String, command: u16 },
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> SysfsError {
    let path = path.to_path_buf();
    move |source| SysfsError::Io { op, path, source }
}

/// A PCI function's identity as sysfs lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Its sysfs directory.
    pub path: PathBuf,
    /// Its address, `domain:bus:device.function`.
    pub bdf: String,
    pub vendor: u16,
    pub device: u16,
}

fn parse_hex16(s: &str) -> Option<u16> {
    u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok()
}

/// Every function under `root` whose vendor and device can be read, by BDF.
pub fn list_functions(root: &Path) -> Result<Vec<Function>, SysfsError> {
    let mut v = Vec::new();
    let rd = fs::read_dir(root).map_err(|source| SysfsError::List {
        path: root.to_path_buf(),
        source,
    })?;
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

impl Function {
    fn is_adapter(&self) -> bool {
        self.vendor == abi::PCI_VENDOR_ID && self.device == abi::PCI_DEVICE_ID
    }
}

/// The PCI functions of Memory Channel adapters under `root`, by BDF.
pub fn find_adapters(root: &Path) -> Result<Vec<PathBuf>, SysfsError> {
    Ok(list_functions(root)?
        .into_iter()
        .filter(Function::is_adapter)
        .map(|f| f.path)
        .collect())
}

/// The adapter under `root`: the first by BDF if there are several (with a
/// warning), an error that lists what is there if there is none.
pub fn find_adapter(root: &Path) -> Result<Function, SysfsError> {
    let all = list_functions(root)?;
    let found: Vec<&Function> = all.iter().filter(|f| f.is_adapter()).collect();
    match found.as_slice() {
        [] => Err(SysfsError::NoAdapter {
            root: root.to_path_buf(),
            found: all
                .iter()
                .map(|f| format!("{} {:04x}:{:04x}", f.bdf, f.vendor, f.device))
                .collect(),
        }),
        [one] => Ok((*one).clone()),
        [first, ..] => {
            warn!(
                "{} Memory Channel adapters found; using the first, {}",
                found.len(),
                first.bdf
            );
            Ok((*first).clone())
        }
    }
}

impl Function {
    /// Take the function from a kernel driver (virtio-pci, if loaded).
    pub fn unbind_kernel_driver(&self) -> Result<(), SysfsError> {
        let driver = self.path.join("driver");
        if let Ok(target) = fs::read_link(&driver) {
            let name = target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            info!("unbinding {} from kernel driver {name}", self.bdf);
            fs::write(driver.join("unbind"), &self.bdf).map_err(|source| SysfsError::Unbind {
                bdf: self.bdf.clone(),
                driver: name,
                source,
            })?;
        }
        Ok(())
    }

    /// Enable the function (memory decoding) if it is not already.
    pub fn enable(&self) -> Result<(), SysfsError> {
        let enable = self.path.join("enable");
        let now = fs::read_to_string(&enable).map_err(io_err("reading", &enable))?;
        if now.trim() != "1" {
            fs::write(&enable, "1").map_err(io_err("writing 1 to", &enable))?;
        }
        Ok(())
    }

    /// Read the whole configuration space and set memory space and Bus
    /// Master in its command register (checked by reading it back). Returns
    /// the configuration space as read before the change.
    pub fn enable_bus_master(&self) -> Result<Vec<u8>, SysfsError> {
        let path = self.path.join("config");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err("opening", &path))?;
        let mut config = Vec::new();
        file.read_to_end(&mut config)
            .map_err(io_err("reading", &path))?;
        if config.len() < CONFIG_HEADER {
            return Err(SysfsError::ShortConfig {
                path,
                len: config.len(),
            });
        }
        let cmd = u16::from_le_bytes([config[4], config[5]]);
        let want = cmd | COMMAND_MEMORY | COMMAND_BUS_MASTER;
        if want != cmd {
            file.seek(SeekFrom::Start(COMMAND))
                .and_then(|_| file.write_all(&want.to_le_bytes()))
                .map_err(io_err("setting Bus Master in", &path))?;
            let mut b = [0u8; 2];
            file.read_exact_at(&mut b, COMMAND)
                .map_err(io_err("reading", &path))?;
            let command = u16::from_le_bytes(b);
            let both = COMMAND_MEMORY | COMMAND_BUS_MASTER;
            if command & both != both {
                return Err(SysfsError::BusMaster {
                    bdf: self.bdf.clone(),
                    command,
                });
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(root: &Path, bdf: &str, vendor: &str, device: &str) -> PathBuf {
        let f = root.join(bdf);
        fs::create_dir(&f).unwrap();
        fs::write(f.join("vendor"), format!("{vendor}\n")).unwrap();
        fs::write(f.join("device"), format!("{device}\n")).unwrap();
        f
    }

    #[test]
    fn no_adapter_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        function(d.path(), "0000:00:1f.0", "0x8086", "0x2918");
        assert!(find_adapters(d.path()).unwrap().is_empty());
        match find_adapter(d.path()) {
            Err(SysfsError::NoAdapter { found, .. }) => {
                assert_eq!(found, vec!["0000:00:1f.0 8086:2918".to_string()])
            }
            other => panic!("expected NoAdapter, got {other:?}"),
        }
        let a = function(d.path(), "0000:00:01.0", "0x1af4", "0x106d");
        assert_eq!(find_adapters(d.path()).unwrap(), vec![a.clone()]);
        // Two adapters: the first by BDF.
        function(d.path(), "0000:00:05.0", "0x1af4", "0x106d");
        assert_eq!(find_adapter(d.path()).unwrap().path, a);
        assert!(matches!(
            find_adapter(&d.path().join("nothing")),
            Err(SysfsError::List { .. })
        ));
    }

    #[test]
    fn taking_the_function_over_fake_sysfs_files() {
        let d = tempfile::tempdir().unwrap();
        let path = function(d.path(), "0000:00:03.0", "0x1af4", "0x106d");
        let f = find_adapter(d.path()).unwrap();
        // A kernel driver bound: its `unbind` file gets the BDF.
        let drv = d.path().join("virtio-pci");
        fs::create_dir(&drv).unwrap();
        fs::write(drv.join("unbind"), "").unwrap();
        std::os::unix::fs::symlink(&drv, path.join("driver")).unwrap();
        f.unbind_kernel_driver().unwrap();
        assert_eq!(fs::read_to_string(drv.join("unbind")).unwrap(), f.bdf);
        // Not enabled yet: enabling writes 1.
        fs::write(path.join("enable"), "0\n").unwrap();
        f.enable().unwrap();
        assert_eq!(fs::read_to_string(path.join("enable")).unwrap(), "1");
        // Bus Master is set and the rest of the header is kept.
        let mut config = vec![0u8; 256];
        config[0] = 0xf4;
        config[4] = 0x01;
        fs::write(path.join("config"), &config).unwrap();
        assert_eq!(f.enable_bus_master().unwrap(), config);
        let after = fs::read(path.join("config")).unwrap();
        assert_eq!(u16::from_le_bytes([after[4], after[5]]), 0x7);
        assert_eq!((after.len(), after[0]), (256, 0xf4));
        // A config space an unprivileged reader sees (the header only).
        fs::write(path.join("config"), [0u8; 16]).unwrap();
        assert!(matches!(
            f.enable_bus_master(),
            Err(SysfsError::ShortConfig { len: 16, .. })
        ));
    }
}
