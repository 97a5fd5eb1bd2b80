//! The guest boot image: the cached kernel and a gzip'd newc initramfs with
//! a static busybox, `/init` (init.sh) and, optionally, the static guest
//! program as `/bin/mc-guest`.
//!
//! The image is cached in its output directory and rebuilt only when the
//! SHA-256 over its inputs (kernel, busybox, guest binary, init script)
//! changes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;
use log::info;
use sha2::{Digest, Sha256};

use super::cpio::CpioWriter;
use super::elf::check_static_elf;
use super::{CacheDir, QemuError};

/// The guest's `/init`.
pub const INIT_SCRIPT: &str = include_str!("init.sh");

/// Where the guest program is installed in the image.
pub const GUEST_BINARY_PATH: &str = "bin/mc-guest";

/// Bump when the image layout changes without its inputs changing.
const IMAGE_FORMAT: &str = "mc-image v1";

const KERNEL_FILE: &str = "vmlinuz";
const INITRD_FILE: &str = "initramfs.cpio.gz";
const KEY_FILE: &str = "image.key";
const GUEST_FILE: &str = "image.guest";

/// What goes into an image.
#[derive(Debug, Clone)]
pub struct GuestInputs {
    pub kernel: PathBuf,
    pub busybox: PathBuf,
    pub guest_binary: Option<PathBuf>,
}

impl GuestInputs {
    /// The kernel and busybox from the set-up cache, plus an optional guest
    /// binary. Missing files are errors that name `scripts/setup.sh`.
    pub fn from_cache(cache: &CacheDir, guest_binary: Option<&Path>) -> Result<Self, QemuError> {
        let kernel = cache.kernel();
        if !kernel.is_file() {
            return Err(QemuError::MissingGuestFile {
                what: "guest kernel",
                path: kernel,
            });
        }
        let busybox = cache.busybox();
        if !busybox.is_file() {
            return Err(QemuError::MissingGuestFile {
                what: "static busybox",
                path: busybox,
            });
        }
        if let Some(g) = guest_binary {
            if !g.is_file() {
                return Err(QemuError::NoGuestBinary {
                    path: g.to_path_buf(),
                });
            }
        }
        Ok(GuestInputs {
            kernel,
            busybox,
            guest_binary: guest_binary.map(Path::to_path_buf),
        })
    }
}

/// The guest binary the image in `dir` was last built with, if any and if
/// it still exists: `mc-host qemu-boot` rebuilds with it when an input
/// (the init script, say) changed.
pub fn recorded_guest_binary(dir: &Path) -> Option<PathBuf> {
    let p = fs::read_to_string(dir.join(GUEST_FILE)).ok()?;
    let p = PathBuf::from(p.trim());
    (!p.as_os_str().is_empty() && p.is_file()).then_some(p)
}

/// A built (or found up to date) image.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// Hex SHA-256 of the inputs.
    pub key: String,
    /// False when the cached image was up to date.
    pub rebuilt: bool,
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, QemuError> {
    fs::read(path).map_err(|e| QemuError::io(format!("reading {what} {}", path.display()), e))
}

/// Hex SHA-256 over the image inputs, each length-prefixed so that no two
/// different input sets hash alike.
pub fn cache_key(kernel: &[u8], busybox: &[u8], guest: Option<&[u8]>, init: &str) -> String {
    let mut h = Sha256::new();
    let mut part = |tag: &str, data: &[u8]| {
        h.update(tag.as_bytes());
        h.update((data.len() as u64).to_le_bytes());
        h.update(data);
    };
    part(IMAGE_FORMAT, &[]);
    part("kernel", kernel);
    part("busybox", busybox);
    match guest {
        Some(g) => part("guest", g),
        None => part("no-guest", &[]),
    }
    part("init", init.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
/// The gzip'd newc initramfs.
pub fn build_initramfs(
    busybox: &[u8],
    guest: Option<&[u8]>,
    init: &str,
) -> Result<Vec<u8>, QemuError> {
    let mut w = CpioWriter::new(GzEncoder::new(Vec::new(), Compression::default()));
    for d in [
        "bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "run",
    ] {
        w.dir(d, 0o755)?;
    }
    w.char_dev("dev/console", 0o600, 5, 1)?;
    w.char_dev("dev/null", 0o666, 1, 3)?;
    w.file("bin/busybox", 0o755, busybox)?;
    // /init's interpreter; the other applet links are made at boot
    // (`busybox --install -s`).
    w.symlink("bin/sh", "busybox")?;
    w.file("init", 0o755, init.as_bytes())?;
    if let Some(g) = guest {
        w.file(GUEST_BINARY_PATH, 0o755, g)?;
    }
    let gz = w.finish()?;
    gz.finish()
        .map_err(|e| QemuError::io("compressing the initramfs", e))
}

fn write_atomically(path: &Path, data: &[u8]) -> Result<(), QemuError> {
    let tmp = path.with_extension("tmp");
    let ctx = |e| QemuError::io(format!("writing {}", path.display()), e);
    let mut f = fs::File::create(&tmp).map_err(ctx)?;
    f.write_all(data).map_err(ctx)?;
    f.sync_all().map_err(ctx)?;
    fs::rename(&tmp, path).map_err(ctx)
}

/// Build the image into `out_dir` (`vmlinuz`, `initramfs.cpio.gz`,
/// `image.key`), or keep the one there if its key matches the inputs.
pub fn build_image(inputs: &GuestInputs, out_dir: &Path) -> Result<BuiltImage, QemuError> {
    let kernel = read(&inputs.kernel, "guest kernel")?;
    let busybox = read(&inputs.busybox, "busybox")?;
    let guest = match &inputs.guest_binary {
        Some(p) => {
            let g = read(p, "guest binary")?;
            check_static_elf(&g).map_err(|source| QemuError::BadGuestBinary {
                path: p.clone(),
                source,
            })?;
            Some(g)
        }
        None => None,
    };
    let key = cache_key(&kernel, &busybox, guest.as_deref(), INIT_SCRIPT);
    let image = BuiltImage {
        kernel: out_dir.join(KERNEL_FILE),
        initrd: out_dir.join(INITRD_FILE),
        key: key.clone(),
        rebuilt: true,
    };
    let old_key = fs::read_to_string(out_dir.join(KEY_FILE)).unwrap_or_default();
    if old_key.trim() == key && image.kernel.is_file() && image.initrd.is_file() {
        info!(
            "image in {} is up to date (key {})",
            out_dir.display(),
            &key[..12]
        );
        return Ok(BuiltImage {
            rebuilt: false,
            ..image
        });
    }
    fs::create_dir_all(out_dir)
        .map_err(|e| QemuError::io(format!("creating {}", out_dir.display()), e))?;
    let initrd = build_initramfs(&busybox, guest.as_deref(), INIT_SCRIPT)?;
    // The key goes last: a half-written image never looks up to date.
    let _ = fs::remove_file(out_dir.join(KEY_FILE));
    write_atomically(&image.kernel, &kernel)?;
    write_atomically(&image.initrd, &initrd)?;
    let guest_path = match &inputs.guest_binary {
        Some(p) => fs::canonicalize(p)
            .map_err(|e| QemuError::io(format!("resolving {}", p.display()), e))?
            .to_string_lossy()
            .into_owned(),
        None => String::new(),
    };
    write_atomically(&out_dir.join(GUEST_FILE), guest_path.as_bytes())?;
    write_atomically(&out_dir.join(KEY_FILE), format!("{key}\n").as_bytes())?;
    info!(
        "built image in {}: kernel {} KiB, initramfs {} KiB{} (key {})",
        out_dir.display(),
        kernel.len() / 1024,
        initrd.len() / 1024,
        if guest.is_some() {
            " with /bin/mc-guest"
        } else {
            ", no guest binary"
        },
        &key[..12]
    );
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qemu::elf::tests::elf_with_phdrs;

    #[test]
    fn cache_key_changes_with_every_input() {
        let base = cache_key(b"k", b"b", Some(b"g"), "i");
        assert_eq!(base.len(), 64);
        assert_eq!(base, cache_key(b"k", b"b", Some(b"g"), "i"));
        let others = [
            cache_key(b"K", b"b", Some(b"g"), "i"),
            cache_key(b"k", b"B", Some(b"g"), "i"),
            cache_key(b"k", b"b", Some(b"G"), "i"),
            cache_key(b"k", b"b", None, "i"),
            cache_key(b"k", b"b", Some(b""), "i"),
            cache_key(b"k", b"b", Some(b"g"), "I"),
            // moving bytes between inputs must change the key too
            cache_key(b"kb", b"", Some(b"g"), "i"),
        ];
        for (i, k) in others.iter().enumerate() {
            assert_ne!(&base, k, "variant {i}");
        }
    }

    #[test]
    fn initramfs_is_gzip_with_init() {
        let gz = build_initramfs(b"BB", Some(b"GUEST"), INIT_SCRIPT).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw);
        assert!(text.starts_with("070701"));
        for name in [
            "bin/busybox",
            "bin/sh",
            "init",
            "bin/mc-guest",
            "dev/console",
        ] {
            assert!(text.contains(&format!("{name}\0")), "{name}");
        }
        assert!(text.contains("MC-GUEST-READY"));
    }

    #[test]
    fn image_is_cached_and_rebuilt_on_change() {
        let dir = std::env::temp_dir().join(format!("mc-image-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let (k, b, g) = (dir.join("k"), dir.join("b"), dir.join("g"));
        fs::write(&k, b"kernel").unwrap();
        fs::write(&b, b"busybox").unwrap();
        fs::write(&g, elf_with_phdrs(&[1])).unwrap();
        let inputs = GuestInputs {
            kernel: k.clone(),
            busybox: b,
            guest_binary: Some(g.clone()),
        };
        let out = dir.join("out");
        let first = build_image(&inputs, &out).unwrap();
        assert!(first.rebuilt);
        assert_eq!(fs::read(&first.kernel).unwrap(), b"kernel");
        assert_eq!(
            recorded_guest_binary(&out),
            Some(fs::canonicalize(&g).unwrap())
        );
        let second = build_image(&inputs, &out).unwrap();
        assert!(!second.rebuilt);
        assert_eq!(first.key, second.key);
        fs::write(&k, b"kernel 2").unwrap();
        let third = build_image(&inputs, &out).unwrap();
        assert!(third.rebuilt);
        assert_ne!(third.key, first.key);
        // A dynamically linked guest binary is refused with a clear error.
        fs::write(&g, elf_with_phdrs(&[3])).unwrap();
        let e = build_image(&inputs, &out).unwrap_err();
        assert!(matches!(e, QemuError::BadGuestBinary { .. }), "{e}");
        // A missing input is an error, not a panic.
        let missing = GuestInputs {
            guest_binary: Some(dir.join("nope")),
            ..inputs
        };
        assert!(build_image(&missing, &out).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_cache_files_name_setup_script() {
        let cache = CacheDir(PathBuf::from("/nonexistent/mc-emu"));
        let e = GuestInputs::from_cache(&cache, None).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("guest kernel") && msg.contains("scripts/setup.sh"),
            "{msg}"
        );
    }
}
