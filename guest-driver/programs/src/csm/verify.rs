//! How the suite's applications check their results against their own
//! sequential runs: bit for bit where the parallel program performs the same
//! operations in the same order, within a stated tolerance element by
//! element where the order of floating-point sums depends on timing (Water's
//! lock-protected force sums), and on invariants such as total energy.

/// Why an application of the suite failed, other than Cashmere failing.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// A value differs from the sequential run's (exact comparison).
    #[error("{app}: {what}[{index}] is {got:e}, sequential run has {want:e}")]
    Exact {
        app: &'static str,
        what: &'static str,
        index: usize,
        got: f64,
        want: f64,
    },
    /// A value is further from the sequential run's than the tolerance.
    #[error(
        "{app}: {what}[{index}] is {got:e}, sequential run has {want:e} \
         (allowed |difference| <= {tolerance:e} x (1 + |expected|))"
    )]
    Tolerance {
        app: &'static str,
        what: &'static str,
        index: usize,
        got: f64,
        want: f64,
        tolerance: f64,
    },
    /// An integer result (a count, an index) differs.
    #[error("{app}: {what}[{index}] is {got}, sequential run has {want}")]
    Count {
        app: &'static str,
        what: &'static str,
        index: usize,
        got: u64,
        want: u64,
    },
    /// A fixed-size shared pool ran out (Barnes' cells, Water-Spatial's
    /// boxes).
    #[error("{app}: {what} full ({limit} entries); the problem needs more")]
    Capacity {
        app: &'static str,
        what: &'static str,
        limit: usize,
    },
    /// The problem cannot be run with this many processors or this size.
    #[error("{app}: {why}")]
    Shape { app: &'static str, why: String },
    /// `--preset` was given to a program that has none.
    #[error("{app} has no presets (it takes --size and --iters)")]
    NoPresets { app: &'static str },
}

/// `got` must equal `want` bit for bit.
pub fn exact(
    app: &'static str,
    what: &'static str,
    index: usize,
    got: f64,
    want: f64,
) -> Result<(), SuiteError> {
    if got.to_bits() == want.to_bits() {
        Ok(())
    } else {
        Err(SuiteError::Exact {
            app,
            what,
            index,
            got,
            want,
        })
    }
}

/// `|got - want| <= tolerance * (1 + |want|)`: relative for large values,
/// absolute near zero.
pub fn close(
    app: &'static str,
    what: &'static str,
    index: usize,
    got: f64,
    want: f64,
    tolerance: f64,
) -> Result<(), SuiteError> {
    if (got - want).abs() <= tolerance * (1.0 + want.abs()) {
        Ok(())
    } else {
        Err(SuiteError::Tolerance {
            app,
            what,
            index,
            got,
            want,
            tolerance,
        })
    }
}

/// Integer results must be equal.
pub fn count(
    app: &'static str,
    what: &'static str,
    index: usize,
    got: u64,
    want: u64,
) -> Result<(), SuiteError> {
    if got == want {
        Ok(())
    } else {
        Err(SuiteError::Count {
            app,
            what,
            index,
            got,
            want,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_compares_bits_and_close_scales_with_the_value() {
        assert!(exact("a", "x", 0, 1.0, 1.0).is_ok());
        assert!(exact("a", "x", 0, 0.0, -0.0).is_err());
        assert!(close("a", "x", 0, 1000.0 + 1e-7, 1000.0, 1e-9).is_ok());
        assert!(close("a", "x", 0, 1e-8, 0.0, 1e-9).is_err());
        let e = close("water", "position", 7, 2.0, 1.0, 1e-9).unwrap_err();
        assert!(
            e.to_string().starts_with("water: position[7] is 2e0"),
            "{e}"
        );
    }
}
