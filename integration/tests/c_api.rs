//! libimc, the TruCluster Memory Channel API for C (guest-driver/libimc):
//! the C test programs of `guest-driver/libimc/tests/c` and seed 004's
//! Figure 6 (`examples/c/figure6.c`), compiled with the system `cc` and run
//! as virtual guests by `mc-host run --nodes N -- ./prog`.
//!
//! Skipped, saying so, when no C compiler runs.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use integration::{binary, c_program};

const PROGRAMS: &[(&str, &[&str])] = &[
    ("calls", &["guest-driver/libimc/tests/c/calls.c"]),
    ("order", &["guest-driver/libimc/tests/c/order.c"]),
    ("locks", &["guest-driver/libimc/tests/c/locks.c"]),
    ("coherent", &["guest-driver/libimc/tests/c/coherent.c"]),
    ("errcount", &["guest-driver/libimc/tests/c/errcount.c"]),
    ("refuse", &["guest-driver/libimc/tests/c/refuse.c"]),
    ("figure6", &["examples/c/figure6.c"]),
];

/// The compiled programs' directory, or why there is none.
fn programs() -> Result<&'static PathBuf, &'static String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let cc = c_program::compiler()?;
        // Beside the library they link: rebuilt by every run, nothing left
        // behind in /tmp.
        let dir = c_program::libimc_dir().join("c-programs");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for (name, sources) in PROGRAMS {
            c_program::build(&cc, sources, &dir, name, &[]);
        }
        Ok(dir)
    })
    .as_ref()
}

/// The program `name`, or None (the test is skipped) without a compiler.
fn program(test: &str, name: &str) -> Option<String> {
    match programs() {
        Ok(d) => Some(d.join(name).to_string_lossy().into_owned()),
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

fn run(nodes: u32, host_opts: &[&str], prog: &str) -> (bool, String) {
    integration::mc_host_run(nodes, 120, host_opts, &[prog])
}

/// The lines node `n` printed.
fn node_lines(out: &str, n: u32) -> Vec<&str> {
    let p = format!("[node{n}] ");
    out.lines().filter_map(|l| l.strip_prefix(&p)).collect()
}

#[test]
fn every_call_returns_the_seeds_codes_used_rightly_and_wrongly() {
    let Some(p) = program("every_call", "calls") else {
        return;
    };
    let (ok, out) = run(3, &[], &p);
    assert!(ok, "{out}");
    for n in 0..3 {
        assert!(
            node_lines(&out, n)
                .iter()
                .any(|l| l.starts_with("calls: ")
                    && l.ends_with(&format!("checks passed on node {n}"))),
            "node {n}:\n{out}"
        );
    }
    assert!(
        out.contains("[node1] calls: node 1 got SIGUSR1 from node 0 through the relay"),
        "{out}"
    );
    assert!(!out.contains("FAIL"), "{out}");
}

/// Seed 004 Figure 6 on 3 and 4 nodes: every copy counts itself in, sees
/// every copy counted, and counts itself out; the counter goes 1..N up and
/// N-1..0 down, each value written once, so it comes out right everywhere.
#[test]
fn figure_6_counts_every_process_on_3_and_4_nodes() {
    let Some(p) = program("figure_6", "figure6") else {
        return;
    };
    for nodes in [3u32, 4] {
        let (ok, out) = run(nodes, &[], &p);
        assert!(ok, "{nodes} nodes:\n{out}");
        let mut ups = Vec::new();
        let mut downs = Vec::new();
        let mut creators = 0;
        for n in 0..nodes {
            let lines = node_lines(&out, n);
            let value = |what: &str| -> i64 {
                let l = lines
                    .iter()
                    .find(|l| l.contains(what))
                    .unwrap_or_else(|| panic!("node {n} did not print {what:?}:\n{out}"));
                l.rsplit(' ').next().unwrap().parse().unwrap()
            };
            ups.push(value("incremented the process counter to"));
            downs.push(value("decremented the process counter to"));
            creators += lines
                .iter()
                .filter(|l| l.contains("created the lock set"))
                .count();
            let want =
                format!("figure6: node {n} sees {nodes} processes counted, {nodes} copies running");
            assert!(lines.contains(&want.as_str()), "node {n}: {want:?}\n{out}");
        }
        ups.sort_unstable();
        downs.sort_unstable();
        assert_eq!(ups, (1..=i64::from(nodes)).collect::<Vec<_>>(), "{out}");
        assert_eq!(downs, (0..i64::from(nodes)).collect::<Vec<_>>(), "{out}");
        assert_eq!(creators, 1, "exactly one copy creates the lock set:\n{out}");
    }
}

#[test]
fn a_coherent_region_is_whole_for_a_process_that_attaches_late() {
    let Some(p) = program("coherent", "coherent") else {
        return;
    };
    let (ok, out) = run(3, &[], &p);
    assert!(ok, "{out}");
    for n in 1..3 {
        assert!(
            out.contains(&format!("[node{n}] coherent: node {n} attached late and sees all 3072 words node 0 wrote before")),
            "{out}"
        );
    }
}

#[test]
fn spinlocks_under_contention_from_every_node_and_thread() {
    let Some(p) = program("locks", "locks") else {
        return;
    };
    let (ok, out) = run(3, &[], &p);
    assert!(ok, "{out}");
    for n in 0..3 {
        assert!(
            out.contains(&format!(
                "[node{n}] locks: node {n} counted 900 = 150 x 2 threads x 3 nodes"
            )),
            "{out}"
        );
    }
}

/// Plain stores of every kind (emulated movs, stepped SSE stores,
/// imc_write) from three threads arrive in program order at every
/// receiver, with eager and with skewed delivery.
#[test]
fn plain_stores_arrive_in_program_order_everywhere_also_skewed() {
    let Some(p) = program("order", "order") else {
        return;
    };
    for opts in [&[][..], &["--delivery", "skewed", "--seed", "11"][..]] {
        let (ok, out) = run(3, opts, &p);
        assert!(ok, "{opts:?}:\n{out}");
        for n in 0..3 {
            assert!(
                out.contains(&format!(
                    "[node{n}] order: node {n} saw 4 lanes in program order"
                )),
                "{opts:?}:\n{out}"
            );
        }
        assert!(!out.contains("FAIL"), "{out}");
    }
}

/// imc_ckerrcnt detects corruption injected while the program runs, and the
/// seed's "write, mb, check, retry" loop still gets a message through whole.
#[test]
fn ckerrcnt_detects_corruption_and_the_retry_loop_gets_through() {
    let Some(p) = program("ckerrcnt", "errcount") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sockets = dir.path().join("s");
    std::fs::create_dir_all(&sockets).unwrap();
    binary("mc-guest");
    let mc_host = binary("mc-host");
    let mut child = Command::new(&mc_host)
        .args(["run", "--nodes", "2", "--timeout", "120", "--socket-dir"])
        .arg(&sockets)
        .args(["--", &p])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = String::new();
    let mut injected = false;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        out += &line;
        out.push('\n');
        if !injected && line.contains("errcount: ready") {
            let f = Command::new(&mc_host)
                .args(["fault", "--socket-dir"])
                .arg(&sockets)
                .args(["corrupt", "5%", "link", "0", "1"])
                .output()
                .unwrap();
            assert!(f.status.success(), "{}", String::from_utf8_lossy(&f.stderr));
            injected = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{out}");
    assert!(
        out.contains("[node0] errcount: node 0 detected 3 corrupted messages"),
        "{out}"
    );
    assert!(
        out.contains("[node0] errcount: node 0 sent message 1000000 clean"),
        "{out}"
    );
    assert!(
        out.contains("[node1] errcount: node 1 got the final message whole"),
        "{out}"
    );
}

#[test]
fn a_load_from_a_transmit_address_stops_the_program_as_on_the_hardware() {
    let Some(p) = program("refuse", "refuse") else {
        return;
    };
    let (ok, out) = run(1, &[], &p);
    assert!(!ok, "{out}");
    assert!(out.contains("refuse: stored, now loading"), "{out}");
    assert!(
        out.contains(
            "libimc: a load from a transmit address: Memory Channel transmit space is write-only"
        ),
        "{out}"
    );
    assert!(!out.contains("which must not happen"), "{out}");
    // Outside a cluster (no MC_SOCKET, no adapter on PCI): IMC_NOTINIT.
    let o = Command::new(&p)
        .arg("notinit")
        .env_remove("MC_SOCKET")
        .env("MC_DMA_MIB", "2")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert!(text.contains("refuse: imc_api_init returned 3"), "{text}");
    assert!(
        text.contains(
            "refuse: the Memory Channel adapter could not be opened: opening the Memory Channel"
        ),
        "{text}"
    );
}
