//! The clock's configuration, read once from the environment `mc-host`
//! gives a guest (the value and its variables are
//! `firmware_model::abi::clock`'s, shared with the host).

use firmware_model::abi::clock::{ClockConfig, ClockEnvError};

/// The configuration the environment asks for: `None` for wall-clock runs.
pub fn config_from_env() -> Result<Option<ClockConfig>, ClockEnvError> {
    ClockConfig::from_lookup(|name| std::env::var(name).ok())
}
