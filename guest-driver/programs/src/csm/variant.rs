//! Which Cashmere protocol variant a run uses (seed 000 Table I), as
//! `mc-guest csm --variant` names it and records carry it. CSM-DMS, CSM-MS
//! and CSM-MS-Mg exist; CSM-S, CSM-None, CSM-None-Mg and ADB do not yet
//! (docs/cashmere.md, "Variants"), and are not offered.

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
        }
    }

    /// The protocol Cashmere runs for it.
    pub fn protocol(self) -> cashmere::CsmVariant {
        match self {
            ProtocolVariant::Dms => cashmere::CsmVariant::Dms,
            ProtocolVariant::Ms => cashmere::CsmVariant::Ms,
            ProtocolVariant::MsMg => cashmere::CsmVariant::MsMg,
        }
    }
}
