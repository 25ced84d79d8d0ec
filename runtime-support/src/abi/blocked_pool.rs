//! The C entry points and parameter structs of [`crate::generic::blocked_pool`].

use crate::abi::pool::PoolParams;
use crate::generic::blocked_pool::*;
use crate::parallel::Parallel;

/// Pools `x` into `y`, both blocked (`[N, C/8, H, W, 8]`).
///
/// # Safety
/// As the module contract of [`crate::generic`].
#[no_mangle]
pub unsafe extern "C" fn onnxc_pool_blocked_f32(
    p: *const PoolParams,
    x: *const f32,
    y: *mut f32,
    parallel: *const Parallel,
) -> i32 {
    pool_blocked_f32(p, x, y, parallel)
}
