//! The guest kernel command line: it carries the node and the command to
//! /init.

use crate::error::QemuError;
use crate::shell::base64_encode;

/// Longest kernel command line x86 Linux accepts (COMMAND_LINE_SIZE 2048, with its NUL).
pub const MAX_CMDLINE: usize = 2047;

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
