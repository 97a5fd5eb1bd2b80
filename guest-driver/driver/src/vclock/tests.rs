use super::*;
use std::time::{Duration, Instant};

fn on() {
    test_on();
}

fn burn(d: Duration) {
    let start = thread_cpu_ns();
    let mut x = 0u64;
    let d = u64::try_from(d.as_nanos()).unwrap();
    while thread_cpu_ns() - start < d {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
    }
}

#[test]
fn computing_advances_the_clock_by_cpu_time() {
    on();
    std::thread::spawn(|| {
        let _p = join(0).unwrap();
        let before = sync();
        burn(Duration::from_millis(30));
        let after = sync();
        let d = after - before;
        assert!(
            (29_000_000..200_000_000).contains(&d),
            "30 ms of CPU advanced the clock by {d} ns"
        );
    })
    .join()
    .unwrap();
}

#[test]
fn waiting_does_not_advance_the_clock_and_the_arrival_does() {
    on();
    std::thread::spawn(|| {
        let _p = join(1_000).unwrap();
        let t0 = sync();
        wait_begin();
        burn(Duration::from_millis(20)); // spinning while waiting
        std::thread::sleep(Duration::from_millis(10));
        let t1 = wait_end(None);
        assert!(
            t1 - t0 < 1_000_000,
            "a wait advanced the clock by {}",
            t1 - t0
        );
        let t2 = wait_end_with(t1 + 5_000_000);
        assert_eq!(t2, t1 + 5_000_000 + NOTICE_NS, "resumes at the arrival");
        // An arrival in the past costs only the notice.
        let t3 = wait_end_with(10);
        assert!(t3 >= t2 + NOTICE_NS && t3 < t2 + 1_000_000);
    })
    .join()
    .unwrap();
}

fn wait_end_with(arrival: u64) -> u64 {
    wait_begin();
    wait_end(Some(arrival))
}

#[test]
fn a_spawned_thread_starts_at_its_parents_time_and_debt_is_charged() {
    on();
    std::thread::spawn(|| {
        let _p = join(7_000_000).unwrap();
        let slot = my_slot().expect("joined");
        let t = std::thread::spawn(move || {
            let _q = join(7_000_000).unwrap();
            charge(slot, 3_000_000);
        });
        t.join().unwrap();
        let now = sync();
        assert!(now >= 10_000_000, "{now}");
    })
    .join()
    .unwrap();
}

#[test]
fn a_thread_far_ahead_waits_for_a_slow_one() {
    // A board of its own, a 1 ms quantum: a thread 50 ms ahead of a running
    // one is held until that one catches up.
    let b = std::sync::Arc::new(ClockBoard::private(1_000_000, 8).unwrap());
    let slow = b.claim(0).unwrap();
    let fast = b.claim(50_000_000).unwrap();
    let b2 = b.clone();
    let start = Instant::now();
    let t = std::thread::spawn(move || b2.gate(fast, 50_000_000, &mut None));
    for vt in (0..=49_000_000).step_by(1_000_000) {
        b.publish(slow, vt, vt.saturating_sub(1_000_000));
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(!t.join().unwrap(), "went on because the slow one caught up");
    assert!(start.elapsed() >= Duration::from_millis(5));
}

#[test]
fn off_costs_nothing_and_returns_zero_outside_a_run() {
    // In this binary the clock is on once `on()` ran; a fresh thread that
    // never joined still keeps a clock but holds nobody back.
    on();
    std::thread::spawn(|| {
        assert_eq!(my_slot(), None);
        let a = sync();
        burn(Duration::from_millis(5));
        assert!(sync() > a);
    })
    .join()
    .unwrap();
}

#[test]
fn a_waiter_serves_at_the_arrival_without_moving_its_own_clock() {
    on();
    std::thread::spawn(|| {
        let _p = join(1_000_000).unwrap();
        wait_begin();
        let before = stamp();
        {
            let _s = serve(Some(before + 50_000_000));
            burn(Duration::from_millis(2));
            // What it sends while serving carries the service's time.
            let during = tick();
            assert!(during >= before + 50_000_000 + 1_000_000, "{during}");
            assert_eq!(stamp(), during);
        }
        assert!(waiting());
        assert_eq!(stamp(), before, "the waiter's clock is put back");
        wait_end(None);
        // A computing thread serving a request from its virtual future
        // moves up to it.
        let t = sync();
        {
            let _s = serve(Some(t + 7_000));
        }
        assert!(stamp() >= t + 7_000);
    })
    .join()
    .unwrap();
}

#[test]
fn a_computing_poller_serves_a_past_request_at_its_arrival_and_pays_for_it() {
    on();
    std::thread::spawn(|| {
        let _p = join(10_000_000).unwrap();
        // The poller's clock ran 9 ms past the request's arrival before it
        // noticed the request.
        let arrival = 1_000_000;
        let before = sync();
        assert!(before >= 10_000_000);
        {
            let _s = serve(Some(arrival));
            burn(Duration::from_millis(2));
            // The reply goes out as if served when the request arrived.
            let during = tick();
            assert!(
                (arrival + 2_000_000..arrival + 6_000_000).contains(&during),
                "{during}"
            );
            assert_eq!(stamp(), during);
        }
        // Its own clock gets the service's time on top of where it was.
        let after = stamp();
        assert!(
            (before + 2_000_000..before + 6_000_000).contains(&after),
            "{before} -> {after}"
        );
    })
    .join()
    .unwrap();
}

#[test]
fn a_tight_poller_syncs_once_its_gap_has_passed() {
    on();
    std::thread::spawn(|| {
        let before = sync();
        // CPU time never runs ahead of the host's clock: after this much
        // computing, the gap has passed and the poller's sync counts it.
        burn(SYNC_GAP * 20);
        let after = sync_when_due();
        assert!(
            after >= before + u64::try_from((SYNC_GAP * 20).as_nanos()).unwrap(),
            "{before} -> {after}"
        );
        // What it returns is never behind the thread's own time.
        assert!(sync_when_due() >= after);
    })
    .join()
    .unwrap();
}
