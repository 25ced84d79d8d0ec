//! Single-thread throughput of the elementwise math: `onnxc_elementwise_f32`
//! running one transcendental step (or SiLU as Sigmoid then Mul) over an
//! activation of MobileNet's first layers, 64×112×112 floats (3.2 MB, in
//! L2/L3), the shape of the per-operator benchmark's unary models. These
//! kernels are bound by arithmetic, so the figure to watch is elements per
//! second against the instruction count of the function.
//!
//! Throughput is in elements (Criterion's "elem/s"). Time is the thread's
//! CPU time, as in the `gemm` bench.
//!
//! Run: `cargo bench -p onnxc-runtime --bench math -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use onnxc_runtime::abi::elementwise::*;
use onnxc_runtime::{MAX_RANK, STATUS_OK};
use std::hint::black_box;
use std::ptr::null;

mod cpu_time;
use cpu_time::ThreadCpuTime;

type Crit = Criterion<ThreadCpuTime>;

const ELEMENTS: usize = 64 * 112 * 112;

/// (name, steps as (code, operand)).
const PROGRAMS: &[(&str, &[(i32, i32)])] = &[
    ("exp", &[(STEP_EXP, 0)]),
    ("log", &[(STEP_LOG, 0)]),
    ("tanh", &[(STEP_TANH, 0)]),
    ("sigmoid", &[(STEP_SIGMOID, 0)]),
    ("erf", &[(STEP_ERF, 0)]),
    ("silu", &[(STEP_SIGMOID, 0), (STEP_MUL, 0)]),
    ("gelu", &[(STEP_GELU, 0)]),
];

/// A one-dimensional program over `ELEMENTS` reading operand 0.
fn params(steps: &[(i32, i32)]) -> ElementwiseParams {
    let mut p: ElementwiseParams = bytemuck::Zeroable::zeroed();
    p.rank = 1;
    p.dims[0] = ELEMENTS as i64;
    p.strides[0] = [1; MAX_RANK];
    p.steps = steps.len() as i64;
    for (slot, &(op, operand)) in p.program.iter_mut().zip(steps) {
        *slot = ProgramStep { op, operand, alpha: 0.0, beta: 0.0 };
    }
    p
}

fn bench_programs(c: &mut Crit) {
    let x: Vec<f32> = (0..ELEMENTS).map(|i| ((i * 7919 % 2001) as f32 - 1000.0) / 250.0).collect();
    let mut y = vec![0.0f32; ELEMENTS];
    let mut g = c.benchmark_group("elementwise");
    g.throughput(Throughput::Elements(ELEMENTS as u64));
    for &(name, steps) in PROGRAMS {
        let p = params(steps);
        g.bench_function(name, |b| {
            b.iter(|| {
                // SAFETY: one contiguous operand and output of ELEMENTS floats.
                let rc = unsafe {
                    onnxc_elementwise_f32(
                        &p,
                        y.as_mut_ptr(),
                        x.as_ptr(),
                        null(),
                        null(),
                        null(),
                        null(),
                        null(),
                        null(),
                    )
                };
                assert_eq!(rc, STATUS_OK);
                black_box(&y);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = bench_programs
}
criterion_main!(benches);
