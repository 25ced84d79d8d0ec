//! cargo-fuzz target; what it checks is [`onnxc_fuzz::compile_run`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| onnxc_fuzz::compile_run(data));
