//! A persistent thread pool for the kernels' `parallel_for`.
//!
//! Threads are started once and wait for work, so a model call pays a
//! wake-up per parallel kernel, not a thread start. A `parallel_for` posts
//! one job (task, env, count); the calling thread and the workers take task
//! indices from a shared counter until none are left, and the call returns
//! when every task has finished. Workers spin briefly before sleeping on a
//! condition variable (consecutive kernels follow each other within
//! microseconds), and so does the caller before it waits for the last
//! task. One job runs at a time (concurrent callers queue on a lock); a
//! task must not call `parallel_for` on the same pool.
//!
//! C callers get it as `onnxc_thread_pool_new`, `onnxc_thread_pool_parallel_for`
//! (an `onnxc_context.parallel_for` with the pool as `parallel_user`) and
//! `onnxc_thread_pool_free`.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use onnxc_runtime::parallel::{Parallel, TaskFn};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Stack of each worker: the kernels' packing buffers take up to 512 KiB.
const WORKER_STACK: usize = 4 << 20;
/// Spins a worker makes (checking for a new job) before it sleeps.
const SPINS: u32 = 20_000;

/// The job being run (valid while `pending > 0`).
#[derive(Clone, Copy)]
struct Job {
    task: TaskFn,
    env: *mut u8,
    count: usize,
    /// Its generation, tagging its task indices in `Shared::next`.
    generation: u32,
}

// SAFETY: `env` is only used by the job's tasks, which `parallel_for`'s
// caller declares safe to run on any thread (`Parallel`'s contract).
unsafe impl Send for Job {}

struct Shared {
    /// The current job (and `true` once the pool shuts down).
    job: Mutex<(Option<Job>, bool)>,
    wake: Condvar,
    /// Bumped for each job; workers watch it to notice new work.
    generation: AtomicU64,
    /// The next task index to take (low 32 bits) of the job whose generation
    /// is in the high 32 bits: a worker still leaving an earlier job can
    /// never take an index of the new one.
    next: AtomicU64,
    /// Tasks of the current job not finished yet.
    pending: AtomicUsize,
    /// Signalled when `pending` reaches 0.
    finished: (Mutex<()>, Condvar),
}

impl Shared {
    /// Takes and runs tasks of `job` until none are left.
    fn work(&self, job: Job) {
        let tag = (job.generation as u64) << 32;
        loop {
            let current = self.next.load(Ordering::Acquire);
            let i = (current & 0xffff_ffff) as usize;
            if current & !0xffff_ffff != tag || i >= job.count {
                return;
            }
            if self.next.compare_exchange_weak(current, current + 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
                continue;
            }
            // SAFETY: the job's contract; each index is taken exactly once.
            unsafe { (job.task)(job.env, i) };
            if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                let _guard = self.finished.0.lock().unwrap_or_else(|e| e.into_inner());
                self.finished.1.notify_all();
            }
        }
    }
}

/// A pool of `threads - 1` workers plus the calling thread.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// One job at a time.
    submit: Mutex<()>,
}

impl ThreadPool {
    /// A pool running tasks on `threads` threads in all (the caller's
    /// included; 0 counts as 1). Fails when the OS refuses a thread.
    pub fn new(threads: usize) -> std::io::Result<ThreadPool> {
        let shared = Arc::new(Shared {
            job: Mutex::new((None, false)),
            wake: Condvar::new(),
            generation: AtomicU64::new(0),
            next: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            finished: (Mutex::new(()), Condvar::new()),
        });
        let mut pool = ThreadPool { shared, workers: Vec::new(), submit: Mutex::new(()) };
        for k in 1..threads.max(1) {
            let shared = Arc::clone(&pool.shared);
            let worker = std::thread::Builder::new()
                .name(format!("onnxc-worker-{k}"))
                .stack_size(WORKER_STACK)
                .spawn(move || worker(&shared))?;
            pool.workers.push(worker);
        }
        Ok(pool)
    }

    /// Threads that run tasks, the caller's included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// The context fields that hand this pool to a model's kernels; valid
    /// while the pool lives. A pool of one thread gives no hook at all, so
    /// kernels do not split work that only the caller would run.
    pub fn parallel(&self) -> Parallel {
        if self.workers.is_empty() {
            return Parallel::SERIAL;
        }
        Parallel { run: Some(onnxc_thread_pool_parallel_for), user: self as *const ThreadPool as *mut u8 }
    }

    /// Runs `task(env, i)` for every `i` in `0..count`; returns when all are done.
    ///
    /// # Safety
    /// `task` may be called with `env` from any of the pool's threads, at
    /// the same time for different indices.
    pub unsafe fn run(&self, count: usize, task: TaskFn, env: *mut u8) {
        if count == 0 {
            return;
        }
        // Task indices are 32-bit (kernels make a few hundred tasks at most).
        if count > u32::MAX as usize {
            (0..count).for_each(|i| task(env, i));
            return;
        }
        let _one_job = self.submit.lock().unwrap_or_else(|e| e.into_inner());
        let shared = &self.shared;
        let generation = (shared.generation.load(Ordering::Acquire) + 1) as u32;
        let job = Job { task, env, count, generation };
        shared.pending.store(count, Ordering::Release);
        shared.next.store((generation as u64) << 32, Ordering::Release);
        {
            let mut slot = shared.job.lock().unwrap_or_else(|e| e.into_inner());
            slot.0 = Some(job);
            shared.generation.fetch_add(1, Ordering::AcqRel);
            shared.wake.notify_all();
        }
        shared.work(job);
        // The workers' last tasks usually end within microseconds of the
        // caller's: spin for them before paying a sleep and a wake-up.
        let mut spins = 0;
        while shared.pending.load(Ordering::Acquire) != 0 && spins < SPINS {
            core::hint::spin_loop();
            spins += 1;
        }
        let mut guard = shared.finished.0.lock().unwrap_or_else(|e| e.into_inner());
        while shared.pending.load(Ordering::Acquire) != 0 {
            guard = shared.finished.1.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        {
            let mut slot = self.shared.job.lock().unwrap_or_else(|e| e.into_inner());
            slot.1 = true;
            self.shared.generation.fetch_add(1, Ordering::AcqRel);
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// A worker: waits for a new generation (spinning first), then helps with its job.
fn worker(shared: &Shared) {
    let mut seen = 0u64;
    loop {
        let mut spins = 0;
        while shared.generation.load(Ordering::Acquire) == seen && spins < SPINS {
            core::hint::spin_loop();
            spins += 1;
        }
        let job = {
            let mut slot = shared.job.lock().unwrap_or_else(|e| e.into_inner());
            while shared.generation.load(Ordering::Acquire) == seen && !slot.1 {
                slot = shared.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
            if slot.1 {
                return;
            }
            seen = shared.generation.load(Ordering::Acquire);
            slot.0
        };
        if let Some(job) = job {
            shared.work(job);
        }
    }
}

/// `onnxc_thread_pool *onnxc_thread_pool_new(size_t threads)`: NULL when a
/// thread cannot be started.
#[no_mangle]
pub extern "C" fn onnxc_thread_pool_new(threads: usize) -> *mut ThreadPool {
    ThreadPool::new(threads).map_or(core::ptr::null_mut(), |p| Box::into_raw(Box::new(p)))
}

/// Stops the workers and frees the pool (NULL is ignored).
///
/// # Safety
/// `pool` came from [`onnxc_thread_pool_new`] and no call uses it any more.
#[no_mangle]
pub unsafe extern "C" fn onnxc_thread_pool_free(pool: *mut ThreadPool) {
    if !pool.is_null() {
        drop(Box::from_raw(pool));
    }
}

/// An `onnxc_context.parallel_for` whose `parallel_user` is a pool.
///
/// # Safety
/// `user` is a live pool; as [`ThreadPool::run`].
#[no_mangle]
pub unsafe extern "C" fn onnxc_thread_pool_parallel_for(user: *mut u8, count: usize, task: TaskFn, env: *mut u8) {
    (*(user as *const ThreadPool)).run(count, task, env)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every index runs exactly once, job after job, on 1 to 4 threads.
    #[test]
    fn each_task_runs_once() {
        for threads in 1..=4 {
            let pool = ThreadPool::new(threads).expect("threads");
            assert_eq!(pool.threads(), threads);
            for count in [0, 1, 2, 7, 100] {
                let hits: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
                let parallel = pool.parallel();
                unsafe { Parallel::for_each(&parallel, count, |i| _ = hits[i].fetch_add(1, Ordering::Relaxed)) };
                assert_eq!(hits.iter().map(|h| h.load(Ordering::Relaxed)).collect::<Vec<_>>(), vec![1; count]);
            }
        }
    }
}
