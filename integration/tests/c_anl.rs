//! C programs written with the SPLASH-2/3 (ANL) macros on Cashmere (libcsm,
//! `scripts/mc-cc`, docs/c-programs.md): this project's own programs in
//! `integration/c/anl/`, each built twice from the same source, for
//! Cashmere and with the pthreads macros (`mc-cc --posix`), and the
//! Cashmere run's result compared with the pthreads run's, bit for bit
//! (the programs print hashes of their results' bytes). Also what cannot
//! work, refused with a message, and the statistics and the record.
//!
//! By default a representative subset: every program on 2 nodes x 2
//! threads; every variant on two programs, over shapes of 1 to 4 nodes and
//! 1 or 2 threads, eager and skewed in turn; SOR under a fault plan with
//! reliable stores. `MC_TEST_EXHAUSTIVE=1` runs every program on every
//! shape (1-4 nodes x 1-2 threads) under every variant, eager and skewed,
//! and every program under the fault plan.
//!
//! Skipped, saying so, without a C compiler, m4 or objcopy.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use cashmere::CsmVariant;
use integration::c_program::{mc_cc, tool};
use integration::{build, c_program};

/// Each program with the arguments the tests give it (besides `-p`).
const PROGRAMS: &[(&str, &[&str])] = &[
    ("sor", &["-n", "66", "-i", "6"]),
    ("lu", &["-n", "64", "-b", "16"]),
    ("transpose", &["-n", "64", "-r", "2"]),
    ("taskq", &["-t", "120"]),
    ("tree", &["-d", "10", "-e", "10"]),
    ("prodcons", &["-i", "200"]),
    ("globals", &["-f", "PARAMS"]),
    ("subword", &["-n", "6000", "-r", "2"]),
    ("fft", &["-m", "10"]),
    ("radix", &["-n", "20000", "-b", "8"]),
    ("ocean", &["-n", "62", "-c", "2"]),
];

/// One cluster at a time: they share the machine's cores.
static CLUSTER: Mutex<()> = Mutex::new(());

fn exhaustive() -> bool {
    std::env::var("MC_TEST_EXHAUSTIVE").is_ok_and(|v| v == "1")
}

fn source_dir() -> PathBuf {
    c_program::workspace().join("integration/c/anl")
}

/// libcsm.a for this test's profile, built once per test process.
fn libcsm_dir() -> PathBuf {
    build::library_dir("libcsm")
}

/// The built programs' directory (NAME and NAME-posix), or why there is none.
fn programs() -> Result<&'static PathBuf, &'static String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let cc = c_program::compiler()?;
        tool("m4", "--version")?;
        tool("objcopy", "--version")?;
        tool("objdump", "--version")?;
        let lib = libcsm_dir();
        let dir = lib.join("c-anl");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let names = PROGRAMS.iter().map(|p| p.0).chain(["misuse"]);
        for name in names {
            let src = source_dir().join(format!("{name}.C"));
            mc_cc(&cc, &lib, &[], &dir.join(name), &src)?;
            mc_cc(
                &cc,
                &lib,
                &["--posix"],
                &dir.join(format!("{name}-posix")),
                &src,
            )?;
        }
        Ok(dir)
    })
    .as_ref()
}

/// The programs, or None (the test is skipped) saying why.
fn built(test: &str) -> Option<&'static PathBuf> {
    match programs() {
        Ok(d) => Some(d),
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

fn args_of(name: &str, procs: u32) -> Vec<String> {
    let (_, a) = PROGRAMS
        .iter()
        .find(|p| p.0 == name)
        .expect("a program of PROGRAMS");
    let params = source_dir().join("params.txt");
    let mut v = vec!["-p".to_string(), procs.to_string()];
    v.extend(a.iter().map(|s| match *s {
        "PARAMS" => params.to_string_lossy().into_owned(),
        s => s.to_string(),
    }));
    v
}

/// The result line the pthreads build prints with `procs` threads.
fn reference(dir: &Path, name: &str, procs: u32) -> String {
    let o = Command::new(dir.join(format!("{name}-posix")))
        .args(args_of(name, procs))
        .output()
        .expect("run the pthreads build");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{name}-posix -p {procs}: {out}");
    result_line(&out, name).unwrap_or_else(|| panic!("{name}-posix printed no result: {out}"))
}

fn result_line(out: &str, name: &str) -> Option<String> {
    let p = format!("{name}: ");
    out.lines()
        .map(|l| l.strip_prefix("[node0] ").unwrap_or(l))
        .find(|l| l.starts_with(&p) && !l.ends_with(" us"))
        .map(str::to_string)
}

/// One Cashmere run.
struct Run<'a> {
    nodes: u32,
    threads: u32,
    host: Vec<String>,
    env: Vec<(&'a str, String)>,
}

impl<'a> Run<'a> {
    fn new(nodes: u32, threads: u32) -> Run<'a> {
        Run {
            nodes,
            threads,
            host: Vec::new(),
            env: Vec::new(),
        }
    }

    fn variant(mut self, v: CsmVariant) -> Self {
        self.env.push(("CSM_VARIANT", v.name().to_string()));
        self
    }

    fn skewed(mut self, seed: u64) -> Self {
        self.host.extend([
            "--delivery".into(),
            "skewed".into(),
            "--seed".into(),
            seed.to_string(),
        ]);
        self
    }

    fn env(mut self, k: &'a str, v: &str) -> Self {
        self.env.push((k, v.to_string()));
        self
    }

    fn host(mut self, opts: &[&str]) -> Self {
        self.host.extend(opts.iter().map(|s| s.to_string()));
        self
    }

    /// `mc-host run ... -- sh -c 'exec env K=V ./prog args > DIR/nodeN.out
    /// 2> DIR/nodeN.err'`: success, and its output with each node's output
    /// read back from its files and prefixed as `mc-host run` prefixes
    /// lines. (The
    /// files, not the pipes `mc-host run` reads: it stops reading 200 ms
    /// after the guests exit, and on a loaded machine the last lines can
    /// come later.)
    fn go(&self, dir: &Path, name: &str, args: &[String]) -> (bool, String) {
        let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
        let outs = tempfile::tempdir().expect("temporary directory");
        let mut cmd = String::from("exec env");
        for (k, v) in &self.env {
            cmd += &format!(" {}", quote(&format!("{k}={v}")));
        }
        cmd += &format!(" {}", quote(&dir.join(name).to_string_lossy()));
        for a in args {
            cmd += &format!(" {}", quote(a));
        }
        let o = quote(&outs.path().to_string_lossy());
        cmd += &format!(" > {o}/node$MC_NODE.out 2> {o}/node$MC_NODE.err");
        let mut host: Vec<String> = vec!["--threads".into(), self.threads.to_string()];
        host.extend(self.host.iter().cloned());
        let host: Vec<&str> = host.iter().map(String::as_str).collect();
        let (ok, mut out) = {
            let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
            integration::mc_host_run(self.nodes, 180, &host, &["sh", "-c", &cmd])
        };
        for n in 0..self.nodes {
            for ext in ["out", "err"] {
                let f = outs.path().join(format!("node{n}.{ext}"));
                if let Ok(text) = std::fs::read_to_string(f) {
                    for l in text.lines() {
                        out += &format!("[node{n}] {l}\n");
                    }
                }
            }
        }
        (ok, out)
    }

    /// Run `name` on every process and check its result against the
    /// pthreads build's.
    fn verify(&self, dir: &Path, name: &str) {
        let procs = self.nodes * self.threads;
        if name == "prodcons" && procs < 2 {
            return;
        }
        let want = reference(dir, name, procs);
        let (ok, out) = self.go(dir, name, &args_of(name, procs));
        let what = format!(
            "{name} on {} x {} ({:?} {:?})",
            self.nodes, self.threads, self.env, self.host
        );
        assert!(ok, "{what} failed:\n{out}");
        let got = result_line(&out, name).unwrap_or_else(|| panic!("{what}: no result:\n{out}"));
        assert_eq!(
            got, want,
            "{what}: the pthreads build printed\n{want}\n{out}"
        );
    }
}

const SHAPES: &[(u32, u32)] = &[
    (1, 1),
    (2, 1),
    (3, 1),
    (4, 1),
    (1, 2),
    (2, 2),
    (3, 2),
    (4, 2),
];

#[test]
fn every_program_matches_its_pthreads_build_on_2_nodes_x_2_threads() {
    let Some(dir) = built("every_program") else {
        return;
    };
    for (name, _) in PROGRAMS {
        Run::new(2, 2).verify(dir, name);
    }
}

/// Every variant, on two programs each, over the shapes in turn, eager and
/// skewed in turn (exhaustive: every program, shape and delivery).
#[test]
fn every_variant_runs_the_programs_on_1_to_4_nodes_verified() {
    let Some(dir) = built("every_variant") else {
        return;
    };
    let mut turn = 0usize;
    for &v in CsmVariant::all() {
        if exhaustive() {
            for (name, _) in PROGRAMS {
                for (i, &(nodes, threads)) in SHAPES.iter().enumerate() {
                    Run::new(nodes, threads).variant(v).verify(dir, name);
                    Run::new(nodes, threads)
                        .variant(v)
                        .skewed(1 + i as u64)
                        .verify(dir, name);
                }
            }
            continue;
        }
        for _ in 0..2 {
            let (name, _) = PROGRAMS[turn % PROGRAMS.len()];
            let (nodes, threads) = SHAPES[turn % SHAPES.len()];
            let run = Run::new(nodes, threads).variant(v);
            let run = if turn % 2 == 1 {
                run.skewed(turn as u64)
            } else {
                run
            };
            run.verify(dir, name);
            turn += 1;
        }
    }
}

/// Sub-word writes (issue 37): `subword.C` writes interleaved bytes, blocks
/// of three bytes and 16-bit halves of shared words from every process and
/// checks every byte, under every variant (migration included), 2L
/// (2 x 2), 1L (4 x 1) and with the home's writes diffed (3 x 2,
/// CSM_HOME_DIFFS=1), eager and skewed.
#[test]
fn sub_word_writes_keep_every_byte_under_every_variant() {
    let Some(dir) = built("sub_word_writes") else {
        return;
    };
    for (v, &variant) in CsmVariant::all().iter().enumerate() {
        let seed = 9100 + 10 * v as u64;
        Run::new(2, 2).variant(variant).verify(dir, "subword");
        Run::new(2, 2)
            .variant(variant)
            .skewed(seed)
            .verify(dir, "subword");
        let one_level = Run::new(4, 1).variant(variant).env("CSM_LEVELS", "1");
        let home_diffs = Run::new(3, 2).variant(variant).env("CSM_HOME_DIFFS", "1");
        if v % 2 == 0 {
            one_level.verify(dir, "subword");
            home_diffs.skewed(seed + 1).verify(dir, "subword");
        } else {
            one_level.skewed(seed + 1).verify(dir, "subword");
            home_diffs.verify(dir, "subword");
        }
    }
}

/// The fault plan of examples/ (1% of packets corrupted, a link flap) with
/// reliable stores (MC_RELIABLE=1, as `mc-guest --reliable`).
#[test]
fn a_program_survives_a_fault_plan_with_reliable_stores() {
    let Some(dir) = built("fault_plan") else {
        return;
    };
    let plan = c_program::workspace().join("examples/sor-fault-plan.toml");
    let plan = plan.to_string_lossy();
    let names: Vec<&str> = if exhaustive() {
        PROGRAMS.iter().map(|p| p.0).collect()
    } else {
        vec!["sor"]
    };
    for name in names {
        Run::new(4, 1)
            .host(&["--fault-plan", &plan])
            .env("MC_RELIABLE", "1")
            .verify(dir, name);
    }
}

fn refused(out: &str, what: &str) {
    assert!(
        out.lines()
            .any(|l| l.contains("csm: node ") && l.contains(what)),
        "no message containing {what:?}:\n{out}"
    );
}

#[test]
fn a_process_count_that_is_not_the_clusters_is_refused_naming_both() {
    let Some(dir) = built("process_count") else {
        return;
    };
    // sor -p 3 on 2 x 2.
    let (ok, out) = Run::new(2, 2).go(dir, "sor", &["-p".into(), "3".into()]);
    assert!(!ok, "{out}");
    refused(
        &out,
        "the cluster runs 2 nodes x 2 threads = 4: give the program -p 4",
    );
    // lu -p 6 (CREATE(f, 6)) on 2 x 1.
    let (ok, out) = Run::new(2, 1).go(dir, "lu", &args_of("lu", 6));
    assert!(!ok, "{out}");
    refused(&out, "= 2: give the program -p 2");
}

#[test]
fn what_cannot_work_across_nodes_is_refused_with_a_message() {
    let Some(dir) = built("misuse") else {
        return;
    };
    let run = |mode: &str| {
        Run::new(2, 1).go(
            dir,
            "misuse",
            &["-p".into(), "2".into(), "-m".into(), mode.into()],
        )
    };
    let (ok, out) = run("none");
    assert!(ok && out.contains("misuse: fine"), "{out}");
    // What works although a copy of the globals per node would break it:
    // a GETSUB counter in a global, a global lock initialised by one
    // process after CREATE; and G_MALLOC before MAIN_INITENV starts the
    // cluster there (SPLASH-3's Barnes does it).
    for mode in ["shared", "lock"] {
        let (ok, out) = run(mode);
        assert!(ok && out.contains("misuse: fine"), "{mode}: {out}");
    }
    let (ok, out) = run("early");
    assert!(ok && out.contains("misuse: fine (early)"), "{out}");
    for (mode, what) in [
        (
            "create",
            "CREATE on node 1: only main (process 0, on node 0) may do that",
        ),
        ("exit", "the program exited (status 3) before the run ended"),
    ] {
        let (ok, out) = run(mode);
        assert!(!ok, "{mode}: {out}");
        refused(&out, what);
    }
    // The other node is told, and stops too.
    let (_, out) = run("exit");
    refused(&out, "node 1 failed");
    // A forked child is stopped at once; the run goes on.
    let (ok, out) = run("fork");
    assert!(ok, "{out}");
    assert!(out.contains("csm: fork is not supported"), "{out}");
    assert!(
        out.contains("misuse: the forked child ended with status 1"),
        "{out}"
    );
    assert!(!out.contains("the forked child runs on"), "{out}");
}

/// A program compiled without mc-cc (plain m4 and cc): its globals could
/// not be shipped, so a run on several nodes is refused.
#[test]
fn a_program_not_built_by_mc_cc_is_refused_on_several_nodes() {
    let Some(dir) = built("not_mc_cc") else {
        return;
    };
    let ws = c_program::workspace();
    let c = dir.join("plain-sor.c");
    let m4 = Command::new("m4")
        .args(["-Ulen", "-Uindex"])
        .arg(ws.join("guest-driver/libcsm/m4/c.m4.cashmere"))
        .arg(source_dir().join("sor.C"))
        .output()
        .expect("run m4");
    assert!(m4.status.success());
    std::fs::write(&c, &m4.stdout).expect("write the C file");
    let exe = dir.join("plain-sor");
    let st = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-pthread", "-I"])
        .arg(ws.join("guest-driver/libcsm/include"))
        .arg(&c)
        .arg(dir.parent().expect("profile dir").join("libcsm.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .status()
        .expect("run cc");
    assert!(st.success());
    let (ok, out) = Run::new(2, 1).go(dir, "plain-sor", &args_of("sor", 2));
    assert!(!ok, "{out}");
    refused(&out, "was not built with mc-cc");
}

/// CSM_STATS=1 prints each node's counters and time breakdown; CSM_JSON
/// appends one record with the run's shape, variant and counters.
#[test]
fn statistics_and_the_json_record_as_mc_guest_csm_gives_them() {
    let Some(dir) = built("record") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let json = tmp.path().join("runs.jsonl");
    let (ok, out) = Run::new(2, 2)
        .variant(CsmVariant::Ms)
        .env("CSM_STATS", "1")
        .env("CSM_JSON", &json.to_string_lossy())
        .go(dir, "lu", &args_of("lu", 4));
    assert!(ok, "{out}");
    for n in 0..2 {
        assert!(
            out.contains(&format!(
                "[node{n}] csm lu node {n}: 4 processes (2 nodes x 2), variant ms: faults r/w"
            )),
            "{out}"
        );
    }
    assert!(out.contains("csm time node 1 p2: wall"), "{out}");
    let text = std::fs::read_to_string(&json).expect("the record");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let r: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON");
    assert_eq!(r["kind"], "c");
    assert_eq!(r["app"], "lu");
    assert_eq!(r["processors"], 4);
    assert_eq!(r["levels"], 2);
    assert_eq!(r["variant"], "ms");
    // lu marks its region of interest.
    assert_eq!(r["times"]["compute_is"], "roi");
    assert!(
        r["times"]["compute_s"].as_f64().is_some_and(|s| s > 0.0),
        "{r}"
    );
    let per_node = r["stats"]["per_node"]
        .as_array()
        .expect("per-node counters");
    assert_eq!(per_node.len(), 2);
    assert!(
        r["stats"]["total"]["barriers"]
            .as_u64()
            .is_some_and(|b| b > 0),
        "{r}"
    );
    assert!(r["breakdown"]["total"]["user"].as_f64().is_some(), "{r}");
}

/// The macro file defines every macro SPLASH-2 and SPLASH-3 programs use
/// (issue 32's list and the rest of the public pthreads macro files'), and
/// the pthreads reference file defines the same ones.
#[test]
fn the_macro_files_define_every_anl_macro() {
    let ws = c_program::workspace();
    let read = |f: &str| {
        std::fs::read_to_string(ws.join("guest-driver/libcsm/m4").join(f)).expect("macro file")
    };
    let defined = |text: &str| -> std::collections::BTreeSet<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("define("))
            .filter_map(|l| l.split(',').next())
            .map(str::to_string)
            .collect()
    };
    let csm = defined(&read("c.m4.cashmere"));
    let posix = defined(&read("c.m4.posix"));
    let wanted = "MAIN_ENV EXTERN_ENV MAIN_INITENV MAIN_END CREATE WAIT_FOR_END CLOCK \
        G_MALLOC G_MALLOC_F NU_MALLOC NU_MALLOC_F G_FREE NU_FREE \
        LOCKDEC LOCKINIT LOCK UNLOCK ALOCKDEC ALOCKINIT ALOCK AULOCK AGETL \
        BARDEC BARINIT BARRIER BAREXCLUDE BARINCLUDE ABARDEF ABAREXTERN ABARRIER \
        PAUSEDEC PAUSEINIT SETPAUSE CLEARPAUSE WAITPAUSE PAUSE EVENT \
        GSDEC GSINIT GETSUB NU_GSDEC NU_GSINIT NU_GETSUB ADEC AINIT PROBEND \
        NLOCKDEC NLOCKINIT NLOCK NUNLOCK \
        CONDVARDEC CONDVARINIT CONDVARWAIT CONDVARSIGNAL CONDVARBCAST \
        RELEASE_FENCE ACQUIRE_FENCE FULL_FENCE SPLASH3_ROI_BEGIN SPLASH3_ROI_END \
        INCLUDES ENV NEWPROC GET_PID GET_HOME SET_HOME ST_LOG AUG_ON AUG_OFF \
        TRACE_ON TRACE_OFF MENTER DELAY CONTINUE MEXIT MONINIT";
    for m in wanted.split_whitespace() {
        assert!(csm.contains(m), "c.m4.cashmere lacks {m}");
    }
    assert_eq!(
        csm.iter()
            .filter(|m| !m.starts_with("CSM_"))
            .collect::<Vec<_>>(),
        posix
            .iter()
            .filter(|m| !m.starts_with("CSM_"))
            .collect::<Vec<_>>(),
        "the two macro files define different macros"
    );
}
