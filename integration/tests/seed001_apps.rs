//! Seed 001's three applications that seed 000's suite lacks (FFT, Ocean,
//! Radix; issue 40, docs/hlrc.md "Seed 001's applications") at the small
//! preset, on 2 and 4 nodes, eager and skewed, under Cashmere and HLRC:
//! every node verifies its part against the sequential run, and together
//! the nodes check every value of the result once.

use integration::dsm_runs::shapes;
use integration::mc_host_run;

/// Values node `node` says it verified (`[nodeN] csm ...: verified V values`).
fn verified(text: &str, node: u32) -> Option<u64> {
    let tag = format!("[node{node}] csm ");
    text.lines()
        .filter_map(|l| l.strip_prefix(&tag))
        .find_map(|l| l.split(": verified ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// `mc-guest csm APP --preset small --protocol PROTOCOL` on every shape:
/// the values the nodes verified add up to `values`.
fn run_app(app: &str, values: u64, seed: u64) {
    for protocol in ["cashmere", "hlrc"] {
        for (nodes, host) in shapes(seed) {
            let host: Vec<&str> = host.iter().map(String::as_str).collect();
            let guest = [
                "mc-guest",
                "csm",
                app,
                "--preset",
                "small",
                "--protocol",
                protocol,
            ];
            let (ok, text) = mc_host_run(nodes, 120, &host, &guest);
            let what = format!("{app} under {protocol} on {nodes} nodes ({host:?})");
            assert!(ok, "{what} failed:\n{text}");
            let total: u64 = (0..nodes)
                .map(|n| {
                    verified(&text, n)
                        .unwrap_or_else(|| panic!("{what}: node {n} did not verify:\n{text}"))
                })
                .sum();
            assert_eq!(total, values, "{what}: values verified:\n{text}");
        }
    }
}

#[test]
fn fft_verifies_under_cashmere_and_hlrc_eager_and_skewed() {
    // 2^10 complex points (re and im), and 8 points against the DFT.
    run_app("fft", 2 * 1024 + 2 * 8, 61);
}

#[test]
fn ocean_verifies_under_cashmere_and_hlrc_eager_and_skewed() {
    // Every interior point of the 62 x 62 fine grid.
    run_app("ocean", 62 * 62, 63);
}

#[test]
fn radix_verifies_under_cashmere_and_hlrc_eager_and_skewed() {
    run_app("radix", 16_384, 65);
}
