//! The C entry point and parameter struct of [`crate::generic::elementwise`]:
//! a chain of f32 functions over broadcast operands, given as a program.

use crate::abi::MAX_RANK;
use crate::generic::elementwise::run_program;
use crate::parallel::Parallel;

/// Operands a program reads (pointers passed to [`onnxc_elementwise_f32`]).
pub const PROGRAM_OPERANDS: usize = 6;
/// Steps a program holds.
pub const PROGRAM_STEPS: usize = 32;
/// A step's `operand` when its second value is the step's `alpha`.
pub const OPERAND_IMMEDIATE: i32 = -1;

/// Binary steps: `v = v op w`, `w` the step's operand (or immediate);
/// `_FROM`/`_INTO` put `w` first. Maximum and minimum give NaN if either
/// value is NaN.
pub const STEP_ADD: i32 = 1;
pub const STEP_SUB: i32 = 2;
pub const STEP_SUB_FROM: i32 = 3;
pub const STEP_MUL: i32 = 4;
pub const STEP_DIV: i32 = 5;
pub const STEP_DIV_INTO: i32 = 6;
pub const STEP_MAXIMUM: i32 = 7;
pub const STEP_MINIMUM: i32 = 8;
/// Unary steps: `v = f(v)`, with the step's `alpha` and `beta` where the
/// ONNX function has those attributes.
pub const STEP_ABS: i32 = 20;
pub const STEP_NEG: i32 = 21;
pub const STEP_SQRT: i32 = 22;
pub const STEP_RECIPROCAL: i32 = 23;
pub const STEP_EXP: i32 = 24;
pub const STEP_LOG: i32 = 25;
pub const STEP_TANH: i32 = 26;
pub const STEP_ERF: i32 = 27;
pub const STEP_SIGMOID: i32 = 28;
pub const STEP_RELU: i32 = 29;
pub const STEP_LEAKY_RELU: i32 = 30;
pub const STEP_ELU: i32 = 31;
pub const STEP_HARD_SIGMOID: i32 = 32;
pub const STEP_HARD_SWISH: i32 = 33;
pub const STEP_SOFTPLUS: i32 = 34;
pub const STEP_GELU: i32 = 35;
pub const STEP_GELU_TANH: i32 = 36;
pub const STEP_MISH: i32 = 37;
pub const STEP_SWISH: i32 = 38;
pub const STEP_SOFTSIGN: i32 = 39;
/// `v` to the power `alpha`.
pub const STEP_POW: i32 = 40;

/// One step of a program.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ProgramStep {
    /// A `STEP_*` code.
    pub op: i32,
    /// For binary steps: the operand index, or `OPERAND_IMMEDIATE`.
    pub operand: i32,
    pub alpha: f32,
    pub beta: f32,
}

/// Parameters of [`onnxc_elementwise_f32`]: the output's dims (contiguous),
/// each operand's element strides against them (0 where it broadcasts;
/// the innermost stride of every operand is 0 or 1), the operand the
/// running value starts from, and the steps applied to it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ElementwiseParams {
    pub rank: i64,
    pub dims: [i64; MAX_RANK],
    pub strides: [[i64; MAX_RANK]; PROGRAM_OPERANDS],
    pub start: i64,
    pub steps: i64,
    pub program: [ProgramStep; PROGRAM_STEPS],
}

/// `y = program(operands)` elementwise over the broadcast dims. Unused
/// operand pointers may be null; `y` may be an operand whose strides are
/// the output's (the program reads each element before writing it).
/// With threads lent through `parallel` (may be null), a large output is
/// split over tasks; the results are the same bits on any thread count.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn onnxc_elementwise_f32(
    p: *const ElementwiseParams,
    y: *mut f32,
    a: *const f32,
    b: *const f32,
    c: *const f32,
    d: *const f32,
    e: *const f32,
    f: *const f32,
    parallel: *const Parallel,
) -> i32 {
    run_program(p, y, [a, b, c, d, e, f], parallel)
}
