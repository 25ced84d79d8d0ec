//! The C entry points and parameter structs of [`crate::generic::svm`].

use crate::generic::svm::*;

pub const SVM_LINEAR: i64 = 0;
pub const SVM_POLY: i64 = 1;
pub const SVM_RBF: i64 = 2;
pub const SVM_SIGMOID: i64 = 3;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SvmKernelParams {
    pub rows: i64,
    pub features: i64,
    pub vectors: i64,
    pub x_elem: i64,
    /// `SVM_*`.
    pub kernel: i64,
    pub gamma: f64,
    pub coef0: f64,
    pub degree: f64,
}

/// `k[r, v]` = the kernel of row `r` of `x` and support vector `v`
/// (`vectors` is `[vectors, features]`): LINEAR `x·v`, POLY
/// `(γ x·v + c)^d`, RBF `exp(-γ |x - v|²)`, SIGMOID `tanh(γ x·v + c)`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_svm_kernels(
    p: *const SvmKernelParams,
    vectors: *const f32,
    x: *const u8,
    k: *mut f32,
) -> i32 {
    svm_kernels(p, vectors, x, k)
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SvmRegressParams {
    pub rows: i64,
    pub vectors: i64,
    pub rho: f64,
    /// 1: the output is 1 or -1 by the score's sign.
    pub one_class: i64,
}

/// SVMRegressor: `y[r] = rho + sum_v k[r, v] * coefficients[v]`.
#[no_mangle]
pub unsafe extern "C" fn onnxc_svm_regress(
    p: *const SvmRegressParams,
    coefficients: *const f32,
    k: *const f32,
    y: *mut f32,
) -> i32 {
    svm_regress(p, coefficients, k, y)
}

/// SVMClassifier with support vectors (one-vs-one classifiers).
pub const SVM_MODE_SVC: i64 = 0;

/// SVMClassifier without support vectors: one linear score per class.
pub const SVM_MODE_LINEAR: i64 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SvmClassifyParams {
    pub rows: i64,
    pub classes: i64,
    /// Columns of `k`: support vectors (SVC) or classes (linear).
    pub vectors: i64,
    /// `SVM_MODE_*`.
    pub mode: i64,
    /// 1 when `prob_a`/`prob_b` give Platt scaling (one pair per classifier).
    pub have_proba: i64,
    pub post_transform: i64,
    /// 1 when no coefficient is negative.
    pub all_positive: i64,
    /// Columns of `z`.
    pub score_columns: i64,
}

/// SVMClassifier from the kernel values `k` (`[rows, vectors]`), as ONNX
/// Runtime computes it (in f32 where it does): SVC scores each class pair
/// `i < j` with the coefficients of both classes' support vectors
/// (`starts[c]..starts[c + 1]`) plus `rho`, a vote goes to `i` when the
/// score is positive, and the label is the most voted class; with Platt
/// scaling the pair probabilities are coupled into class probabilities
/// (Wu, Lin and Weng's method, as libsvm), else the scores are the pair
/// scores (`-s, s` for two classes). Linear mode scores each class with
/// `k + rho[0]` and takes the highest (two classes: class 1 when that
/// score passes 0.5 with positive coefficients, or 0 otherwise).
/// `work` holds [`svm_work_len`] f32.
#[no_mangle]
pub unsafe extern "C" fn onnxc_svm_classify(
    p: *const SvmClassifyParams,
    starts: *const i64,
    coefficients: *const f32,
    rho: *const f32,
    prob_a: *const f32,
    prob_b: *const f32,
    k: *const f32,
    work: *mut f32,
    label: *mut i64,
    z: *mut f32,
) -> i32 {
    svm_classify(p, starts, coefficients, rho, prob_a, prob_b, k, work, label, z)
}
