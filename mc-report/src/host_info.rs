//! This machine as reports show it: cores and load average, sampled around
//! each run, so every table and chart can say what the times were measured
//! on (the virtual nodes, the hub and the protocol threads share the cores).

use serde_json::{json, Value};

/// Cores and load.
#[derive(Clone, Debug, PartialEq)]
pub struct HostInfo {
    pub cores: usize,
    /// 1, 5 and 15 minute load averages (None where /proc/loadavg is not).
    pub load: Option<[f64; 3]>,
}

impl HostInfo {
    pub fn now() -> HostInfo {
        HostInfo {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load: load_average(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({ "cores": self.cores, "load": self.load })
    }
}

/// Parse /proc/loadavg's first three fields.
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn load_average() -> Option<[f64; 3]> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| parse_loadavg(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loadavg_parses() {
        assert_eq!(
            parse_loadavg("5.37 6.24 7.32 3/612 12345\n"),
            Some([5.37, 6.24, 7.32])
        );
        assert_eq!(parse_loadavg("x"), None);
        assert!(HostInfo::now().cores >= 1);
    }
}
