//! Counted work in a build without counters (issue 39): refused at start;
//! and a thread on the clock that never counts makes a clear error when it
//! leaves, not a prediction. One test: it needs this process's clock off
//! at first (a process has one clock).

use mc_driver::vclock::{self, counter, ClockConfig, VclockError, WorkFault, WorkMeasure};

fn counted() -> ClockConfig {
    ClockConfig {
        work: WorkMeasure::Counted,
        ..ClockConfig::new(1.0)
    }
}

#[test]
fn counted_work_without_counters_is_refused_and_a_silent_thread_is_an_error() {
    // Nothing in this (plain) test binary called a counter's callback.
    let e = vclock::init(counted()).unwrap_err();
    assert!(matches!(e, VclockError::NotInstrumented), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("scripts/build-counted.sh") && msg.contains("--work cpu-time"),
        "{msg}"
    );
    assert!(!vclock::enabled());

    // Once this thread counts, the clock starts; a thread that then joins
    // the clock and never counts (code without counters) is the run's
    // fault when it leaves.
    counter::__sanitizer_cov_trace_pc();
    vclock::init(counted()).unwrap();
    std::thread::spawn(|| {
        let p = vclock::join(0).unwrap();
        vclock::sync();
        vclock::wait_begin();
        vclock::wait_end(Some(10_000));
        drop(p);
    })
    .join()
    .unwrap();
    let f = vclock::work_fault().expect("the silent thread is recorded");
    assert!(matches!(f, WorkFault::NeverCounted { .. }), "{f:?}");
    let e = vclock::check().unwrap_err().to_string();
    assert!(
        e.contains("counted no work") && e.contains("not instrumented"),
        "{e}"
    );

    // A thread that counts leaves without a complaint (the first fault
    // stays the run's).
    std::thread::spawn(|| {
        let _p = vclock::join(0).unwrap();
        counter::__sanitizer_cov_trace_pc();
    })
    .join()
    .unwrap();
    assert!(matches!(
        vclock::work_fault(),
        Some(WorkFault::NeverCounted { .. })
    ));
}
