//! `scripts/mc-cc` as a program's own build uses it (docs/c-programs.md,
//! "mc-cc in a Makefile"): the CC of a SPLASH-style Makefile, whose own m4
//! takes mc-cc's macro file (`mc-cc --macros`) as SPLASH's Makefile.config
//! sets MACROS, compiling with `-c` and linking objects, an archive made
//! with `ar` and a shared library; and the same program built in one step
//! from its source directory. The program (`integration/c/mc-cc-make/`) has
//! a `.H` header that m4-includes another generated header, and a `.C` file
//! in a subdirectory that includes `"../common.h"`; it checks its own
//! result, and the test checks the sum it prints against one computed here,
//! on 2 nodes x 2 threads. Also what mc-cc refuses, and how.
//!
//! Each test builds in a temporary directory of its own. Those that build
//! are skipped, saying so, without a C compiler, m4, binutils or make.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use integration::c_program::tool;
use integration::{build, c_program};

/// One cluster at a time: they share the machine's cores.
static CLUSTER: Mutex<()> = Mutex::new(());

fn mc_cc_path() -> PathBuf {
    c_program::workspace().join("scripts/mc-cc")
}

fn fixture_dir() -> PathBuf {
    c_program::workspace().join("integration/c/mc-cc-make")
}

/// The C compiler if every tool a build needs runs, else None (the test is
/// skipped) saying why.
fn tools(test: &str) -> Option<String> {
    let found = c_program::compiler().and_then(|cc| {
        tool("m4", "--version")?;
        tool("objcopy", "--version")?;
        tool("objdump", "--version")?;
        tool("ar", "--version")?;
        tool("make", "--version")?;
        Ok(cc)
    });
    match found {
        Ok(cc) => Some(cc),
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

/// Copy the fixture program into `to`, subdirectories too.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the build directory");
    for entry in std::fs::read_dir(from).expect("read the fixture directory") {
        let entry = entry.expect("a fixture file");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy a fixture file");
        }
    }
}

fn text(o: &Output) -> String {
    integration::output_text(o)
}

/// mc-cc (or make calling it) with the compiler and libcsm of this test.
fn with_env<'a>(cmd: &'a mut Command, cc: &str) -> &'a mut Command {
    cmd.env("MC_CC_CC", cc)
        .env("MC_CSM_LIB", build::library_dir("libcsm"))
}

/// `mcmake -p 4` on 2 nodes x 2 threads: its output, each node's lines read
/// back from files (`mc-host run` stops reading its guests' pipes shortly
/// after they exit) and prefixed `[nodeN]`.
fn run_2x2(exe: &Path) -> (bool, String) {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let outs = tempfile::tempdir().expect("temporary directory");
    let o = quote(&outs.path().to_string_lossy());
    let cmd = format!(
        "exec {} -p 4 > {o}/node$MC_NODE.out 2> {o}/node$MC_NODE.err",
        quote(&exe.to_string_lossy())
    );
    let (ok, mut out) = {
        let _one = CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
        integration::mc_host_run(2, 180, &["--threads", "2"], &["sh", "-c", &cmd])
    };
    for n in 0..2 {
        for ext in ["out", "err"] {
            if let Ok(t) = std::fs::read_to_string(outs.path().join(format!("node{n}.{ext}"))) {
                for l in t.lines() {
                    out += &format!("[node{n}] {l}\n");
                }
            }
        }
    }
    (ok, out)
}

/// The line node 0 prints: item i is scale_factor (3) x twice (the shared
/// library) of weight (weight_base 10 + i % 7, the archive) x the
/// multiplier of sub/tally.H (5), over 96 items (params.H). Globals main
/// sets after the start that another node did not see would give another
/// sum.
fn expected_line() -> String {
    let sum: i64 = (0..96).map(|i| 3 * (2 * (10 + i % 7) * 5)).sum();
    format!("[node0] mcmake: sum {sum} over 96 items, 4 processes")
}

fn check_run(exe: &Path) {
    let (ok, out) = run_2x2(exe);
    assert!(ok, "mcmake on 2 x 2 failed:\n{out}");
    let want = expected_line();
    assert!(
        out.lines().any(|l| l == want),
        "mcmake on 2 x 2 did not print {want:?}:\n{out}"
    );
}

#[test]
fn a_splash_style_makefile_with_mc_cc_as_cc_builds_a_program_that_runs_verified() {
    let Some(cc) = tools("makefile") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().join("mcmake");
    copy_tree(&fixture_dir(), &dir);
    // CC on make's command line, as a user sets it: make exports it to the
    // commands, so mc-cc sees CC naming itself.
    let o = with_env(&mut Command::new("make"), &cc)
        .arg("-C")
        .arg(&dir)
        .arg(format!("CC={}", mc_cc_path().display()))
        .arg(format!("HOSTCC={cc}"))
        .output()
        .expect("run make");
    let log = text(&o);
    assert!(o.status.success(), "make failed:\n{log}");
    // The Makefile's own m4 took mc-cc's macro file, and mc-cc compiled
    // with -c and linked the objects, the archive and the shared library.
    let macros = c_program::workspace().join("guest-driver/libcsm/m4/c.m4.cashmere");
    assert!(
        log.contains(&format!("m4 -s -Ulen -Uindex {} prog.H", macros.display())),
        "{log}"
    );
    assert!(
        log.contains("-o mcmake libweight.a libhelp.so"),
        "the link line is not the Makefile's:\n{log}"
    );
    for f in ["params.h", "prog.h", "main.c", "main.o", "work.o", "util.o"] {
        assert!(dir.join(f).is_file(), "make made no {f}:\n{log}");
    }
    // mc-cc -c placed the objects' globals in its sections, archived too.
    let sections = Command::new("objdump")
        .arg("-h")
        .arg(dir.join("libweight.a"))
        .output()
        .expect("run objdump");
    assert!(text(&sections).contains("csm_data"), "{}", text(&sections));
    check_run(&dir.join("mcmake"));
}

#[test]
fn mc_cc_builds_the_same_program_in_one_step_from_its_source_directory() {
    let Some(cc) = tools("one_step") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path().join("mcmake");
    copy_tree(&fixture_dir(), &dir);
    // The object, the archive and the shared library made by plain cc and
    // ar: mc-cc renames the globals' sections in its copies of the object
    // and the archive, so that main's settings of their globals reach the
    // other node.
    for args in [
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libhelp.so",
            "-o",
            "libhelp.so",
            "help.c",
        ][..],
        &["-O2", "-c", "util.c"][..],
        &["-O2", "-c", "weight.c"][..],
    ] {
        let o = Command::new(&cc)
            .current_dir(&dir)
            .args(args)
            .output()
            .expect("run cc");
        assert!(o.status.success(), "cc {args:?}: {}", text(&o));
    }
    let o = Command::new("ar")
        .current_dir(&dir)
        .args(["rcs", "libweight.a", "weight.o"])
        .output()
        .expect("run ar");
    assert!(o.status.success(), "ar: {}", text(&o));
    // Nothing generated yet: mc-cc makes params.h before prog.h and
    // sub/tally.h before sub/stage.h, m4 finds them in its build directory,
    // and cc finds "../common.h" from sub/work.C's directory.
    let o = with_env(&mut Command::new(mc_cc_path()), &cc)
        .current_dir(&dir)
        .args(["-Wall", "-Werror", "-o", "mcmake", "main.C", "sub/work.C"])
        .args(["util.o", "libweight.a", "libhelp.so", "-Wl,-rpath,$ORIGIN"])
        .output()
        .expect("run mc-cc");
    assert!(o.status.success(), "mc-cc failed:\n{}", text(&o));
    // The files given are left as they were.
    let sections = Command::new("objdump")
        .arg("-h")
        .arg(dir.join("libweight.a"))
        .output()
        .expect("run objdump");
    assert!(!text(&sections).contains("csm_data"), "{}", text(&sections));
    for f in ["params.h", "prog.h", "sub/stage.h", "main.c"] {
        assert!(
            !dir.join(f).exists(),
            "mc-cc wrote {f} into the source tree"
        );
    }
    check_run(&dir.join("mcmake"));
}

/// mc-cc with `args` in `dir`: its exit code and its output.
fn mc_cc_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(mc_cc_path())
        .current_dir(dir)
        .env("MC_CC_CC", "cc")
        .args(args)
        .output()
        .expect("run mc-cc");
    (o.status.code(), text(&o))
}

#[test]
fn mc_cc_refuses_what_it_cannot_build_saying_why() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path();
    std::fs::write(dir.join("a.C"), "int main(void) { return 0; }\n").expect("write a.C");
    std::fs::write(dir.join("b.c"), "int b;\n").expect("write b.c");
    for (args, what) in [
        (
            &["-o", "p", "a.C", "notes.txt"][..],
            "mc-cc: notes.txt: not a source (.C, .c.in, .U or .c), an object or library (.o, .a, .so) nor an option",
        ),
        (
            &["-shared", "-o", "p.so", "a.C"][..],
            "mc-cc: -shared: mc-cc builds programs, not shared libraries",
        ),
        (&["-S", "a.C"][..], "mc-cc: -S: not supported"),
        (&["-x", "c", "a.C"][..], "mc-cc: -x: not supported"),
        (&["-M", "a.C"][..], "mc-cc: -M: not supported"),
        (
            &["-c", "-o", "x.o", "a.C", "b.c"][..],
            "mc-cc: -o x.o with -c and 2 sources: one object each",
        ),
        (&["-c", "x.o"][..], "mc-cc: no source files to compile"),
        (&["-o", "p", "gone.o"][..], "mc-cc: gone.o: no such file"),
        (&["-I"][..], "mc-cc: -I needs an argument"),
    ] {
        let (code, out) = mc_cc_in(dir, args);
        assert_eq!(code, Some(2), "mc-cc {args:?}:\n{out}");
        assert!(out.contains(what), "mc-cc {args:?} did not say {what:?}:\n{out}");
    }
    assert!(!dir.join("p").exists() && !dir.join("x.o").exists());
}

#[test]
fn mc_cc_names_its_macro_files_for_a_makefile() {
    let ws = c_program::workspace();
    let tmp = tempfile::tempdir().expect("temporary directory");
    for (args, file) in [
        (&["--macros"][..], "c.m4.cashmere"),
        (&["--posix", "--macros"][..], "c.m4.posix"),
    ] {
        let (code, out) = mc_cc_in(tmp.path(), args);
        assert_eq!(code, Some(0), "{out}");
        let want = ws.join("guest-driver/libcsm/m4").join(file);
        assert_eq!(out.trim_end(), want.to_string_lossy(), "mc-cc {args:?}");
        assert!(want.is_file());
    }
}

/// A header m4 cannot make, for want of a file nothing generates, is named,
/// after m4's own message, and nothing is compiled.
#[test]
fn a_header_m4_cannot_make_is_named() {
    if tools("bad_header").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = tmp.path();
    std::fs::write(dir.join("a.C"), "int main(void) { return 0; }\n").expect("write a.C");
    std::fs::write(dir.join("ok.H"), "#define OK 1\n").expect("write ok.H");
    std::fs::write(dir.join("bad.H"), "include(ok.h)\ninclude(nowhere.h)\n").expect("write bad.H");
    let (code, out) = mc_cc_in(dir, &["-c", "a.C"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("cannot open `nowhere.h'"), "{out}");
    assert!(
        out.contains(&format!(
            "mc-cc: {}: m4 failed (above)",
            dir.join("bad.H").display()
        )),
        "{out}"
    );
    assert!(!dir.join("a.o").exists());
}
