//! Host tooling: what runs compiled code in this process (the CLI's `run`,
//! `test` and `bench`, the JIT, the tests) rather than a pipeline stage.
//! `call` passes inputs and outputs to a compiled `run` through the C ABI,
//! `buffer` places them (optionally against guard pages), `tensor_io` reads
//! and writes `.pb` and `.npy` files, `profile` times each node.

pub mod buffer;
pub mod call;
pub mod profile;
pub mod tensor_io;
