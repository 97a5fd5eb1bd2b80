//! `mc-host report`: `run` then `render` end to end on a tiny matrix (runs
//! recorded, a second `run` skips them, report.md has both tables, every
//! SVG parses and rasterises to a picture with ink on it), and rendering of
//! records this machine cannot produce yet (a time breakdown, oversubscribed
//! and failed runs).

use std::path::{Path, PathBuf};
use std::process::Command;

use host::report::results::{load, ResultSet};

fn mc_host(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mc-host"))
        .args(args)
        .output()
        .expect("run mc-host")
}

/// Parse `svg`, rasterise it, save it as PNG beside it, and return the
/// share of pixels that are not white.
fn rasterise(svg: &Path) -> f64 {
    let data = std::fs::read(svg).expect("read the SVG");
    let mut opt = resvg::usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_data(&data, &opt)
        .unwrap_or_else(|e| panic!("{} does not parse: {e}", svg.display()));
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).expect("pixmap");
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .save_png(svg.with_extension("png"))
        .expect("save the PNG");
    let px = pixmap.pixels();
    let inked = px
        .iter()
        .filter(|p| p.red() < 240 || p.green() < 240 || p.blue() < 240)
        .count();
    inked as f64 / px.len() as f64
}

/// The mc-guest beside mc-host, built if need be (as cargo test does not).
fn build_guest() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_mc-host"));
    if exe.with_file_name("mc-guest").is_file() {
        return;
    }
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
    ];
    let out = mc_host(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Two baselines and four runs, one progress line each.
    assert_eq!(err.matches("ok in").count(), 6, "{err}");
    let records = load(&results).unwrap();
    assert_eq!(records.len(), 6);
    for rec in &records {
        assert!(rec.ok(), "{:?}", rec.v);
        assert_eq!(rec.v["variant"], "dms");
        assert_eq!(rec.v["delivery"], "eager");
        assert!(
            rec.v["stats"]["total"]["barriers"].as_u64() > Some(0),
            "{:?}",
            rec.v
        );
        assert!(Path::new(rec.log().unwrap()).is_file());
    }
    let set = ResultSet::new(records);
    assert!(set.sequential_s("em3d", "small").is_some());

    // Run again: everything is there already.
    let out = mc_host(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("skipped").count(), 6, "{err}");
    assert_eq!(load(&results).unwrap().len(), 6);

    let report = dir.path().join("report");
    let out = mc_host(&["report", "render", r, "--out", report.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(
        md.contains("## Table III") && md.contains("## Table IV"),
        "{md}"
    );
    assert!(md.contains("| EM3D | small | nodes 2048"), "{md}");
    assert!(md.contains("| 1:2 | 2:2 | 2L | CSM-DMS |"), "{md}");
    assert!(md.contains("host: "), "{md}");
    for svg in ["speedup.svg", "data.svg"] {
        let p = report.join(svg);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("host: ") && text.contains("CSM-DMS 1:2 (2L)"),
            "{svg}"
        );
        let ink = rasterise(&p);
        assert!(ink > 0.01, "{svg}: only {ink} of it is drawn");
    }
}

/// Records as a later Cashmere writes them (a breakdown) and as an
/// oversubscribed host gives them.
#[test]
fn render_breakdowns_oversubscription_and_failures() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r.jsonl");
    let host = r#""host":{"cores":2,"load_before":[1.5,1,1],"load_after":[2.5,1,1]}"#;
    let mut lines = vec![format!(
        r#"{{"schema":1,"app":"lu","preset":"small","problem":{{"n":120,"block":16}},"nodes":1,"threads":1,"variant":"dms","delivery":"eager","link":"unthrottled","page_size":8192,"heap_bytes":122880,"times":{{"compute_s":0.1,"sequential_s":0.08}},"stats":{{"total":{{}}}},"run":{{"key":"b","status":"ok","baseline":true,{host}}}}}"#
    )];
    for (key, nodes, threads, variant, compute, transfers) in [
        ("a", 2, 1, "dms", 0.05, 40),
        ("c", 4, 1, "dms", 0.09, 90),
        ("d", 2, 1, "ms-mg", 0.04, 30),
    ] {
        lines.push(format!(
            r#"{{"schema":1,"app":"lu","preset":"small","problem":{{"n":120,"block":16}},"nodes":{nodes},"threads":{threads},"variant":"{variant}","delivery":"eager","link":"unthrottled","page_size":8192,"counters_until":"compute_end","times":{{"compute_s":{compute}}},"stats":{{"total":{{"page_transfers":{transfers},"diffs":7,"diff_bytes":1000,"write_notices_sent":3,"messages_sent":{transfers},"migrations":5}}}},"breakdown":{{"total":{{"user":0.03,"protocol":0.01,"comm_wait":0.005,"messages":0.005}}}},"run":{{"key":"{key}","status":"ok",{host}}}}}"#
        ));
    }
    lines.push(format!(
        r#"{{"schema":1,"app":"lu","preset":"small","nodes":2,"threads":2,"variant":"dms","run":{{"key":"f","status":"failed","log":"/x.log",{host}}}}}"#
    ));
    std::fs::write(&results, lines.join("\n") + "\n").unwrap();
    let out = dir.path().join("out");
    let files = host::report::render(&results, &out).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["report.md", "speedup.svg", "data.svg", "breakdown.svg"]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| 2:1 | 2:1 | 1L | CSM-DMS | 0.050 | 1.60 | 40 | 7 | 3 | 5 | 40 |"),
        "{md}"
    );
    assert!(
        md.contains("| 4:1 | 4:1 | 1L | CSM-DMS | 0.090 | oversubscribed |"),
        "{md}"
    );
    assert!(md.contains("CSM-MS-Mg"), "{md}");
    assert!(md.contains("failed") && md.contains("/x.log"), "{md}");
    let speedup = std::fs::read_to_string(out.join("speedup.svg")).unwrap();
    assert!(speedup.contains("oversubscribed") && speedup.contains("failed"));
    let breakdown = std::fs::read_to_string(out.join("breakdown.svg")).unwrap();
    for c in ["user", "protocol", "comm_wait", "messages"] {
        assert!(
            breakdown.contains(c),
            "{c} missing from the breakdown chart"
        );
    }
    for f in &files[1..] {
        assert!(rasterise(f) > 0.01, "{}", f.display());
    }
}
