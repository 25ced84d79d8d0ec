//! Subcommand implementations. Library stages return typed errors; here
//! they become messages and exit codes.

pub mod compile;
pub mod info;
pub mod object_runner;
pub mod run;
pub mod test;

use crate::ShapeArgs;
use onnxc::infer::Bindings;

/// Parses `--shape NAME=AxB` and `--dim SYM=N`.
pub fn bindings(args: &ShapeArgs) -> Result<Bindings, String> {
    let mut b = Bindings::default();
    for s in &args.shapes {
        let (name, dims) = s.rsplit_once('=').ok_or_else(|| format!("--shape {s}: expected NAME=AxBxC"))?;
        let dims = if dims.is_empty() {
            Vec::new()
        } else {
            dims.split('x')
                .map(|d| d.parse::<usize>().map_err(|_| format!("--shape {s}: \"{d}\" is not a size")))
                .collect::<Result<Vec<_>, _>>()?
        };
        b.shapes.insert(name.to_string(), dims);
    }
    for s in &args.dims {
        let (name, n) = s.rsplit_once('=').ok_or_else(|| format!("--dim {s}: expected SYM=N"))?;
        let n = n.parse::<usize>().map_err(|_| format!("--dim {s}: \"{n}\" is not a size"))?;
        b.dims.insert(name.to_string(), n);
    }
    Ok(b)
}
