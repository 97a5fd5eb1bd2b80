//! `mc-host demo` end to end: it runs, its own checks pass, and bad arguments get
//! a clear message and exit code 2.

use std::process::Command;

fn mc_host(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mc-host"))
        .args(args)
        .output()
        .expect("run mc-host")
}

#[test]
fn demo_runs_every_scenario() {
    let out = mc_host(&[
        "demo",
        "--nodes",
        "5",
        "--link",
        "mc1",
        "--corrupt",
        "0.02",
        "--seed",
        "3",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("5 nodes"));
    assert_eq!(stdout.matches("hello from node 4").count(), 2, "{stdout}");
    assert!(stdout.contains("node4 sees \"just for you\""), "{stdout}");
    assert!(stdout.contains("node1 sees \"\\0"), "{stdout}");
    assert!(stdout.contains("-> clean"), "{stdout}");
    assert!(stdout.contains("epoch 3 members {0,1,2,3,4}"), "{stdout}");
}

#[test]
fn same_seed_same_run() {
    let a = mc_host(&["demo", "--seed", "9", "--corrupt", "0.03"]);
    let b = mc_host(&["demo", "--seed", "9", "--corrupt", "0.03"]);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn bad_arguments_exit_2_with_a_reason() {
    for (args, reason) in [
        (&["demo", "--nodes", "1"][..], "not in 2..=64"),
        (
            &["demo", "--link", "mc9"][..],
            "expected one of mc1, mc2, clan, unthrottled",
        ),
        (
            &["demo", "--corrupt", "1.5"][..],
            "probability between 0 and 1",
        ),
        (&["demo", "--corrupt", "lots"][..], "not a number"),
        (&["frobnicate"][..], "unrecognized subcommand"),
    ] {
        let out = mc_host(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
    }
}
