//! Counted work (issue 39): the clock advances by counted edges at the
//! committed rate, waits are not counted, the model charges what no counter
//! sees, and a count that wraps makes a clear error, not a prediction.
//!
//! The test binary is not instrumented: the tests count work as the
//! compiler's callbacks would, through the counter's own entry points
//! (`__sanitizer_cov_trace_pc`, and `counter::add_for_test` for many at
//! once). A process has one clock, so this binary's tests share one
//! configuration: counted work, the application at scale 2, protocol work
//! at scale 10.

use mc_driver::vclock::{
    self, counter, meter::edges_to_ns, unseen, ClockConfig, Unseen, WorkFault, WorkMeasure,
    NOTICE_NS,
};

fn on() {
    // Counted work is refused until something counted (`init` checks the
    // build carries counters): this thread counts one edge first.
    counter::__sanitizer_cov_trace_pc();
    vclock::init(ClockConfig {
        protocol_scale: Some(10.0),
        quantum_ns: 1_000_000_000,
        work: WorkMeasure::Counted,
        ..ClockConfig::new(2.0)
    })
    .expect("one configuration for every test of this binary");
}

/// Run `f` on a fresh thread on the clock (its count starts at 0).
fn on_a_thread(f: impl FnOnce() + Send + 'static) {
    on();
    std::thread::spawn(move || {
        let _p = vclock::join(1_000_000).unwrap();
        f();
    })
    .join()
    .unwrap();
}

#[test]
fn counted_edges_advance_the_clock_at_the_rate_and_the_scales() {
    on_a_thread(|| {
        let t0 = vclock::sync();
        assert_eq!(t0, 1_000_000, "nothing counted yet");
        // 10 000 edges of the application's computing, at scale 2.
        counter::add_for_test(10_000);
        let t1 = vclock::sync();
        assert_eq!(t1 - t0, 2 * edges_to_ns(10_000));
        // The same again in protocol code, at scale 10.
        vclock::tick_into(true);
        counter::add_for_test(10_000);
        let t2 = vclock::tick_into(false);
        assert_eq!(t2 - t1, 10 * (edges_to_ns(20_000) - edges_to_ns(10_000)));
        // One callback is one edge.
        let before = counter::edges();
        for _ in 0..5 {
            counter::__sanitizer_cov_trace_pc();
            counter::__sanitizer_cov_trace_pc_guard(std::ptr::null_mut());
        }
        assert_eq!(counter::edges() - before, 10);
    });
}

#[test]
fn the_clocks_own_machinery_is_not_counted() {
    on_a_thread(|| {
        let t0 = vclock::sync();
        {
            // A sync that was due, a gate: regions nest, the outer counts.
            let _u = counter::Uncounted::enter();
            counter::add_for_test(5_000);
            {
                let _v = counter::Uncounted::enter();
                counter::add_for_test(5_000);
            }
            assert_eq!(vclock::sync(), t0, "inside, the count stands still");
        }
        assert_eq!(vclock::sync(), t0, "nothing of the region is work");
        counter::add_for_test(10_000);
        assert_eq!(vclock::sync() - t0, 2 * edges_to_ns(10_000));
    });
}

#[test]
fn the_same_count_gives_the_same_time_whatever_the_host_did() {
    // Two threads count the same work; one also burns CPU time that no
    // counter sees (the test binary is not instrumented) and sleeps. Their
    // clocks agree to the nanosecond.
    let run = |burn: bool| {
        let (tx, rx) = std::sync::mpsc::channel();
        on_a_thread(move || {
            let t0 = vclock::sync();
            for i in 0..100u64 {
                counter::add_for_test(1_000 + i);
                if burn {
                    let mut x = 0u64;
                    for k in 0..200_000u64 {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(k));
                    }
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
                vclock::sync();
            }
            tx.send(vclock::sync() - t0).unwrap();
        });
        rx.recv().unwrap()
    };
    let quiet = run(false);
    assert_eq!(quiet, run(true));
    assert_eq!(quiet, 2 * edges_to_ns((0..100).map(|i| 1_000 + i).sum()));
}

#[test]
fn a_wait_counts_nothing_the_wait_api_charges_it() {
    on_a_thread(|| {
        let t0 = vclock::sync();
        vclock::wait_begin();
        // A waiter spinning: a million edges, none of them its processor's.
        counter::add_for_test(1_000_000);
        // The model's charges while waiting are not its processor's either.
        unseen::charge_unseen(Unseen::Mprotect);
        let t1 = vclock::wait_end(None);
        assert_eq!(t1, t0 + NOTICE_NS, "the wait API charges the notice only");
        vclock::wait_begin();
        counter::add_for_test(1_000_000);
        let t2 = vclock::wait_end(Some(t1 + 5_000_000));
        assert_eq!(t2, t1 + 5_000_000 + NOTICE_NS, "resumes at the arrival");
        assert_eq!(vclock::sync(), t2, "nothing of the wait is left over");
    });
}

#[test]
fn work_no_counter_sees_is_charged_by_the_stated_model() {
    on_a_thread(|| {
        let t0 = vclock::sync();
        unseen::charge_unseen(Unseen::PageFault);
        unseen::charge_unseen(Unseen::Mprotect);
        unseen::charge_unseen(Unseen::Copy { bytes: 8192 });
        let t1 = vclock::sync();
        // Virtual ns of the paper's era, not scaled: 6.2 us + 2.7 us +
        // an 8 KiB copy at the paper's twin cost (68 us, to the ps).
        assert_eq!(t1 - t0, 6_200 + 2_700 + 8192 * 8300 / 1000);
        assert_eq!(unseen::PAGE_FAULT_NS, 6_200);
        assert_eq!(unseen::MPROTECT_NS, 2_700);
    });
}

#[test]
fn a_count_that_wraps_is_a_clear_error_not_a_prediction() {
    on_a_thread(|| {
        vclock::sync();
        // The counter is one add per edge and wraps at 2^64.
        counter::add_for_test(u64::MAX);
        vclock::sync();
        counter::add_for_test(2);
        vclock::sync();
    });
    // Near 2^64 edges the count no longer fits in ns at a rate above 1 ns
    // an edge (an overflow); at a rate below, it wraps (goes backwards).
    let f = vclock::work_fault().expect("the wrap is recorded");
    let e = vclock::check().unwrap_err().to_string();
    if mc_driver::vclock::meter::EDGE_PS > 1000 {
        assert_eq!(f, WorkFault::Overflow);
        assert!(e.contains("overflowed"), "{e}");
    } else {
        assert!(matches!(f, WorkFault::Backwards { .. }), "{f:?}");
        assert!(e.contains("went backwards"), "{e}");
    }
    assert!(e.contains("no prediction"), "{e}");
}
