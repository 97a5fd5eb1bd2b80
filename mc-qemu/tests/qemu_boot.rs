//! Boots a real QEMU guest (TCG) from the set-up cache.
//!
//! Skips, and passes, with a message naming `scripts/setup.sh` when no
//! QEMU 10.2 or later, guest kernel or busybox is installed, so
//! `cargo test --workspace` passes on machines where set-up was not run.
//!
//! With `MC_TEST_VHOST_SOCKET=PATH` (a vhost-user backend with 3 queues
//! serving PATH, e.g. node0.sock of `mc-host serve --nodes 1 --socket-dir
//! DIR`; `MC_TEST_CONFIG_SIZE`, default the adapter's register file,
//! `abi::CONFIG_SIZE`) it also attaches the Memory Channel adapter and checks
//! that the guest sees PCI 0x1af4:0x106d with no kernel driver bound.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mc_qemu::boot::{AdapterSpec, BootSpec};
use mc_qemu::{boot, build_image, find_qemu, CacheDir, GuestInputs};

const HELLO_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    const char *node = getenv("MC_NODE");
    printf("mc-guest-test argc=%d node=%s\n", argc, node ? node : "unset");
    for (int i = 1; i < argc; i++) printf("arg[%d]=%s\n", i, argv[i]);
    return 0;
}
"#;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A static test program built with the C compiler, if there is one.
fn static_test_binary(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("hello.c");
    let bin = dir.join("hello");
    std::fs::write(&src, HELLO_C).unwrap();
    let ok = Command::new("cc")
        .args(["-static", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("note: no static C toolchain (cc -static): booting without /bin/mc-guest");
    }
    ok.then_some(bin)
}

#[test]
fn boots_a_guest_under_tcg() {
    let _ = env_logger::builder().is_test(true).try_init();
    let cache = match CacheDir::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIPPED boots_a_guest_under_tcg: {e}");
            return;
        }
    };
    let qemu = match find_qemu(None, &cache) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("SKIPPED boots_a_guest_under_tcg: {e}");
            return;
        }
    };
    if let Err(e) = GuestInputs::from_cache(&cache, None) {
        eprintln!("SKIPPED boots_a_guest_under_tcg: {e}");
        return;
    }
    let dir = scratch("qemu-boot-test");
    let guest = static_test_binary(&dir);
    let inputs = GuestInputs::from_cache(&cache, guest.as_deref()).unwrap();
    let img = build_image(&inputs, &dir.join("image")).unwrap();

    let mut cmd = String::new();
    if guest.is_some() {
        cmd.push_str("/bin/mc-guest one 'two words'; ");
    }
    cmd.push_str(
        "echo hugepages=$(cat /proc/sys/vm/nr_hugepages); \
         grep -q ' /dev/hugepages hugetlbfs ' /proc/mounts && echo hugetlbfs-mounted; \
         cat /sys/bus/pci/devices/*/vendor /sys/bus/pci/devices/*/device; \
         for d in /sys/bus/pci/devices/*; do \
           if [ -e $d/driver ]; then echo $(basename $d) driver=$(basename $(readlink $d/driver)); fi; \
         done; \
         exit 7",
    );
    let mut spec = BootSpec::new(img.kernel, img.initrd, dir.join("serial.log"), cmd);
    spec.node = 5;
    spec.timeout = Duration::from_secs(180);
    let socket = std::env::var_os("MC_TEST_VHOST_SOCKET").map(PathBuf::from);
    if let Some(s) = &socket {
        let size = std::env::var("MC_TEST_CONFIG_SIZE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(u32::try_from(firmware_model::abi::CONFIG_SIZE).unwrap());
        spec.adapter = Some(AdapterSpec::memory_channel(s.clone(), size));
    }
    let out = boot(&qemu, &spec).unwrap_or_else(|e| panic!("boot failed: {e}"));
    eprintln!("guest output:\n{}", out.output);
    eprintln!(
        "QEMU {} {}: ready after {:.2} s, exited after {:.2} s",
        qemu.version,
        out.accel,
        out.ready_after.as_secs_f64(),
        out.total.as_secs_f64()
    );
    assert!(out.serial.contains("MC-GUEST-READY node=5"));
    assert_eq!(out.exit_status, 7, "serial:\n{}", out.serial);
    assert!(out.output.contains("hugepages=64"), "{}", out.output);
    assert!(out.output.contains("hugetlbfs-mounted"), "{}", out.output);
    assert!(out.output.contains("0x8086"), "{}", out.output);
    if guest.is_some() {
        assert!(
            out.output.contains("mc-guest-test argc=3 node=5"),
            "{}",
            out.output
        );
        assert!(out.output.contains("arg[2]=two words"), "{}", out.output);
    }
    if socket.is_some() {
        let lines: Vec<&str> = out.output.lines().map(str::trim).collect();
        assert!(lines.contains(&"0x1af4"), "{}", out.output);
        assert!(lines.contains(&"0x106d"), "{}", out.output);
        // The adapter is 00:01.0; no kernel driver may hold it.
        assert!(
            !out.output.contains("0000:00:01.0 driver="),
            "{}",
            out.output
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
