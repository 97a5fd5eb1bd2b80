//! Cluster options shared by every command that starts a cluster.

use clap::Args;
use clap::ValueEnum;
use firmware_model::{
    ClusterConfig, ConfigError, DeliveryMode, FaultCommand, LinkTiming, ModelError,
};
use mc_device::Cluster;

use crate::fault_plan::{FaultPlan, FaultPlanError};

/// Cluster options that do not make a cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterArgsError {
    #[error(transparent)]
    FaultPlan(#[from] FaultPlanError),
    #[error("--seed {given} contradicts the fault plan's seed {plan}")]
    SeedContradictsPlan { given: u64, plan: u64 },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("fault plan: {command}")]
    Schedule {
        command: FaultCommand,
        #[source]
        source: ModelError,
    },
}

/// A `--page-size` that is neither 4096 nor 8192.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: page size must be 4096 or 8192")]
pub struct PageSizeError(pub String);

/// A size argument that is not a byte count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a size (examples: 512M, 128M, 1G)")]
pub struct SizeError(pub String);

/// `--delivery`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryChoice {
    /// Every receiver at once (the default).
    Eager,
    /// Each receiver independently late, seeded by `--seed`.
    Skewed,
}

/// Shape of the emulated cluster.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Adapters (nodes) in the cluster.
    #[arg(long, short = 'n', default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub nodes: u8,
    /// Link timing: `unthrottled` (as fast as this host can go), or `mc1` / `mc2`
    /// / `clan` to hold each delivery until the real hardware would have made
    /// it; `clan` (seed 001's cLAN VIA) also sets the network that virtual
    /// time follows (docs/virtual-time.md s.3a).
    #[arg(long, default_value = "unthrottled")]
    pub link: LinkTiming,
    /// Page size in bytes: 8192 (Alpha, default) or 4096.
    #[arg(long, default_value_t = 8192, value_parser = parse_page_size)]
    pub page_size: u32,
    /// Global address space, e.g. 512M (Memory Channel 2) or 128M (Memory Channel 1).
    #[arg(long, default_value = "512M", value_parser = parse_size)]
    pub address_space: u64,
    /// Largest packet payload in bytes (8..=256, a power of two).
    #[arg(long, default_value_t = 32)]
    pub max_payload: u32,
    /// Hub ports; defaults to 8, or the node count if larger (at most 64).
    #[arg(long)]
    pub hub_ports: Option<u8>,
    /// When receivers see a store: `eager` (every receiver as soon as the
    /// link timing allows) or `skewed` (each receiver independently late,
    /// within the network's ordering promises: docs/device.md section 19).
    #[arg(long, value_enum, default_value_t = DeliveryChoice::Eager)]
    pub delivery: DeliveryChoice,
    /// Seed of the fault injector and of skewed delivery: the same seed
    /// replays the same faults and the same delivery schedule (default: the
    /// fault plan's, else 0).
    #[arg(long)]
    pub seed: Option<u64>,
    /// A fault plan (TOML: a seed and a timeline of faults) to replay.
    #[arg(long, value_name = "FILE")]
    pub fault_plan: Option<std::path::PathBuf>,
}

impl ClusterArgs {
    /// The fault plan, if one was given.
    pub fn plan(&self) -> Result<Option<FaultPlan>, ClusterArgsError> {
        Ok(self
            .fault_plan
            .as_deref()
            .map(FaultPlan::load)
            .transpose()?)
    }

    /// The model configuration, or what is wrong with the options.
    pub fn config(&self, plan: Option<&FaultPlan>) -> Result<ClusterConfig, ClusterArgsError> {
        let seed = match (self.seed, plan.and_then(|p| p.seed)) {
            (Some(given), Some(plan)) if given != plan => {
                return Err(ClusterArgsError::SeedContradictsPlan { given, plan });
            }
            (Some(s), _) => s,
            (None, p) => p.unwrap_or(0),
        };
        let c = ClusterConfig {
            nodes: self.nodes,
            hub_ports: self.hub_ports.unwrap_or(self.nodes.max(8)),
            address_space: self.address_space,
            page_size: self.page_size,
            max_payload: self.max_payload,
            link: self.link,
            fault_seed: seed,
            delivery: match self.delivery {
                DeliveryChoice::Eager => DeliveryMode::Eager,
                DeliveryChoice::Skewed => DeliveryMode::skewed(seed),
            },
        };
        c.validate()?;
        Ok(c)
    }

    /// The same options as command-line arguments (for `mc-host serve`
    /// started by `mc-host cluster up`).
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![
            "--nodes".to_string(),
            self.nodes.to_string(),
            "--link".into(),
            self.link.to_string(),
            "--page-size".into(),
            self.page_size.to_string(),
            "--address-space".into(),
            self.address_space.to_string(),
            "--max-payload".into(),
            self.max_payload.to_string(),
        ];
        if let Some(p) = self.hub_ports {
            a.extend(["--hub-ports".into(), p.to_string()]);
        }
        if self.delivery == DeliveryChoice::Skewed {
            a.extend(["--delivery".into(), "skewed".into()]);
        }
        if let Some(s) = self.seed {
            a.extend(["--seed".into(), s.to_string()]);
        }
        if let Some(f) = &self.fault_plan {
            a.extend(["--fault-plan".into(), f.display().to_string()]);
        }
        a
    }
}

/// Schedule every fault of `plan` on the running cluster.
pub fn schedule_plan(cluster: &Cluster, plan: &FaultPlan) -> Result<(), ClusterArgsError> {
    for (at, cmd) in &plan.timeline {
        cluster
            .schedule_fault(*at, *cmd)
            .map_err(|source| ClusterArgsError::Schedule {
                command: *cmd,
                source,
            })?;
    }
    Ok(())
}

fn parse_page_size(s: &str) -> Result<u32, PageSizeError> {
    match s {
        "4096" | "4K" | "4k" => Ok(4096),
        "8192" | "8K" | "8k" => Ok(8192),
        _ => Err(PageSizeError(s.to_string())),
    }
}

/// "512M", "128m", "1G", "65536": a byte count.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| SizeError(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("lots"), Err(SizeError("lots".into())));
        assert_eq!(
            SizeError("lots".into()).to_string(),
            "\"lots\" is not a size (examples: 512M, 128M, 1G)"
        );
        assert!(parse_size("99999999999999G").is_err());
    }
}
