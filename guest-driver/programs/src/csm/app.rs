//! The programs `mc-guest csm` runs, by name ([`App`]).

/// A program on Cashmere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum App {
    Wtest,
    Test,
    /// Byte and 16-bit writes to shared words by several processors.
    Subword,
    Sor,
    Gauss,
    Tsp,
    Barnes,
    Clu,
    Lu,
    Em3d,
    Ilink,
    WaterNsquared,
    WaterSpatial,
    /// The six-step FFT (seed 001's suite).
    Fft,
    /// Two-grid red-black SOR, Ocean's solver (seed 001's suite).
    Ocean,
    /// Parallel radix sort (seed 001's suite).
    Radix,
}

impl App {
    /// Seed 000's application suite (Table III), in the table's order: every
    /// app but the debugging programs wtest and test.
    pub const SUITE: [App; 10] = [
        App::Barnes,
        App::Clu,
        App::Lu,
        App::Em3d,
        App::Gauss,
        App::Ilink,
        App::Sor,
        App::Tsp,
        App::WaterNsquared,
        App::WaterSpatial,
    ];

    /// Seed 001's seven SPLASH-2 applications (Table 5), in the table's
    /// order.
    pub const SEED001: [App; 7] = [
        App::Barnes,
        App::Fft,
        App::Lu,
        App::Ocean,
        App::Radix,
        App::WaterNsquared,
        App::WaterSpatial,
    ];

    /// The name on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            App::Wtest => "wtest",
            App::Test => "test",
            App::Subword => "subword",
            App::Sor => "sor",
            App::Gauss => "gauss",
            App::Tsp => "tsp",
            App::Barnes => "barnes",
            App::Clu => "clu",
            App::Lu => "lu",
            App::Em3d => "em3d",
            App::Ilink => "ilink",
            App::WaterNsquared => "water-nsquared",
            App::WaterSpatial => "water-spatial",
            App::Fft => "fft",
            App::Ocean => "ocean",
            App::Radix => "radix",
        }
    }
}
