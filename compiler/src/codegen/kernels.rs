//! Typed kernel calls: one constant per kernel, made from the kernel
//! library's own list, so that rustc checks every call when onnxc is built.
//!
//! `onnxc_runtime::kernel_list!` (and `onnxc_runtime_std::kernel_list!` for
//! the kernels that need std) hands its rows to `typed_kernels!`, which
//! turns `onnxc_pool_f32(*const PoolParams, *const f32, ...) -> i32` into
//! `onnxc_pool_f32: Kernel<(Ref<PoolParams>, Ptr, ...), I32>`. A lowering
//! passes a tuple of typed arguments, so a misspelt kernel, a missing or
//! extra argument, a swapped pointer and integer, or a params block of the
//! wrong struct fails to compile instead of failing when a model is compiled.
//!
//! The types are those the ABI tells apart (pointer, i32, i64, f32, f64),
//! with one refinement: a pointer to a struct (a params block, a table of
//! records, the context's `Parallel`) is a [`Ref`] to that struct, which
//! [`Lower::params`](super::Lower::params) makes from the struct itself (and
//! [`Ref::to`] from an address known to hold one). A pointer to tensor
//! elements is a [`Ptr`] whatever the element type, so that the f32 and f64
//! kernels of a family have one Rust type and a lowering picks one by the
//! element type it was given ([`by_dtype`]).
//!
//! Each row's types resolve here, hence the glob imports of the runtime's
//! parameter structs; [`Kernel::abi`] gives the machine types from which
//! `Lower::call` declares the import, and a test compares them with the
//! library's tables.

use super::Value;
use crate::ir::DType;
use onnxc_runtime::abi::AbiType;
use std::marker::PhantomData;

use onnxc_runtime::*;
use onnxc_runtime_std::ImageDecodeParams;

/// A pointer to tensor elements (of any type) or to bytes.
#[derive(Clone, Copy, Debug)]
pub struct Ptr(pub Value);

/// A pointer to one `T` (or a table of them) laid out as the kernel reads it.
#[derive(Debug)]
pub struct Ref<T>(Value, PhantomData<T>);

impl<T> Ref<T> {
    /// A value known to point to a `T`: read-only data made from a `T` (see
    /// `Lower::params`), or memory a kernel filled with one.
    pub fn to(value: Value) -> Self {
        Ref(value, PhantomData)
    }

    /// The address itself, for code that reads the struct's fields.
    pub fn value(&self) -> Value {
        self.0
    }
}

impl<T> Clone for Ref<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Ref<T> {}

/// An `int32_t` argument or result.
#[derive(Clone, Copy, Debug)]
pub struct I32(pub Value);
/// An `int64_t` argument or result.
#[derive(Clone, Copy, Debug)]
pub struct I64(pub Value);
/// A `float` argument or result.
#[derive(Clone, Copy, Debug)]
pub struct F32(pub Value);
/// A `double` argument or result.
#[derive(Clone, Copy, Debug)]
pub struct F64(pub Value);

/// One typed argument or result: its machine type and the Cranelift value
/// it carries.
pub trait KernelValue: Copy {
    const ABI: AbiType;
    fn value(self) -> Value;
}

macro_rules! kernel_values {
    ($($t:ident: $abi:ident),*) => {$(
        impl KernelValue for $t {
            const ABI: AbiType = AbiType::$abi;
            fn value(self) -> Value {
                self.0
            }
        }
    )*};
}
kernel_values!(Ptr: Ptr, I32: I32, I64: I64, F32: F32, F64: F64);

impl<T> KernelValue for Ref<T> {
    const ABI: AbiType = AbiType::Ptr;
    fn value(self) -> Value {
        self.0
    }
}

/// The arguments of one kernel, as the tuple its [`Kernel`] type names.
pub trait KernelArgs {
    /// Their machine types, which declare the kernel's signature.
    const ABI: &'static [AbiType];
    fn values(self) -> Vec<Value>;
}

macro_rules! kernel_args {
    ($($a:ident)*) => {
        impl<$($a: KernelValue),*> KernelArgs for ($($a,)*) {
            const ABI: &'static [AbiType] = &[$($a::ABI),*];
            #[allow(non_snake_case)]
            fn values(self) -> Vec<Value> {
                let ($($a,)*) = self;
                vec![$($a.value()),*]
            }
        }
    };
}
kernel_args!(A);
kernel_args!(A B);
kernel_args!(A B C);
kernel_args!(A B C D);
kernel_args!(A B C D E);
kernel_args!(A B C D E F);
kernel_args!(A B C D E F G);
kernel_args!(A B C D E F G H);
kernel_args!(A B C D E F G H I);
kernel_args!(A B C D E F G H I J);
kernel_args!(A B C D E F G H I J K);
kernel_args!(A B C D E F G H I J K L);
kernel_args!(A B C D E F G H I J K L M);
kernel_args!(A B C D E F G H I J K L M N);

/// A kernel of the library taking the arguments `A` and returning an `R`.
pub struct Kernel<A, R> {
    pub name: &'static str,
    signature: PhantomData<fn(A) -> R>,
}

impl<A, R> Kernel<A, R> {
    const fn new(name: &'static str) -> Self {
        Kernel { name, signature: PhantomData }
    }
}

impl<A: KernelArgs, R: KernelValue> Kernel<A, R> {
    /// The machine types of its arguments and of its result.
    pub fn abi(&self) -> (&'static [AbiType], AbiType) {
        (A::ABI, R::ABI)
    }
}

impl<A, R> Clone for Kernel<A, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<A, R> Copy for Kernel<A, R> {}

/// The variant of a family with one kernel per float type that computes in
/// `dtype` (f64 for f64, f32 otherwise); the variants share one type, so
/// rustc has checked that they take the same arguments.
pub fn by_dtype<A, R>(f32: Kernel<A, R>, f64: Kernel<A, R>, dtype: DType) -> Kernel<A, R> {
    if dtype == DType::F64 {
        f64
    } else {
        f32
    }
}

/// The typed argument for one spelled-out C type of a kernel row: a
/// pointer to an element type of tensors (or to bytes) is a [`Ptr`], any
/// other pointee is a struct, so a [`Ref`] to it.
macro_rules! kernel_arg {
    (i32) => { I32 };
    (i64) => { I64 };
    (f32) => { F32 };
    (f64) => { F64 };
    (* $m:ident u8) => { Ptr };
    (* $m:ident i8) => { Ptr };
    (* $m:ident u16) => { Ptr };
    (* $m:ident i16) => { Ptr };
    (* $m:ident u32) => { Ptr };
    (* $m:ident i32) => { Ptr };
    (* $m:ident i64) => { Ptr };
    (* $m:ident u64) => { Ptr };
    (* $m:ident f32) => { Ptr };
    (* $m:ident f64) => { Ptr };
    (* $m:ident OnnxString) => { Ptr };
    (* $m:ident $t:ty) => { Ref<$t> };
}

/// The tuple of typed arguments for a row's argument list.
macro_rules! kernel_arg_tuple {
    ([$($done:ty,)*]) => { ($($done,)*) };
    ([$($done:ty,)*] * $m:ident $t:tt $(, $($rest:tt)*)?) => {
        kernel_arg_tuple!([$($done,)* kernel_arg!(* $m $t),] $($($rest)*)?)
    };
    ([$($done:ty,)*] $t:ident $(, $($rest:tt)*)?) => {
        kernel_arg_tuple!([$($done,)* kernel_arg!($t),] $($($rest)*)?)
    };
}

/// One [`Kernel`] constant per row of a kernel list, and (for the tests)
/// the list `$listed` of every row's name and machine types.
macro_rules! typed_kernels {
    ($listed:ident; $($name:ident ( $($arg:tt)* ) -> $ret:ident;)*) => {
        $(
            #[allow(non_upper_case_globals)]
            pub const $name: Kernel<kernel_arg_tuple!([] $($arg)*), kernel_arg!($ret)> =
                Kernel::new(stringify!($name));
        )*
        #[cfg(test)]
        const $listed: &[(&str, &[AbiType], AbiType)] = &[$(
            (stringify!($name), <kernel_arg_tuple!([] $($arg)*)>::ABI, <kernel_arg!($ret)>::ABI),
        )*];
    };
}

macro_rules! no_std_kernels {
    ($($row:tt)*) => { typed_kernels!(NO_STD_LISTED; $($row)*); };
}

macro_rules! std_kernels {
    ($($row:tt)*) => { typed_kernels!(STD_LISTED; $($row)*); };
}

onnxc_runtime::kernel_list!(no_std_kernels);
onnxc_runtime_std::kernel_list!(std_kernels);

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed rows declare exactly the library's signatures: the same
    /// kernels, each with the machine types its checked Rust signature has.
    fn check_against(listed: &[(&str, &[AbiType], AbiType)], table: &[onnxc_runtime::abi::KernelSig]) {
        assert_eq!(listed.len(), table.len());
        for &(name, params, ret) in listed {
            let sig = table.iter().find(|k| k.name == name).unwrap_or_else(|| panic!("{name} is not in the table"));
            assert_eq!((sig.params, sig.ret), (params, Some(ret)), "{name}");
        }
    }

    #[test]
    fn typed_kernels_match_the_library_tables() {
        check_against(NO_STD_LISTED, onnxc_runtime::abi::KERNELS);
        if !onnxc_runtime_std::KERNELS.is_empty() {
            check_against(STD_LISTED, onnxc_runtime_std::KERNELS);
        }
    }

    #[test]
    fn by_dtype_picks_the_f64_variant_for_f64_only() {
        let pick = |dtype| by_dtype(onnxc_softmax_f32, onnxc_softmax_f64, dtype).name;
        assert_eq!(pick(DType::F64), "onnxc_softmax_f64");
        assert_eq!(pick(DType::F32), "onnxc_softmax_f32");
        assert_eq!(pick(DType::F16), "onnxc_softmax_f32");
    }
}
