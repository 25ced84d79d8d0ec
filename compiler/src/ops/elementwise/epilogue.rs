//! An elementwise function applied by a kernel to each element it stores,
//! while the element is still in a register: a convolution's fused
//! activation (`passes::fuse_conv_activation`). Which functions a kernel
//! can apply, and by which `EPILOGUE_*` code, is in their rows; the kernel
//! takes the function's attributes (or Clip's bounds) as two parameters.
//! SiLU, `v * sigmoid(v)`, is the one gated function: a Sigmoid and a Mul
//! in the graph, one code in the kernels.

use super::Func;
use onnxc_runtime::{EPILOGUE_NONE, EPILOGUE_SILU};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Activation {
    pub func: Func,
    /// Clip's bounds, the Clip node's constant inputs (±inf where absent);
    /// `None` for the other functions.
    pub bounds: Option<(f64, f64)>,
    /// Whether the function's result is multiplied by its argument,
    /// `v * func(v)`: only [`Activation::SILU`] is.
    pub gated: bool,
}

impl Activation {
    /// SiLU (Swish with alpha 1), `Mul(x, Sigmoid(x))` in a graph.
    pub const SILU: Activation = Activation { func: Func::Sigmoid, bounds: None, gated: true };

    /// `func` (with Clip's `bounds`) as an epilogue, if its row has a code.
    pub fn new(func: Func, bounds: Option<(f64, f64)>) -> Option<Activation> {
        func.row().epilogue.map(|_| Activation { func, bounds, gated: false })
    }

    /// The `EPILOGUE_*` code (a function without one is never an activation).
    pub fn code(&self) -> i64 {
        if self.gated {
            return EPILOGUE_SILU;
        }
        self.func.row().epilogue.unwrap_or(EPILOGUE_NONE)
    }

    /// The kernel's two parameters (`ConvParams::act_a`, `act_b`): LeakyRelu's
    /// alpha, HardSigmoid's alpha and beta, Clip's bounds; zero otherwise.
    pub fn params(&self) -> (f64, f64) {
        match (self.func, self.bounds) {
            (Func::LeakyRelu { alpha }, _) => (alpha as f64, 0.0),
            (Func::HardSigmoid { alpha, beta }, _) => (alpha as f64, beta as f64),
            (_, Some(bounds)) => bounds,
            _ => (0.0, 0.0),
        }
    }
}
