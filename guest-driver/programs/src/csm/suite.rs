//! The registry of seed 000 Table III's application suite: which
//! application is set up how (each a [`Workload`], `workload`), plus what a run needs to know before it starts
//! (heap bytes, cluster locks) and the sequential version to time.

use std::time::Instant;

use dsm_core::Dsm;

use super::app::App;
use super::error::AppError;
use super::problem::{HeapPlan, Problem};
use super::seq_timing;
use super::workload::Workload;
use super::{barnes, clu, em3d, ilink, lu, water, water_nsquared, water_spatial};
use super::{fft, ocean, radix};
use super::{gauss, sor, tsp};

/// Whether `app` is one of the suite's applications set up here (the
/// others are dispatched by `csm::run` itself).
pub fn is_suite(app: App) -> bool {
    matches!(
        app,
        App::Barnes
            | App::Clu
            | App::Lu
            | App::Em3d
            | App::Ilink
            | App::WaterNsquared
            | App::WaterSpatial
            | App::Fft
            | App::Ocean
            | App::Radix
    )
}

fn radix_shape(keys: usize, radix_bits: u32, key_bits: u32) -> radix::RadixShape {
    radix::RadixShape {
        keys,
        radix_bits,
        key_bits,
    }
}

fn em3d_shape(p: Problem) -> Option<em3d::Em3dShape> {
    match p {
        Problem::Em3d {
            nodes,
            degree,
            remote_pct,
            iters,
        } => Some(em3d::Em3dShape {
            nodes,
            degree,
            remote_pct,
            iters,
        }),
        _ => None,
    }
}

fn ilink_shape(p: Problem) -> Option<ilink::IlinkShape> {
    match p {
        Problem::Ilink {
            families,
            children,
            alleles,
            thetas,
        } => Some(ilink::IlinkShape {
            families,
            children,
            alleles,
            thetas,
        }),
        _ => None,
    }
}

/// A problem that does not belong to the application it was given to.
fn wrong(app: App, p: Problem) -> AppError {
    super::verify::SuiteError::Shape {
        app: app.name(),
        why: format!("{p:?} is not its problem"),
    }
    .into()
}

/// Allocate `app`'s shared data for `problem` (every node, same order).
pub fn setup(app: App, problem: Problem, csm: &Dsm) -> Result<Box<dyn Workload>, AppError> {
    Ok(match (app, problem) {
        (App::Barnes, Problem::Barnes { bodies, steps }) => {
            Box::new(barnes::setup(csm, bodies, steps)?)
        }
        (App::Clu, Problem::Lu { n, block }) => Box::new(clu::setup(csm, n, block)?),
        (App::Lu, Problem::Lu { n, block }) => Box::new(lu::setup(csm, n, block)?),
        (App::Em3d, p @ Problem::Em3d { .. }) => {
            Box::new(em3d::setup(csm, em3d_shape(p).ok_or(wrong(app, p))?)?)
        }
        (App::Ilink, p @ Problem::Ilink { .. }) => {
            Box::new(ilink::setup(csm, ilink_shape(p).ok_or(wrong(app, p))?)?)
        }
        (App::WaterNsquared, Problem::Water { molecules, steps }) => {
            Box::new(water_nsquared::setup(csm, molecules, steps)?)
        }
        (App::WaterSpatial, Problem::Water { molecules, steps }) => {
            Box::new(water_spatial::setup(csm, molecules, steps)?)
        }
        (App::Fft, Problem::Fft { m }) => Box::new(fft::setup(csm, fft::FftShape { m })?),
        (App::Ocean, Problem::Ocean { n, cycles }) => {
            Box::new(ocean::setup(csm, ocean::OceanShape { n, cycles })?)
        }
        (
            App::Radix,
            Problem::Radix {
                keys,
                radix_bits,
                key_bits,
            },
        ) => Box::new(radix::setup(csm, radix_shape(keys, radix_bits, key_bits))?),
        (app, p) => return Err(wrong(app, p)),
    })
}

/// Shared heap bytes `app` allocates for `problem` with `procs` threads in
/// all (before Cashmere rounds the heap to pages).
pub fn heap_bytes(app: App, problem: Problem, page_size: u32, procs: usize) -> usize {
    let plan = |f: &dyn Fn(&mut HeapPlan)| {
        let mut h = HeapPlan::new(page_size);
        f(&mut h);
        h.bytes()
    };
    match problem {
        Problem::Wtest { elements, .. } => plan(&|h| {
            h.array::<u32>(procs * elements, true).array::<u64>(1, true);
        }),
        Problem::Sor { rows, cols, .. } => plan(&|h| {
            // Red and black points in two arrays (sor.rs).
            let colour = sor::Grid { rows, cols }.colour_len();
            h.array::<f64>(colour, true).array::<f64>(colour, true);
        }),
        Problem::Gauss { n } => {
            let ps = page_size as usize;
            let stride = ((n + 1) * 8).div_ceil(ps) * ps / 8;
            plan(&|h| {
                h.array::<f64>(n * stride, true).array::<f64>(n, true);
            })
        }
        Problem::Tsp { cities } => plan(&|h| {
            h.array::<u32>(cities * cities, true)
                .array::<u32>(1, true)
                .array::<u32>(1, false)
                .array::<u32>(cities, false);
        }),
        Problem::Barnes { bodies, .. } => barnes::footprint(bodies, page_size, procs),
        Problem::Lu { n, block } => match app {
            App::Clu => clu::footprint(n, block, page_size, procs),
            _ => lu::footprint(n, page_size),
        },
        p @ Problem::Em3d { .. } => em3d_shape(p).map_or(0, |s| em3d::footprint(&s, page_size)),
        p @ Problem::Ilink { .. } => ilink_shape(p).map_or(0, |s| ilink::footprint(&s, page_size)),
        Problem::Water { molecules, steps } => match app {
            App::WaterSpatial => water_spatial::footprint(molecules, steps, page_size),
            _ => water_nsquared::footprint(molecules, steps, page_size),
        },
        Problem::Fft { m } => fft::footprint(fft::FftShape { m }, page_size),
        Problem::Ocean { n, cycles } => {
            ocean::footprint(ocean::OceanShape { n, cycles }, page_size)
        }
        Problem::Radix {
            keys,
            radix_bits,
            key_bits,
        } => radix::footprint(radix_shape(keys, radix_bits, key_bits), page_size, procs),
    }
}

/// Cluster locks `app` uses (lock indices below this).
pub fn locks(app: App) -> u32 {
    match app {
        App::Barnes => barnes::CELL_LOCK_BASE + barnes::CELL_LOCKS,
        App::WaterNsquared => water_nsquared::MOL_LOCK_BASE + water_nsquared::MOL_LOCKS,
        App::WaterSpatial => water_spatial::CELL_LOCK_BASE + water_spatial::CELL_LOCKS,
        _ => 64,
    }
}

/// Seconds the sequential version of `app` takes here for `problem` (the
/// program without Cashmere: plain vectors), or None for the debugging
/// programs, which have none. EM3D's graph depends on the processor count.
pub fn time_sequential(app: App, problem: Problem, procs: usize) -> Option<f64> {
    time_sequential_cpu(app, problem, procs).map(|(wall, _)| wall)
}

/// [`time_sequential`], with the sequential run's CPU time (this thread's,
/// `CLOCK_THREAD_CPUTIME_ID`; its counted work under `--work counted`,
/// `vclock::work_ns`): what a predicted speedup divides, times the
/// CPU scale (docs/virtual-time.md). (wall seconds, CPU seconds). Both
/// count the computation only, from `seq_timing::compute_begins`: the parallel run's
/// timed window leaves its initialisation out too, and a speedup that
/// counted the sequential program's initialisation would credit the
/// parallel run with work it was not timed for.
pub fn time_sequential_cpu(app: App, problem: Problem, procs: usize) -> Option<(f64, f64)> {
    seq_timing::clear();
    let cpu = mc_api::vclock::work_ns();
    let t = Instant::now();
    match (app, problem) {
        (App::Sor, Problem::Sor { rows, cols, iters }) => drop(std::hint::black_box(
            sor::sequential(sor::Grid { rows, cols }, iters),
        )),
        (App::Gauss, Problem::Gauss { n }) => drop(std::hint::black_box(gauss::sequential(n))),
        (App::Tsp, Problem::Tsp { cities }) => {
            std::hint::black_box(tsp::sequential(cities));
        }
        (App::Barnes, Problem::Barnes { bodies, steps }) => {
            drop(std::hint::black_box(barnes::sequential(bodies, steps)))
        }
        (App::Lu, Problem::Lu { n, block }) => drop(std::hint::black_box(
            super::blocked_lu::sequential(n, block),
        )),
        (App::Clu, Problem::Lu { n, block }) => drop(std::hint::black_box(
            super::blocked_lu::sequential_blocks(n, block),
        )),
        (App::Em3d, p) => drop(std::hint::black_box(em3d::sequential(
            &em3d_shape(p)?,
            procs,
        ))),
        (App::Ilink, p) => drop(std::hint::black_box(ilink::sequential(&ilink_shape(p)?))),
        (App::WaterNsquared, Problem::Water { molecules, steps }) => drop(std::hint::black_box(
            water::sequential(molecules, steps, water::Pairs::HalfShell),
        )),
        (App::WaterSpatial, Problem::Water { molecules, steps }) => drop(std::hint::black_box(
            water::sequential(molecules, steps, water::Pairs::Boxes),
        )),
        (App::Fft, Problem::Fft { m }) => {
            drop(std::hint::black_box(fft::sequential(fft::FftShape { m })))
        }
        (App::Ocean, Problem::Ocean { n, cycles }) => {
            drop(std::hint::black_box(ocean::sequential(ocean::OceanShape {
                n,
                cycles,
            })))
        }
        (
            App::Radix,
            Problem::Radix {
                keys,
                radix_bits,
                key_bits,
            },
        ) => drop(std::hint::black_box(radix::sequential(radix_shape(
            keys, radix_bits, key_bits,
        )))),
        _ => return None,
    }
    let end_cpu = mc_api::vclock::work_ns();
    let end = Instant::now();
    // A program that never marked its computation is timed whole.
    let (cpu, t) = seq_timing::take().unwrap_or((cpu, t));
    let cpu = end_cpu.saturating_sub(cpu) as f64 / 1e9;
    Some((end.duration_since(t).as_secs_f64(), cpu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csm::problem::{preset, Preset};

    #[test]
    fn gauss_presets_get_a_flag_per_row_and_locks_cover_the_apps() {
        let mut p = crate::csm::Params::new(App::Gauss, 1);
        p.preset = Some(Preset::Paper);
        assert_eq!(p.config().flags, 2048);
        p.preset = None;
        assert_eq!(p.config().flags, 64);
        assert_eq!(
            crate::csm::Params::new(App::WaterNsquared, 1)
                .config()
                .locks,
            2 + 256
        );
    }

    /// Small presets fit CI, paper presets fit the Memory Channel address
    /// space (the arena is 4 MiB + twice the heap, in 512 MiB) on up to 8
    /// processors. `--nocapture` prints the table docs/applications.md has.
    #[test]
    fn presets_fit_their_machines() {
        let mut apps = App::SUITE.to_vec();
        apps.extend(App::SEED001.iter().filter(|a| !App::SUITE.contains(a)));
        for app in apps {
            for pr in [
                Preset::Small,
                Preset::Medium,
                Preset::Paper,
                Preset::Seed001,
                Preset::Seed001Scaled,
            ] {
                if !pr.applies_to(app) {
                    continue;
                }
                let p = preset(app, pr);
                let bytes: Vec<usize> = [1, 4, 8]
                    .iter()
                    .map(|&procs| heap_bytes(app, p, 8192, procs))
                    .collect();
                println!(
                    "{:<15} {:<7} {:<55} {:>9.2} MiB (1 proc) {:>9.2} MiB (8 procs)",
                    app.name(),
                    pr.name(),
                    p.describe(),
                    bytes[0] as f64 / (1 << 20) as f64,
                    bytes[2] as f64 / (1 << 20) as f64
                );
                let most = *bytes.iter().max().unwrap_or(&0);
                match pr {
                    Preset::Small => assert!(most <= 2 << 20, "{app:?} small: {most}"),
                    // Table 1's Radix (45M keys) is seed 001's 377 MB.
                    Preset::Seed001 | Preset::Paper if app == App::Radix => {
                        assert!(most <= 400 << 20, "{app:?} {pr:?}: {most}")
                    }
                    _ => assert!(most <= 200 << 20, "{app:?} {pr:?}: {most}"),
                }
            }
        }
    }
}
