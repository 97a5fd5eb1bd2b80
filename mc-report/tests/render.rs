//! `report render` on records this machine cannot produce yet (a time
//! breakdown, oversubscribed and failed runs): the tables say what each run
//! was, and every chart parses and rasterises to a picture with ink on it.

use std::path::{Path, PathBuf};

/// Parse `svg`, rasterise it, save it as PNG beside it, and return the
/// share of pixels that are not white.
fn rasterise(svg: &Path) -> f64 {
    let r = mc_report::raster::rasterise(svg).unwrap_or_else(|e| panic!("{e}: {e:?}"));
    r.save_png(&svg.with_extension("png"))
        .expect("save the PNG");
    r.inked()
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
    let files = mc_report::render(&results, &out, None).unwrap().files;
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

/// The committed results (docs/report): ten applications at the medium
/// preset, eight at the paper preset, seven variants, on the virtual clock. Their charts are small multiples a page wide, not
/// strips: at most 1200 pixels across and 1400 down, each variant named
/// once (in the legend), the clock and the host said under each chart.
#[test]
fn the_committed_results_render_to_charts_a_page_wide() {
    let results = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/report/results.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let files = mc_report::render(&results, dir.path(), None).unwrap().files;
    let md = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        md.contains("times are predicted by the virtual clock"),
        "{md}"
    );
    for f in &files[1..] {
        let text = std::fs::read_to_string(f).unwrap();
        let r = mc_report::raster::rasterise(f).unwrap();
        let (w, h) = r.size();
        assert!(w <= 1200 && h <= 1400, "{}: {w} x {h}", f.display());
        assert!(r.inked() > 0.05, "{}", f.display());
        assert!(text.contains("host: "), "{}", f.display());
        let breakdown = f
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("breakdown"));
        if !breakdown {
            for v in ["CSM-DMS", "CSM-MS-Mg", "CSM-None-Mg"] {
                assert_eq!(
                    text.lines().filter(|l| l.trim() == v).count(),
                    1,
                    "{}: {v} named more than once",
                    f.display()
                );
            }
        }
    }
    // One set of charts per preset (medium, and paper for the applications
    // that finish at it), every application in a speedup chart.
    let name = |f: &PathBuf| f.file_name().unwrap().to_string_lossy().into_owned();
    let speedups: Vec<String> = files
        .iter()
        .filter(|f| name(f).starts_with("speedup"))
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    assert!(
        files.iter().any(|f| name(f) == "speedup-paper.svg"),
        "{:?}",
        files
    );
    for app in ["Barnes", "SOR", "Water-Spatial", "TSP"] {
        assert!(
            speedups.iter().any(|t| t.lines().any(|l| l.trim() == app)),
            "no {app} panel"
        );
    }
    for speedup in &speedups {
        assert!(speedup.contains("times are predicted"));
        // 32 processors on a 2-core host get a speedup, not "oversubscribed".
        assert!(!speedup.contains("oversubscribed"));
    }
}
