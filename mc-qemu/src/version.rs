//! QEMU versions: parsing `-version` and the oldest this project can use.

use std::fmt;

/// The oldest QEMU whose `vhost-user-test-device-pci` is user-creatable.
pub const MIN_VERSION: QemuVersion = QemuVersion {
    major: 10,
    minor: 2,
    micro: 0,
};

/// A QEMU version, as printed by `qemu-system-x86_64 -version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QemuVersion {
    pub major: u32,
    pub minor: u32,
    pub micro: u32,
}

impl fmt::Display for QemuVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.micro)
    }
}

impl QemuVersion {
    /// Parse the output of `-version`: the first line reading
    /// `QEMU emulator version X.Y[.Z] ...`.
    pub fn parse(output: &str) -> Option<QemuVersion> {
        const TAG: &str = "QEMU emulator version ";
        let line = output.lines().find_map(|l| l.trim().strip_prefix(TAG))?;
        let word = line.split_whitespace().next()?;
        let mut parts = word.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let micro = match parts.next() {
            None => 0,
            Some(p) => {
                // "9.2.90" or a vendor tail like "3-dirty": take the leading digits.
                let digits: String = p.chars().take_while(|c| c.is_ascii_digit()).collect();
                digits.parse().ok()?
            }
        };
        Some(QemuVersion {
            major,
            minor,
            micro,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_debian_backports_version() {
        let out = "QEMU emulator version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)\n\
                   Copyright (c) 2003-2025 Fabrice Bellard and the QEMU Project developers\n";
        assert_eq!(
            QemuVersion::parse(out),
            Some(QemuVersion {
                major: 11,
                minor: 1,
                micro: 3
            })
        );
    }

    #[test]
    fn parses_two_part_and_dev_versions() {
        assert_eq!(
            QemuVersion::parse("QEMU emulator version 10.2\n"),
            Some(QemuVersion {
                major: 10,
                minor: 2,
                micro: 0
            })
        );
        assert_eq!(
            QemuVersion::parse("QEMU emulator version 9.2.90 (v9.2.0-1234-gdeadbeef)"),
            Some(QemuVersion {
                major: 9,
                minor: 2,
                micro: 90
            })
        );
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(QemuVersion::parse(""), None);
        assert_eq!(QemuVersion::parse("qemu 11.1"), None);
        assert_eq!(QemuVersion::parse("QEMU emulator version eleven"), None);
        assert_eq!(QemuVersion::parse("QEMU emulator version 11"), None);
        assert_eq!(QemuVersion::parse("QEMU emulator version 11.x.1"), None);
    }

    #[test]
    fn minimum_version_ordering() {
        let v = |s: &str| QemuVersion::parse(&format!("QEMU emulator version {s}")).unwrap();
        assert!(v("10.1.9") < MIN_VERSION);
        assert!(v("10.0.2") < MIN_VERSION);
        assert!(v("7.2.0") < MIN_VERSION);
        assert!(v("10.2.0") >= MIN_VERSION);
        assert!(v("11.1.3") >= MIN_VERSION);
    }
}
