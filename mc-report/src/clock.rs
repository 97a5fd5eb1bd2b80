//! Which clock a report's times come from, and how every table and chart
//! says so: the one place that names it.
//!
//! Every record has wall-clock times on the host that ran it
//! (`times.compute_s`, `times.sequential_s`), so a wall-clock speedup is
//! only shown where the run had a core per application thread. A run on the
//! virtual clock (issue 29, `report run`'s default) adds predicted times;
//! [`TimeBasis::Predicted`] (`report render`'s default) reads those instead,
//! needs no such guard, and relabels everything.

/// Where the times in a report come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimeBasis {
    /// Measured on the host that ran the runs.
    #[default]
    Wall,
    /// Predicted by the virtual clock for the emulated cluster.
    Predicted,
}

impl TimeBasis {
    /// The record field (under `times`) of a run's computation time.
    pub fn compute_field(self) -> &'static str {
        match self {
            TimeBasis::Wall => "compute_s",
            TimeBasis::Predicted => "predicted_s",
        }
    }

    /// The record field (under `times`) of the sequential program's time.
    pub fn sequential_field(self) -> &'static str {
        match self {
            TimeBasis::Wall => "sequential_s",
            TimeBasis::Predicted => "sequential_predicted_s",
        }
    }

    /// Whether the times describe the host: then a run with more
    /// application threads than cores gets no speedup (its figure would
    /// measure the host's scheduling, not the protocol).
    pub fn host_bound(self) -> bool {
        self == TimeBasis::Wall
    }

    /// What every table and chart says about its times, before the host
    /// line.
    pub fn label(self) -> &'static str {
        match self {
            TimeBasis::Wall => "times are wall-clock, on the host that ran them",
            TimeBasis::Predicted => {
                "times are predicted by the virtual clock for the emulated cluster, not measured on the host"
            }
        }
    }

    /// A time axis' unit, for charts.
    pub fn axis_unit(self) -> &'static str {
        match self {
            TimeBasis::Wall => "wall-clock",
            TimeBasis::Predicted => "predicted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_basis_names_its_fields_and_says_what_it_is() {
        let w = TimeBasis::default();
        assert_eq!(w, TimeBasis::Wall);
        assert_eq!(w.compute_field(), "compute_s");
        assert!(w.host_bound() && w.label().contains("wall-clock"));
        let p = TimeBasis::Predicted;
        assert_eq!(p.compute_field(), "predicted_s");
        assert!(!p.host_bound() && p.label().contains("predicted"));
    }
}
