//! Booting one guest under QEMU and following its serial console.
//!
//! The guest's /init prints `MC-GUEST-READY node=<id>`, runs the command
//! from the kernel command line, prints `MC-GUEST-EXIT <status>` and powers
//! off; [`boot`] watches the serial log for those lines.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use log::{debug, info, warn};

use crate::cmdline::kernel_cmdline;
use crate::error::QemuError;
use crate::find::{Accel, Qemu};
use crate::shell::shell_quote;

pub const READY_TAG: &str = "MC-GUEST-READY";
pub const EXIT_TAG: &str = "MC-GUEST-EXIT";

/// The virtio device id the adapter is attached as: QEMU names it
/// (virtio-spi), so `vhost-user-test-device-pci` accepts it, and the guests'
/// kernel has no driver of its own for it. The guest sees PCI device
/// 0x1af4:0x106d (0x1040 + 45).
pub const MC_VIRTIO_ID: u32 = 45;
/// Transmit, control and event queues.
pub const MC_NUM_VQS: u32 = 3;
/// The least guest memory the image boots in.
pub const MIN_MEMORY_MIB: u32 = 64;

/// The Memory Channel adapter as a generic vhost-user device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterSpec {
    /// The vhost-user backend's socket.
    pub socket: PathBuf,
    pub virtio_id: u32,
    pub num_vqs: u32,
    /// Bytes of config space QEMU fetches from the backend (GET_CONFIG).
    pub config_size: u32,
}

impl AdapterSpec {
    /// The adapter on `socket`, with `config_size` bytes of config space
    /// (what the backend serves).
    pub fn memory_channel(socket: PathBuf, config_size: u32) -> Self {
        AdapterSpec {
            socket,
            virtio_id: MC_VIRTIO_ID,
            num_vqs: MC_NUM_VQS,
            config_size,
        }
    }
}

/// One guest to boot.
#[derive(Debug, Clone)]
pub struct BootSpec {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub node: u32,
    /// A /bin/sh command line for the guest's /init to run.
    pub command: String,
    pub memory_mib: u32,
    pub adapter: Option<AdapterSpec>,
    /// Where QEMU writes the serial console (`-serial file:`); QEMU's own
    /// stderr goes next to it, with `.qemu-stderr` appended.
    pub serial_log: PathBuf,
    /// Limit for the whole boot, command included.
    pub timeout: Duration,
    /// With KVM: how long to wait for the readiness line before giving up
    /// on KVM and booting again under TCG.
    pub kvm_probe_timeout: Duration,
    /// `quiet` on the kernel command line.
    pub quiet: bool,
    /// The accelerator to try first (see [`crate::find::preferred_accel`]).
    pub accel: Accel,
    /// Run the command agent instead of `command` (`mc.agent=1`): its
    /// channel is the guest's second serial port, served by QEMU on this
    /// Unix socket (see init.sh and [`crate::cluster`]).
    pub agent_socket: Option<PathBuf>,
}

impl BootSpec {
    /// Defaults: 256 MiB, no adapter, 120 s limit, 20 s KVM probe, quiet, TCG.
    pub fn new(kernel: PathBuf, initrd: PathBuf, serial_log: PathBuf, command: String) -> Self {
        BootSpec {
            kernel,
            initrd,
            node: 0,
            command,
            memory_mib: 256,
            adapter: None,
            serial_log,
            timeout: Duration::from_secs(120),
            kvm_probe_timeout: Duration::from_secs(20),
            quiet: true,
            accel: Accel::Tcg,
            agent_socket: None,
        }
    }

    fn stderr_log(&self) -> PathBuf {
        let mut p = self.serial_log.clone().into_os_string();
        p.push(".qemu-stderr");
        PathBuf::from(p)
    }
}

/// What a finished boot gave.
#[derive(Debug, Clone)]
pub struct BootOutcome {
    pub accel: Accel,
    /// From starting QEMU to the readiness line in the serial log.
    pub ready_after: Duration,
    /// From starting QEMU to the exit line.
    pub command_done_after: Duration,
    /// From starting QEMU to QEMU's exit.
    pub total: Duration,
    /// The guest command's exit status.
    pub exit_status: i32,
    /// The serial lines between the readiness and exit lines.
    pub output: String,
    /// The whole serial log.
    pub serial: String,
    pub qemu_status: ExitStatus,
}

fn path_arg(what: &'static str, p: &Path) -> Result<String, QemuError> {
    let s = p.to_str().ok_or_else(|| QemuError::NotUtf8 {
        what,
        path: p.to_path_buf(),
    })?;
    // QEMU option values split at commas (`,,` escapes one).
    Ok(s.replace(',', ",,"))
}

/// QEMU's arguments (after the [`Qemu`] prefix) for `spec` under `accel`.
pub fn qemu_args(spec: &BootSpec, accel: Accel) -> Result<Vec<OsString>, QemuError> {
    if spec.memory_mib < MIN_MEMORY_MIB {
        return Err(QemuError::TooLittleMemory {
            mib: spec.memory_mib,
            min: MIN_MEMORY_MIB,
        });
    }
    for (what, p) in [("kernel", &spec.kernel), ("initramfs", &spec.initrd)] {
        if !p.is_file() {
            return Err(QemuError::MissingImageFile {
                what,
                path: p.clone(),
            });
        }
    }
    let mem = spec.memory_mib;
    let append = match &spec.agent_socket {
        Some(_) => kernel_cmdline(spec.node, "", spec.quiet, Some("mc.agent=1"))?,
        None => kernel_cmdline(spec.node, &spec.command, spec.quiet, None)?,
    };
    let mut a: Vec<String> = vec![
        "-accel".into(),
        accel.qemu_name().into(),
        "-machine".into(),
        "q35,memory-backend=mem".into(),
        "-m".into(),
        format!("{mem}M"),
        "-object".into(),
        format!("memory-backend-memfd,id=mem,size={mem}M,share=on"),
        "-nodefaults".into(),
        "-no-user-config".into(),
        "-nographic".into(),
        "-no-reboot".into(),
        "-serial".into(),
        format!("file:{}", path_arg("serial log", &spec.serial_log)?),
        "-kernel".into(),
        path_arg("kernel", &spec.kernel)?,
        "-initrd".into(),
        path_arg("initramfs", &spec.initrd)?,
        "-append".into(),
        append,
    ];
    if let Some(sock) = &spec.agent_socket {
        // The second -serial is the guest's ttyS1.
        a.extend([
            "-chardev".into(),
            format!(
                "socket,id=agent,path={},server=on,wait=off",
                path_arg("agent socket", sock)?
            ),
            "-serial".into(),
            "chardev:agent".into(),
        ]);
    }
    if accel == Accel::Kvm {
        a.extend(["-cpu".into(), "host".into()]);
    }
    if let Some(ad) = &spec.adapter {
        if !ad.socket.exists() {
            return Err(QemuError::NoBackendSocket {
                path: ad.socket.clone(),
            });
        }
        a.extend([
            "-chardev".into(),
            format!(
                "socket,id=mc0,path={}",
                path_arg("vhost-user socket", &ad.socket)?
            ),
            "-device".into(),
            format!(
                "vhost-user-test-device-pci,chardev=mc0,virtio-id={},num_vqs={},config_size={}",
                ad.virtio_id, ad.num_vqs, ad.config_size
            ),
        ]);
    }
    Ok(a.into_iter().map(OsString::from).collect())
}

/// Kills the QEMU child if the boot is abandoned.
struct QemuProcess(Option<Child>);

impl Drop for QemuProcess {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// The parsed state of a serial log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SerialState {
    pub ready: bool,
    pub exit_status: Option<i32>,
    pub output: String,
}

/// Find the readiness and exit lines in `serial` (CR/LF tolerant).
pub fn parse_serial(serial: &str) -> Result<SerialState, QemuError> {
    let mut st = SerialState::default();
    let mut out = Vec::new();
    for line in serial.lines().map(|l| l.trim_end_matches('\r')) {
        // Firmware escape sequences may precede a tag on its line.
        if !st.ready {
            st.ready = line.contains(READY_TAG);
            continue;
        }
        if let Some(rest) = line.find(EXIT_TAG).map(|i| &line[i + EXIT_TAG.len()..]) {
            let status = rest.trim().parse().map_err(|_| QemuError::GuestProtocol {
                line: line.to_string(),
            })?;
            st.exit_status = Some(status);
            break;
        }
        out.push(line);
    }
    st.output = out.join("\n");
    Ok(st)
}

/// The last `n` lines of `text`.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn boot_once(
    qemu: &Qemu,
    spec: &BootSpec,
    accel: Accel,
    ready_limit: Duration,
) -> Result<BootOutcome, QemuError> {
    let args = qemu_args(spec, accel)?;
    let _ = fs::remove_file(&spec.serial_log);
    let stderr_path = spec.stderr_log();
    let stderr = fs::File::create(&stderr_path)
        .map_err(|e| QemuError::io(format!("creating {}", stderr_path.display()), e))?;
    let mut cmd = qemu.command();
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    debug!(
        "starting: {} {}",
        qemu.display_prefix(),
        args.iter()
            .map(|a| shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let start = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| QemuError::io(format!("starting {}", qemu.program.display()), e))?;
    let mut guard = QemuProcess(Some(child));
    let mut ready_after = None;
    let mut done_after = None;
    loop {
        let serial = read_lossy(&spec.serial_log);
        let st = parse_serial(&serial)?;
        if st.ready && ready_after.is_none() {
            ready_after = Some(start.elapsed());
            info!(
                "node {}: ready after {:.2} s ({accel})",
                spec.node,
                start.elapsed().as_secs_f64()
            );
        }
        if st.exit_status.is_some() && done_after.is_none() {
            done_after = Some(start.elapsed());
        }
        let child = guard.0.as_mut().expect("child present until the end");
        let exited = child
            .try_wait()
            .map_err(|e| QemuError::io("waiting for QEMU", e))?;
        if let Some(status) = exited {
            // Read once more: the exit line may have landed just before.
            let serial = read_lossy(&spec.serial_log);
            let st = parse_serial(&serial)?;
            return match (st.ready, st.exit_status) {
                (true, Some(code)) => Ok(BootOutcome {
                    accel,
                    ready_after: ready_after.unwrap_or_else(|| start.elapsed()),
                    command_done_after: done_after.unwrap_or_else(|| start.elapsed()),
                    total: start.elapsed(),
                    exit_status: code,
                    output: st.output,
                    qemu_status: status,
                    serial,
                }),
                (ready, _) => Err(QemuError::QemuExited {
                    status: status.to_string(),
                    stage: if ready {
                        "printed MC-GUEST-EXIT"
                    } else {
                        "printed MC-GUEST-READY"
                    },
                    stderr: read_lossy(&stderr_path).trim().to_string(),
                    serial_tail: tail_lines(&serial, 30),
                }),
            };
        }
        let elapsed = start.elapsed();
        if !st.ready && elapsed > ready_limit {
            return Err(QemuError::Timeout {
                stage: "print MC-GUEST-READY",
                after: ready_limit,
                serial_tail: tail_lines(&serial, 30),
            });
        }
        if let Some(d) = done_after {
            // Powered off by now, normally; don't wait forever on it.
            if elapsed > d + Duration::from_secs(10) {
                warn!("guest printed its exit line but QEMU did not exit: killing it");
                let _ = child.kill();
            }
        } else if elapsed > spec.timeout {
            return Err(QemuError::Timeout {
                stage: "print MC-GUEST-EXIT",
                after: spec.timeout,
                serial_tail: tail_lines(&serial, 30),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Boot one guest, run its command, and wait for QEMU to exit.
///
/// Under KVM (only when asked for, see [`crate::find::preferred_accel`]) the
/// boot is a probe: if the guest is not ready within
/// `spec.kvm_probe_timeout`, or QEMU fails before that, it boots again under
/// TCG.
pub fn boot(qemu: &Qemu, spec: &BootSpec) -> Result<BootOutcome, QemuError> {
    if spec.accel == Accel::Kvm {
        match boot_once(qemu, spec, Accel::Kvm, spec.kvm_probe_timeout) {
            Ok(o) => return Ok(o),
            Err(
                e @ (QemuError::Timeout {
                    stage: "print MC-GUEST-READY",
                    ..
                }
                | QemuError::QemuExited {
                    stage: "printed MC-GUEST-READY",
                    ..
                }),
            ) => warn!("KVM probe failed, falling back to TCG: {e}"),
            Err(e) => return Err(e),
        }
    }
    boot_once(qemu, spec, Accel::Tcg, spec.timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_parsing() {
        let log = "Linux version 6.1\r\n\x1bc\x1b[?7l\x1b[2JMC-GUEST-READY node=2\r\nhello\r\n0x1af4\r\nMC-GUEST-EXIT 3\r\nreboot: Power down\r\n";
        let st = parse_serial(log).unwrap();
        assert!(st.ready);
        assert_eq!(st.exit_status, Some(3));
        assert_eq!(st.output, "hello\n0x1af4");
        let partial = parse_serial("MC-GUEST-READY node=0\nworking").unwrap();
        assert!(partial.ready && partial.exit_status.is_none());
        assert_eq!(parse_serial("booting...").unwrap(), SerialState::default());
        assert!(matches!(
            parse_serial("MC-GUEST-READY node=0\nMC-GUEST-EXIT what"),
            Err(QemuError::GuestProtocol { .. })
        ));
    }

    #[test]
    fn args_for_tcg_with_adapter() {
        let dir = std::env::temp_dir().join(format!("mc-boot-args-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let (k, i, s) = (
            dir.join("vmlinuz"),
            dir.join("initrd"),
            dir.join("n0,x.sock"),
        );
        for p in [&k, &i, &s] {
            fs::write(p, b"").unwrap();
        }
        let mut spec = BootSpec::new(k, i, dir.join("serial.log"), "true".into());
        spec.adapter = Some(AdapterSpec::memory_channel(s, 64));
        let args: Vec<String> = qemu_args(&spec, Accel::Tcg)
            .unwrap()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let joined = args.join(" ");
        assert!(joined.starts_with("-accel tcg -machine q35,memory-backend=mem -m 256M -object memory-backend-memfd,id=mem,size=256M,share=on"), "{joined}");
        assert!(joined.contains(&format!(
            "-chardev socket,id=mc0,path={}/n0,,x.sock",
            dir.display()
        )));
        assert!(joined.contains(
            "-device vhost-user-test-device-pci,chardev=mc0,virtio-id=45,num_vqs=3,config_size=64"
        ));
        let append = &args[args.iter().position(|a| a == "-append").unwrap() + 1];
        assert!(append.starts_with("console=ttyS0 "), "{append}");
        assert!(!joined.contains("-cpu host"));
        let kvm = qemu_args(&spec, Accel::Kvm).unwrap();
        assert!(kvm.iter().any(|a| a == "host"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_files_are_errors() {
        let spec = BootSpec::new(
            "/nonexistent/vmlinuz".into(),
            "/nonexistent/initrd".into(),
            "/tmp/x.log".into(),
            String::new(),
        );
        let e = qemu_args(&spec, Accel::Tcg).unwrap_err();
        assert!(
            matches!(e, QemuError::MissingImageFile { what: "kernel", .. }),
            "{e}"
        );
        assert!(e.to_string().contains("mc-host image"), "{e}");
    }
}
