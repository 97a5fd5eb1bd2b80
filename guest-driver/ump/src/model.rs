//! The reference model of a channel direction and the property test that
//! holds the ring protocol to it: whatever the ring and fragment sizes,
//! the message sizes and the interleaving of the writer's and reader's
//! steps, the reader gets exactly the messages written, in order, each
//! whole, and neither side ever waits for something the other cannot
//! give (a schedule always finishes). Over both kinds of link: shared
//! memory (the producer index with every message) and one like Memory
//! Channel's (a short message one store, its slot polled).

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;

    use proptest::prelude::*;

    use crate::link::{Link, ShmLink, ShmPair, ShmRing};
    use crate::stream::tests::Polled;
    use crate::stream::{Reader, Step, Writer};

    /// The model: a channel direction is a FIFO queue of messages.
    #[derive(Default)]
    struct Model {
        queue: VecDeque<Vec<u8>>,
    }

    fn message(i: usize, len: usize) -> Vec<u8> {
        (0..len)
            .map(|k| (i * 131 + k * 7 + (k >> 9)).to_le_bytes()[0])
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn the_rings_deliver_exactly_the_model_queue(
            ring_units in 1usize..64,
            fragment in 8usize..3000,
            sizes in proptest::collection::vec(prop_oneof![0usize..470, 0usize..9000], 1..24),
            schedule in proptest::collection::vec((any::<bool>(), 1usize..5000), 1..400),
            checksum in any::<bool>(),
            polled in any::<bool>(),
        ) {
            let ring = ring_units * 64;
            let pair = Arc::new(ShmPair { a_to_b: ShmRing::new(ring), b_to_a: ShmRing::new(64) });
            let shm_a = ShmLink::new(pair.clone(), true);
            let shm_b = ShmLink::new(pair, false);
            let mc = Polled::new(ring, 11);
            let (a, b): (&dyn Link, &dyn Link) = if polled { (&mc, &mc) } else { (&shm_a, &shm_b) };
            let mut model = Model::default();
            let mut w = Writer::new(fragment, checksum, false);
            let mut r = Reader::new(checksum, true);
            let msgs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| message(i, n)).collect();
            let mut next = 0;
            let mut cur = None;
            let mut got: Vec<Vec<u8>> = Vec::new();
            let mut partial: Option<Vec<u8>> = None;
            // The schedule, then as many rounds as it takes to drain.
            let tail = std::iter::repeat_n((true, 4096), 100_000).flat_map(|s| [s, (false, s.1)]);
            for (writer_turn, chunk) in schedule.into_iter().chain(tail) {
                if got.len() == msgs.len() {
                    break;
                }
                if writer_turn {
                    if cur.is_none() && next < msgs.len() {
                        cur = Some((next, w.start(msgs[next].len() as u64)));
                        model.queue.push_back(msgs[next].clone());
                        next += 1;
                    }
                    if let Some((i, m)) = &mut cur {
                        if w.step(a, m, &msgs[*i]).unwrap() == Step::Done {
                            cur = None;
                        }
                    }
                } else {
                    let Some(p) = r.peek(b).unwrap() else { continue };
                    let buf = partial.get_or_insert_with(Vec::new);
                    let want = usize::try_from(p.len - p.got).expect("a test message fits usize").min(chunk);
                    let mut tmp = vec![0u8; want];
                    let n = r.read_some(b, &mut tmp);
                    buf.extend_from_slice(&tmp[..n]);
                    r.release(b, false).unwrap();
                    if r.finish(b).unwrap() {
                        r.release(b, false).unwrap();
                        let m = partial.take().unwrap();
                        prop_assert_eq!(Some(&m), model.queue.front());
                        model.queue.pop_front();
                        got.push(m);
                    }
                }
            }
            prop_assert_eq!(got, msgs);
            prop_assert!(model.queue.is_empty());
        }
    }
}
