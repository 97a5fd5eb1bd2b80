//! The `mc-host report` subcommand's arguments, and what each runs.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::clock::TimeBasis;
use crate::error::ReportError;
use crate::render::render;
use crate::runner;

/// `mc-host report ...`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: ReportCommand,
}

#[derive(Subcommand, Debug)]
pub enum ReportCommand {
    /// Run every application x variant x configuration (and one sequential
    /// baseline per application), appending each run's record to the
    /// results file; runs already recorded there are skipped.
    Run(Box<runner::RunMatrixArgs>),
    /// Write report.md and the SVG charts from a results file.
    Render(RenderArgs),
    /// Draw seed 004's Figures 8 and 9 (fig8.svg, fig9.svg) from what
    /// `mc-guest bench ump --json FILE` wrote.
    UmpChart(UmpChartArgs),
}

#[derive(Args, Debug)]
pub struct UmpChartArgs {
    /// The JSON file `mc-guest bench ump --json` wrote.
    #[arg(long)]
    pub json: PathBuf,
    /// Where the charts go (created if need be).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// The results file (JSON lines) `report run` wrote.
    pub results: PathBuf,
    /// Where report.md and the charts go (created if need be).
    #[arg(long)]
    pub out: PathBuf,
    /// Which times the tables and charts show: `predicted` (the virtual
    /// clock's, for the emulated cluster) or `wall` (this host's).
    /// Default: predicted when the results have them, else wall-clock.
    #[arg(long, value_enum)]
    pub clock: Option<TimeBasis>,
}

/// Run `mc-host report ARGS`.
pub fn run(args: &ReportArgs) -> Result<(), ReportError> {
    match &args.command {
        ReportCommand::Run(a) => runner::run_matrix(a),
        ReportCommand::Render(a) => render(&a.results, &a.out, a.clock).map(|r| {
            if r.fell_back_to_wall {
                eprintln!(
                    "note: {} holds no predicted times (its runs kept the wall clock): \
                     the report shows wall-clock times",
                    a.results.display()
                );
            }
            for f in r.files {
                println!("{}", f.display());
            }
        }),
        ReportCommand::UmpChart(a) => {
            let bench = crate::charts::ump::UmpBench::load(&a.json)?;
            for f in crate::charts::ump::draw(&bench, &a.out)? {
                println!("{}", f.display());
            }
            Ok(())
        }
    }
}
