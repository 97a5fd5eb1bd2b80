//! The command line's protocol options: `--variant` parses Cashmere's own
//! [`CsmVariant`] (seed 000 Table I; every row exists but CSM-ADB (1L),
//! docs/cashmere.md, "Variants", which is not offered), and `--detection`
//! Cashmere's [`MessageDetection`] (how a node notices requests).

use cashmere::{CsmVariant, MessageDetection};

/// `--variant`: clap parses a [`CsmVariant`] by its name (`FromStr`), and
/// lists every name, with what it is, in the help and in the error for a
/// name it does not know.
pub fn variant_parser() -> impl clap::builder::TypedValueParser<Value = CsmVariant> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(CsmVariant::ALL.map(|v| PossibleValue::new(v.name()).help(v.about())))
        .try_map(|name| name.parse::<CsmVariant>())
}

/// `--detection`: clap parses a [`MessageDetection`] by its name, and lists
/// both names, with what each is, in the help and in the error for a name
/// it does not know.
pub fn detection_parser() -> impl clap::builder::TypedValueParser<Value = MessageDetection> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        MessageDetection::ALL.map(|d| PossibleValue::new(d.name()).help(d.about())),
    )
    .try_map(|name| name.parse::<MessageDetection>())
}
