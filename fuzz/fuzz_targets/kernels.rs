//! cargo-fuzz target; what it checks is [`onnxc_fuzz::kernels`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| onnxc_fuzz::kernels(data));
