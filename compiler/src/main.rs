//! The `onnxc` command line: compile, check, info, run, test,
//! bench. `onnxc MODEL -o OUT.o` is shorthand for `onnxc compile`.

mod cli;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "onnxc", version, about = "Ahead-of-time compiler from ONNX models to native object files")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone, Default)]
pub struct ShapeArgs {
    /// Fix an input's shape: NAME=1x3x224x224; a sequence input's element
    /// shapes: NAME=2x3,4 (NAME=[] for none); an empty optional: NAME=none
    #[arg(long = "shape", value_name = "NAME=AxBxC")]
    pub shapes: Vec<String>,
    /// Bind a symbolic dim: SYM=N specialises to N; SYM=LO..HI or
    /// SYM=..HI compiles the code for every size in the range (elementwise
    /// and MatMul graphs yet), SYM=LO..HI%K for multiples of K in it
    #[arg(long = "dim", value_name = "SYM=N")]
    pub dims: Vec<String>,
}

/// Overrides of [`onnxc::limits::Limits`]; README, "Limits".
#[derive(clap::Args, Clone, Default)]
#[command(next_help_heading = "Limits")]
pub struct LimitArgs {
    /// Largest model file read [default: 2G]
    #[arg(long, value_name = "BYTES", value_parser = onnxc::limits::parse_bytes)]
    pub max_file_bytes: Option<u64>,
    /// Largest tensor stored in the model or computed by it [default: 4G]
    #[arg(long, value_name = "BYTES", value_parser = onnxc::limits::parse_bytes)]
    pub max_tensor_bytes: Option<u64>,
    /// Total external data one model may pull in [default: 16G]
    #[arg(long, value_name = "BYTES", value_parser = onnxc::limits::parse_bytes)]
    pub max_external_bytes: Option<u64>,
    /// Largest constant materialised by constant folding [default: 16M]
    #[arg(long, value_name = "BYTES", value_parser = onnxc::limits::parse_bytes)]
    pub max_fold_bytes: Option<u64>,
    /// Total bytes constant folding may materialise [default: 1G]
    #[arg(long, value_name = "BYTES", value_parser = onnxc::limits::parse_bytes)]
    pub max_fold_total: Option<u64>,
    /// How deep model-local functions may call each other [default: 32]
    #[arg(long, value_name = "N")]
    pub max_function_depth: Option<usize>,
    /// How deep subgraphs may nest [default: 16]
    #[arg(long, value_name = "N")]
    pub max_subgraph_depth: Option<usize>,
    /// Most nodes once functions are inlined [default: 1000000]
    #[arg(long, value_name = "N")]
    pub max_nodes: Option<usize>,
    /// Wall time of the whole compilation, checked at every node and generated function [default: 600]
    #[arg(long, value_name = "SECONDS")]
    pub max_compile_seconds: Option<u64>,
}

#[derive(Subcommand)]
enum Command {
    /// Compile a model to an object file (and header, archive, Rust module, mir)
    Compile(cli::compile::Args),
    /// Validate a model; list every problem and every unsupported operator
    Check {
        model: PathBuf,
        #[command(flatten)]
        shapes: ShapeArgs,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Show IR/opsets, inputs/outputs, an op histogram, parameters and MACs
    Info {
        model: PathBuf,
        #[command(flatten)]
        shapes: ShapeArgs,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Compile for this machine, run on inputs, write output_K.pb
    Run(cli::run::RunArgs),
    /// Run ONNX backend-test case folders
    Test(cli::test::Args),
    /// Time the model after warm-up
    Bench(cli::run::BenchArgs),
}

const SUBCOMMANDS: &[&str] = &["compile", "check", "info", "run", "test", "bench", "help"];

fn main() -> ExitCode {
    // Like other command-line tools, end quietly when the reader of our
    // output goes away (`onnxc info m.onnx | head`) instead of panicking in
    // `println!` on the broken pipe.
    // SAFETY: restoring a signal's default disposition at start-up, before
    // any thread exists.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let mut args: Vec<String> = std::env::args().collect();
    // `onnxc MODEL -o OUT.o` means `onnxc compile MODEL -o OUT.o`.
    if let Some(first) = args.get(1) {
        if !first.starts_with('-') && !SUBCOMMANDS.contains(&first.as_str()) {
            args.insert(1, "compile".into());
        }
    }
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        Command::Compile(a) => cli::compile::compile(&a),
        Command::Check { model, shapes, limits } => cli::info::check(&model, &shapes, &limits),
        Command::Info { model, shapes, limits } => cli::info::info(&model, &shapes, &limits),
        Command::Run(a) => cli::run::run(&a),
        Command::Test(a) => cli::test::test(&a),
        Command::Bench(a) => cli::run::bench(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
