//! A freestanding x86-64 Linux program that runs a model compiled by onnxc:
//! no libc, no allocator, no Rust runtime, its own entry point. Its only
//! dependency is the static archive `onnxc compile --emit archive` writes
//! (the model object and the kernels it calls); the workspace is a static
//! buffer of exactly the size the header names, and the result leaves
//! through the exit syscall: 0 when every output matches the expected
//! values, the number of mismatches otherwise, 100 + the status's low byte
//! when the model fails.
//!
//! Built as an object with rustc and linked with cc (stable Rust, no
//! nightly features, no Cargo), from the repository root:
//!
//! ```sh
//! onnxc compile model.onnx -o out/model.o --emit obj,header,archive
//! ONNXC_WORKSPACE_BYTES=<MODEL_WORKSPACE_BYTES from out/model.h> \
//! ONNXC_INPUT=input.bin ONNXC_EXPECTED=expected.bin \
//!   rustc --edition 2021 --crate-type lib --emit obj -C panic=abort -C opt-level=2 \
//!         examples/freestanding/main.rs -o out/main.o
//! cc -nostdlib -static -Wl,--gc-sections out/main.o out/model.a -o out/freestanding
//! ./out/freestanding; echo $?
//! ```
//!
//! `ONNXC_INPUT` and `ONNXC_EXPECTED` are raw little-endian f32 files
//! (the model's one input and one output) embedded at compile time. A
//! `lib` crate needs no panic handler of its own: the archive's (from
//! `onnxc-runtime-staticlib`) serves, and nothing here can panic.

#![no_std]
// This file defines memcpy and friends: keep LLVM from turning their
// loops back into calls to themselves.
#![no_builtins]

use core::arch::{asm, global_asm};

/// `onnxc_context` of the generated header.
#[repr(C)]
struct Context {
    workspace: *mut u8,
    workspace_bytes: usize,
    alloc: usize,
    alloc_user: usize,
    parallel_for: usize,
    parallel_user: usize,
}

extern "C" {
    fn model_run(ctx: *const Context, inputs: *const *const u8, outputs: *const *mut u8) -> i32;
}

/// A compile-time decimal from the environment.
const fn parse(s: &str) -> usize {
    let bytes = s.as_bytes();
    let (mut n, mut i) = (0, 0);
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "not a decimal number");
        n = n * 10 + (bytes[i] - b'0') as usize;
        i += 1;
    }
    n
}

const WORKSPACE_BYTES: usize = parse(env!("ONNXC_WORKSPACE_BYTES"));
const EXPECTED_BYTES: &[u8] = include_bytes!(env!("ONNXC_EXPECTED"));
const OUTPUTS: usize = EXPECTED_BYTES.len() / 4;

#[repr(C, align(64))]
struct Aligned<T>(T);

static INPUT: Aligned<[u8; include_bytes!(env!("ONNXC_INPUT")).len()]> = Aligned(*include_bytes!(env!("ONNXC_INPUT")));
static mut WORKSPACE: Aligned<[u8; WORKSPACE_BYTES]> = Aligned([0; WORKSPACE_BYTES]);
static mut OUTPUT: Aligned<[f32; OUTPUTS]> = Aligned([0.0; OUTPUTS]);

// The kernel calls the process entry: the stack is 16-byte aligned there,
// a function expects it 8 bytes off (a pushed return address).
global_asm!(".globl _start", "_start:", "xor ebp, ebp", "and rsp, -16", "call onnxc_freestanding_main", "ud2");

#[no_mangle]
extern "C" fn onnxc_freestanding_main() -> ! {
    let ctx = Context { workspace: (&raw mut WORKSPACE).cast(), workspace_bytes: WORKSPACE_BYTES, alloc: 0, alloc_user: 0, parallel_for: 0, parallel_user: 0 };
    let inputs = [INPUT.0.as_ptr()];
    let outputs = [(&raw mut OUTPUT).cast::<u8>()];
    // SAFETY: buffers of the compiled sizes; the workspace is 64-byte aligned.
    let status = unsafe { model_run(&ctx, inputs.as_ptr(), outputs.as_ptr()) };
    if status != 0 {
        write(b"the model failed\n");
        exit(100 + (status & 0xff));
    }
    // SAFETY: the model has returned; nothing else touches OUTPUT.
    let output = unsafe { &(*(&raw const OUTPUT)).0 };
    let mut mismatches = 0;
    for (got, want) in output.iter().zip(EXPECTED_BYTES.chunks_exact(4)) {
        let want = f32::from_le_bytes([want[0], want[1], want[2], want[3]]);
        if !(abs(got - want) <= 1e-5 + 1e-3 * abs(want)) {
            mismatches += 1;
        }
    }
    write(if mismatches == 0 { b"freestanding: outputs match\n" } else { b"freestanding: outputs differ\n" });
    exit(mismatches)
}

fn abs(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0x7fff_ffff)
}

fn write(text: &[u8]) {
    // SAFETY: write(1, text, len) reads only `text`.
    unsafe {
        asm!("syscall", inlateout("rax") 1usize => _, in("rdi") 1usize, in("rsi") text.as_ptr(), in("rdx") text.len(),
             lateout("rcx") _, lateout("r11") _, options(nostack));
    }
}

fn exit(code: i32) -> ! {
    // SAFETY: exit_group never returns.
    unsafe { asm!("syscall", in("rax") 231usize, in("rdi") code as usize, options(noreturn, nostack)) }
}

// The C library functions that compiled code and the kernels call.

#[no_mangle]
unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    for i in 0..n {
        *dst.add(i) = *src.add(i);
    }
    dst
}

#[no_mangle]
unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) < (src as usize) {
        return memcpy(dst, src, n);
    }
    for i in (0..n).rev() {
        *dst.add(i) = *src.add(i);
    }
    dst
}

#[no_mangle]
unsafe extern "C" fn memset(dst: *mut u8, byte: i32, n: usize) -> *mut u8 {
    for i in 0..n {
        *dst.add(i) = byte as u8;
    }
    dst
}

#[no_mangle]
unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        let (x, y) = (*a.add(i), *b.add(i));
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

#[no_mangle]
unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    memcmp(a, b, n)
}
