//! PVM programs on the emulated Memory Channel: the example programs of
//! Debian's pvm-examples, built unmodified against Debian's pvm3.h and run
//! by `mc-host pvm` on libpvm-mc (guest-driver/libpvm, docs/pvm.md):
//! hello/hello_other, master1/slave1, spmd, gexample (groups and
//! reductions), timing/timing_slave, on 2 and 4 hosts (8 too with
//! MC_TEST_EXHAUSTIVE=1), eagerly and skewed; and under dropped packets,
//! a run that completes correctly or fails naming the loss, never with
//! wrong results.
//!
//! Skipped, saying why, where pvm-dev or pvm-examples is not installed
//! (scripts/setup-pvm.sh installs them) or there is no C compiler. The
//! examples' sources are extracted into a temporary directory of the test's
//! own and never kept.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use integration::build;

const HEADER: &str = "/usr/include/pvm3.h";
const EXAMPLES: &str = "/usr/share/doc/pvm-examples/examples.tar.gz";
const PROGRAMS: [&str; 8] = [
    "hello",
    "hello_other",
    "master1",
    "slave1",
    "spmd",
    "gexample",
    "timing",
    "timing_slave",
];

fn exhaustive() -> bool {
    std::env::var("MC_TEST_EXHAUSTIVE").is_ok_and(|v| v == "1")
}

/// Why the examples cannot run here, if they cannot.
fn missing() -> Option<String> {
    if !Path::new(HEADER).is_file() {
        return Some(format!(
            "{HEADER} is not installed (pvm-dev; scripts/setup-pvm.sh)"
        ));
    }
    if !Path::new(EXAMPLES).is_file() {
        return Some(format!(
            "{EXAMPLES} is not installed (pvm-examples; scripts/setup-pvm.sh)"
        ));
    }
    integration::c_program::compiler().err()
}

/// The examples, extracted and built (as shared objects: docs/pvm.md)
/// into a directory of their own.
fn examples() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("pvm-examples-")
        .tempdir()
        .expect("tempdir");
    let st = Command::new("tar")
        .arg("xzf")
        .arg(EXAMPLES)
        .arg("-C")
        .arg(dir.path())
        .status()
        .expect("run tar");
    assert!(st.success(), "tar xzf {EXAMPLES} failed");
    let src = dir.path().join("examples");
    let cc = integration::c_program::compiler().expect("checked");
    for p in PROGRAMS {
        // -w: the examples are K&R C, which today's compilers warn about.
        let o = Command::new(&cc)
            .args(["-w", "-O1", "-shared", "-fPIC", "-o"])
            .arg(dir.path().join(p))
            .arg(src.join(format!("{p}.c")))
            .output()
            .expect("run the C compiler");
        assert!(
            o.status.success(),
            "{p}.c does not build against pvm3.h:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    dir
}

/// mc-host, pvm-task and libpvm_mc.so, built with the test's profile.
fn mc_host() -> PathBuf {
    build::cargo_build(&["-p", "host", "-p", "libpvm-mc"]).join("mc-host")
}

/// One PVM cluster at a time: each is up to 16 guest processes, and the
/// tests' clusters side by side on this 2-core machine starved one another
/// past `--timeout`.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `mc-host pvm OPTS -- ./PROG` in `dir` with `stdin`: exit code and output.
fn pvm(dir: &Path, opts: &[&str], prog: &str, stdin: &str) -> (Option<i32>, String) {
    use std::io::Write;
    let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let mut child = Command::new(mc_host())
        .current_dir(dir)
        .arg("pvm")
        .args(opts)
        .args(["--timeout", "120", "--"])
        .arg(format!("./{prog}"))
        // A lost message's stream gives up in 10 s, not 60.
        .env("MC_UMP_TIMEOUT_S", "10")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mc-host pvm");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("stdin");
    let out = child.wait_with_output().expect("mc-host pvm");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// master1's results: each "I got X from W; (expecting Y)" has X == Y.
/// The number of such lines.
fn master1_results(out: &str) -> usize {
    let mut n = 0;
    for l in out.lines().filter(|l| l.contains("I got ")) {
        let got = l.split("I got ").nth(1).and_then(|r| r.split(' ').next());
        let want = l
            .split("(expecting ")
            .nth(1)
            .and_then(|r| r.strip_suffix(')'));
        assert_eq!(got, want, "master1 got a wrong result: {l}\n{out}");
        n += 1;
    }
    n
}

fn check_all(dir: &Path, hosts: u8, opts: &[&str]) {
    let h = hosts.to_string();
    let mut o: Vec<&str> = vec!["-n", &h];
    o.extend_from_slice(opts);
    let what = format!("{hosts} hosts {opts:?}");

    let (rc, out) = pvm(dir, &o, "hello", "");
    assert_eq!(rc, Some(0), "hello on {what}:\n{out}");
    assert!(out.contains("[t40001] i'm t40001"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("[t40001] from t") && l.contains(": hello, world from ")),
        "hello_other's greeting did not come back on {what}:\n{out}"
    );

    let (rc, out) = pvm(dir, &o, "master1", "");
    assert_eq!(rc, Some(0), "master1 on {what}:\n{out}");
    assert!(out.contains("SUCCESSFUL"), "{out}");
    assert_eq!(
        master1_results(&out),
        3 * usize::from(hosts),
        "master1 on {what}:\n{out}"
    );

    let tasks = h.clone();
    let mut so = o.clone();
    so.extend(["--tasks", &tasks]);
    let (rc, out) = pvm(dir, &so, "spmd", "");
    // spmd ends with exit(1), whatever happens.
    assert_eq!(rc, Some(1), "spmd on {what}:\n{out}");
    assert!(
        out.contains(&format!("Pass a token through the {hosts:>3} tid ring")),
        "{out}"
    );
    assert!(
        out.contains("[t40001] token ring done"),
        "spmd on {what}:\n{out}"
    );

    gexample(dir, &o, hosts, &what);

    let (rc, out) = pvm(dir, &o, "timing", "");
    // timing ends with exit(1) too, and kills its slave.
    assert_eq!(rc, Some(1), "timing on {what}:\n{out}");
    for needle in [
        "slave is task t",
        "RTT Avg uSec",
        "Message size 1000000",
        "[t40001] done",
    ] {
        assert!(
            out.contains(needle),
            "timing on {what}: no {needle:?}:\n{out}"
        );
    }
    assert!(!out.contains("libpvm-mc"), "timing on {what}:\n{out}");
}

/// gexample (groups, a reduction, a product) with 2 processes a host.
fn gexample(dir: &Path, o: &[&str], hosts: u8, what: &str) {
    let nproc = (2 * hosts).min(32);
    let (rc, out) = pvm(dir, o, "gexample", &format!("100 {nproc}\n"));
    assert_eq!(rc, Some(0), "gexample on {what}:\n{out}");
    assert!(
        out.contains(&format!("--> Using {nproc} processors <--")),
        "{out}"
    );
    assert!(
        out.contains("The 1-Norm is 5050"),
        "gexample on {what}:\n{out}"
    );
    assert!(
        out.contains("The product of column 1 is 9.33262e+157"),
        "gexample on {what}:\n{out}"
    );
}

#[test]
fn debians_examples_run_unmodified_on_2_and_4_hosts() {
    if let Some(why) = missing() {
        eprintln!("SKIPPED the PVM examples: {why}");
        return;
    }
    let dir = examples();
    check_all(dir.path(), 2, &[]);
    check_all(dir.path(), 4, &[]);
    if exhaustive() {
        check_all(dir.path(), 8, &[]);
    }
}

#[test]
fn debians_examples_run_with_skewed_delivery() {
    if let Some(why) = missing() {
        eprintln!("SKIPPED the PVM examples, skewed: {why}");
        return;
    }
    let dir = examples();
    check_all(dir.path(), 2, &["--delivery", "skewed", "--seed", "7"]);
}

/// Packets dropped while the tasks talk: the run completes with the right
/// results, or fails naming the loss; it never prints wrong results.
#[test]
fn dropped_packets_fail_with_the_loss_named_or_change_nothing() {
    if let Some(why) = missing() {
        eprintln!("SKIPPED the PVM fault test: {why}");
        return;
    }
    let dir = examples();
    let plan = dir.path().join("plan.toml");
    let runs: &[(u64, &str, &str)] = if exhaustive() {
        &[
            (11, "300ms", "2%"),
            (12, "350ms", "1%"),
            (13, "400ms", "0.5%"),
            (14, "0ms", "2%"),
        ]
    } else {
        // Drops from 0 ms hit the task shells' Memory Channel set-up.
        &[(11, "350ms", "2%"), (14, "0ms", "2%")]
    };
    for &(seed, at, rate) in runs {
        std::fs::write(
            &plan,
            format!("seed = {seed}\n[[fault]]\nat = \"{at}\"\ndo = \"drop {rate} everywhere\"\n"),
        )
        .expect("plan");
        for prog in ["timing", "master1"] {
            let (rc, out) = pvm(
                dir.path(),
                &["-n", "2", "--fault-plan", plan.to_str().expect("utf-8")],
                prog,
                "",
            );
            assert!(
                !out.contains("timed out"),
                "{prog} hung until --timeout:\n{out}"
            );
            let completed = match prog {
                "timing" => out.contains("[t40001] done") && rc == Some(1),
                _ => rc == Some(0) && master1_results(&out) == 6,
            };
            if out.contains("the task shell of host 0 did not come up") {
                // The set-up failed: mc-host names the losses behind it,
                // wherever they were counted.
                assert!(
                    out.contains("packets were lost on the network meanwhile"),
                    "{prog} (drop {rate} from {at}, seed {seed}): the set-up failed without naming the loss:\n{out}"
                );
            }
            if !completed {
                assert!(
                    out.contains("lost") && (out.contains("libpvm-mc") || out.contains("pvm-task")),
                    "{prog} (drop {rate} from {at}, seed {seed}) failed without naming the loss:\n{out}"
                );
            }
            eprintln!(
                "drop {rate} from {at} seed {seed}: {prog} {}",
                if completed {
                    "completed correctly"
                } else {
                    "failed, naming the loss"
                }
            );
        }
    }
}

/// The calls the examples do not make (integration/c/pvm/api.c): spawn on a
/// named host, the tables, every group function, psend/precv, the
/// non-blocking receives, in-place packing, options, notices and kill, and
/// PvmNotImpl said once.
#[test]
fn the_rest_of_the_api() {
    if let Some(why) = missing() {
        eprintln!("SKIPPED the PVM API test: {why}");
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("pvm-api-")
        .tempdir()
        .expect("tempdir");
    let cc = integration::c_program::compiler().expect("checked");
    let o = Command::new(&cc)
        .args(["-Wall", "-Werror", "-O1", "-shared", "-fPIC", "-o"])
        .arg(dir.path().join("api"))
        .arg(build::workspace().join("integration/c/pvm/api.c"))
        .output()
        .expect("run the C compiler");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (rc, out) = pvm(dir.path(), &["-n", "2"], "api", "");
    assert_eq!(rc, Some(0), "{out}");
    assert!(out.contains("[t40001] api: ok"), "{out}");
    assert_eq!(
        out.matches("pvm_addhosts is not supported (PvmNotImpl)")
            .count(),
        1,
        "PvmNotImpl is said once per call:\n{out}"
    );
}
