//! Problem sizes: what each application computes, its named presets (seed
//! 000 Table III's size as `paper`, smaller ones that fit a 2-core, 24 GiB
//! machine), the `--size` / `--iters` overrides, and how much shared heap a
//! size needs. docs/applications.md lists every preset with its footprint.

use firmware_model::abi::reference::{self, ReferenceProcessor};

use super::app::App;

/// A named problem size. `small` is what CI runs (well under a second of
/// computation per run here), `medium` takes seconds to a minute, `paper`
/// is the size of seed 000 Table III (minutes to hours on this machine).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    #[default]
    Small,
    Medium,
    Paper,
    /// Seed 001's seven applications (`App::SEED001`) at seed 001 Table 1's
    /// problem sizes (what the table leaves unsaid is ours, docs/hlrc.md).
    /// The other applications have none.
    Seed001,
    /// The same seven at SPLASH-2's default sizes (Woo et al. 1995, Table
    /// 1), ours, not the seed's: Table 1's sizes run for hours here
    /// (docs/hlrc.md), and reports label results at this size as scaled.
    Seed001Scaled,
}

impl Preset {
    /// The processor whose committed rates a counted-work run of this
    /// preset predicts on (`firmware_model::abi::reference`), unless the
    /// run names its scales: `paper`'s sizes are Table III's, so its
    /// processor is the paper's; the others run on this host's edge rate
    /// (seed 001's Pentium II has no committed rates yet: its Table 5 runs
    /// name their `--cpu-scale`, docs/hlrc.md).
    pub fn reference(self) -> Option<&'static ReferenceProcessor> {
        match self {
            Preset::Paper => Some(&reference::PAPER),
            Preset::Small | Preset::Medium | Preset::Seed001 | Preset::Seed001Scaled => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Preset::Small => "small",
            Preset::Medium => "medium",
            Preset::Paper => "paper",
            Preset::Seed001 => "seed001",
            Preset::Seed001Scaled => "seed001-scaled",
        }
    }

    /// Whether `app` has a size by this name (the `seed001` ones only for
    /// seed 001's seven applications).
    pub fn applies_to(self, app: App) -> bool {
        !matches!(self, Preset::Seed001 | Preset::Seed001Scaled) || App::SEED001.contains(&app)
    }
}

/// What one run of an application computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// wtest and test: elements per thread, rounds.
    Wtest {
        elements: usize,
        rounds: u32,
    },
    Sor {
        rows: usize,
        cols: usize,
        iters: u32,
    },
    Gauss {
        n: usize,
    },
    Tsp {
        cities: usize,
    },
    /// Barnes-Hut: bodies in a Plummer model, time steps.
    Barnes {
        bodies: usize,
        steps: u32,
    },
    /// Blocked LU (CLU and LU): matrix side, block (tile) side.
    Lu {
        n: usize,
        block: usize,
    },
    /// EM3D: graph nodes (half E, half H), edges per node, percentage of
    /// edges to a neighbouring processor's nodes, iterations.
    Em3d {
        nodes: usize,
        degree: usize,
        remote_pct: u32,
        iters: u32,
    },
    /// Ilink on a synthetic pedigree: nuclear families in a chain, children
    /// per family, marker alleles, likelihood evaluations (theta values).
    Ilink {
        families: usize,
        children: usize,
        alleles: usize,
        thetas: u32,
    },
    /// Water-Nsquared and Water-Spatial: molecules, time steps.
    Water {
        molecules: usize,
        steps: u32,
    },
    /// FFT: 2^m complex points (m even).
    Fft {
        m: usize,
    },
    /// Ocean's solver: interior points a side (even), two-grid cycles.
    Ocean {
        n: usize,
        cycles: u32,
    },
    /// Radix: keys, bits of a digit (radix 2^radix_bits), keys below
    /// 2^key_bits.
    Radix {
        keys: usize,
        radix_bits: u32,
        key_bits: u32,
    },
}

/// Sizes of the apps without presets (wtest, test): their historic defaults.
const WTEST: Problem = Problem::Wtest {
    elements: 256,
    rounds: 3,
};

/// The size `preset` names for `app`. `small` keeps the defaults the apps
/// had before presets existed (SOR 64x64 x 10, Gauss 48, TSP 9). `seed001`
/// is seed 001 Table 1's size, `seed001-scaled` SPLASH-2's default size, for
/// seed 001's seven applications; asked of another app (which
/// `Params::problem` refuses) either is that app's `paper` size. FFT, Ocean
/// and Radix are not in seed 000: their `paper` is their `seed001` size.
pub fn preset(app: App, preset: Preset) -> Problem {
    use Preset::*;
    match (app, preset) {
        // Table 1: "Barnes-Spatial 262144 bodies"; steps are not given (ours,
        // SPLASH-2's default input's 4).
        (App::Barnes, Seed001) => Problem::Barnes {
            bodies: 262_144,
            steps: 4,
        },
        (App::Barnes, Seed001Scaled) => Problem::Barnes {
            bodies: 16_384,
            steps: 4,
        },
        // "2048 x 2048"; the block is not given (SPLASH-2's default 16).
        (App::Lu, Seed001) => Problem::Lu { n: 2048, block: 16 },
        (App::Lu, Seed001Scaled) => Problem::Lu { n: 512, block: 16 },
        // "32768 molecules, 5 steps".
        (App::WaterNsquared, Seed001) => Problem::Water {
            molecules: 32_768,
            steps: 5,
        },
        // "262144 molecules"; steps not given (ours: Water-Nsquared's 5).
        (App::WaterSpatial, Seed001) => Problem::Water {
            molecules: 262_144,
            steps: 5,
        },
        (App::WaterNsquared | App::WaterSpatial, Seed001Scaled) => Problem::Water {
            molecules: 512,
            steps: 3,
        },
        (App::Fft, Small) => Problem::Fft { m: 10 },
        (App::Fft, Medium) => Problem::Fft { m: 14 },
        // "2048x2048" points: 2^22.
        (App::Fft, Paper | Seed001) => Problem::Fft { m: 22 },
        (App::Fft, Seed001Scaled) => Problem::Fft { m: 16 },
        (App::Ocean, Small) => Problem::Ocean { n: 62, cycles: 2 },
        (App::Ocean, Medium) => Problem::Ocean { n: 126, cycles: 3 },
        // "514 x 514", borders included; cycles are ours.
        (App::Ocean, Paper | Seed001) => Problem::Ocean { n: 512, cycles: 4 },
        // SPLASH-2's 258 x 258.
        (App::Ocean, Seed001Scaled) => Problem::Ocean { n: 256, cycles: 4 },
        (App::Radix, Small) => Problem::Radix {
            keys: 16_384,
            radix_bits: 8,
            key_bits: 24,
        },
        (App::Radix, Medium) => Problem::Radix {
            keys: 262_144,
            radix_bits: 10,
            key_bits: 19,
        },
        // "45M keys"; radix and largest key not given (SPLASH-2's
        // defaults: radix 1024, keys below 524,288 = 2^19).
        (App::Radix, Paper | Seed001) => Problem::Radix {
            keys: 45_000_000,
            radix_bits: 10,
            key_bits: 19,
        },
        // SPLASH-2's 1M keys.
        (App::Radix, Seed001Scaled) => Problem::Radix {
            keys: 1 << 20,
            radix_bits: 10,
            key_bits: 19,
        },
        (app, Seed001 | Seed001Scaled) => self::preset(app, Paper),
        (App::Wtest | App::Test | App::Subword, _) => WTEST,
        (App::Sor, Small) => Problem::Sor {
            rows: 64,
            cols: 64,
            iters: 10,
        },
        (App::Sor, Medium) => Problem::Sor {
            rows: 768,
            cols: 1024,
            iters: 20,
        },
        // 3072 x 4096 in single precision is the paper's 50 MB; ours is
        // double precision (100 MB). Iterations are not in Table III.
        (App::Sor, Paper) => Problem::Sor {
            rows: 3072,
            cols: 4096,
            iters: 20,
        },
        (App::Gauss, Small) => Problem::Gauss { n: 48 },
        (App::Gauss, Medium) => Problem::Gauss { n: 512 },
        (App::Gauss, Paper) => Problem::Gauss { n: 2048 },
        (App::Tsp, Small) => Problem::Tsp { cities: 9 },
        (App::Tsp, Medium) => Problem::Tsp { cities: 12 },
        (App::Tsp, Paper) => Problem::Tsp { cities: 17 },
        (App::Barnes, Small) => Problem::Barnes {
            bodies: 256,
            steps: 2,
        },
        // Tree building takes a cluster lock per cell visited: thousands of
        // bodies are minutes in a debug build.
        (App::Barnes, Medium) => Problem::Barnes {
            bodies: 2048,
            steps: 3,
        },
        (App::Barnes, Paper) => Problem::Barnes {
            bodies: 131_072,
            steps: 4,
        },
        (App::Clu, Small) => Problem::Lu { n: 128, block: 16 },
        (App::Clu, Medium) => Problem::Lu { n: 512, block: 32 },
        (App::Clu, Paper) => Problem::Lu { n: 2048, block: 32 },
        // Not a multiple of the block: the last tile row and column are
        // partial, as in the paper's 2500 x 2500.
        (App::Lu, Small) => Problem::Lu { n: 120, block: 16 },
        (App::Lu, Medium) => Problem::Lu { n: 500, block: 32 },
        (App::Lu, Paper) => Problem::Lu { n: 2500, block: 32 },
        (App::Em3d, Small) => Problem::Em3d {
            nodes: 2048,
            degree: 5,
            remote_pct: 20,
            iters: 4,
        },
        (App::Em3d, Medium) => Problem::Em3d {
            nodes: 16_000,
            degree: 10,
            remote_pct: 20,
            iters: 10,
        },
        (App::Em3d, Paper) => Problem::Em3d {
            nodes: 64_000,
            degree: 10,
            remote_pct: 20,
            iters: 50,
        },
        (App::Ilink, Small) => Problem::Ilink {
            families: 6,
            children: 3,
            alleles: 4,
            thetas: 3,
        },
        (App::Ilink, Medium) => Problem::Ilink {
            families: 40,
            children: 3,
            alleles: 8,
            thetas: 5,
        },
        (App::Ilink, Paper) => Problem::Ilink {
            families: 480,
            children: 3,
            alleles: 20,
            thetas: 10,
        },
        (App::WaterNsquared | App::WaterSpatial, Small) => Problem::Water {
            molecules: 64,
            steps: 3,
        },
        (App::WaterNsquared | App::WaterSpatial, Medium) => Problem::Water {
            molecules: 512,
            steps: 3,
        },
        (App::WaterNsquared | App::WaterSpatial, Paper) => Problem::Water {
            molecules: 9261,
            steps: 3,
        },
    }
}

impl Problem {
    /// Override the main dimension (`--size`) and the iteration count
    /// (`--iters`); 0 leaves either as it is.
    pub fn with_overrides(mut self, size: usize, iters: u32) -> Problem {
        let set = |v: &mut usize| {
            if size != 0 {
                *v = size;
            }
        };
        let set_iters = |v: &mut u32| {
            if iters != 0 {
                *v = iters;
            }
        };
        match &mut self {
            Problem::Wtest { elements, rounds } => {
                set(elements);
                set_iters(rounds);
            }
            Problem::Sor { rows, cols, iters } => {
                // --size keeps its old meaning: a square grid.
                if size != 0 {
                    *rows = size;
                    *cols = size;
                }
                set_iters(iters);
            }
            Problem::Gauss { n } => set(n),
            Problem::Tsp { cities } => set(cities),
            Problem::Barnes { bodies, steps } => {
                set(bodies);
                set_iters(steps);
            }
            Problem::Lu { n, .. } => set(n),
            Problem::Em3d { nodes, iters, .. } => {
                set(nodes);
                set_iters(iters);
            }
            Problem::Ilink {
                families, thetas, ..
            } => {
                set(families);
                set_iters(thetas);
            }
            Problem::Water { molecules, steps } => {
                set(molecules);
                set_iters(steps);
            }
            Problem::Fft { m } => set(m),
            Problem::Ocean { n, cycles } => {
                set(n);
                set_iters(cycles);
            }
            Problem::Radix { keys, .. } => set(keys),
        }
        self
    }

    /// The dimensions by name, for records and summaries.
    pub fn dims(&self) -> Vec<(&'static str, u64)> {
        let u = |v: usize| v as u64;
        match *self {
            Problem::Wtest { elements, rounds } => {
                vec![("elements", u(elements)), ("rounds", rounds.into())]
            }
            Problem::Sor { rows, cols, iters } => vec![
                ("rows", u(rows)),
                ("cols", u(cols)),
                ("iterations", iters.into()),
            ],
            Problem::Gauss { n } => vec![("n", u(n))],
            Problem::Tsp { cities } => vec![("cities", u(cities))],
            Problem::Barnes { bodies, steps } => {
                vec![("bodies", u(bodies)), ("steps", steps.into())]
            }
            Problem::Lu { n, block } => vec![("n", u(n)), ("block", u(block))],
            Problem::Em3d {
                nodes,
                degree,
                remote_pct,
                iters,
            } => vec![
                ("nodes", u(nodes)),
                ("degree", u(degree)),
                ("remote_pct", remote_pct.into()),
                ("iterations", iters.into()),
            ],
            Problem::Ilink {
                families,
                children,
                alleles,
                thetas,
            } => vec![
                ("families", u(families)),
                ("children", u(children)),
                ("alleles", u(alleles)),
                ("thetas", thetas.into()),
            ],
            Problem::Water { molecules, steps } => {
                vec![("molecules", u(molecules)), ("steps", steps.into())]
            }
            Problem::Fft { m } => vec![("m", u(m)), ("points", 1u64 << m.min(63))],
            Problem::Ocean { n, cycles } => vec![("n", u(n)), ("cycles", cycles.into())],
            Problem::Radix {
                keys,
                radix_bits,
                key_bits,
            } => vec![
                ("keys", u(keys)),
                ("radix_bits", radix_bits.into()),
                ("key_bits", key_bits.into()),
            ],
        }
    }

    /// One line for people: `clu (n 128, block 16)`.
    pub fn describe(&self) -> String {
        self.dims()
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The largest `--size`, `--rows` or `--cols`: 2^28, what wtest's smallest
/// case (one processor of 4-byte elements) fits in a heap of
/// [`cashmere::MAX_HEAP_BYTES`] (every other main dimension needs more per
/// unit), and small enough that the footprint sums cannot overflow.
pub const MAX_DIMENSION: usize = 1 << 28;

/// Replays [`cashmere::Csm::alloc`]'s placement to tell how many heap bytes
/// a sequence of allocations needs.
#[derive(Clone, Debug)]
pub struct HeapPlan {
    page: usize,
    next: usize,
}

impl HeapPlan {
    pub fn new(page_size: u32) -> HeapPlan {
        HeapPlan {
            page: page_size as usize,
            next: 0,
        }
    }

    /// Room for `len` elements of `T`, placed as `Csm::alloc` places them.
    pub fn array<T>(&mut self, len: usize, page_aligned: bool) -> &mut Self {
        let align = if page_aligned {
            self.page
        } else {
            std::mem::align_of::<T>().max(8)
        };
        self.next = self.next.div_ceil(align) * align + len * std::mem::size_of::<T>();
        self
    }

    /// Heap bytes, rounded up to whole pages.
    pub fn bytes(&self) -> usize {
        self.next.div_ceil(self.page).max(1) * self.page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_presets_keep_the_old_defaults() {
        assert_eq!(
            preset(App::Sor, Preset::Small),
            Problem::Sor {
                rows: 64,
                cols: 64,
                iters: 10
            }
        );
        assert_eq!(preset(App::Gauss, Preset::Small), Problem::Gauss { n: 48 });
        assert_eq!(preset(App::Tsp, Preset::Small), Problem::Tsp { cities: 9 });
    }

    #[test]
    fn overrides_replace_the_main_dimension_and_iterations() {
        let p = preset(App::Sor, Preset::Paper).with_overrides(100, 2);
        assert_eq!(
            p,
            Problem::Sor {
                rows: 100,
                cols: 100,
                iters: 2
            }
        );
        let p = preset(App::Clu, Preset::Small).with_overrides(0, 7);
        assert_eq!(p, Problem::Lu { n: 128, block: 16 });
        assert_eq!(p.describe(), "n 128, block 16");
    }

    #[test]
    fn heap_plan_places_like_alloc() {
        let mut h = HeapPlan::new(8192);
        h.array::<f64>(3, false)
            .array::<u32>(1, true)
            .array::<u8>(1, false);
        // 24 bytes, then a page boundary, 4 bytes, then 8-byte alignment.
        assert_eq!(h.next, 8192 + 8 + 1);
        assert_eq!(h.bytes(), 16384);
    }
}
