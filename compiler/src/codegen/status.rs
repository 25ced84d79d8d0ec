//! Status codes returned by generated code. A nonzero status is
//! `(node_index + 1) << 8 | code` for failures inside a node, or a bare
//! code for failures before any node runs.

/// The context's workspace is too small or not 8-byte aligned.
pub const BAD_CONTEXT: i32 = 1;
/// An index input (Gather, ...) is out of range.
pub const INDEX_OUT_OF_RANGE: i32 = onnxc_runtime::abi::STATUS_INDEX_OUT_OF_RANGE;
/// A kernel rejected its parameters.
pub const INVALID_PARAMS: i32 = onnxc_runtime::abi::STATUS_INVALID_PARAMS;
/// Integer division by zero.
pub const DIVISION_BY_ZERO: i32 = 4;
/// The allocator could not give memory for a data-dependent value (the
/// workspace is too small, the hook returned NULL, or the size overflows).
pub const OUT_OF_MEMORY: i32 = 5;

/// A readable description of a status returned by a compiled model.
pub fn describe(status: i32, node_names: &[String]) -> String {
    let code = status & 0xff;
    let what = match code {
        BAD_CONTEXT => "workspace too small or misaligned",
        INDEX_OUT_OF_RANGE => "index out of range",
        INVALID_PARAMS => "kernel parameters rejected",
        DIVISION_BY_ZERO => "integer division by zero",
        OUT_OF_MEMORY => "out of memory for a data-dependent value",
        _ => "unknown failure",
    };
    let node = (status >> 8) as usize;
    match node.checked_sub(1).and_then(|i| node_names.get(i)) {
        Some(name) => format!("{name}: {what} (status {status})"),
        None => format!("{what} (status {status})"),
    }
}
