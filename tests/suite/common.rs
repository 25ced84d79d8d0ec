//! Helpers shared by the suite's modules: where things are, how to run onnxc.

use onnx_proto::{ModelProto, TensorProto};
use prost::Message;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The repository root: the nearest ancestor of the crate that registers
/// this test binary which holds `tests/conformance/passing.txt`.
pub fn repo_root() -> PathBuf {
    let start = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in start.ancestors() {
        if dir.join("tests/conformance/passing.txt").is_file() {
            return dir.to_path_buf();
        }
    }
    panic!("cannot find the repository root (no tests/conformance/passing.txt above {})", start.display());
}

/// `tests/data/`, or a clear failure telling how to make it.
pub fn data_dir() -> PathBuf {
    let data = repo_root().join("tests/data");
    if !data.is_dir() {
        panic!(
            "{} does not exist: run `bash tests/make_data.sh` first \
             (or `bash tests/run.sh`, which does everything)",
            data.display()
        );
    }
    data
}

/// The onnxc binary cargo built for this test run.
pub fn onnxc() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_onnxc"));
    if !exe.is_file() {
        panic!(
            "the onnxc binary {} does not exist; build it (`cargo build --release`) \
             or run the suite through `cargo test`",
            exe.display()
        );
    }
    exe
}

/// What a finished (or killed) child process left behind.
pub struct Output {
    /// `None` when the process was killed after the timeout.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    /// "exit code 3", "killed by signal 11", "timed out after 600 s".
    pub fn describe_status(&self) -> String {
        match self.status {
            None => format!("timed out after {} s and was killed", self.elapsed.as_secs()),
            Some(s) => describe_exit(s),
        }
    }

    /// The last `n` lines of stderr, for failure messages.
    pub fn stderr_tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.stderr.lines().collect();
        let from = lines.len().saturating_sub(n);
        lines[from..].join("\n")
    }
}

fn describe_exit(s: ExitStatus) -> String {
    if let Some(code) = s.code() {
        return format!("exit code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            return format!("killed by signal {sig}");
        }
    }
    format!("{s}")
}

/// Runs `cmd` with stdout/stderr captured, killing it after `timeout`.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> std::io::Result<Output> {
    let start = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut out_pipe = child.stdout.take().expect("stdout is piped");
    let mut err_pipe = child.stderr.take().expect("stderr is piped");
    let out_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out_pipe.read_to_end(&mut buf);
        buf
    });
    let err_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.read_to_end(&mut buf);
        buf
    });
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if start.elapsed() >= timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    Ok(Output { status, stdout, stderr, elapsed: start.elapsed() })
}

/// A positive integer from the environment, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .ok()
            .filter(|&n: &usize| n > 0)
            .unwrap_or_else(|| panic!("{name}={v:?} is not a positive integer")),
        Err(_) => default,
    }
}

/// Runs `onnxc ARGS` in `dir`, killed after two minutes.
pub fn onnxc_in(dir: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(onnxc());
    c.args(args).current_dir(dir);
    run_with_timeout(c, Duration::from_secs(120)).expect("run onnxc")
}

pub fn succeeded(out: &Output) -> bool {
    out.status.is_some_and(|s| s.success())
}

/// Writes `m` to `dir/name`.
pub fn write_model(dir: &Path, name: &str, m: &ModelProto) {
    std::fs::write(dir.join(name), m.encode_to_vec()).expect("write model");
}

/// `onnxc run` on `m` with `inputs` in a fresh folder: the outputs, or the
/// failed run's output.
pub fn run_model(m: &ModelProto, inputs: &[TensorProto]) -> Result<Vec<TensorProto>, Output> {
    let dir = tempfile::tempdir().expect("temporary folder");
    write_model(dir.path(), "model.onnx", m);
    let mut args = vec!["run".to_string(), "model.onnx".into()];
    for (k, t) in inputs.iter().enumerate() {
        let name = format!("input_{k}.pb");
        std::fs::write(dir.path().join(&name), t.encode_to_vec()).expect("write input");
        args.push(name);
    }
    args.extend(["-o".into(), "out".into()]);
    let out = onnxc_in(dir.path(), &args.iter().map(String::as_str).collect::<Vec<_>>());
    if !succeeded(&out) {
        return Err(out);
    }
    let read = |k: usize| std::fs::read(dir.path().join(format!("out/output_{k}.pb"))).ok();
    Ok((0..).map_while(read).map(|b| TensorProto::decode(b.as_slice()).expect("a TensorProto")).collect())
}

/// Runs `cmd` (five minutes at most) and returns its stdout; fails the
/// test with everything it printed unless it succeeded.
pub fn run_ok(cmd: Command, what: &str) -> String {
    let out = run_with_timeout(cmd, Duration::from_secs(300)).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.is_some_and(|s| s.success()),
        "{what} failed ({}):\n{}\n{}",
        out.describe_status(),
        out.stdout,
        out.stderr
    );
    out.stdout
}

/// The number a generated C header defines: `#define NAME 123u` → 123.
pub fn header_number(header: &Path, name: &str) -> usize {
    let text = std::fs::read_to_string(header).unwrap_or_else(|e| panic!("{}: {e}", header.display()));
    let prefix = format!("#define {name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.trim_end_matches('u').parse().ok())
        .unwrap_or_else(|| panic!("{} defines no number {name}:\n{text}", header.display()))
}

/// Builds `tests/suite/c/{program}.c` with the headers and the
/// `archives` in `dir` (plus `-lm`), runs it, and fails unless it printed
/// just "ok".
pub fn run_c_program(dir: &Path, program: &str, archives: &[&str]) {
    let exe = dir.join(program);
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/suite/c/{program}.c"));
    let mut cc = Command::new("cc");
    cc.args(["-std=c11", "-O2", "-Wall", "-Werror", "-I"])
        .arg(dir)
        .arg(source)
        .args(archives.iter().map(|a| dir.join(a)))
        .arg("-lm")
        .arg("-o")
        .arg(&exe);
    let built = run_with_timeout(cc, Duration::from_secs(120)).expect("run cc");
    assert!(succeeded(&built), "cc failed: {}", built.stderr);
    let ran = run_with_timeout(Command::new(&exe), Duration::from_secs(60)).expect("run the program");
    assert!(succeeded(&ran) && ran.stdout.trim() == "ok", "{}{}", ran.stdout, ran.stderr);
}
