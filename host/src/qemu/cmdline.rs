//! The guest's command lines: the kernel command line that carries the node
//! and the command to /init, and /bin/sh quoting and base64 for the commands
//! sent to guests.

use super::QemuError;

/// Longest kernel command line x86 Linux accepts (COMMAND_LINE_SIZE 2048, with its NUL).
pub const MAX_CMDLINE: usize = 2047;

/// Quote `s` for /bin/sh (single quotes unless it is plainly safe).
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// An argv as one /bin/sh command line.
pub fn shell_join<S: AsRef<str>>(argv: &[S]) -> String {
    argv.iter()
        .map(|a| shell_quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Standard base64 (RFC 4648, with padding), what busybox `base64 -d` reads.
pub fn base64_encode(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The guest kernel command line: serial console, reboot (= QEMU exit with
/// `-no-reboot`) on panic, node id and the base64'd shell command for /init.
pub fn kernel_cmdline(
    node: u32,
    command: &str,
    quiet: bool,
    extra: Option<&str>,
) -> Result<String, QemuError> {
    let mut line = String::from("console=ttyS0 panic=-1");
    if quiet {
        line.push_str(" quiet");
    }
    if let Some(x) = extra.map(str::trim).filter(|x| !x.is_empty()) {
        line.push(' ');
        line.push_str(x);
    }
    line.push_str(&format!(" mc.node={node}"));
    if !command.is_empty() {
        line.push_str(" mc.cmd=");
        line.push_str(&base64_encode(command.as_bytes()));
    }
    if line.len() > MAX_CMDLINE {
        return Err(QemuError::CmdlineTooLong {
            len: line.len(),
            max: MAX_CMDLINE,
        });
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), enc, "{plain:?}");
        }
        assert_eq!(base64_encode(&[0xfb, 0xff, 0xbf]), "+/+/");
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("abc"), "abc");
        assert_eq!(shell_quote("/bin/mc-guest"), "/bin/mc-guest");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME;*"), "'$HOME;*'");
        assert_eq!(
            shell_join(&["/bin/mc-guest", "--node", "3", "hello world"]),
            "/bin/mc-guest --node 3 'hello world'"
        );
    }

    #[test]
    fn cmdline_carries_node_and_command_without_spaces() {
        let line = kernel_cmdline(3, "echo hi; cat /proc/cpuinfo", true, None).unwrap();
        assert!(line.starts_with("console=ttyS0 panic=-1 quiet "), "{line}");
        assert!(line.contains(" mc.node=3 "), "{line}");
        let b64 = line.split(" mc.cmd=").nth(1).unwrap();
        assert!(!b64.contains(' '));
        assert_eq!(b64, base64_encode(b"echo hi; cat /proc/cpuinfo"));
        let loud = kernel_cmdline(0, "", false, Some(" loglevel=8 ")).unwrap();
        assert_eq!(loud, "console=ttyS0 panic=-1 loglevel=8 mc.node=0");
    }

    #[test]
    fn cmdline_too_long_is_an_error() {
        let e = kernel_cmdline(0, &"x".repeat(2000), true, None).unwrap_err();
        assert!(matches!(e, QemuError::CmdlineTooLong { .. }), "{e}");
    }
}
