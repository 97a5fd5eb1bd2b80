//! Fidelity on counts: seed 000's qualitative findings that are about
//! protocol counters (which do not depend on how fast this host is), checked
//! on the emulator. Where a finding needs a protocol variant Cashmere does
//! not have yet, the test says so and returns. docs/fidelity.md records
//! what the emulator shows and where it disagrees with the paper.

use integration::{binary, mc_host_run};
use serde_json::Value;

/// Run `mc-guest csm APP` on `nodes` x `threads` with `--json` and return
/// the run's record.
fn record(nodes: u32, threads: u32, app: &str, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.jsonl");
    let t = threads.to_string();
    let f = file.to_str().unwrap().to_string();
    let mut guest = vec!["mc-guest", "csm", app, "--threads", &t, "--json", &f];
    guest.extend_from_slice(extra);
    let (ok, text) = mc_host_run(nodes, 300, &[], &guest);
    assert!(ok, "{app} {nodes}x{threads} {extra:?}:\n{text}");
    let line = std::fs::read_to_string(&file).unwrap();
    serde_json::from_str(line.trim()).unwrap()
}

fn total(r: &Value, counter: &str) -> u64 {
    r["stats"]["total"][counter]
        .as_u64()
        .unwrap_or_else(|| panic!("no {counter} in {r}"))
}

/// Bytes the protocol moved between nodes: whole pages fetched plus diffs.
fn data(r: &Value) -> u64 {
    total(r, "page_transfers") * r["page_size"].as_u64().unwrap() + total(r, "diff_bytes")
}

/// Does `mc-guest csm --variant` accept `v` yet (issue 18 adds variants)?
/// Asked by giving it a value it cannot have: clap's refusal lists the
/// possible values.
fn variant_exists(v: &str) -> bool {
    let out = std::process::Command::new(binary("mc-guest"))
        .args(["csm", "wtest", "--variant", "?"])
        .output()
        .expect("mc-guest csm --variant ?");
    let err = String::from_utf8_lossy(&out.stderr);
    let values = err
        .split("[possible values: ")
        .nth(1)
        .and_then(|s| s.split(']').next());
    assert!(
        values.is_some(),
        "mc-guest did not list --variant's values:\n{err}"
    );
    values.is_some_and(|vals| vals.split(", ").any(|x| x == v))
}

/// Seed 000 s.3.3: CLU and Water-Nsquared "benefit from ... coalescing
/// remote requests for data. In both applications, the amount of data
/// transmitted in 2L relative to 1L is halved." Four processors either way:
/// 4 nodes of 1 (1L) against 2 nodes of 2 (2L).
///
/// CLU synchronises by barriers only, so its transfers do not depend on
/// timing, and the small preset shows it. Water-Nsquared's page transfers
/// depend on the order in which processors take the per-molecule locks
/// (each acquire invalidates what the last holder wrote): at the small
/// preset (64 molecules, a handful of pages) a loaded host once made 1L
/// fetch fewer pages than 2L. At the medium preset the cold fetches that
/// coalescing saves dominate (2L/1L 0.4-0.8 here, loaded or not), and two
/// runs of each, interleaved so that both see the same load, are summed.
#[test]
fn two_level_moves_less_data_than_one_level_for_clu_and_water_nsquared() {
    for (app, preset, rounds) in [("clu", "small", 1), ("water-nsquared", "medium", 2)] {
        let (mut one, mut two) = ((0, 0, 0), (0, 0, 0));
        for _ in 0..rounds {
            for (nodes, threads, sum) in [(4, 1, &mut one), (2, 2, &mut two)] {
                let r = record(nodes, threads, app, &["--preset", preset]);
                sum.0 += data(&r);
                sum.1 += total(&r, "page_transfers");
                sum.2 += total(&r, "diff_bytes");
            }
        }
        eprintln!(
            "{app} {preset} x{rounds}: 1L {} B ({} page transfers, {} diff B), 2L {} B ({} page transfers, {} diff B): 2L/1L = {:.2}",
            one.0,
            one.1,
            one.2,
            two.0,
            two.1,
            two.2,
            two.0 as f64 / one.0 as f64
        );
        assert!(
            two.0 < one.0,
            "{app}: 2L moved {} bytes, 1L {}",
            two.0,
            one.0
        );
    }
}

/// Seed 000 Table IV: home migration takes LU from 285.6K diffs (CSM-DMS)
/// to 1.1K (CSM-MS-Mg): "orders of magnitude". The paper's CSM-DMS diffs
/// are owners' writes to pages homed elsewhere. Here each processor
/// initialises its own tiles, so first touch already makes the owners the
/// homes, and migration can only cut the pages whose writer changes between
/// phases (pages two owners write in the same interval are diffed under any
/// home): fewer diffs, at most two thirds (0.3-0.45 here; which migration
/// a home refuses because its own thread is writing the page depends on
/// timing). With every page's home imposed at
/// node 0 (`--homes`, from a recorded run), the paper's starting point,
/// migration moves the homes to the writers: at least four times fewer
/// (CSM-DMS makes 159 every run, CSM-MS-Mg 14-28; docs/fidelity.md has the
/// figures).
#[test]
fn migration_cuts_lus_diffs() {
    if !variant_exists("ms-mg") {
        eprintln!("skipped: mc-guest csm has no --variant ms-mg yet (issue 18)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let first_touch = dir.path().join("homes");
    let at_node_0 = dir.path().join("homes-at-0");
    let (ft, n0) = (
        first_touch.to_str().unwrap().to_string(),
        at_node_0.to_str().unwrap().to_string(),
    );
    let small = ["--preset", "small"];
    let with = |more: &[&str]| -> Vec<String> {
        small.iter().chain(more).map(|s| s.to_string()).collect()
    };
    fn args(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let dms = record(
        4,
        1,
        "lu",
        &args(&with(&["--variant", "dms", "--record-homes", &ft])),
    );
    let mg = record(4, 1, "lu", &args(&with(&["--variant", "ms-mg"])));
    let (a, b) = (total(&dms, "diffs"), total(&mg, "diffs"));
    let (tried, moved) = (total(&mg, "migration_attempts"), total(&mg, "migrations"));
    eprintln!("lu, first touch: CSM-DMS {a} diffs, CSM-MS-Mg {b} ({moved} migrations of {tried} attempts)");
    assert!(moved > 0 && moved <= tried, "{moved} migrations of {tried}");
    assert!(b * 3 <= a * 2, "CSM-MS-Mg made {b} diffs, CSM-DMS {a}");

    let mut homes =
        cashmere::HomeAssignment::parse(&std::fs::read_to_string(&first_touch).unwrap()).unwrap();
    for h in homes.homes.iter_mut().filter(|h| h.is_some()) {
        *h = Some(0);
    }
    std::fs::write(&at_node_0, homes.render()).unwrap();
    let dms = record(
        4,
        1,
        "lu",
        &args(&with(&["--variant", "dms", "--homes", &n0])),
    );
    let mg = record(
        4,
        1,
        "lu",
        &args(&with(&["--variant", "ms-mg", "--homes", &n0])),
    );
    let (a, b) = (total(&dms, "diffs"), total(&mg, "diffs"));
    let moved = total(&mg, "migrations");
    eprintln!("lu, homes at node 0: CSM-DMS {a} diffs, CSM-MS-Mg {b} ({moved} migrations)");
    assert!(
        b * 4 <= a,
        "homes at node 0: CSM-MS-Mg made {b} diffs, CSM-DMS {a}"
    );
}

/// Seed 000 s.3.4.3: with adaptive broadcast "the protocol is able to
/// detect and optimize the communication of each pivot row to multiple
/// consumers": fewer page transfers than without broadcast. At the medium
/// preset (512 rows): how many consumers find a row in the buffers depends
/// on whether they fault before or after its broadcast arrives, and at the
/// small preset (48 rows) a loaded host left as few as 2 of 46 placements
/// read, a margin of a couple of pages; at 512 rows a loaded host still
/// served 80-100 updates from them.
#[test]
fn adaptive_broadcast_serves_gauss_pivot_rows_with_fewer_transfers() {
    if !variant_exists("adb") {
        eprintln!("skipped: mc-guest csm has no --variant adb yet (issue 18)");
        return;
    }
    let dms = record(4, 1, "gauss", &["--preset", "medium", "--variant", "dms"]);
    let adb = record(4, 1, "gauss", &["--preset", "medium", "--variant", "adb"]);
    let (a, b) = (total(&dms, "page_transfers"), total(&adb, "page_transfers"));
    let (placed, hits) = (total(&adb, "adb_placements"), total(&adb, "adb_hits"));
    eprintln!(
        "gauss page transfers: CSM-DMS {a}, CSM-ADB {b} ({placed} pages placed in the buffers, {hits} updates served from them)"
    );
    assert!(b < a, "CSM-ADB fetched {b} pages, CSM-DMS {a}");
    assert!(placed > 0 && hits > 0, "{placed} placed, {hits} hits");
}

#[test]
fn variant_detection_sees_dms() {
    assert!(variant_exists("dms"));
    assert!(!variant_exists("no-such-variant"));
}
