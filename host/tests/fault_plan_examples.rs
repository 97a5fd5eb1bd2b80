//! Every example fault plan parses, and a malformed plan is rejected with the
//! line and the reason.

use std::process::Command;

#[test]
fn example_plans_are_accepted_and_bad_ones_refused() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let dir = tempfile::tempdir().unwrap();
    let examples: Vec<_> = std::fs::read_dir(format!("{root}/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    assert!(examples
        .iter()
        .any(|p| p.file_name().unwrap().to_string_lossy().contains("fault")));
    for plan in examples {
        // A run that only checks its environment: the plan must load and schedule.
        let out = Command::new(env!("CARGO_BIN_EXE_mc-host"))
            .args(["run", "--nodes", "4", "--fault-plan"])
            .arg(&plan)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            plan.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "seed = 1\n\n[[fault]]\nat = \"5ms\"\ndo = \"corrupt 150%\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mc-host"))
        .args(["run", "--nodes", "2", "--fault-plan"])
        .arg(&bad)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("line 5") && err.contains("probability"),
        "{err}"
    );
}
