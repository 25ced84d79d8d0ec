//! The resource limits of one compilation, in one place.
//!
//! Models come from strangers: a 1 KB file can ask for a 64 GiB constant,
//! nest subgraphs or functions until the compiler exhausts memory, or make
//! constant folding run for minutes. Every stage that could be driven into
//! such a corner reads its bound from [`Limits`], which the CLI builds from
//! its `--max-*` flags (README, "Limits"); a model past a bound fails with a
//! message naming the culprit and the flag that raises the bound.

use std::time::{Duration, Instant};

/// Bounds on what a model may make the compiler do.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest model file (the `.onnx` itself) read, in bytes.
    pub max_file_bytes: u64,
    /// Largest tensor, in bytes: each tensor stored in the model (inline or
    /// external), and each value the graph computes (`--max-tensor-bytes`).
    pub max_tensor_bytes: u64,
    /// Total bytes of external data one model may pull in, over all its
    /// tensors (`--max-external-bytes`): each reference is bounded by
    /// `max_tensor_bytes`, but a small model can repeat one many times.
    pub max_external_bytes: u64,
    /// Largest single constant that constant folding materialises; a larger
    /// result is computed at run time instead (`--max-fold-bytes`).
    pub max_fold_bytes: usize,
    /// Total bytes constant folding may materialise; past it, remaining
    /// foldable nodes are computed at run time (`--max-fold-total`).
    pub max_fold_total_bytes: usize,
    /// How deep model-local functions may call each other while they are
    /// inlined (`--max-function-depth`).
    pub max_function_depth: usize,
    /// How deep subgraphs (If/Loop/Scan bodies) may nest
    /// (`--max-subgraph-depth`).
    pub max_subgraph_depth: usize,
    /// Most nodes the imported graph may have once functions are inlined
    /// (`--max-nodes`): inlining can multiply a small model's size.
    pub max_nodes: usize,
    /// Wall time the compile stages may take, checked between nodes and
    /// between generated functions
    /// (`--max-compile-seconds`).
    pub max_compile_time: Duration,
    /// When the clock for `max_compile_time` started (when the limits
    /// were made, or [`Limits::restart_clock`]).
    pub started: Instant,
}

impl Default for Limits {
    /// 2 GiB model files (protobuf's own limit), 4 GiB tensors, 16 GiB of
    /// external data in all, 16 MiB per
    /// folded constant and 1 GiB in all, functions 32 and subgraphs 16 deep,
    /// a million nodes, ten minutes.
    fn default() -> Limits {
        Limits {
            max_file_bytes: 2 << 30,
            max_tensor_bytes: 4 << 30,
            max_external_bytes: 16 << 30,
            max_fold_bytes: 16 << 20,
            max_fold_total_bytes: 1 << 30,
            max_function_depth: 32,
            max_subgraph_depth: 16,
            max_nodes: 1_000_000,
            max_compile_time: Duration::from_secs(600),
            started: Instant::now(),
        }
    }
}

impl Limits {
    /// Starts the compile-time clock again (one `onnxc test` case after another).
    pub fn restart_clock(&mut self) {
        self.started = Instant::now();
    }

    /// Fails once the compile has taken longer than `max_compile_time`;
    /// `at` names where it was (e.g. a node).
    pub fn check_time(&self, at: &str) -> Result<(), String> {
        let spent = self.started.elapsed();
        if spent <= self.max_compile_time {
            return Ok(());
        }
        Err(format!(
            "{at}: compiling took longer than the limit of {} s (raise it with --max-compile-seconds)",
            self.max_compile_time.as_secs_f64()
        ))
    }
}

/// Parses a byte count: `4096`, `16K`, `16M`, `4G` (also `KiB`, `MiB`,
/// `GiB`; powers of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        other => return Err(format!("\"{text}\": unknown unit \"{other}\" (use K, M, G or T)")),
    };
    let n: u64 = digits.parse().map_err(|_| format!("\"{text}\" is not a byte count"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("\"{text}\" is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_binary_units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("16M"), Ok(16 << 20));
        assert_eq!(parse_bytes("4GiB"), Ok(4 << 30));
        assert!(parse_bytes("4X").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }

    #[test]
    fn the_clock_fails_only_after_the_limit() {
        let mut limits = Limits { max_compile_time: Duration::ZERO, ..Limits::default() };
        std::thread::sleep(Duration::from_millis(2));
        assert!(limits.check_time("node \"a\"").unwrap_err().contains("node \"a\""));
        limits.max_compile_time = Duration::from_secs(60);
        limits.restart_clock();
        assert_eq!(limits.check_time("x"), Ok(()));
    }
}
