//! Status codes returned by generated code. A nonzero status is
//! `(node_index + 1) << 8 | code` for failures inside a node, or a bare
//! code for failures before any node runs. The codes and their meaning
//! live in the kernel library (`onnxc_runtime::abi`, `onnxc_runtime::model`)
//! so that Rust callers of a compiled model decode them the same way.

use onnxc_runtime::abi;
use onnxc_runtime::model::Status;

/// The context's workspace is too small or not 8-byte aligned.
pub const BAD_CONTEXT: i32 = abi::STATUS_BAD_CONTEXT;
/// An index input (Gather, ...) is out of range.
pub const INDEX_OUT_OF_RANGE: i32 = abi::STATUS_INDEX_OUT_OF_RANGE;
/// A kernel rejected its parameters.
pub const INVALID_PARAMS: i32 = abi::STATUS_INVALID_PARAMS;
/// Integer division by zero.
pub const DIVISION_BY_ZERO: i32 = abi::STATUS_DIVISION_BY_ZERO;
/// The allocator could not give memory for a data-dependent value (the
/// workspace is too small, the hook returned NULL, or the size overflows).
pub const OUT_OF_MEMORY: i32 = abi::STATUS_OUT_OF_MEMORY;

/// A sequence, optional or map input's descriptor is not what the code was
/// compiled for; the upper bits are the input's index + 1.
pub const BAD_INPUT: i32 = abi::STATUS_BAD_INPUT;

/// A readable description of a status returned by a compiled model.
pub fn describe(status: i32, node_names: &[String], input_names: &[String]) -> String {
    let status = Status(status);
    if let Some(name) = status.input().and_then(|k| input_names.get(k)) {
        return format!("input \"{name}\": {status}");
    }
    match status.node().and_then(|i| node_names.get(i)) {
        Some(name) => format!("{name}: {status}"),
        None => status.to_string(),
    }
}
