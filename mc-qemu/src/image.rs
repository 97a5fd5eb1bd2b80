//! The guest boot image: the cached kernel and a gzip'd newc initramfs with
//! a static busybox, `/init` (init.sh), optionally the static guest
//! program as `/bin/mc-guest`, and any user programs (`--add PROG`, a C
//! program linked with libimc, say) as `/bin/<name>`.
//!
//! The image is cached in its output directory and rebuilt only when the
//! SHA-256 over its inputs (kernel, busybox, guest binary, programs, init
//! script) changes. The programs it was built with are recorded
//! (`image.programs`), so `cluster up` and `qemu-boot` keep them unless
//! given others.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;
use log::info;
use sha2::{Digest, Sha256};

use crate::cache::CacheDir;
use crate::cpio::CpioWriter;
use crate::elf::{check_static_elf, ElfCheckError};
use crate::error::QemuError;
use crate::image_record::{GUEST_FILE, PROGRAMS_FILE};

/// The guest's `/init`.
pub const INIT_SCRIPT: &str = include_str!("init.sh");

/// Where the guest program is installed in the image.
pub const GUEST_BINARY_PATH: &str = "bin/mc-guest";

/// Bump when the image layout changes without its inputs changing.
const IMAGE_FORMAT: &str = "mc-image v1";

const KERNEL_FILE: &str = "vmlinuz";
const INITRD_FILE: &str = "initramfs.cpio.gz";
const KEY_FILE: &str = "image.key";

/// What goes into an image.
#[derive(Debug, Clone)]
pub struct GuestInputs {
    pub kernel: PathBuf,
    pub busybox: PathBuf,
    pub guest_binary: Option<PathBuf>,
    /// User programs, installed as `/bin/<file name>`.
    pub programs: Vec<PathBuf>,
}

impl GuestInputs {
    /// These inputs with user programs added (each must exist).
    pub fn with_programs(mut self, programs: &[PathBuf]) -> Result<Self, QemuError> {
        for p in programs {
            if !p.is_file() {
                return Err(QemuError::NoProgram { path: p.clone() });
            }
        }
        self.programs = programs.to_vec();
        Ok(self)
    }

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
            programs: Vec::new(),
        })
    }
}

/// A user program as it goes into the image: `/bin/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageProgram {
    pub name: String,
    pub data: Vec<u8>,
}

/// Read the user programs: static x86-64 ELF files (the image has no
/// dynamic loader) or scripts, with distinct file names.
fn read_programs(paths: &[PathBuf]) -> Result<Vec<ImageProgram>, QemuError> {
    let mut out: Vec<(ImageProgram, &Path)> = Vec::new();
    for p in paths {
        let data = read(p, "program")?;
        if data.starts_with(b"\x7fELF") {
            match check_static_elf(&data) {
                Ok(()) => {}
                Err(ElfCheckError::Dynamic) => {
                    return Err(QemuError::DynamicProgram { path: p.clone() })
                }
                Err(source) => {
                    return Err(QemuError::BadProgram {
                        path: p.clone(),
                        source,
                    })
                }
            }
        }
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| QemuError::NoProgram { path: p.clone() })?;
        if let Some((_, first)) = out.iter().find(|(o, _)| o.name == name) {
            return Err(QemuError::ProgramNameTwice {
                name,
                first: first.display().to_string(),
                second: p.display().to_string(),
            });
        }
        out.push((ImageProgram { name, data }, p));
    }
    Ok(out.into_iter().map(|(o, _)| o).collect())
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
pub fn cache_key(
    kernel: &[u8],
    busybox: &[u8],
    guest: Option<&[u8]>,
    programs: &[ImageProgram],
    init: &str,
) -> String {
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
    for p in programs {
        part("program", p.name.as_bytes());
        part("program-data", &p.data);
    }
    part("init", init.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
/// The gzip'd newc initramfs.
pub fn build_initramfs(
    busybox: &[u8],
    guest: Option<&[u8]>,
    programs: &[ImageProgram],
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
    for p in programs {
        w.file(&format!("bin/{}", p.name), 0o755, &p.data)?;
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
    let programs = read_programs(&inputs.programs)?;
    let key = cache_key(&kernel, &busybox, guest.as_deref(), &programs, INIT_SCRIPT);
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
    let initrd = build_initramfs(&busybox, guest.as_deref(), &programs, INIT_SCRIPT)?;
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
    let mut recorded = String::new();
    for p in &inputs.programs {
        let p = fs::canonicalize(p)
            .map_err(|e| QemuError::io(format!("resolving {}", p.display()), e))?;
        recorded += &format!("{}\n", p.display());
    }
    write_atomically(&out_dir.join(PROGRAMS_FILE), recorded.as_bytes())?;
    write_atomically(&out_dir.join(KEY_FILE), format!("{key}\n").as_bytes())?;
    info!(
        "built image in {}: kernel {} KiB, initramfs {} KiB{} (key {})",
        out_dir.display(),
        kernel.len() / 1024,
        initrd.len() / 1024,
        match (guest.is_some(), programs.len()) {
            (true, 0) => " with /bin/mc-guest".to_string(),
            (false, 0) => ", no guest binary".to_string(),
            (g, n) => format!(
                "{} and {n} program(s): {}",
                if g {
                    " with /bin/mc-guest"
                } else {
                    ", no guest binary,"
                },
                programs
                    .iter()
                    .map(|p| format!("/bin/{}", p.name))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        },
        &key[..12]
    );
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::tests::elf_with_phdrs;
    use crate::image_record::{recorded_guest_binary, recorded_programs};

    #[test]
    fn cache_key_changes_with_every_input() {
        let prog = |n: &str, d: &[u8]| ImageProgram {
            name: n.into(),
            data: d.to_vec(),
        };
        let base = cache_key(b"k", b"b", Some(b"g"), &[], "i");
        assert_eq!(base.len(), 64);
        assert_eq!(base, cache_key(b"k", b"b", Some(b"g"), &[], "i"));
        let others = [
            cache_key(b"K", b"b", Some(b"g"), &[], "i"),
            cache_key(b"k", b"B", Some(b"g"), &[], "i"),
            cache_key(b"k", b"b", Some(b"G"), &[], "i"),
            cache_key(b"k", b"b", None, &[], "i"),
            cache_key(b"k", b"b", Some(b""), &[], "i"),
            cache_key(b"k", b"b", Some(b"g"), &[], "I"),
            // moving bytes between inputs must change the key too
            cache_key(b"kb", b"", Some(b"g"), &[], "i"),
            // a program, its name or its contents
            cache_key(b"k", b"b", Some(b"g"), &[prog("p", b"x")], "i"),
            cache_key(b"k", b"b", Some(b"g"), &[prog("q", b"x")], "i"),
            cache_key(b"k", b"b", Some(b"g"), &[prog("p", b"y")], "i"),
        ];
        for (i, k) in others.iter().enumerate() {
            assert_ne!(&base, k, "variant {i}");
        }
    }

    #[test]
    fn initramfs_is_gzip_with_init() {
        let prog = ImageProgram {
            name: "figure6".into(),
            data: b"PROG".to_vec(),
        };
        let gz = build_initramfs(b"BB", Some(b"GUEST"), &[prog], INIT_SCRIPT).unwrap();
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
            "bin/figure6",
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
            programs: Vec::new(),
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
        // User programs: static ELF or scripts go in (and are recorded);
        // a dynamic one, a missing one, or two of one name are refused.
        fs::write(&g, elf_with_phdrs(&[1])).unwrap();
        let (p1, p2, p3) = (dir.join("prog"), dir.join("run.sh"), dir.join("dyn"));
        fs::write(&p1, elf_with_phdrs(&[1])).unwrap();
        fs::write(&p2, b"#!/bin/sh\necho hi\n").unwrap();
        fs::write(&p3, elf_with_phdrs(&[3])).unwrap();
        let with = inputs
            .clone()
            .with_programs(&[p1.clone(), p2.clone()])
            .unwrap();
        let fourth = build_image(&with, &out).unwrap();
        assert!(fourth.rebuilt);
        assert_eq!(
            recorded_programs(&out),
            vec![
                fs::canonicalize(&p1).unwrap(),
                fs::canonicalize(&p2).unwrap()
            ]
        );
        let e = build_image(&inputs.clone().with_programs(&[p3]).unwrap(), &out).unwrap_err();
        assert!(matches!(e, QemuError::DynamicProgram { .. }), "{e}");
        assert!(e.to_string().contains("-static"), "{e}");
        let e = build_image(
            &inputs
                .clone()
                .with_programs(&[p1.clone(), p1.clone()])
                .unwrap(),
            &out,
        )
        .unwrap_err();
        assert!(matches!(e, QemuError::ProgramNameTwice { .. }), "{e}");
        assert!(matches!(
            inputs.clone().with_programs(&[dir.join("nope")]),
            Err(QemuError::NoProgram { .. })
        ));
        fs::write(&g, elf_with_phdrs(&[3])).unwrap();
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
