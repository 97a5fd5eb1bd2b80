//! The `image`, `qemu-check` and `qemu-boot` subcommands.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use mc_qemu::boot::{qemu_args, AdapterSpec, BootSpec};
use mc_qemu::find::preferred_accel;
use mc_qemu::image_record::{recorded_guest_binary, recorded_programs};
use mc_qemu::shell::{shell_join, shell_quote};
use mc_qemu::{boot, build_image, find_qemu, CacheDir, GuestInputs, QemuError};

/// `mc-host image`
#[derive(Args, Debug)]
pub struct ImageArgs {
    /// Static guest program to install as /bin/mc-guest.
    #[arg(long)]
    pub guest_binary: Option<PathBuf>,
    /// A program of yours to install as /bin/<its file name> (repeatable):
    /// a static x86-64 ELF (a C program linked with libimc and -static,
    /// docs/c-api.md) or a script.
    #[arg(long = "add", value_name = "PROG")]
    pub programs: Vec<PathBuf>,
    /// Output directory [default: <cache>/image].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `mc-host qemu-check`
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// QEMU binary to use (else MC_QEMU, PATH, the cached root).
    #[arg(long)]
    pub qemu: Option<PathBuf>,
}

/// Which QEMU, and the guest image to boot (`qemu-boot`, `cluster up`).
#[derive(Args, Debug)]
pub struct GuestImageArgs {
    /// QEMU binary to use (else MC_QEMU, PATH, the cached root).
    #[arg(long)]
    pub qemu: Option<PathBuf>,
    /// Image directory [default: <cache>/image]; (re)built there if missing
    /// or out of date.
    #[arg(long)]
    pub image_dir: Option<PathBuf>,
    /// Static guest program to build the image with [default: `cluster up`
    /// builds one from this project's sources (see docs/qemu.md), `qemu-boot`
    /// takes the one the image was last built with].
    #[arg(long)]
    pub guest_binary: Option<PathBuf>,
    /// Programs of yours to install as /bin/<name> (repeatable) [default:
    /// those the image was last built with, e.g. by `mc-host image --add`].
    #[arg(long = "add", value_name = "PROG")]
    pub programs: Vec<PathBuf>,
}

impl GuestImageArgs {
    /// The user programs to build the image with: those given, else those
    /// the image in `dir` was last built with.
    pub fn programs(&self, dir: &std::path::Path) -> Vec<PathBuf> {
        if self.programs.is_empty() {
            recorded_programs(dir)
        } else {
            self.programs.clone()
        }
    }

    /// The image directory: the one given, else `<cache>/image`.
    pub fn image_dir(&self, cache: &CacheDir) -> PathBuf {
        self.image_dir.clone().unwrap_or_else(|| cache.image_dir())
    }

    /// The image directory, and the guest program to build it with: the one
    /// given, else the one the image there was last built with.
    pub fn dir_and_guest(&self, cache: &CacheDir) -> (PathBuf, Option<PathBuf>) {
        let dir = self.image_dir(cache);
        let guest = self
            .guest_binary
            .clone()
            .or_else(|| recorded_guest_binary(&dir));
        (dir, guest)
    }
}

/// `mc-host qemu-boot`
#[derive(Args, Debug)]
pub struct BootArgs {
    #[command(flatten)]
    pub image: GuestImageArgs,
    /// Node id passed to the guest (mc.node=).
    #[arg(long, default_value_t = 0)]
    pub node: u32,
    /// Attach the Memory Channel adapter: the vhost-user backend's socket.
    #[arg(long)]
    pub vhost_socket: Option<PathBuf>,
    /// Config space size of the adapter (what the backend serves: the
    /// register file, abi::CONFIG_SIZE).
    #[arg(long, default_value_t = firmware_model::abi::CONFIG_SIZE as u32)]
    pub config_size: u32,
    /// Guest memory in MiB.
    #[arg(long, default_value_t = 256)]
    pub memory: u32,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// With MC_KVM=1: seconds to wait for the guest under KVM before
    /// falling back to TCG.
    #[arg(long, default_value_t = 20)]
    pub kvm_probe_timeout: u64,
    /// Serial log file [default: <image dir>/node<N>.serial.log].
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Leave `quiet` off the kernel command line.
    #[arg(long)]
    pub verbose_kernel: bool,
    /// Print the QEMU command line and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Command to run in the guest (argv, after `--`); default: list the PCI
    /// devices with their vendor, device and bound driver.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// The guest command `qemu-boot` runs by default.
pub const LIST_PCI: &str = r#"for d in /sys/bus/pci/devices/*; do drv=none; if [ -e "$d/driver" ]; then drv=$(basename "$(readlink "$d/driver")"); fi; echo "pci $(basename "$d") vendor=$(cat "$d/vendor") device=$(cat "$d/device") driver=$drv"; done"#;

pub fn image(args: &ImageArgs) -> Result<(), QemuError> {
    let cache = CacheDir::from_env()?;
    let inputs = GuestInputs::from_cache(&cache, args.guest_binary.as_deref())?
        .with_programs(&args.programs)?;
    let out = args.out.clone().unwrap_or_else(|| cache.image_dir());
    let img = build_image(&inputs, &out)?;
    println!(
        "{} {}\nkernel: {}\ninitrd: {}\nkey:    {}",
        if img.rebuilt { "built" } else { "up to date:" },
        out.display(),
        img.kernel.display(),
        img.initrd.display(),
        img.key
    );
    Ok(())
}

pub fn check(args: &CheckArgs) -> Result<(), QemuError> {
    let cache = CacheDir::from_env()?;
    println!("cache: {}", cache.0.display());
    let qemu = find_qemu(args.qemu.as_deref(), &cache)?;
    println!("QEMU {}: {}", qemu.version, qemu.display_prefix());
    let inputs = GuestInputs::from_cache(&cache, None)?;
    println!("kernel: {}", inputs.kernel.display());
    println!("busybox: {}", inputs.busybox.display());
    println!("accelerator: {} (TCG unless MC_KVM=1)", preferred_accel());
    Ok(())
}

pub fn qemu_boot(args: &BootArgs) -> Result<i32, QemuError> {
    let cache = CacheDir::from_env()?;
    // Rebuilt only if an input changed; without --guest-binary, with the one
    // the image was last built with.
    let (dir, guest) = args.image.dir_and_guest(&cache);
    let programs = args.image.programs(&dir);
    let img = build_image(
        &GuestInputs::from_cache(&cache, guest.as_deref())?.with_programs(&programs)?,
        &dir,
    )?;
    let command = if args.command.is_empty() {
        LIST_PCI.to_string()
    } else {
        shell_join(&args.command)
    };
    let log = args
        .log
        .clone()
        .unwrap_or_else(|| dir.join(format!("node{}.serial.log", args.node)));
    let mut spec = BootSpec::new(img.kernel, img.initrd, log, command);
    spec.node = args.node;
    spec.memory_mib = args.memory;
    spec.timeout = Duration::from_secs(args.timeout);
    spec.quiet = !args.verbose_kernel;
    spec.accel = preferred_accel();
    spec.kvm_probe_timeout = Duration::from_secs(args.kvm_probe_timeout);
    spec.adapter = args
        .vhost_socket
        .clone()
        .map(|s| AdapterSpec::memory_channel(s, args.config_size));
    let qemu = find_qemu(args.image.qemu.as_deref(), &cache)?;
    if args.dry_run {
        let a = qemu_args(&spec, spec.accel)?;
        let words: Vec<String> = a
            .iter()
            .map(|w| shell_quote(&w.to_string_lossy()))
            .collect();
        println!("{} {}", qemu.display_prefix(), words.join(" "));
        return Ok(0);
    }
    let out = boot(&qemu, &spec)?;
    println!("{}", out.output);
    println!(
        "node {}: {} ready after {:.2} s, command done after {:.2} s, QEMU exited after {:.2} s; guest command status {}",
        spec.node,
        out.accel,
        out.ready_after.as_secs_f64(),
        out.command_done_after.as_secs_f64(),
        out.total.as_secs_f64(),
        out.exit_status
    );
    println!("serial log: {}", spec.serial_log.display());
    Ok(out.exit_status)
}
