//! The command line's protocol options: `--variant` parses Cashmere's own
//! [`CsmVariant`] (seed 000 Table I; every row exists but CSM-ADB (1L),
//! docs/cashmere.md, "Variants", which is not offered), and `--detection`
//! how a node notices requests.

use cashmere::CsmVariant;

/// `--variant`: clap parses a [`CsmVariant`] by its name (`FromStr`), and
/// lists every name, with what it is, in the help and in the error for a
/// name it does not know.
pub fn variant_parser() -> impl clap::builder::TypedValueParser<Value = CsmVariant> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(CsmVariant::ALL.map(|v| PossibleValue::new(v.name()).help(v.about())))
        .try_map(|name| name.parse::<CsmVariant>())
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
