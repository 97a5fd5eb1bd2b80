//! `mc-guest bench ump` runs on a 3-node virtual cluster and reports every
//! point of Figures 8 and 9, the multicast points (one copy through the
//! outbuf against one per channel, to nodes 1 and 2), the raw limits and the goals, and writes the
//! same as JSON. Its figures are not checked here (no timed assertions):
//! only that they are there and well-formed.

use integration::mc_host_run;

#[test]
fn bench_ump_reports_every_point_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ump.json");
    let (ok, out) = mc_host_run(
        3,
        300,
        &[],
        &[
            "mc-guest",
            "bench",
            "ump",
            "--iters",
            "10",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert!(ok, "{out}");
    for size in [8, 1048576] {
        assert!(
            out.contains(&format!("[node0] {size:>11} |")),
            "{size}:\n{out}"
        );
    }
    assert!(out.contains("adapter one-way"), "{out}");
    assert_eq!(out.matches("[node0] mcast ").count(), 2, "{out}");
    assert_eq!(out.matches("[node0] goal ").count(), 3, "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let points = v["points"].as_array().unwrap();
    // 8 sizes x blocking/non-blocking x two transports.
    assert_eq!(points.len(), 32, "{v}");
    assert!(
        points
            .iter()
            .all(|p| p["mb_s"].as_f64().is_some_and(|x| x > 0.0)),
        "{v}"
    );
    let mcast = v["mcast"].as_array().unwrap();
    // 2 sizes x one copy / per channel, to 2 readers.
    assert_eq!(mcast.len(), 4, "{v}");
    assert!(
        mcast
            .iter()
            .all(|p| p["readers"] == 2 && p["us_per_mcast"].as_f64().is_some_and(|x| x > 0.0)),
        "{v}"
    );
    assert!(
        v["raw"]["adapter_one_way_us"]
            .as_f64()
            .is_some_and(|x| x > 0.0),
        "{v}"
    );
}
