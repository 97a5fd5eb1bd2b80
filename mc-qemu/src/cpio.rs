//! A writer for the "newc" cpio format (the one the Linux kernel unpacks as
//! an initramfs; see Documentation/driver-api/early-userspace/buffer-format.rst).
//!
//! Each entry: the magic `070701`, thirteen 8-digit hex fields, the name with
//! its NUL, padding to 4 bytes, the data, padding to 4 bytes. The archive ends
//! with an entry named `TRAILER!!!`. Timestamps are 0 and inode numbers
//! sequential, so equal inputs give equal archives.

use std::io::{self, Write};

use crate::error::QemuError;

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// Writes a newc cpio archive to `W`.
pub struct CpioWriter<W: Write> {
    out: W,
    next_ino: u32,
    written: u64,
}

impl<W: Write> CpioWriter<W> {
    pub fn new(out: W) -> Self {
        CpioWriter {
            out,
            next_ino: 1,
            written: 0,
        }
    }

    /// A directory, e.g. `dir("proc", 0o755)`.
    pub fn dir(&mut self, name: &str, perm: u32) -> Result<(), QemuError> {
        self.entry(name, S_IFDIR | (perm & 0o7777), 2, (0, 0), &[])
    }

    /// A regular file.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) -> Result<(), QemuError> {
        self.entry(name, S_IFREG | (perm & 0o7777), 1, (0, 0), data)
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) -> Result<(), QemuError> {
        self.entry(name, S_IFLNK | 0o777, 1, (0, 0), target.as_bytes())
    }

    /// A character device node, e.g. `dev/console` (5, 1).
    pub fn char_dev(
        &mut self,
        name: &str,
        perm: u32,
        major: u32,
        minor: u32,
    ) -> Result<(), QemuError> {
        self.entry(name, S_IFCHR | (perm & 0o7777), 1, (major, minor), &[])
    }

    /// Write the trailer and hand back the writer.
    pub fn finish(mut self) -> Result<W, QemuError> {
        self.raw_entry("TRAILER!!!", 0, 0, 1, (0, 0), &[])
            .map_err(|e| QemuError::io("writing cpio trailer", e))?;
        Ok(self.out)
    }

    fn entry(
        &mut self,
        name: &str,
        mode: u32,
        nlink: u32,
        rdev: (u32, u32),
        data: &[u8],
    ) -> Result<(), QemuError> {
        check_name(name)?;
        let ino = self.next_ino;
        self.next_ino += 1;
        self.raw_entry(name, ino, mode, nlink, rdev, data)
            .map_err(|e| QemuError::io(format!("writing cpio entry {name}"), e))
    }

    fn raw_entry(
        &mut self,
        name: &str,
        ino: u32,
        mode: u32,
        nlink: u32,
        rdev: (u32, u32),
        data: &[u8],
    ) -> io::Result<()> {
        let filesize = u32::try_from(data.len())
            .map_err(|_| io::Error::other(format!("{name}: larger than 4 GiB")))?;
        let namesize = u32::try_from(name.len() + 1)
            .map_err(|_| io::Error::other("a name longer than 4 GiB"))?;
        // Everything owned by root, timestamp 0, no checksum (newc, not crc).
        let (uid, gid, mtime, devmajor, devminor, check) = (0, 0, 0, 0, 0, 0);
        let fields = [
            ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdev.0, rdev.1,
            namesize, check,
        ];
        let mut header = String::with_capacity(110);
        header.push_str("070701");
        for f in fields {
            header.push_str(&format!("{f:08X}"));
        }
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - (self.written % 4) as usize) % 4;
        self.put(&[0u8; 3][..n])
    }
}

fn check_name(name: &str) -> Result<(), QemuError> {
    let bad = |reason| {
        Err(QemuError::CpioName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.starts_with('/') {
        return bad("must be relative (no leading /)");
    }
    if name.contains('\0') {
        return bad("contains NUL");
    }
    if name
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return bad("empty, `.` or `..` path component");
    }
    if name == "TRAILER!!!" {
        return bad("reserved for the trailer");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, mode, data, (rdev major, rdev minor)) of one entry.
    type CpioTestEntry = (String, u32, Vec<u8>, (u32, u32));

    /// A minimal newc reader, to check the writer against.
    fn parse(mut buf: &[u8]) -> Vec<CpioTestEntry> {
        let mut out = Vec::new();
        let total = buf.len();
        loop {
            let off = total - buf.len();
            assert_eq!(off % 4, 0, "entry not 4-aligned");
            assert_eq!(&buf[..6], b"070701");
            let field = |i: usize| {
                let s = std::str::from_utf8(&buf[6 + 8 * i..14 + 8 * i]).unwrap();
                u32::from_str_radix(s, 16).unwrap()
            };
            let (mode, filesize, rmaj, rmin, namesize) =
                (field(1), field(6), field(9), field(10), field(11));
            let name_end = 110 + namesize as usize;
            let name = std::str::from_utf8(&buf[110..name_end - 1])
                .unwrap()
                .to_string();
            assert_eq!(buf[name_end - 1], 0);
            let data_start = (off + name_end).div_ceil(4) * 4 - off;
            let data = buf[data_start..data_start + filesize as usize].to_vec();
            let next = (off + data_start + filesize as usize).div_ceil(4) * 4 - off;
            buf = &buf[next..];
            if name == "TRAILER!!!" {
                assert!(buf.is_empty());
                return out;
            }
            out.push((name, mode, data, (rmaj, rmin)));
        }
    }

    #[test]
    fn round_trips_all_entry_kinds() {
        let mut w = CpioWriter::new(Vec::new());
        w.dir("bin", 0o755).unwrap();
        w.file("bin/busybox", 0o755, b"\x7fELF...").unwrap();
        w.symlink("bin/sh", "busybox").unwrap();
        w.file("init", 0o755, b"#!/bin/sh\n").unwrap();
        w.file("empty", 0o644, b"").unwrap();
        w.char_dev("dev/console", 0o600, 5, 1).unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len() % 4, 0);
        let entries = parse(&bytes);
        let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "bin",
                "bin/busybox",
                "bin/sh",
                "init",
                "empty",
                "dev/console"
            ]
        );
        assert_eq!(entries[0].1, 0o040755);
        assert_eq!(entries[1].1, 0o100755);
        assert_eq!(entries[1].2, b"\x7fELF...");
        assert_eq!(entries[2].1, 0o120777);
        assert_eq!(entries[2].2, b"busybox");
        assert_eq!(entries[3].2, b"#!/bin/sh\n");
        assert!(entries[4].2.is_empty());
        assert_eq!(entries[5].1, 0o020600);
        assert_eq!(entries[5].3, (5, 1));
    }

    #[test]
    fn header_layout_is_newc() {
        let mut w = CpioWriter::new(Vec::new());
        w.file("a", 0o644, b"xyz").unwrap();
        let bytes = w.finish().unwrap();
        // magic, ino 1, mode 0100644, uid, gid, nlink 1, mtime 0, size 3, ..., namesize 2
        let want = "070701\
                    00000001000081A4000000000000000000000001000000000000000300000000\
                    00000000000000000000000000000002\
                    00000000";
        assert_eq!(&bytes[..110], want.as_bytes());
        // name "a\0" at 110..112, pad to 112 (already aligned), data, pad to 116
        assert_eq!(&bytes[110..112], b"a\0");
        assert_eq!(&bytes[112..115], b"xyz");
        assert_eq!(bytes[115], 0);
    }

    #[test]
    fn deterministic() {
        let build = || {
            let mut w = CpioWriter::new(Vec::new());
            w.dir("x", 0o755).unwrap();
            w.file("x/y", 0o600, b"data").unwrap();
            w.finish().unwrap()
        };
        assert_eq!(build(), build());
    }

    #[test]
    fn bad_names_are_errors() {
        let mut w = CpioWriter::new(Vec::new());
        for name in ["", "/init", "a//b", "a/../b", "./a", "TRAILER!!!", "a\0b"] {
            let e = w.file(name, 0o644, b"").unwrap_err();
            assert!(matches!(e, QemuError::CpioName { .. }), "{name:?}: {e}");
        }
    }
}
