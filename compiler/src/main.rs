//! The `onnxc` command line (DESIGN §6): compile, check, info, run, test,
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
    /// Fix an input's shape: NAME=1x3x224x224
    #[arg(long = "shape", value_name = "NAME=AxBxC")]
    pub shapes: Vec<String>,
    /// Bind a symbolic dim: SYM=N
    #[arg(long = "dim", value_name = "SYM=N")]
    pub dims: Vec<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Compile a model to an object file (and header, archive, Rust module, mir)
    Compile(cli::compile::Args),
    /// Validate a model; list every problem and every unsupported operator
    Check { model: PathBuf },
    /// Show IR/opsets, inputs/outputs, an op histogram, parameters and MACs
    Info {
        model: PathBuf,
        #[command(flatten)]
        shapes: ShapeArgs,
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
        Command::Check { model } => cli::info::check(&model),
        Command::Info { model, shapes } => cli::info::info(&model, &shapes),
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
