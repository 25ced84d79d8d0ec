//! How kernels run independent tasks on several threads without owning any.
//!
//! The kernel library has no threads of its own (it is `no_std` and runs
//! where there may be no OS). The caller lends a `parallel_for` through the
//! model's context (`onnxc_context.parallel_for` / `parallel_user`): a
//! function that runs `task(env, i)` for every `i` in `0..count`, on as many
//! threads as it likes, and returns when all have run. The
//! `onnxc-runtime-std` crate's `thread_pool` provides one (for
//! `onnxc bench --threads`, and as `onnxc_thread_pool_*` for C); C callers
//! may also bring their own (OpenMP, a job system). Without one the tasks
//! run in turn on the calling thread.
//!
//! A kernel splits its work into tasks that write disjoint outputs and
//! compute every output element the same way whichever task or thread
//! computes it, so results are bit-identical for any thread count and any
//! order the hook runs tasks in. Tasks use up to 512 KiB of stack (the
//! packing buffers), which a hook's threads must have.
//!
//! What splits: the gemm on pre-packed weights (`generic::prepacked`)
//! its column blocks and, with threads, row ranges; a convolution of many
//! small groups its groups, the depthwise convolution its channel planes
//! (whole groups of 16), and the direct and blocked convolutions their
//! tiles and channel blocks (`x86_64::direct_conv`,
//! `x86_64::blocked_conv`, `generic::winograd`); 2-D max and average
//! pooling (global pools too), NCHW or blocked, its planes; a large
//! reorder to or from the blocked layout its blocks and their pixels; a
//! large strided copy (Transpose, Slice, Concat...) its outermost
//! dimension; an elementwise program (`generic::elementwise`) spans of
//! its output; the plain gemm (`generic::gemm_batched`, MatMul and Gemm)
//! its batches or its columns; a recurrent layer (`generic::rnn`) its
//! input projection's columns, its directions, or a single direction's
//! recurrent product at each step.

/// `void (*task)(void *env, size_t index)`: one task of a parallel loop.
pub type TaskFn = unsafe extern "C" fn(env: *mut u8, index: usize);

/// `void (*parallel_for)(void *user, size_t count, task, void *env)`.
pub type ParallelForFn = unsafe extern "C" fn(user: *mut u8, count: usize, task: TaskFn, env: *mut u8);

/// The `parallel_for` and `parallel_user` fields of `onnxc_context`, which
/// kernels that split their work receive a pointer to.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Parallel {
    /// Runs every task and returns when all are done; `None` runs them in
    /// turn on the calling thread.
    pub run: Option<ParallelForFn>,
    /// Passed to `run`.
    pub user: *mut u8,
}

impl Parallel {
    /// No hook: every task on the calling thread.
    pub const SERIAL: Parallel = Parallel { run: None, user: core::ptr::null_mut() };

    /// Whether `parallel` (which may be null) has a hook, so that splitting
    /// work can pay.
    ///
    /// # Safety
    /// `parallel` is null or points to a valid `Parallel`.
    pub unsafe fn is_threaded(parallel: *const Parallel) -> bool {
        parallel.as_ref().is_some_and(|p| p.run.is_some())
    }

    /// Runs `task(i)` for every `i` in `0..count` through the hook of
    /// `parallel` (which may be null), on the calling thread when there is
    /// no hook or a single task.
    ///
    /// # Safety
    /// `parallel` is null or points to a valid `Parallel` whose hook keeps
    /// its contract (each index run exactly once, all done on return), and
    /// `task` may run on several threads at once (for different indices).
    pub unsafe fn for_each<F: Fn(usize)>(parallel: *const Parallel, count: usize, task: F) {
        unsafe extern "C" fn trampoline<F: Fn(usize)>(env: *mut u8, index: usize) {
            (*(env as *const F))(index)
        }
        match parallel.as_ref().and_then(|p| p.run.map(|run| (run, p.user))) {
            Some((run, user)) if count > 1 => run(user, count, trampoline::<F>, &task as *const F as *mut u8),
            _ => (0..count).for_each(task),
        }
    }
}

/// `count` items split into `parts` ranges as even as possible, part `r`.
pub(crate) fn share(count: usize, parts: usize, r: usize) -> core::ops::Range<usize> {
    count * r / parts..count * (r + 1) / parts
}
