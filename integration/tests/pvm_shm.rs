//! Two PVM tasks of one host talk over shared memory (issue 41, item 2;
//! docs/pvm.md, "Several tasks on one host"): each task is a process with
//! its own adapter, and their UMP channel maps a file both processes share
//! instead of going through the hub. `tests/pvm_shm/exchange.c` sends
//! messages of 1 B to 1 MiB both ways, one at a time and in a burst larger
//! than a ring, checking every byte; while both tasks are still enrolled
//! the test reads the hub's packet count (`mc-host stats`): a handful of
//! directory packets on one host, hundreds of thousands between two hosts
//! (the same program, the control), so the count shows which way the
//! bytes went. After the run the host's shared-memory directory is gone.
//!
//! Skipped, saying why, without pvm-dev (pvm3.h) or a C compiler. The
//! program is built into a temporary directory of the test's own.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use integration::build;
use integration::delivery::{for_each_delivery_up_to, host_args};

const HEADER: &str = "/usr/include/pvm3.h";
const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pvm_shm/exchange.c");
/// exchange.c's count: 3 rounds and a burst of 8 sizes, both ways.
const MESSAGES: usize = 64;
/// The bytes it moves: (3 + 1) x the sizes' sum, both ways.
const BYTES: u64 = 2 * 4 * (8 + 1 + 100 + 465 + 4096 + 65536 + 262_151 + 1_048_576);
/// Payload bytes per packet of `mc-host pvm`'s cluster (its max_payload).
const PACKET_PAYLOAD: u64 = 32;

fn missing() -> Option<String> {
    if !Path::new(HEADER).is_file() {
        return Some(format!(
            "{HEADER} is not installed (pvm-dev; scripts/setup-pvm.sh)"
        ));
    }
    integration::c_program::compiler().err()
}

/// exchange.c as a shared object (docs/pvm.md) in a directory of its own.
fn program() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("pvm-shm-")
        .tempdir()
        .expect("tempdir");
    let cc = integration::c_program::compiler().expect("checked");
    let o = Command::new(&cc)
        .args(["-Wall", "-O1", "-shared", "-fPIC", "-o"])
        .arg(dir.path().join("exchange"))
        .arg(SOURCE)
        .output()
        .expect("run the C compiler");
    assert!(
        o.status.success(),
        "exchange.c does not build against pvm3.h:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    dir
}

fn mc_host() -> PathBuf {
    build::cargo_build(&["-p", "host", "-p", "libpvm-mc"]).join("mc-host")
}

/// One PVM cluster at a time (each is several guest processes on a small
/// machine).
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What a run showed: its output, its exit code, and the hub's packet
/// count while both tasks were enrolled.
struct Run {
    code: Option<i32>,
    out: String,
    hub_packets: u64,
}

/// `mc-host pvm OPTS --socket-dir D -- ./exchange PEER_HOST wait`, with
/// the hub's packets read once the exchange is done.
fn exchange(dir: &Path, opts: &[String], peer_host: &str) -> Run {
    let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let sockets = dir.join("sockets");
    std::fs::create_dir_all(&sockets).expect("socket dir");
    let mut child = Command::new(mc_host())
        .current_dir(dir)
        .arg("pvm")
        .args(opts)
        .arg("--socket-dir")
        .arg(&sockets)
        .args(["--timeout", "120", "--", "./exchange", peer_host, "wait"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mc-host pvm");
    let stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut out = String::new();
    let mut hub_packets = None;
    for line in lines.by_ref() {
        let line = line.expect("mc-host's output");
        out.push_str(&line);
        out.push('\n');
        if line.ends_with("] waiting") {
            let stats = Command::new(mc_host())
                .args(["stats", "--socket-dir"])
                .arg(&sockets)
                .output()
                .expect("run mc-host stats");
            let text = String::from_utf8_lossy(&stats.stdout).into_owned();
            hub_packets = text
                .lines()
                .find_map(|l| l.strip_prefix("hub: "))
                .and_then(|l| l.split(' ').next())
                .and_then(|n| n.parse().ok());
            assert!(
                hub_packets.is_some(),
                "no hub line in `mc-host stats`:\n{text}"
            );
            // The first task ends once it reads a line.
            child
                .stdin
                .take()
                .expect("piped")
                .write_all(b"go\n")
                .expect("stdin");
            break;
        }
    }
    for line in lines {
        out.push_str(&line.expect("mc-host's output"));
        out.push('\n');
    }
    let status = child.wait().expect("mc-host pvm");
    out.push_str(&errors.join().expect("stderr reader"));
    assert!(
        !sockets.join("ump-shm").exists(),
        "mc-host left the host's shared-memory directory behind"
    );
    let Some(hub_packets) = hub_packets else {
        panic!("the exchange never got to its end:\n{out}");
    };
    Run {
        code: status.code(),
        out,
        hub_packets,
    }
}

fn verified(run: &Run) {
    assert_eq!(run.code, Some(0), "mc-host pvm failed:\n{}", run.out);
    assert!(
        run.out.contains(&format!("] verified {MESSAGES} messages")),
        "{}",
        run.out
    );
}

/// Both tasks on host 0 (`--slots 2`: two adapters there): every message
/// arrives whole and right, and the hub carried only the set-up's packets,
/// not the messages' (which would be BYTES / 32 packets and more).
#[test]
fn two_tasks_of_one_host_exchange_every_size_over_shared_memory() {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = program();
    for_each_delivery_up_to(&[41], 1, |mode| {
        let mut opts: Vec<String> = ["-n", "1", "--slots", "2"].map(String::from).to_vec();
        opts.extend(host_args(mode));
        let run = exchange(dir.path(), &opts, "node0");
        verified(&run);
        assert!(
            run.hub_packets < BYTES / PACKET_PAYLOAD / 100,
            "the hub carried {} packets for {BYTES} bytes exchanged on one host: the messages went over Memory Channel, not shared memory\n{}",
            run.hub_packets,
            run.out
        );
    });
}

/// The control: the same program with its tasks on two hosts goes over
/// Memory Channel, and the hub's count shows every message's packets.
#[test]
fn tasks_of_two_hosts_keep_memory_channel() {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = program();
    let opts: Vec<String> = ["-n", "2", "--slots", "1"].map(String::from).to_vec();
    let run = exchange(dir.path(), &opts, "node1");
    verified(&run);
    assert!(
        run.hub_packets >= BYTES / PACKET_PAYLOAD,
        "the hub carried only {} packets for {BYTES} bytes between two hosts\n{}",
        run.hub_packets,
        run.out
    );
}
