//! `mc-host report`: `run` then `render` end to end on a tiny matrix (runs
//! recorded, a second `run` skips them, report.md has both tables, every
//! SVG parses and rasterises to a picture with ink on it). Rendering alone
//! is tested in mc-report/tests/render.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use firmware_model::ErrorChain;
use mc_report::raster::rasterise as rasterise_chart;
use mc_report::results::{load, ResultSet};

fn mc_host(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mc-host"))
        .args(args)
        .output()
        .expect("run mc-host")
}

/// Parse `svg`, rasterise it, save it as PNG beside it, and return the
/// share of pixels that are not white.
fn rasterise(svg: &Path) -> f64 {
    let r = rasterise_chart(svg).unwrap_or_else(|e| panic!("{}", ErrorChain(&e)));
    r.save_png(&svg.with_extension("png"))
        .expect("save the PNG");
    r.inked()
}

/// The mc-guest beside mc-host, built (as cargo test does not build
/// another package's binary; cargo does nothing when it is fresh, and an
/// mc-guest left by an older build would speak an older ABI).
fn build_guest() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_mc-host"));
    let release = exe
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|p| p == "release");
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "-p", "mc-guest", "--bin", "mc-guest"]);
    if release {
        cmd.arg("--release");
    }
    assert!(cmd.status().expect("cargo build").success());
}

#[test]
fn run_resume_and_render_a_tiny_matrix() {
    build_guest();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let r = results.to_str().unwrap();
    let args = [
        "report",
        "run",
        "--apps",
        "em3d,tsp",
        "--variants",
        "dms",
        "--config",
        "1:1,1:2",
        "--preset",
        "small",
        "--results",
        r,
        // This host's CPU time: the plain debug mc-guest (counted work,
        // the default, needs scripts/build-counted.sh's release build).
        "--work",
        "cpu-time",
    ];
    let out = mc_host(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Two baselines and four runs, one progress line each, after Table II's
    // micro-benchmark under CSM-DMS and CSM-None.
    assert_eq!(err.matches("ok in").count(), 6, "{err}");
    assert_eq!(err.matches("micro-benchmark under").count(), 2, "{err}");
    let all = load(&results).unwrap();
    assert_eq!(all.len(), 8);
    let (table2, records): (Vec<_>, Vec<_>) = all.into_iter().partition(|r| r.is_table2());
    assert_eq!(table2.len(), 2);
    assert!(table2.iter().all(|r| r.ok()), "{table2:?}");
    for rec in &records {
        assert!(rec.ok(), "{:?}", rec.v);
        // The virtual clock is report run's default.
        assert_eq!(rec.v["times"]["clock"], "virtual", "{:?}", rec.v);
        assert_eq!(rec.v["times"]["work"], "cpu-time", "{:?}", rec.v);
        assert!(rec.time("predicted_s") > Some(0.0), "{:?}", rec.v);
        assert_eq!(rec.v["variant"], "dms");
        assert_eq!(rec.v["delivery"], "eager");
        assert!(
            rec.v["stats"]["total"]["barriers"].as_u64() > Some(0),
            "{:?}",
            rec.v
        );
        assert!(Path::new(rec.log().unwrap()).is_file());
    }
    assert!(table2
        .iter()
        .all(|r| r.v["rows"][0]["predicted_us"].as_f64() > Some(0.0)));
    let set = ResultSet::new(records);
    assert!(set.sequential_s("em3d", "small").is_some());
    let predicted = set.with_basis(mc_report::clock::TimeBasis::Predicted);
    assert!(predicted.sequential_s("em3d", "small").is_some());

    // Run again: everything is there already.
    let out = mc_host(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("skipped").count(), 6, "{err}");
    assert_eq!(load(&results).unwrap().len(), 8);

    let report = dir.path().join("report");
    let out = mc_host(&["report", "render", r, "--out", report.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        md.contains("## Table II:") && md.contains("## Table III") && md.contains("## Table IV"),
        "{md}"
    );
    assert!(
        md.contains("| lock acquire (+release) | 10.0 | 33.0 |"),
        "{md}"
    );
    assert!(md.contains("| EM3D | small | nodes 2048"), "{md}");
    assert!(md.contains("| 1:2 | 2:2 | 2L | CSM-DMS |"), "{md}");
    assert!(md.contains("host: "), "{md}");
    // Predicted times by default, said on every table and chart.
    assert!(
        md.contains("times are predicted by the virtual clock"),
        "{md}"
    );
    assert!(
        md.contains("predicted by the virtual clock for Memory Channel 2"),
        "{md}"
    );
    for svg in ["speedup.svg", "data.svg"] {
        let p = report.join(svg);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("host: ") && text.contains("CSM-DMS") && text.contains("1:2 (2L)"),
            "{svg}"
        );
        if svg == "speedup.svg" {
            assert!(text.contains("predicted"), "{svg}");
        }
        let ink = rasterise(&p);
        assert!(ink > 0.01, "{svg}: only {ink} of it is drawn");
    }
    // Wall-clock times stay available.
    let wall = dir.path().join("wall");
    let out = mc_host(&[
        "report",
        "render",
        r,
        "--out",
        wall.to_str().unwrap(),
        "--clock",
        "wall",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(wall.join("report.md")).unwrap();
    assert!(md.contains("times are wall-clock"), "{md}");
}

#[test]
fn clock_options_that_do_not_fit_are_refused_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let r = results.to_str().unwrap();
    for (extra, says) in [
        (
            &["--clock", "wall", "--cpu-scale", "2"][..],
            "only applies with --clock virtual",
        ),
        (&["--cpu-scale", "paper"][..], "needs --preset paper"),
        (
            &["--clock", "wall", "--work", "counted"][..],
            "--work only applies with --clock virtual",
        ),
        (&["--cpu-scale", "fast"][..], "not a CPU scale"),
        (&["--clock", "sundial"][..], "invalid value"),
    ] {
        let mut args = vec!["report", "run", "--apps", "sor", "--results", r];
        args.extend_from_slice(extra);
        let out = mc_host(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert!(!results.exists(), "{extra:?} ran something");
    }
    // A results file of wall-clock runs cannot be shown in predicted time
    // when that is asked for; by default it falls back and says so.
    std::fs::write(
        &results,
        r#"{"schema":1,"app":"sor","preset":"small","nodes":1,"threads":1,"times":{"compute_s":1.0,"sequential_s":1.0},"run":{"key":"b","status":"ok","baseline":true}}"#,
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let o = out_dir.to_str().unwrap();
    let out = mc_host(&["report", "render", r, "--out", o, "--clock", "predicted"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no predicted times"),
        "{err}"
    );
    let out = mc_host(&["report", "render", r, "--out", o]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("wall-clock times"),
        "{err}"
    );
}
