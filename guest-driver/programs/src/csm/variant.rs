//! Which Cashmere protocol variant a run uses (seed 000 Table I), as
//! `mc-guest csm --variant` names it and records carry it. Every row of
//! Table I exists but CSM-ADB (1L) (docs/cashmere.md, "Variants"), which is
//! not offered.

/// A protocol variant of Cashmere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ProtocolVariant {
    /// CSM-DMS: data, metadata and synchronisation by Memory Channel remote
    /// writes, broadcast and total order (seed 000 s.2.3.1.1).
    #[default]
    Dms,
    /// CSM-MS: shared data outside Memory Channel space, diffs as messages
    /// the home applies and acknowledges; metadata and synchronisation by
    /// Memory Channel (seed 000 s.2.3.1.2).
    Ms,
    /// CSM-MS-Mg: CSM-MS with home migration: a node that write-faults on a
    /// page whose home is not writing it becomes its home (seed 000 s.2.3.2).
    MsMg,
    /// CSM-ADB (Table I's 2L row): CSM-MS-Mg, and a home that sees several
    /// consumers of a page broadcasts it through buffers every node
    /// receives (seed 000 s.2.3.3).
    Adb,
    /// CSM-S: data and metadata by explicit messages (directory changes
    /// to the page's home, piggybacked on fetches and diff
    /// acknowledgements; write notices as messages), synchronisation by
    /// Memory Channel (seed 000 s.2.3.1.3).
    S,
    /// CSM-None: CSM-S, and synchronisation by explicit messages too
    /// (queue locks with a manager per lock, barriers and flags by
    /// messages) (seed 000 s.2.3.1.4, seed 002 s.6.1).
    None,
    /// CSM-None-Mg: CSM-None with home migration as CSM-MS-Mg's (seed 000
    /// s.2.3.2).
    NoneMg,
}

impl ProtocolVariant {
    /// Every variant `--variant` offers.
    pub fn all() -> &'static [ProtocolVariant] {
        <ProtocolVariant as clap::ValueEnum>::value_variants()
    }

    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            ProtocolVariant::Dms => "dms",
            ProtocolVariant::Ms => "ms",
            ProtocolVariant::MsMg => "ms-mg",
            ProtocolVariant::Adb => "adb",
            ProtocolVariant::S => "s",
            ProtocolVariant::None => "none",
            ProtocolVariant::NoneMg => "none-mg",
        }
    }

    /// Whether its locks and barriers are explicit messages (Table II's
    /// "MC Messages" column) rather than Memory Channel.
    pub fn sync_by_messages(self) -> bool {
        matches!(self, ProtocolVariant::None | ProtocolVariant::NoneMg)
    }

    /// The protocol Cashmere runs for it.
    pub fn protocol(self) -> cashmere::CsmVariant {
        match self {
            ProtocolVariant::Dms => cashmere::CsmVariant::Dms,
            ProtocolVariant::Ms => cashmere::CsmVariant::Ms,
            ProtocolVariant::MsMg => cashmere::CsmVariant::MsMg,
            ProtocolVariant::Adb => cashmere::CsmVariant::Adb,
            ProtocolVariant::S => cashmere::CsmVariant::S,
            ProtocolVariant::None => cashmere::CsmVariant::None,
            ProtocolVariant::NoneMg => cashmere::CsmVariant::NoneMg,
        }
    }
}

/// How a node notices other nodes' requests (`--detection`; seed 000 s.2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Detection {
    /// Application threads poll at their loops' back edges and while they
    /// wait; the protocol thread answers what nobody polled for.
    #[default]
    Poll,
    /// Only the protocol thread answers, woken by the adapter's event.
    Interrupt,
}

impl Detection {
    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            Detection::Poll => "poll",
            Detection::Interrupt => "interrupt",
        }
    }

    /// What Cashmere does for it.
    pub fn protocol(self) -> cashmere::MessageDetection {
        match self {
            Detection::Poll => cashmere::MessageDetection::Polling,
            Detection::Interrupt => cashmere::MessageDetection::Interrupt,
        }
    }
}
