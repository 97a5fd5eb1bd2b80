//! Cashmere on virtual clusters, every variant, 2L and 1L: the seed's
//! wtest/test and the applications, each checked against its expected result
//! on every node, on 2 and 4 nodes with 1 and 2 threads per node, in eager
//! and skewed delivery (`MC_TEST_EXHAUSTIVE=1` runs every configuration with
//! eight skewed seeds); plus protocol behaviour seen through the API
//! (first-touch homes, Exclusive mode, release consistency, 1L's
//! processors as nodes of their own).

use cashmere::{Config, Csm, CsmVariant, PageState};
use firmware_model::ClusterConfig;
use integration::{mc_host_run, VirtualCluster};
use mc_guest::csm::{self, App, Params};

/// `mc-host run --nodes N HOST_OPTS -- mc-guest csm ARGS`; every node must
/// report its verified values and its statistics.
fn run_csm_with(nodes: u32, host_opts: &[&str], args: &[&str]) -> String {
    let guest: Vec<&str> = ["mc-guest", "csm"].iter().chain(args).copied().collect();
    let (ok, text) = mc_host_run(nodes, 240, host_opts, &guest);
    assert!(
        ok,
        "{args:?} on {nodes} nodes ({host_opts:?}) failed:\n{text}"
    );
    for n in 0..nodes {
        assert!(
            text.contains(&format!("on node {n}\n"))
                && text.contains(&format!("[node{n}] csm stats node {n}: faults")),
            "node {n} did not report for {args:?} ({host_opts:?}):\n{text}"
        );
    }
    assert_eq!(text.matches("verified").count(), nodes as usize, "{text}");
    text
}

fn run_csm(nodes: u32, args: &[&str]) -> String {
    run_csm_with(nodes, &[], args)
}

/// With `MC_TEST_EXHAUSTIVE=1`, every configuration in eager delivery and
/// with skewed delivery seeds 1 to 8; otherwise a representative matrix:
/// every configuration eager, and each skewed with a seed of its own.
fn exhaustive() -> bool {
    std::env::var("MC_TEST_EXHAUSTIVE").is_ok_and(|v| v == "1")
}

/// `app` on 2 and 4 nodes with 1 and 2 threads per node, in eager and
/// skewed delivery (docs/device.md s.19): what is correct on the hardware
/// must pass with any delivery schedule the network allows.
fn each_config(app: &str, extra: &[&str]) {
    let configs = [(2, "1"), (2, "2"), (4, "1"), (4, "2")];
    for (v, variant) in VARIANTS.into_iter().enumerate() {
        for (k, (nodes, threads)) in configs.into_iter().enumerate() {
            let mut args = vec![app, "--threads", threads, "--variant", variant];
            args.extend_from_slice(extra);
            if v >= MESSAGE_VARIANTS && !exhaustive() {
                // The message-based variants, to keep the time: each
                // configuration once, eager or skewed in turn.
                if k % 2 == v % 2 {
                    run_csm(nodes, &args);
                } else {
                    let seed =
                        (1 + k as u64 + 4 * (app.len() as u64 % 5) + 20 * v as u64).to_string();
                    run_csm_with(nodes, &["--delivery", "skewed", "--seed", &seed], &args);
                }
                continue;
            }
            run_csm(nodes, &args);
            let seeds: Vec<u64> = if exhaustive() {
                (1..=8).collect()
            } else if v == 0 || k % 2 == v % 2 {
                // Different seeds for different configurations, apps and
                // variants; CSM-DMS skewed in every configuration, the
                // others in half of them each (in turn), to keep the time.
                vec![1 + k as u64 + 4 * (app.len() as u64 % 5) + 20 * v as u64]
            } else {
                vec![]
            };
            for seed in seeds {
                let seed = seed.to_string();
                run_csm_with(nodes, &["--delivery", "skewed", "--seed", &seed], &args);
            }
        }
        // CSM-1L: each of a node's 2 threads a protocol node of its own (1L
        // with 1 thread per node is the 1-thread configuration above).
        // Representative: one node count per variant, eager or skewed in
        // turn; exhaustive: both, eager and with every seed.
        for (k, nodes) in [2u32, 4].into_iter().enumerate() {
            if !exhaustive() && k != v % 2 {
                continue;
            }
            let mut args = vec![app, "--threads", "2", "--levels", "1", "--variant", variant];
            args.extend_from_slice(extra);
            let seed = 3 + k as u64 + 4 * (app.len() as u64 % 5) + 20 * v as u64;
            if exhaustive() {
                run_csm(nodes, &args);
                for seed in 1..=8u64 {
                    let seed = seed.to_string();
                    run_csm_with(nodes, &["--delivery", "skewed", "--seed", &seed], &args);
                }
            } else if (v + app.len()) % 2 == 0 {
                run_csm(nodes, &args);
            } else {
                let seed = seed.to_string();
                run_csm_with(nodes, &["--delivery", "skewed", "--seed", &seed], &args);
            }
        }
    }
}

/// Every protocol variant `mc-guest csm --variant` offers.
const VARIANTS: [&str; 7] = ["dms", "ms", "ms-mg", "adb", "s", "none", "none-mg"];
/// `VARIANTS` from here on keep metadata (CSM-S) or synchronisation too
/// (CSM-None, CSM-None-Mg) off Memory Channel: run in a smaller matrix by
/// default.
const MESSAGE_VARIANTS: usize = 4;

/// The variants the tests run are the ones the command line offers: a
/// variant added there must be added here (and so be verified).
#[test]
fn the_tests_cover_every_variant_offered() {
    let offered: Vec<&str> = mc_guest::csm::CsmVariant::all()
        .iter()
        .map(|v| v.name())
        .collect();
    assert_eq!(offered, VARIANTS);
}

#[test]
fn wtest_on_2_and_4_nodes_with_1_and_2_threads() {
    each_config("wtest", &["--size", "64", "--iters", "2"]);
}

#[test]
fn test_program_on_2_and_4_nodes_with_1_and_2_threads() {
    each_config("test", &["--size", "128", "--iters", "2"]);
}

/// Sub-word writes (issue 37): processors write interleaved bytes, blocks
/// of three bytes and 16-bit halves of shared words through
/// `SharedArray<u8>`/`<u16>`, and every byte is checked. Every variant
/// (migration included), 2L and 1L, eager and skewed, and the home's own
/// writes both direct and diffed (`--home-diffs`): a diff that wrote whole
/// words wrote other nodes' bytes back from its twin.
#[test]
fn subword_writes_keep_every_byte_under_every_variant_1l_and_2l() {
    // (nodes, threads, levels)
    let shapes = [(2, "2", "2"), (2, "2", "1"), (4, "1", "2"), (3, "2", "2")];
    for (v, variant) in VARIANTS.into_iter().enumerate() {
        for (k, (nodes, threads, levels)) in shapes.into_iter().enumerate() {
            let mut args = vec!["subword", "--threads", threads, "--levels", levels];
            args.extend(["--variant", variant, "--size", "96", "--iters", "2"]);
            if k == 3 {
                args.push("--home-diffs");
            }
            run_csm(nodes, &args);
            let seed = (7001 + 10 * v + k).to_string();
            run_csm_with(nodes, &["--delivery", "skewed", "--seed", &seed], &args);
        }
    }
}

#[test]
fn sor_on_2_and_4_nodes_with_1_and_2_threads() {
    each_config("sor", &["--size", "48", "--iters", "4"]);
}

/// A rectangular grid whose colour rows are not whole pages: bands share
/// pages, so homes and other writers diff into the same pages every phase.
#[test]
fn sor_on_a_rectangular_grid_in_skewed_delivery() {
    let out = run_csm_with(
        4,
        &["--delivery", "skewed", "--seed", "3"],
        &[
            "sor", "--rows", "30", "--cols", "200", "--iters", "6", "--stats",
        ],
    );
    assert!(out.contains("csm sor (30x200, 6 iterations)"), "{out}");
    // The time breakdown of every application and protocol thread.
    for n in 0..4 {
        assert!(
            out.contains(&format!("csm time node {n} app{n}: wall")),
            "{out}"
        );
        assert!(
            out.contains(&format!("csm time node {n} proto: wall")),
            "{out}"
        );
    }
}

#[test]
fn gauss_on_2_and_4_nodes_with_1_and_2_threads() {
    each_config("gauss", &["--size", "32"]);
}

#[test]
fn tsp_on_2_and_4_nodes_with_1_and_2_threads() {
    each_config("tsp", &["--size", "8"]);
}

#[test]
fn sor_with_4_kib_pages_and_without_exclusive_mode() {
    let out = run_csm(
        2,
        &[
            "sor",
            "--size",
            "48",
            "--iters",
            "4",
            "--page-size",
            "4096",
            "--no-exclusive",
        ],
    );
    assert!(out.contains("exclusive in/out 0/0"), "{out}");
}

#[test]
fn wtest_with_4_kib_pages_on_4_nodes_with_2_threads() {
    run_csm(
        4,
        &[
            "wtest",
            "--threads",
            "2",
            "--size",
            "64",
            "--iters",
            "2",
            "--page-size",
            "4096",
        ],
    );
}

#[test]
fn wtest_in_process_moves_pages_between_nodes() {
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    let outs = vc.on_every_node(|mc| {
        let mut p = Params::new(App::Wtest, 2);
        p.size = 64;
        p.iters = 2;
        csm::run(&mc, &p).map_err(|e| e.to_string())
    });
    let mut diffs = 0;
    for o in outs {
        let o = o.expect("wtest");
        assert_eq!(o.checked, 2 * 2 * 4 * 64 * 2, "{o}");
        let s = o.stats;
        assert!(s.read_faults > 0 && s.write_faults > 0, "{o}");
        // A home writes its pages directly; a node that is not home twins
        // and diffs the pages it writes.
        assert!(s.twins > 0 || s.direct_home_pages > 0, "{o}");
        assert_eq!(s.home_diffs, 0, "{o}");
        assert!(s.page_transfers + s.messages_served > 0, "{o}");
        assert_eq!(s.lock_acquires, 2 * 2 * 4, "{o}");
        diffs += s.diffs;
    }
    assert!(diffs > 0, "somebody diffs into a remote home");
}

/// CSM-1L (seed 000 s.3.2): the two threads of a one-node cluster are two
/// protocol nodes, with frames of their own, so they move pages between
/// them through the adapter (page fetches, diffs to the home, write
/// notices), where in 2L they share the node's frames and nothing goes on
/// the network. The record says so.
#[test]
fn one_level_threads_of_one_node_share_pages_through_the_network() {
    for levels in [cashmere::Levels::One, cashmere::Levels::Two] {
        for variant in [csm::CsmVariant::Dms, csm::CsmVariant::None] {
            let vc = VirtualCluster::start(ClusterConfig::new(1));
            let outs = vc.on_every_node(move |mc| {
                let mut p = Params::new(App::Wtest, 2);
                p.size = 64;
                p.iters = 2;
                p.levels = levels;
                p.variant = variant;
                csm::run(&mc, &p).map_err(|e| e.to_string())
            });
            let o = outs.into_iter().next().expect("one node").expect("wtest");
            assert_eq!(o.checked, 2 * 4 * 64 * 2, "{o}");
            let s = o.stats;
            if levels == cashmere::Levels::One {
                assert!(s.page_transfers > 0, "{o}");
                assert!(s.diffs > 0, "{o}");
                assert!(s.write_notices_sent > 0, "{o}");
                // Both processors' counts: wtest takes a lock once per
                // processor per round on each (2 x 2 rounds x 2).
                assert_eq!(s.lock_acquires, 2 * 2 * 2, "{o}");
            } else {
                assert_eq!(s.page_transfers, 0, "{o}");
                assert_eq!(s.diffs, 0, "{o}");
            }
        }
    }
}

/// 1L starts a protocol node per thread: `Csm::start` refuses it, naming
/// the way, and a cluster too large for the protocol is refused at start.
#[test]
fn one_level_start_is_checked() {
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    let outs = vc.on_every_node(|mc| {
        let cfg = Config {
            threads: 2,
            levels: cashmere::Levels::One,
            ..Config::default()
        };
        let e = Csm::start(&mc, &cfg).err().map(|e| e.to_string());
        let too_many = Config {
            threads: 33,
            levels: cashmere::Levels::One,
            ..Config::default()
        };
        let e2 = Csm::start_one_level(&mc, &too_many)
            .err()
            .map(|e| e.to_string());
        (e, e2)
    });
    for (e, e2) in outs {
        assert!(e.is_some_and(|e| e.contains("start_one_level")));
        // 66 protocol nodes: more than a barrier's 64 words (the region
        // table, a mailbox per node and five shared regions, has room for
        // more with 8 KiB pages).
        assert!(
            e2.as_deref().is_some_and(|e| e.contains("2 adapters x 33")
                && e.contains("Cashmere runs on 1 to 64 protocol nodes")),
            "{e2:?}"
        );
    }
}

/// Diff messages to different homes are in flight together (seed 002
/// s.3.3): node 0 writes a page homed at each other node and its release
/// sends the three diffs before it waits for their acknowledgements; each
/// home applies one, and every node then reads every write.
#[test]
fn diffs_to_different_homes_are_pipelined() {
    for variant in [CsmVariant::Ms, CsmVariant::S, CsmVariant::None] {
        let vc = VirtualCluster::start(ClusterConfig::new(4));
        vc.on_every_node(move |mc| {
            let cfg = Config {
                exclusive_mode: false,
                variant,
                ..Config::default()
            };
            let csm = Csm::start(&mc, &cfg).unwrap();
            let words = 8192 / 4;
            let a = csm.alloc::<u32>(4 * words, true).unwrap();
            let me = csm.node_id() as usize;
            // First touch: node n is the home of page n.
            a.set(me * words, 1);
            csm.barrier().unwrap();
            if me == 0 {
                for n in 1..4 {
                    a.set(n * words + 7, 100 + u32::try_from(n).unwrap());
                }
            }
            csm.barrier().unwrap();
            for n in 1..4 {
                assert_eq!(
                    a.get(n * words + 7),
                    100 + u32::try_from(n).unwrap(),
                    "{variant:?} node {me}"
                );
                assert_eq!(a.get(n * words), 1, "{variant:?} node {me}");
            }
            let s = csm.finish().unwrap();
            if me == 0 {
                assert_eq!(s.diffs, 3, "{variant:?}: {s}");
                assert_eq!(s.diffs_pipelined, 2, "{variant:?}: {s}");
            } else {
                assert_eq!(s.diffs_applied, 1, "{variant:?} node {me}: {s}");
            }
        });
    }
}

/// The home writes its master copy directly (seed 000 s.2.3.2): node 0, the
/// home by first touch, shares the page with node 1 and keeps writing it,
/// and never twins, diffs or refreshes; node 1 twins and diffs its own
/// writes into node 0's master copy, which node 0 then reads in place.
/// With `home_direct` off the home diffs its writes by loopback instead.
fn home_writes_its_master_copy(direct: bool, variant: CsmVariant) {
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    vc.on_every_node(move |mc| {
        let cfg = Config {
            home_direct: direct,
            exclusive_mode: false,
            variant,
            ..Config::default()
        };
        let csm = Csm::start(&mc, &cfg).unwrap();
        let a = csm.alloc::<u64>(1024, true).unwrap();
        let me = csm.node_id();
        if me == 0 {
            for i in 0..1024 {
                a.set(i, i as u64);
            }
        }
        csm.barrier().unwrap();
        for round in 1..=3u64 {
            if me == 0 {
                a.set(0, 1000 * round);
            } else {
                assert_eq!(a.get(10), 10);
                a.set(512, 2000 * round);
            }
            csm.barrier().unwrap();
            assert_eq!(a.get(0), 1000 * round, "node {me}: the home's word");
            assert_eq!(a.get(512), 2000 * round, "node {me}: node 1's word");
            csm.barrier().unwrap();
        }
        let s = csm.finish().unwrap();
        if me == 0 {
            if direct {
                assert_eq!(s.direct_home_pages, 1, "{s}");
                assert_eq!((s.twins, s.diffs, s.home_refreshes), (0, 0, 0), "{s}");
            } else {
                assert_eq!(s.direct_home_pages, 0, "{s}");
                assert!(s.twins >= 3 && s.home_diffs >= 3, "{s}");
            }
            // Node 1 holds a copy from round 1's end on (round 1's notice
            // depends on whether its fetch came before node 0's write).
            assert!(
                s.write_notices_sent >= 2,
                "node 1 is told of rounds 2 and 3: {s}"
            );
            // CSM-MS: each of node 1's diffs came as a message, applied
            // here and acknowledged.
            let messages = if variant == CsmVariant::Dms { 0 } else { 3 };
            assert_eq!(s.diffs_applied, messages, "{s}");
            // Its page replies to node 1 went into node 1's mailbox.
            assert!(s.message_bytes >= 8192, "{s}");
        } else {
            assert_eq!(s.diffs, 3, "{s}");
            assert_eq!(s.home_diffs, 0, "{s}");
            assert_eq!(s.diffs_applied, 0, "{s}");
            if variant != CsmVariant::Dms {
                // Its diffs were messages into node 0's mailbox.
                assert!(s.message_bytes >= s.diff_bytes && s.diff_bytes > 0, "{s}");
            }
        }
    });
}

#[test]
fn the_home_writes_its_master_copy_directly() {
    home_writes_its_master_copy(true, CsmVariant::Dms);
}

#[test]
fn with_home_diffs_the_home_diffs_its_writes_by_loopback() {
    home_writes_its_master_copy(false, CsmVariant::Dms);
}

/// CSM-MS: the home's heap is the master copy (no Memory Channel data
/// regions), and node 1's diffs reach it as acknowledged messages.
#[test]
fn ms_diffs_are_messages_the_home_applies() {
    home_writes_its_master_copy(true, CsmVariant::Ms);
}

/// CSM-S (seed 000 s.2.3.1.3): the same, with the directory and the write
/// notices kept by messages too: node 0 learns node 1 shares the page from
/// its page request, node 1 the sharing set from its diffs'
/// acknowledgements, and the notices are messages (the assertions above
/// hold unchanged: node 0 notifies node 1 of rounds 2 and 3).
#[test]
fn s_keeps_the_directory_and_notices_by_messages() {
    home_writes_its_master_copy(true, CsmVariant::S);
}

/// First touch makes node 0 the home; alone, it goes Exclusive (no twin);
/// node 1's read makes it publish and leave Exclusive; node 1's later write
/// is diffed home and, after a barrier, node 0 sees it.
#[test]
fn exclusive_home_then_sharing_then_release_consistency() {
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    vc.on_every_node(|mc| {
        let csm = Csm::start(&mc, &Config::default()).unwrap();
        let a = csm.alloc::<u64>(1024, true).unwrap();
        let me = csm.node_id();
        if me == 0 {
            for i in 0..1024 {
                a.set(i, i as u64 * 3);
            }
            assert_eq!(csm.page_state(a.offset()), PageState::Exclusive);
            assert_eq!(csm.stats().twins, 0);
        }
        csm.barrier().unwrap();
        if me == 1 {
            for i in 0..1024 {
                assert_eq!(a.get(i), i as u64 * 3, "node 1 reads node 0's data");
            }
            assert_eq!(csm.stats().page_transfers, 1);
            a.set(5, 555 | (7 << 32));
        }
        csm.barrier().unwrap();
        if me == 0 {
            assert_eq!(csm.stats().exclusive_exits, 1);
            assert_eq!(a.get(5), 555 | (7 << 32), "node 1's diff reached the home");
            assert_eq!(a.get(6), 18);
        } else {
            assert_eq!(csm.stats().diffs, 1);
            // 15 -> 555 | 7 << 32: bytes 0 and 1 of the low word and byte
            // 0 of the high word changed; a diff carries changed bytes only
            // (docs/fidelity.md, "Sub-word writes").
            assert_eq!(
                csm.stats().diff_bytes,
                3,
                "one changed u64: three of its bytes changed"
            );
        }
        csm.finish().unwrap();
    });
}

/// 2L: node 0's thread B writes its quarter of a page without pause while
/// node 0's thread A acquires (a flag wait) the page that node 1 changed in
/// another quarter. With incoming diffs the page is updated in place (B never
/// stops, nothing of B's is lost, A sees node 1's words); without them it is
/// invalidated and flushed (a shoot-down) and must come out the same.
fn concurrent_local_writer_during_an_acquire(incoming_diffs: bool) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    vc.on_every_node(move |mc| {
        // The page's writer must keep a twin: node 0 is the page's home,
        // so it keeps a working copy apart from its master copy here (a
        // home writing its master copy directly never twins; a node that is
        // not home does, as here).
        let cfg = Config {
            threads: 2,
            incoming_diffs,
            home_direct: false,
            ..Config::default()
        };
        let csm = Csm::start(&mc, &cfg).unwrap();
        let a = csm.alloc::<u64>(1024, true).unwrap();
        let me = csm.node_id();
        if me == 0 {
            for i in 0..1024 {
                a.set(i, 0);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let last_round = Arc::new(AtomicU64::new(0));
        let (csm_b, stop_b, last_b) = (csm.clone(), stop.clone(), last_round.clone());
        let writer = std::thread::spawn(move || {
            csm_b.barrier().unwrap();
            let mut round = 0u64;
            if csm_b.node_id() == 0 {
                while !stop_b.load(Ordering::Acquire) {
                    round += 1;
                    for k in 0..256 {
                        a.set(k, round);
                    }
                    // Only this thread writes these words: an update that
                    // overwrote them would show here.
                    for k in 0..256 {
                        assert_eq!(a.get(k), round, "writer's word {k} was overwritten");
                    }
                }
            }
            last_b.store(round, Ordering::Release);
            csm_b.barrier().unwrap();
            csm_b.barrier().unwrap();
        });
        csm.barrier().unwrap();
        if me == 1 {
            // A read makes node 0 (the home) leave Exclusive; node 0's
            // writer then write-faults and twins the page.
            assert_eq!(a.get(600), 0);
            for k in 512..768 {
                a.set(k, 7);
            }
            csm.flag_set(0, 1).unwrap();
        } else {
            let t0 = std::time::Instant::now();
            while csm.page_state(a.offset()) != PageState::ReadWrite {
                assert!(t0.elapsed().as_secs() < 30, "writer never twinned");
                std::thread::yield_now();
            }
            let before = csm.stats();
            csm.flag_wait(0).unwrap();
            for k in 512..768 {
                assert_eq!(a.get(k), 7, "node 1's word {k} after the acquire");
            }
            let s = csm.stats();
            if incoming_diffs {
                assert_eq!(s.incoming_diffs - before.incoming_diffs, 1, "{s}");
                assert_eq!(s.incoming_diff_words - before.incoming_diff_words, 256);
                assert_eq!(s.invalidations, before.invalidations, "{s}");
            } else {
                assert_eq!(s.incoming_diffs, 0, "{s}");
                assert!(s.invalidations > before.invalidations, "{s}");
            }
            stop.store(true, Ordering::Release);
        }
        csm.barrier().unwrap();
        if me == 0 {
            let round = last_round.load(Ordering::Acquire);
            assert!(round > 0);
            a.set(256, round);
        }
        csm.barrier().unwrap();
        writer.join().unwrap();
        let last = a.get(256);
        assert!(last > 0, "node {me}: the writer's last round");
        for k in 0..256 {
            assert_eq!(a.get(k), last, "node {me}: writer's word {k}");
        }
        for k in 512..768 {
            assert_eq!(a.get(k), 7, "node {me}: node 1's word {k}");
        }
        csm.finish().unwrap();
    });
}

#[test]
fn incoming_diff_keeps_a_concurrent_local_writer_running() {
    concurrent_local_writer_during_an_acquire(true);
}

#[test]
fn shoot_down_without_incoming_diffs_gives_the_same_result() {
    concurrent_local_writer_during_an_acquire(false);
}

/// `--record-homes` writes the homes first touch gave; `--homes` imposes
/// them on a later run (which records the same ones back), or imposes
/// another assignment (every page at node 1: node 0 is home of nothing and
/// writes no master copy directly); one for another cluster is refused.
#[test]
fn homes_are_recorded_and_imposed() {
    use cashmere::HomeAssignment;
    let dir = std::env::temp_dir().join(format!("csm-homes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (first, again, moved, wrong) = (file("first"), file("again"), file("moved"), file("wrong"));
    let sor = ["sor", "--size", "256", "--iters", "2"];
    let with = |extra: &[&str]| -> Vec<String> {
        sor.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    fn args(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    run_csm(2, &args(&with(&["--record-homes", &first])));
    let text = std::fs::read_to_string(&first).unwrap();
    let homes = HomeAssignment::parse(&text).unwrap();
    assert_eq!((homes.nodes, homes.page_size), (2, 8192));
    for n in 0..2 {
        assert!(
            homes.homes.contains(&Some(n)),
            "first touch makes node {n} a home:\n{text}"
        );
    }

    run_csm(
        2,
        &args(&with(&["--homes", &first, "--record-homes", &again])),
    );
    assert_eq!(std::fs::read_to_string(&again).unwrap(), text);

    let all_at_1 = HomeAssignment {
        homes: homes.homes.iter().map(|h| h.map(|_| 1)).collect(),
        ..homes.clone()
    };
    std::fs::write(&moved, all_at_1.render()).unwrap();
    let out = run_csm(2, &args(&with(&["--homes", &moved])));
    assert!(
        out.contains("[node0] csm stats node 0: ") && out.contains("direct home pages 0,"),
        "{out}"
    );

    let other = HomeAssignment {
        nodes: 4,
        ..homes.clone()
    };
    std::fs::write(&wrong, other.render()).unwrap();
    let wrong_args = with(&["--homes", &wrong]);
    let guest: Vec<&str> = ["mc-guest", "csm"]
        .into_iter()
        .chain(args(&wrong_args))
        .collect();
    let (ok, out) = mc_host_run(2, 60, &[], &guest);
    assert!(!ok, "{out}");
    assert!(
        out.contains("the home assignment is for nodes 4; this run has 2"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// CSM-MS-Mg (seed 000 s.2.3.2): a page node 0 initialised (its home by
/// first touch) and node 1 then writes migrates to node 1 at its first
/// write fault, since node 0 is not writing it; the grant carries no page
/// (node 0's Stale vector knows node 1's copy is current); from then on
/// node 1 writes the master copy directly (no twins, no diffs), and node 0,
/// a sharer now, sees each round's values through the new home.
#[test]
fn a_page_written_by_one_remote_node_migrates_there() {
    a_page_written_by_one_remote_node_migrates(CsmVariant::MsMg);
}

/// The same in CSM-None-Mg: the directory, the notices and the barriers
/// are messages; the migration is the same.
#[test]
fn none_mg_migrates_a_page_to_its_one_remote_writer() {
    a_page_written_by_one_remote_node_migrates(CsmVariant::NoneMg);
}

fn a_page_written_by_one_remote_node_migrates(variant: CsmVariant) {
    let vc = VirtualCluster::start(ClusterConfig::new(2));
    vc.on_every_node(move |mc| {
        let cfg = Config {
            variant,
            ..Config::default()
        };
        let csm = Csm::start(&mc, &cfg).unwrap();
        let a = csm.alloc::<u64>(1024, true).unwrap();
        let me = csm.node_id();
        if me == 0 {
            for i in 0..1024 {
                a.set(i, i as u64);
            }
        }
        csm.barrier().unwrap();
        for round in 1..=3u64 {
            if me == 1 {
                for i in 0..1024 {
                    a.set(i, 1000 * round + i as u64);
                }
            }
            csm.barrier().unwrap();
            for i in (0..1024).step_by(97) {
                assert_eq!(a.get(i), 1000 * round + i as u64, "node {me} round {round}");
            }
            csm.barrier().unwrap();
        }
        let s = csm.finish().unwrap();
        if me == 1 {
            assert_eq!((s.migration_attempts, s.migrations), (1, 1), "{s}");
            assert_eq!((s.twins, s.diffs), (0, 0), "{s}");
            assert_eq!(
                s.page_transfers, 1,
                "one fetch, a grant without the page: {s}"
            );
        } else {
            assert_eq!(s.migrations_granted, 1, "{s}");
            assert_eq!((s.twins, s.diffs), (0, 0), "{s}");
            assert!(
                s.page_transfers >= 2,
                "node 0 fetches from the new home: {s}"
            );
        }
    });
}

/// CSM-ADB (seed 000 s.2.3.3): a page that node 0 wrote and every other
/// node reads is placed in the broadcast buffers once, when the home has
/// answered a second request for it in one interval (or two in one pass),
/// and a reader that comes later takes it from there instead of asking the
/// home. A change at the home kills the copy: the readers then see the
/// new values.
#[test]
fn a_page_read_by_every_node_is_broadcast_once() {
    let vc = VirtualCluster::start(ClusterConfig::new(4));
    let outs = vc.on_every_node(|mc| {
        let cfg = Config {
            variant: CsmVariant::Adb,
            ..Config::default()
        };
        let csm = Csm::start(&mc, &cfg).unwrap();
        let a = csm.alloc::<u64>(1024, true).unwrap();
        let me = csm.node_id();
        if me == 0 {
            for i in 0..1024 {
                a.set(i, 7 * i as u64);
            }
        }
        csm.barrier().unwrap();
        // Nodes 1 and 2 read in one interval of the home's (it only
        // acquires, waiting for their flags), node 3 after them.
        match me {
            1 | 2 => {
                assert_eq!(a.get(100), 700);
                csm.flag_set(me, 1).unwrap();
            }
            _ => {
                csm.flag_wait(1).unwrap();
                csm.flag_wait(2).unwrap();
                if me == 3 {
                    assert_eq!(a.get(100), 700);
                }
            }
        }
        csm.barrier().unwrap();
        let before = csm.stats();
        if me == 0 {
            a.set(100, 1);
        }
        csm.barrier().unwrap();
        assert_eq!(a.get(100), 1, "node {me} sees the home's change");
        csm.barrier().unwrap();
        let s = csm.finish().unwrap();
        Ok::<_, String>((me, before, s))
    });
    let mut placed = 0;
    let mut first_reads = 0;
    for o in outs {
        let (me, before, s) = o.expect("node");
        if me == 0 {
            placed = before.adb_placements;
            assert!(
                s.adb_invalidations >= 1,
                "node 0's write kills the copy: {s}"
            );
        } else {
            // Each reader's first copy: from the home or the buffers.
            first_reads += before.page_transfers + before.adb_hits;
            if me == 3 {
                assert_eq!(
                    before.adb_hits, 1,
                    "node 3 reads the broadcast copy: {before}"
                );
                assert_eq!(before.page_transfers, 0, "{before}");
            }
        }
    }
    assert_eq!(placed, 1, "placed once");
    assert_eq!(first_reads, 3);
}
