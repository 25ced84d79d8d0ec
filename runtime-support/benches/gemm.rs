//! Single-thread sgemm throughput next to the machine's measured FMA peak.
//!
//! Every benchmark sets its throughput in floating-point operations, so
//! Criterion's "elem/s" column reads as FLOP/s (e.g. `95 Gelem/s` = 95 GFLOP/s).
//!
//! * `peak/*`: a loop of 16 independent FMA chains per iteration (enough to
//!   hide the FMA latency on two ports), the single-core FMA ceiling for
//!   that vector width.
//! * `sgemm/<kernel>/<M>x<K>x<N>`: `Y = A * B + bias` through
//!   `sgemm_with`, for 1024^3, the conv-shaped 64x576x3136 and a few other
//!   ResNet-50 convolution shapes (M = out channels, K = in channels * taps,
//!   N = output pixels), each with every kernel this CPU supports.
//!
//! Time is the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not
//! wall time: the machine is shared, and CPU time leaves out the periods
//! other processes hold the core (it still includes their cache damage).
//!
//! Run: `cargo bench -p onnxc-runtime --bench gemm -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onnxc_runtime::{sgemm_with, GemmKernel, MatMut, MatRef};
use std::hint::black_box;

mod cpu_time;
use cpu_time::ThreadCpuTime;

type Crit = Criterion<ThreadCpuTime>;

/// FMA chains per loop iteration.
const CHAINS: usize = 16;
/// Loop iterations per measured call.
const ITERS: usize = 100_000;

#[cfg(target_arch = "x86_64")]
mod peak {
    use super::{CHAINS, ITERS};
    use core::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma512(x: f32) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(x); CHAINS];
        for _ in 0..ITERS {
            for r in acc.iter_mut() {
                *r = _mm512_fmadd_ps(*r, a, b);
            }
        }
        let mut s = _mm512_setzero_ps();
        for r in acc {
            s = _mm512_add_ps(s, r);
        }
        _mm512_reduce_add_ps(s)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma256(x: f32) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(x); CHAINS];
        for _ in 0..ITERS {
            for r in acc.iter_mut() {
                *r = _mm256_fmadd_ps(*r, a, b);
            }
        }
        let mut out = [0.0f32; 8];
        let mut s = _mm256_setzero_ps();
        for r in acc {
            s = _mm256_add_ps(s, r);
        }
        _mm256_storeu_ps(out.as_mut_ptr(), s);
        out.iter().sum()
    }
}

fn bench_peak(c: &mut Crit) {
    let mut g = c.benchmark_group("peak");
    #[cfg(target_arch = "x86_64")]
    {
        if GemmKernel::Avx512.available() {
            g.throughput(Throughput::Elements((ITERS * CHAINS * 16 * 2) as u64));
            g.bench_function("fma-zmm", |bch| bch.iter(|| unsafe { peak::fma512(black_box(1.0)) }));
        } else {
            eprintln!("skipping peak/fma-zmm: no AVX-512F");
        }
        if GemmKernel::Avx2Fma.available() {
            g.throughput(Throughput::Elements((ITERS * CHAINS * 8 * 2) as u64));
            g.bench_function("fma-ymm", |bch| bch.iter(|| unsafe { peak::fma256(black_box(1.0)) }));
        } else {
            eprintln!("skipping peak/fma-ymm: no AVX2+FMA");
        }
    }
    g.finish();
}

/// (M, K, N).
const SHAPES: &[(usize, usize, usize)] = &[
    (1024, 1024, 1024),
    (64, 576, 3136),  // ResNet-50 layer1 3x3 conv
    (64, 147, 12544), // ResNet-50 stem 7x7/2 conv
    (256, 64, 3136),  // ResNet-50 layer1 1x1 expand
    (128, 1152, 784), // ResNet-50 layer2 3x3 conv
    (256, 2304, 196), // ResNet-50 layer3 3x3 conv
    (512, 4608, 49),  // ResNet-50 layer4 3x3 conv
];

fn rand_vec(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn bench_sgemm(c: &mut Crit) {
    let mut g = c.benchmark_group("sgemm");
    let only = std::env::var("GEMM_KERNELS").ok();
    for kernel in GemmKernel::ALL {
        if !kernel.available() {
            eprintln!("skipping sgemm/{}: not supported by this CPU", kernel.name());
            continue;
        }
        if only.as_deref().is_some_and(|o| !o.split(',').any(|k| k == kernel.name())) {
            continue;
        }
        for &(m, k, n) in SHAPES {
            if kernel == GemmKernel::Generic && m * k * n > 200_000_000 {
                continue; // the scalar reference takes too long per iteration
            }
            let a = rand_vec(m * k, 1);
            let b = rand_vec(k * n, 2);
            let bias = rand_vec(m, 3);
            let mut y = vec![0.0f32; m * n];
            g.throughput(Throughput::Elements((2 * m * k * n) as u64));
            g.bench_function(BenchmarkId::new(kernel.name(), format!("{m}x{k}x{n}")), |bch| {
                bch.iter(|| unsafe {
                    sgemm_with(
                        kernel,
                        m,
                        n,
                        k,
                        1.0,
                        MatRef { ptr: a.as_ptr(), rs: k as isize, cs: 1 },
                        MatRef { ptr: b.as_ptr(), rs: n as isize, cs: 1 },
                        1.0,
                        Some(MatRef { ptr: bias.as_ptr(), rs: 1, cs: 0 }),
                        MatMut { ptr: y.as_mut_ptr(), rs: n as isize, cs: 1 },
                    );
                    black_box(&mut y);
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_peak, bench_sgemm
}
criterion_main!(benches);
