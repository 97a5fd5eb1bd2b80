//! The driver against the device side of rust-vmm's virtio-queue
//! ([`crate::test_device`]), over the same guest memory.

use super::*;
use crate::test_device::{allocator, DeviceQueue};
use std::collections::VecDeque;
use std::sync::Arc;
use vm_memory::{Bytes, GuestAddress};

fn queue(size: u16, event_idx: bool) -> (DmaAllocator, Virtqueue, DeviceQueue) {
    let (mut a, mem) = allocator(4 << 20);
    let rings = RingLayout::allocate(&mut a, size).unwrap();
    let q = Virtqueue::new(rings.clone(), size, event_idx).unwrap();
    let dev = DeviceQueue::new(&mem, &rings, size, event_idx);
    (a, q, dev)
}

#[test]
fn sizes_are_checked() {
    let (mut a, _) = allocator(1 << 20);
    for bad in [0u16, 3, 100, 2048] {
        assert!(matches!(
            RingLayout::allocate(&mut a, bad),
            Err(QueueError::BadSize(_))
        ));
    }
    let rings = RingLayout::allocate(&mut a, 8).unwrap();
    assert!(matches!(
        Virtqueue::new(rings.clone(), 16, true),
        Err(QueueError::RingTooSmall { .. })
    ));
    assert!(Virtqueue::new(rings, 8, true).is_ok());
    let big = RingLayout::allocate(&mut a, MAX_QUEUE_SIZE).unwrap();
    assert!(Virtqueue::new(big, MAX_QUEUE_SIZE, true).is_ok());
}

#[test]
fn one_request_round_trip() {
    let (mut a, mut q, mut dev) = queue(8, true);
    let req = a.alloc(64, 8).unwrap();
    let resp = a.alloc(16, 8).unwrap();
    req.write(0, b"hello device").unwrap();
    let t = q
        .add(
            &[Buffer::prefix(&req, 12).unwrap()],
            &[Buffer::of(&resp).unwrap()],
        )
        .unwrap();
    assert_eq!(q.num_free(), 6);
    assert_eq!(q.in_flight(), 1);
    assert!(q.poll_used().unwrap().is_none());
    let (head, descs) = dev.pop().unwrap();
    assert_eq!(head, t.index());
    assert_eq!(descs, vec![(req.gpa(), 12, false), (resp.gpa(), 16, true)]);
    assert!(dev.pop().is_none());
    // The device reads the request and writes the response, through its
    // own map of guest memory.
    let mut got = [0u8; 12];
    dev.memory()
        .read_slice(&mut got, GuestAddress(descs[0].0))
        .unwrap();
    assert_eq!(&got, b"hello device");
    dev.memory()
        .write_slice(b"ok", GuestAddress(descs[1].0))
        .unwrap();
    dev.add_used(head, 2);
    assert!(q.has_used().unwrap());
    let u = q.poll_used().unwrap().unwrap();
    assert_eq!(u, Used { token: t, len: 2 });
    assert_eq!(resp.read_vec(0, 2).unwrap(), b"ok");
    assert_eq!(q.num_free(), 8);
    assert_eq!(q.in_flight(), 0);
    assert!(q.poll_used().unwrap().is_none());
}

#[test]
fn long_chains_keep_order_and_flags() {
    let (mut a, mut q, mut dev) = queue(16, true);
    let bufs: Vec<_> = (0..8).map(|i| a.alloc(32 + i, 8).unwrap()).collect();
    let r: Vec<_> = bufs[..5].iter().map(|b| Buffer::of(b).unwrap()).collect();
    let w: Vec<_> = bufs[5..].iter().map(|b| Buffer::of(b).unwrap()).collect();
    let t = q.add(&r, &w).unwrap();
    let (head, descs) = dev.pop().unwrap();
    assert_eq!(head, t.index());
    let want: Vec<_> = bufs
        .iter()
        .enumerate()
        .map(|(i, b)| (b.gpa(), u32::try_from(b.len()).unwrap(), i >= 5))
        .collect();
    assert_eq!(descs, want);
    // A chain that uses every descriptor.
    let t2 = q.add(&[r[0]; 8], &[]).unwrap();
    assert_eq!(q.num_free(), 0);
    let (_, d2) = dev.pop().unwrap();
    assert_eq!(d2.len(), 8);
    dev.add_used(t2.index(), 0);
    dev.add_used(head, 99);
    assert_eq!(q.poll_used().unwrap().unwrap().token, t2);
    assert_eq!(q.poll_used().unwrap().unwrap(), Used { token: t, len: 99 });
    assert_eq!(q.num_free(), 16);
}

#[test]
fn running_out_of_descriptors_is_an_error() {
    let (mut a, mut q, mut dev) = queue(8, true);
    let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
    assert!(matches!(q.add(&[], &[]), Err(QueueError::EmptyChain)));
    assert!(matches!(
        q.add(&[b; 5], &[b; 4]),
        Err(QueueError::ChainTooLong { len: 9, size: 8 })
    ));
    let t1 = q.add(&[b, b], &[b]).unwrap();
    let t2 = q.add(&[b, b], &[b]).unwrap();
    match q.add(&[b, b], &[b]) {
        Err(QueueError::Full { needed: 3, free: 2 }) => {}
        other => panic!("expected Full, got {other:?}"),
    }
    // Nothing was published by the failed add.
    assert!(dev.pop().is_some() && dev.pop().is_some() && dev.pop().is_none());
    let t3 = q.add(&[b], &[b]).unwrap();
    assert!(matches!(q.add(&[b], &[]), Err(QueueError::Full { .. })));
    assert_eq!(dev.pop().unwrap().0, t3.index());
    dev.add_used(t2.index(), 0);
    assert_eq!(q.poll_used().unwrap().unwrap().token, t2);
    let t4 = q.add(&[b, b, b], &[]).unwrap();
    dev.add_used(t1.index(), 0);
    dev.add_used(t3.index(), 0);
    assert_eq!(dev.pop().unwrap().0, t4.index());
    dev.add_used(t4.index(), 0);
    let mut got: Vec<_> = std::iter::from_fn(|| q.poll_used().unwrap())
        .map(|u| u.token)
        .collect();
    got.sort();
    let mut want = vec![t1, t3, t4];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(q.num_free(), 8);
}

/// Many iterations: the 16-bit avail and used indices wrap several times,
/// with several chains outstanding and completed out of order.
#[test]
fn indices_wrap_around() {
    let (mut a, mut q, mut dev) = queue(8, true);
    let bufs: Vec<_> = (0..4).map(|_| a.alloc(64, 8).unwrap()).collect();
    let mut outstanding: VecDeque<(Token, u64)> = VecDeque::new();
    let mut device_queue: Vec<(u16, u64)> = Vec::new();
    let mut posted = 0u64;
    let mut completed = 0u64;
    let mut rng = 0x1234_5678_u64;
    let mut rand = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while completed < 200_000 {
        // Post chains of 1-3 descriptors while they fit.
        loop {
            let n = usize::try_from(rand() % 3 + 1).unwrap();
            if n > usize::from(q.num_free()) {
                break;
            }
            let b = Buffer::of(&bufs[(posted % 4) as usize]).unwrap();
            let r = vec![b; n - 1];
            let t = q.add(&r, &[b]).unwrap();
            outstanding.push_back((t, posted));
            posted += 1;
        }
        while let Some((head, descs)) = dev.pop() {
            assert!(descs.last().unwrap().2, "last descriptor is writable");
            assert!(descs[..descs.len() - 1].iter().all(|d| !d.2));
            let seq = outstanding
                .iter()
                .find(|(t, _)| t.index() == head)
                .map(|x| x.1)
                .expect("device saw a chain the driver did not post");
            device_queue.push((head, seq));
        }
        // Complete a random subset, in a random order.
        let k = usize::try_from(rand()).unwrap() % device_queue.len() + 1;
        for _ in 0..k {
            let i = usize::try_from(rand()).unwrap() % device_queue.len();
            let (head, seq) = device_queue.swap_remove(i);
            dev.add_used(head, (seq & 0xffff) as u32);
        }
        while let Some(u) = q.poll_used().unwrap() {
            let pos = outstanding
                .iter()
                .position(|(t, _)| *t == u.token)
                .expect("completion for a chain not outstanding");
            let (_, seq) = outstanding.remove(pos).unwrap();
            assert_eq!(u.len, (seq & 0xffff) as u32);
            completed += 1;
        }
    }
    assert!(posted > 3 * 65536, "indices wrapped: {posted} posts");
    assert_eq!(q.in_flight(), outstanding.len());
}

#[test]
fn event_idx_kicks_only_when_asked() {
    let (mut a, mut q, mut dev) = queue(8, true);
    let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
    // avail_event starts at 0: the first post (0 -> 1) crosses it.
    q.add(&[b], &[]).unwrap();
    assert!(q.kick_prepare().unwrap());
    assert!(!q.kick_prepare().unwrap(), "nothing new posted");
    // The device is polling (it does not move avail_event): no kicks.
    for _ in 0..3 {
        q.add(&[b], &[]).unwrap();
        assert!(!q.kick_prepare().unwrap());
    }
    for _ in 0..4 {
        let (h, _) = dev.pop().unwrap();
        dev.add_used(h, 0);
        q.poll_used().unwrap().unwrap();
    }
    // The device goes to sleep and arms (avail_event = 4): the next post
    // must kick.
    assert!(!dev.enable_notification(), "nothing was pending");
    q.add(&[b], &[]).unwrap(); // 4 -> 5
    assert!(q.kick_prepare().unwrap());
    // The device has not re-armed since: no kick.
    q.add(&[b], &[]).unwrap(); // 5 -> 6
    assert!(!q.kick_prepare().unwrap());
    // It serves both and arms again at 6: a batch that crosses it kicks once.
    for _ in 0..2 {
        let (h, _) = dev.pop().unwrap();
        dev.add_used(h, 0);
    }
    assert!(!dev.enable_notification());
    q.add(&[b], &[]).unwrap(); // 6 -> 7
    q.add(&[b], &[]).unwrap(); // 7 -> 8
    assert!(q.kick_prepare().unwrap());
    assert!(!q.kick_prepare().unwrap());
    // Arming while chains wait: the device is told to look again.
    assert!(dev.enable_notification());
    // Across the 16-bit wrap.
    assert!(vring_need_event(0xffff, 0x0001, 0xfffe));
    assert!(vring_need_event(0xffff, 0x0000, 0xffff));
    assert!(!vring_need_event(0x0001, 0x0001, 0xffff));
    assert!(!vring_need_event(5, 5, 5));
}

#[test]
fn without_event_idx_the_no_notify_flag_decides() {
    let (mut a, mut q, mut dev) = queue(4, false);
    let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
    q.add(&[b], &[]).unwrap();
    assert!(q.kick_prepare().unwrap());
    dev.disable_notification();
    q.add(&[b], &[]).unwrap();
    assert!(!q.kick_prepare().unwrap());
    dev.enable_notification();
    q.add(&[b], &[]).unwrap();
    assert!(q.kick_prepare().unwrap());
    // Calls off by default: NO_INTERRUPT set; on clears it.
    assert_eq!(q.rings().avail.read_u16(0).unwrap(), AVAIL_F_NO_INTERRUPT);
    q.set_calls(true).unwrap();
    assert_eq!(q.rings().avail.read_u16(0).unwrap(), 0);
}

#[test]
fn used_event_follows_the_consumer() {
    let (mut a, mut q, mut dev) = queue(4, true);
    let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
    assert_eq!(dev.used_event(), 0xffff, "calls off: behind last_used");
    q.set_calls(true).unwrap();
    assert_eq!(dev.used_event(), 0);
    for i in 1..=70_000u32 {
        q.add(&[b], &[]).unwrap();
        let (h, _) = dev.pop().unwrap();
        dev.add_used(h, 0);
        assert!(
            dev.needs_notification(),
            "calls on: completion {i} is signalled"
        );
        q.poll_used().unwrap().unwrap();
        assert_eq!(u32::from(dev.used_event()), i % 65536);
    }
    q.set_calls(false).unwrap();
    assert_eq!(u32::from(dev.used_event()), 70_000u32 % 65536 - 1);
    // Calls off: the device never needs to signal a completion.
    for _ in 0..3 {
        q.add(&[b], &[]).unwrap();
        let (h, _) = dev.pop().unwrap();
        dev.add_used(h, 0);
        assert!(!dev.needs_notification());
        q.poll_used().unwrap().unwrap();
    }
}

#[test]
fn a_misbehaving_device_gets_an_error_not_a_panic() {
    let (mut a, mut q, mut dev) = queue(4, true);
    let b = Buffer::of(&a.alloc(8, 8).unwrap()).unwrap();
    let t = q.add(&[b], &[]).unwrap();
    dev.pop().unwrap();
    // A used element for a descriptor that heads no chain.
    dev.add_used(3, 0);
    assert!(matches!(
        q.poll_used(),
        Err(QueueError::NotAPostedChain { id: 3 })
    ));
    // An id out of range (virtio-queue refuses to write one: a broken
    // device writes it by hand).
    dev.add_used_unchecked(999, 0);
    assert!(matches!(
        q.poll_used(),
        Err(QueueError::NotAPostedChain { id: 999 })
    ));
    // The real completion still comes through.
    dev.add_used(t.index(), 4);
    assert_eq!(q.poll_used().unwrap().unwrap(), Used { token: t, len: 4 });
    // used.idx far ahead of what is in flight.
    q.rings()
        .used
        .atomic_u16(2)
        .unwrap()
        .store(200u16.to_le(), Ordering::Release);
    assert!(matches!(
        q.poll_used(),
        Err(QueueError::UsedIndexAhead {
            used_idx: 200,
            in_flight: 0,
            ..
        })
    ));
}

/// The device as a real concurrent thread, echoing each request into its
/// response buffer; the driver keeps the ring full and checks every answer.
#[test]
fn concurrent_device_thread() {
    const N: u64 = 100_000;
    const SIZE: u16 = 16;
    let (mut a, mut q, mut dev) = queue(SIZE, true);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let device = std::thread::spawn(move || {
        let mut served = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            match dev.pop() {
                Some((head, descs)) => {
                    let (rg, rl, _) = descs[0];
                    let (wg, _, _) = descs[1];
                    assert_eq!(rl, 8);
                    let v: u64 = dev.memory().read_obj(GuestAddress(rg)).unwrap();
                    dev.memory()
                        .write_obj(u64::from_le(v).wrapping_mul(3).to_le(), GuestAddress(wg))
                        .unwrap();
                    dev.add_used(head, 8);
                    served += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        served
    });
    let slots: Vec<_> = (0..SIZE / 2)
        .map(|_| (a.alloc(8, 8).unwrap(), a.alloc(8, 8).unwrap()))
        .collect();
    let mut free: Vec<usize> = (0..slots.len()).collect();
    let mut by_token = std::collections::HashMap::new();
    let (mut sent, mut done) = (0u64, 0u64);
    while done < N {
        while sent < N {
            let Some(s) = free.pop() else { break };
            slots[s].0.write_u64(0, sent).unwrap();
            slots[s].1.write_u64(0, 0).unwrap();
            let t = q
                .add(
                    &[Buffer::of(&slots[s].0).unwrap()],
                    &[Buffer::of(&slots[s].1).unwrap()],
                )
                .unwrap();
            by_token.insert(t, (s, sent));
            sent += 1;
        }
        match q.poll_used().unwrap() {
            Some(u) => {
                let (s, v) = by_token.remove(&u.token).unwrap();
                assert_eq!(u.len, 8);
                assert_eq!(slots[s].1.read_u64(0).unwrap(), v.wrapping_mul(3));
                free.push(s);
                done += 1;
            }
            None => std::hint::spin_loop(),
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert_eq!(device.join().unwrap(), N);
}
