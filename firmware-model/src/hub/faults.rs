//! Faults: commands checked and applied now or on schedule, and the
//! membership changes a crash or rejoin announces.

use crate::fault::{FaultCommand, FaultError};
use crate::sink::{DeliverySink, ErrorKind, Event};
use crate::status::AdapterErrorStatus;
use crate::types::Nanos;

use super::{Hub, ModelError, ScheduledFault};

impl Hub {
    pub(super) fn check_fault(&self, command: &FaultCommand) -> Result<(), ModelError> {
        command.check_bounds()?;
        for n in command.nodes() {
            if n.0 >= self.config.nodes {
                return Err(FaultError::NoSuchNode {
                    node: n,
                    nodes: self.config.nodes,
                }
                .into());
            }
        }
        Ok(())
    }

    /// Apply `command` at time `now`, after any scheduled faults due by then.
    pub fn apply_fault<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        command: FaultCommand,
        sink: &mut S,
    ) -> Result<(), ModelError> {
        self.advance(now, sink);
        self.check_fault(&command)?;
        self.apply_now(now, command, sink)
    }

    /// Schedule `command` for model time `at` (a fault plan's timeline). Faults
    /// scheduled for the same time apply in the order they were scheduled.
    pub fn schedule_fault(&mut self, at: Nanos, command: FaultCommand) -> Result<(), ModelError> {
        self.check_fault(&command)?;
        let pos = self.schedule.partition_point(|f| f.at <= at);
        self.schedule.insert(pos, ScheduledFault { at, command });
        Ok(())
    }

    /// Apply every scheduled fault due at or before `now`. A scheduled command
    /// that no longer makes sense (crash of a crashed node) is reported as an
    /// event and skipped.
    pub fn advance<S: DeliverySink + ?Sized>(&mut self, now: Nanos, sink: &mut S) {
        let due = self.schedule.partition_point(|f| f.at <= now);
        if due == 0 {
            // The common case, on every store: nothing to collect.
            return;
        }
        let ready: Vec<ScheduledFault> = self.schedule.drain(..due).collect();
        for f in ready {
            // Skipping is the only sensible outcome for a stale plan entry; the
            // FaultApplied event is only sent for commands that took effect.
            let _ = self.apply_now(f.at, f.command, sink);
        }
    }

    pub(super) fn apply_now<S: DeliverySink + ?Sized>(
        &mut self,
        now: Nanos,
        command: FaultCommand,
        sink: &mut S,
    ) -> Result<(), ModelError> {
        match command {
            FaultCommand::Packets { fault, scope, rate } => self.faults.add(fault, scope, rate),
            FaultCommand::ClearPackets => self.faults.clear(),
            FaultCommand::LinkDown(n) => {
                let a = &mut self.adapters[n.index()];
                if a.status.link_up {
                    a.status.link_up = false;
                    self.count_error(n.index());
                    sink.event(&Event::LinkState {
                        node: n,
                        up: false,
                        at: now,
                    });
                    sink.event(&Event::Error {
                        node: n,
                        kind: ErrorKind::LinkDown,
                        at: now,
                    });
                }
            }
            FaultCommand::LinkUp(n) => {
                let a = &mut self.adapters[n.index()];
                if !a.status.link_up {
                    a.status.link_up = true;
                    sink.event(&Event::LinkState {
                        node: n,
                        up: true,
                        at: now,
                    });
                }
            }
            FaultCommand::Crash(n) => {
                let a = &mut self.adapters[n.index()];
                if !a.status.online {
                    return Err(FaultError::AlreadyCrashed(n).into());
                }
                a.status.online = false;
                a.pct.clear();
                self.epoch += 1;
                self.announce_membership(now, sink);
            }
            FaultCommand::Rejoin(n) => {
                let a = &mut self.adapters[n.index()];
                if a.status.online {
                    return Err(FaultError::NotCrashed(n).into());
                }
                // A fresh adapter: clean status, empty PCT, link up.
                a.status = AdapterErrorStatus {
                    online: true,
                    link_up: true,
                    ..Default::default()
                };
                a.pct.clear();
                self.epoch += 1;
                self.announce_membership(now, sink);
            }
            FaultCommand::StallHub { duration } => self.clock.stall(now.saturating_add(duration)),
        }
        sink.event(&Event::FaultApplied { command, at: now });
        Ok(())
    }

    pub(super) fn announce_membership<S: DeliverySink + ?Sized>(&self, now: Nanos, sink: &mut S) {
        let m = self.membership();
        for node in m.members.iter() {
            sink.event(&Event::MembershipChanged {
                node,
                epoch: m.epoch,
                members: m.members,
                at: now,
            });
        }
    }
}
