//! ACK pages: a store to one asks every adapter for its error status, and
//! the answer lands in the writer's frame once everything before it has
//! (seed 004, Error Management).

use crate::sink::{AckReport, DeliverySink, Event};
use crate::types::{rem_u32, GlobalAddr, Nanos, NodeId};

use super::{Hub, ModelError, TransmitSummary, ACK_WORD_BYTES};

impl Hub {
    pub(super) fn ack<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        writer: NodeId,
        addr: GlobalAddr,
        sink: &mut S,
    ) -> Result<TransmitSummary, ModelError> {
        let page_size = self.config.page_size;
        let page = self.page_of(addr);
        let s = writer.index();
        let offset = rem_u32(addr.0, page_size) & !(ACK_WORD_BYTES - 1);
        let bytes = ACK_WORD_BYTES * u32::from(self.config.nodes);
        if offset + bytes > page_size {
            let err = ModelError::AckSlotOutOfPage {
                offset,
                bytes,
                page_size,
            };
            return Err(self.refuse(writer, err, now, sink));
        }
        self.adapters[s].counters.acks += 1;
        let mut summary = TransmitSummary {
            ack: true,
            done_at: now,
            ..Default::default()
        };
        if !self.adapters[s].status.link_up {
            self.count_drop(s);
            summary.lost = 1;
            return Ok(summary);
        }
        self.seq += 1;
        self.counters.acks += 1;
        // The request crosses the hub in global order, so every earlier packet
        // has been delivered or lost before the statuses are read; the answers
        // then travel back: two one-way latencies.
        let hub_time = self.clock.forward(now, s, u64::from(ACK_WORD_BYTES), true);
        // The answer is due after every earlier packet is due at every
        // receiver (and in the writer's own order of deliveries).
        let answer = self
            .clock
            .arrival(self.clock.arrival(hub_time))
            .max(self.receivers.latest());
        let at = self.receivers.due(s, answer);
        let words = self.adapters.iter().map(|a| a.status.to_word()).collect();
        sink.ack(&AckReport {
            seq: self.seq,
            writer,
            page,
            page_offset: offset,
            words,
            at,
        });
        if self.adapters[s]
            .pct
            .get(page)
            .map(|e| e.interrupt)
            .unwrap_or(false)
        {
            sink.event(&Event::PageWritten {
                node: writer,
                page,
                source: writer,
                at,
            });
        }
        summary.done_at = at;
        Ok(summary)
    }
}
