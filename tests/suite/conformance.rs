//! The conformance ratchet: every case in `tests/conformance/passing.txt`
//! must pass `onnxc test`, through the JIT (all listed cases) and through an
//! object file (a fixed fifth of them, chosen by a hash of each case's name,
//! so that adding a line to the list moves no other case in or out of that
//! subset); every case in
//! `tests/conformance/portable.txt` must pass `onnxc test --portable` (no
//! kernel library: the code cross-target objects run). Both run with
//! `--guard-pages`: every buffer the compiled code sees ends on a PROT_NONE
//! page, so an out-of-bounds access kills onnxc and fails its case.
//!
//! Cases are run in batches, many case folders per `onnxc test` call, with a
//! few batches in parallel. If onnxc dies in the middle of a batch, the cases
//! it did not report are rerun one per process so the culprit is named.
//!
//! Knobs (environment): ONNXC_CONFORMANCE_JOBS (parallel onnxc processes,
//! default: available cores), ONNXC_CONFORMANCE_BATCH (cases per process,
//! default 100), ONNXC_CONFORMANCE_TIMEOUT (seconds per process, default 900).

use crate::common::{self, Output};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Whole models accumulate float rounding over hundreds of layers: they are
/// compared with ONNX Runtime at rtol 1e-3 / atol 1e-4; the scikit-learn
/// models at atol 1e-5 (`sklearn.rs`); every other folder uses `onnxc
/// test`'s defaults (the ONNX backend's rtol 1e-3 / atol 1e-7).
/// `tests/update_passing.sh` applies the same rule.
fn tolerance_args(folder: &str) -> &'static [&'static str] {
    if folder.starts_with("light") {
        &["--atol", "1e-4"]
    } else if folder == "sklearn" {
        crate::sklearn::TOLERANCE
    } else {
        &[]
    }
}

/// Top-level folders of tests/data that hold cases.
pub const FOLDERS: &[&str] =
    &["node", "simple", "pytorch-converted", "pytorch-operator", "light", "light-random", "sklearn", "maps"];

/// One listed case in `OBJECT_SHARE` is also run with `--via object`.
const OBJECT_SHARE: u64 = 5;

/// Whether `case` is one of those: its name's FNV-1a hash is a multiple of
/// `OBJECT_SHARE`, which depends on nothing but the name.
fn runs_through_object(case: &str) -> bool {
    let hash = case.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    hash.is_multiple_of(OBJECT_SHARE)
}

/// The ratchet of the default build.
const PASSING: &str = "tests/conformance/passing.txt";
/// The ratchet of portable mode (`onnxc test --portable`: no kernel library).
const PORTABLE: &str = "tests/conformance/portable.txt";

/// A ratchet list, parsed: (line number, case path relative to tests/data).
fn read_list(list: &str) -> Vec<(usize, String)> {
    let path = common::repo_root().join(list);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let line = line.split('#').next().unwrap_or("").trim();
            (!line.is_empty()).then(|| (i + 1, line.to_string()))
        })
        .collect()
}

fn listed_cases(list: &str) -> Vec<String> {
    read_list(list).into_iter().map(|(_, c)| c).collect()
}

#[test]
fn passing_lists_are_well_formed() {
    for list in [PASSING, PORTABLE] {
        check_list(list);
    }
}

fn check_list(list: &str) {
    let mut problems = Vec::new();
    let entries = read_list(list);
    for w in entries.windows(2) {
        let ((_, a), (line, b)) = (&w[0], &w[1]);
        if a == b {
            problems.push(format!("line {line}: duplicate {b}"));
        } else if a > b {
            problems.push(format!("line {line}: {b} is out of order (after {a}); keep the list sorted"));
        }
    }
    for (line, case) in &entries {
        let mut parts = case.split('/');
        let folder = parts.next().unwrap_or("");
        let name = parts.next().unwrap_or("");
        if !FOLDERS.contains(&folder) || name.is_empty() || parts.next().is_some() {
            problems.push(format!("line {line}: {case:?} is not FOLDER/CASE with FOLDER one of {FOLDERS:?}"));
        }
    }
    assert!(problems.is_empty(), "{list}:\n  {}", problems.join("\n  "));
}

#[test]
fn conformance_jit() {
    let cases = listed_cases(PASSING);
    run_ratchet(PASSING, "jit", &cases, &[]);
}

#[test]
fn conformance_object() {
    let cases: Vec<String> = listed_cases(PASSING).into_iter().filter(|c| runs_through_object(c)).collect();
    run_ratchet(PASSING, "object", &cases, &[]);
}

/// Portable mode on this machine: what cross-target objects compute.
#[test]
fn conformance_portable() {
    let cases = listed_cases(PORTABLE);
    run_ratchet(PORTABLE, "jit", &cases, &["--portable"]);
}

/// The result for one case: `Ok(())` or the reason it did not pass.
type Verdict = Result<(), String>;

/// Runs `onnxc test --via VIA EXTRA...` over `cases` of the ratchet `list`.
fn run_ratchet(list: &str, via: &str, cases: &[String], extra: &'static [&'static str]) {
    let data = common::data_dir();
    let start = Instant::now();

    // A listed case must exist; a missing one is a failure, not a skip.
    let mut verdicts: BTreeMap<String, Verdict> = BTreeMap::new();
    let mut present = Vec::new();
    for case in cases {
        if data.join(case).join("model.onnx").is_file() {
            present.push(case.clone());
        } else {
            verdicts.insert(
                case.clone(),
                Err(format!(
                    "no {}/model.onnx (stale data? run `FORCE=1 bash tests/make_data.sh`)",
                    data.join(case).display()
                )),
            );
        }
    }

    if !present.is_empty() {
        let exe = common::onnxc();
        let batch = common::env_usize("ONNXC_CONFORMANCE_BATCH", 100);
        let jobs = common::env_usize("ONNXC_CONFORMANCE_JOBS", thread::available_parallelism().map_or(1, |n| n.get()));
        let timeout = Duration::from_secs(common::env_usize("ONNXC_CONFORMANCE_TIMEOUT", 900) as u64);
        let runner = Runner { exe, data: data.clone(), via: via.to_string(), extra, timeout };
        verdicts.extend(runner.run_all(&present, batch, jobs));
    }

    let failed: Vec<(&String, &String)> =
        verdicts.iter().filter_map(|(c, v)| v.as_ref().err().map(|r| (c, r))).collect();
    eprintln!(
        "conformance --via {via} {}: {} listed, {} passed, {} failed in {:.1} s",
        extra.join(" "),
        cases.len(),
        cases.len() - failed.len(),
        failed.len(),
        start.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        let mut msg = format!(
            "{} of {} cases listed in {list} did not pass `onnxc test --via {via} {}`:\n",
            failed.len(),
            cases.len(),
            extra.join(" ")
        );
        for (case, reason) in &failed {
            let _ = writeln!(msg, "  {case}: {reason}");
        }
        msg.push_str(
            "A listed case is a promise: fix the regression, or remove the line with a reason in the commit message.",
        );
        panic!("{msg}");
    }
}

struct Runner {
    exe: PathBuf,
    data: PathBuf,
    via: String,
    /// More `onnxc test` arguments (`--portable`).
    extra: &'static [&'static str],
    timeout: Duration,
}

impl Runner {
    /// Runs all `cases` in batches on `jobs` worker threads.
    fn run_all(self, cases: &[String], batch: usize, jobs: usize) -> BTreeMap<String, Verdict> {
        // Batches never mix top-level folders, so a case's folder name is
        // unique within its batch whatever form of name onnxc prints.
        let mut by_folder: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for case in cases {
            let folder = case.split('/').next().unwrap_or("");
            by_folder.entry(folder).or_default().push(case.clone());
        }
        let mut batches: Vec<Vec<String>> = Vec::new();
        for list in by_folder.values() {
            batches.extend(list.chunks(batch).map(|c| c.to_vec()));
        }

        let queue = Arc::new(Mutex::new(batches));
        let results = Arc::new(Mutex::new(BTreeMap::new()));
        let runner = Arc::new(self);
        let workers: Vec<_> = (0..jobs.max(1))
            .map(|_| {
                let (queue, results, runner) = (queue.clone(), results.clone(), runner.clone());
                thread::spawn(move || loop {
                    let Some(batch) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let verdicts = runner.run_batch(&batch, true);
                    results.lock().unwrap().extend(verdicts);
                })
            })
            .collect();
        for w in workers {
            if w.join().is_err() {
                panic!("a conformance worker thread panicked");
            }
        }
        let results = results.lock().unwrap();
        results.clone()
    }

    fn run_one(&self, cases: &[String]) -> Result<Output, String> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("test").arg("--guard-pages").arg("--via").arg(&self.via).args(self.extra).current_dir(&self.data);
        let folder = cases.first().and_then(|c| c.split('/').next()).unwrap_or("");
        cmd.args(tolerance_args(folder));
        for case in cases {
            cmd.arg(self.data.join(case));
        }
        common::run_with_timeout(cmd, self.timeout).map_err(|e| format!("cannot run {}: {e}", self.exe.display()))
    }

    /// Runs one `onnxc test` over `cases`; cases it did not report are rerun
    /// alone when `retry_missing` (onnxc crashed or hung part-way).
    fn run_batch(&self, cases: &[String], retry_missing: bool) -> Vec<(String, Verdict)> {
        let out = match self.run_one(cases) {
            Ok(out) => out,
            Err(e) => return cases.iter().map(|c| (c.clone(), Err(e.clone()))).collect(),
        };
        let report = parse_report(&out.stdout);

        // Case folder name -> case; unique within a batch (see run_all).
        let by_name: HashMap<&str, &String> = cases.iter().map(|c| (case_basename(c), c)).collect();
        let mut verdicts: HashMap<&String, Verdict> = HashMap::new();
        for (name, verdict) in &report.lines {
            if let Some(case) = by_name.get(case_basename(name)) {
                // a case reported twice (several data sets?) passes only if all pass
                let entry = verdicts.entry(case).or_insert(Ok(()));
                if entry.is_ok() {
                    *entry = verdict.clone();
                }
            }
        }

        // The contract: last line "N passed, N failed"; exit nonzero iff a case failed.
        // Checked only when onnxc exited normally: after a crash or a timeout the
        // cases it did report stand, and the rest are retried below.
        let any_failed = verdicts.values().any(|v| v.is_err());
        let exited = out.status.is_some_and(|s| s.code().is_some());
        let mut protocol = Vec::new();
        match report.summary {
            _ if !exited => {}
            None => protocol.push("no final \"N passed, N failed\" line".to_string()),
            Some((p, f)) if (p, f) != report.counts => protocol.push(format!(
                "summary says {p} passed, {f} failed but {} PASS and {} FAIL lines were printed",
                report.counts.0, report.counts.1
            )),
            Some(_) => {}
        }
        if let Some(status) = out.status.filter(|_| exited) {
            if status.success() == any_failed {
                protocol.push(format!(
                    "{} although {} case failed",
                    out.describe_status(),
                    if any_failed { "a" } else { "no" }
                ));
            }
        }

        let missing: Vec<String> = cases.iter().filter(|c| !verdicts.contains_key(c)).cloned().collect();
        let mut result: Vec<(String, Verdict)> = verdicts
            .into_iter()
            .map(|(c, v)| {
                // A case that "passed" in a run that broke the output contract
                // is not trusted.
                let v = match (&v, protocol.is_empty()) {
                    (Ok(()), false) => Err(format!("onnxc output broke the contract: {}", protocol.join("; "))),
                    _ => v,
                };
                (c.clone(), v)
            })
            .collect();

        if !missing.is_empty() {
            if retry_missing && cases.len() > 1 {
                for case in &missing {
                    result.extend(self.run_batch(std::slice::from_ref(case), false));
                }
            } else {
                let tail = out.stderr_tail(5);
                let reason = format!(
                    "onnxc printed no PASS/FAIL line for it ({}){}",
                    out.describe_status(),
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!("; stderr:\n      {}", tail.replace('\n', "\n      "))
                    }
                );
                result.extend(missing.into_iter().map(|c| (c, Err(reason.clone()))));
            }
        }
        result
    }
}

/// The last path component of a case name as onnxc printed it, or of a
/// listed case: "node/test_add", "/abs/tests/data/node/test_add/" -> "test_add".
fn case_basename(name: &str) -> &str {
    let name = name.trim().trim_end_matches(['/', '\\']);
    name.rsplit(['/', '\\']).next().unwrap_or(name)
}

struct Report {
    /// (case name as printed, verdict), in output order.
    lines: Vec<(String, Verdict)>,
    /// (PASS lines, FAIL lines).
    counts: (usize, usize),
    /// The final "N passed, N failed" line, if the last non-empty line is one.
    summary: Option<(usize, usize)>,
}

/// Parses `onnxc test` output (`compiler/src/cli/test.rs`): "PASS name", "FAIL name: reason",
/// then "N passed, N failed" as the last line. Other lines are ignored.
fn parse_report(stdout: &str) -> Report {
    let mut lines = Vec::new();
    let mut counts = (0, 0);
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix("PASS ") {
            lines.push((name.trim().to_string(), Ok(())));
            counts.0 += 1;
        } else if let Some(rest) = line.strip_prefix("FAIL ") {
            let (name, reason) = match rest.split_once(": ") {
                Some((n, r)) => (n, r),
                None => (rest.trim_end_matches(':'), "(no reason given)"),
            };
            lines.push((name.trim().to_string(), Err(reason.trim().to_string())));
            counts.1 += 1;
        }
    }
    let summary = stdout.lines().rev().find(|l| !l.trim().is_empty()).and_then(parse_summary);
    Report { lines, counts, summary }
}

fn parse_summary(line: &str) -> Option<(usize, usize)> {
    let (p, f) = line.trim().split_once(" passed, ")?;
    let f = f.strip_suffix(" failed")?;
    Some((p.parse().ok()?, f.parse().ok()?))
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn parses_the_cli_contract() {
        let out = "compiling...\nPASS test_add\nFAIL node/test_sub: output 0 mismatch: max abs diff 1.5\nFAIL test_x:\n1 passed, 2 failed\n";
        let r = parse_report(out);
        assert_eq!(r.counts, (1, 2));
        assert_eq!(r.summary, Some((1, 2)));
        assert_eq!(r.lines[0], ("test_add".to_string(), Ok(())));
        assert_eq!(r.lines[1], ("node/test_sub".to_string(), Err("output 0 mismatch: max abs diff 1.5".to_string())));
        assert_eq!(r.lines[2].0, "test_x");
        assert_eq!(parse_report("PASS a\n").summary, None);
        assert_eq!(case_basename("/x/tests/data/node/test_add/"), "test_add");
        assert_eq!(case_basename("test_add"), "test_add");
    }
}
