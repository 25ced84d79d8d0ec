//! ai.onnx.ml support vector machines: SVMClassifier and SVMRegressor.
//!
//! Both first compute the kernel of every row with every support vector
//! (`onnxc_svm_kernels`: LINEAR, POLY, RBF, SIGMOID with `kernel_params` =
//! gamma, coef0, degree) into scratch, then combine: the regressor with its
//! coefficients and `rho[0]` (`one_class`: the sign as ±1), the classifier
//! through its one-vs-one classifiers, votes, and Platt scaling
//! (`prob_a`/`prob_b`) coupled into class probabilities, as libsvm and
//! ONNX Runtime do (`onnxc_svm_classify`). Without support vectors both
//! are linear models over `coefficients` (one row per class). The importer
//! checks that the attribute lengths agree (support vectors, coefficients,
//! rho and the Platt pairs against the classes); inference checks the
//! feature count.
//!
//! Type constraints (ONNX): X is float, double, int64 or int32, `[N, F]`
//! or `[F]`. SVMRegressor gives float `[N, 1]`; SVMClassifier int64 or
//! string labels `[N]` and float scores `[N, classes]` (without Platt
//! scaling: the pair scores, `[N, 2]` for two classes). SVMRegressor's
//! `post_transform` is ignored, as in ONNX Runtime.

use super::classify::{lower_labels, post_transform, round8, ClassLabels};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{Lower, Value};
use crate::import::attrs::Attrs;
use crate::import::NodeImport;
use crate::ir::DType;
use crate::ops::{InferCx, Inferred, Op, Operator};
use onnxc_runtime::abi::svm::{
    SvmClassifyParams, SvmKernelParams, SvmRegressParams, SVM_LINEAR, SVM_MODE_LINEAR, SVM_MODE_SVC, SVM_POLY, SVM_RBF,
    SVM_SIGMOID,
};
use onnxc_runtime::generic::svm::svm_work_len;

const NUMBERS: &[DType] = &[DType::F32, DType::F64, DType::I64, DType::I32];

fn floats(a: &Attrs, name: &str) -> Result<Vec<f32>, String> {
    Ok(a.floats(name)?.unwrap_or_default())
}

/// The kernel and the vectors it is taken with.
#[derive(Clone, Debug)]
pub struct SvmKernel {
    pub kernel: i64,
    pub gamma: f64,
    pub coef0: f64,
    pub degree: f64,
    /// `[count, features]`.
    pub vectors: Vec<f32>,
    pub count: usize,
    pub features: usize,
}

impl SvmKernel {
    fn import(a: &Attrs, vectors: Vec<f32>, count: usize, linear: bool) -> Result<SvmKernel, String> {
        let kernel = match a.string_or("kernel_type", "LINEAR")?.as_str() {
            _ if linear => SVM_LINEAR,
            "LINEAR" => SVM_LINEAR,
            "POLY" => SVM_POLY,
            "RBF" => SVM_RBF,
            "SIGMOID" => SVM_SIGMOID,
            other => {
                return Err(format!("attribute \"kernel_type\" is \"{other}\", expected LINEAR, POLY, RBF or SIGMOID"))
            }
        };
        let params = floats(a, "kernel_params")?;
        let [gamma, coef0, degree] = match params.len() {
            0 => [0.0; 3],
            3 => [params[0], params[1], params[2]].map(f64::from),
            n => return Err(format!("attribute \"kernel_params\" has {n} values, expected 3 (gamma, coef0, degree)")),
        };
        if count == 0 || !vectors.len().is_multiple_of(count) {
            return Err(format!("{} vector values do not make {count} vectors", vectors.len()));
        }
        let features = vectors.len() / count;
        Ok(SvmKernel { kernel, gamma, coef0, degree, vectors, count, features })
    }

    /// Checks input 0; returns its rows.
    fn infer(&self, cx: &InferCx) -> Result<usize, String> {
        let x = cx.input(0)?;
        if !NUMBERS.contains(&x.dtype) {
            return Err(format!("input 0 is {}, expected float, double, int64 or int32", x.dtype));
        }
        let (rows, features) = match *x.shape {
            [f] => (1, f),
            [n, f] => (n, f),
            _ => return Err(format!("input 0 has shape {:?}, expected [N, features] or [features]", x.shape)),
        };
        if features != self.features {
            return Err(format!("input 0 has {features} features, the model's vectors {}", self.features));
        }
        Ok(rows)
    }

    fn scratch_bytes(&self, rows: usize) -> usize {
        round8(rows * self.count * 4)
    }

    /// The kernel values `[rows, count]` in the node's scratch.
    fn emit(&self, cx: &mut Lower, rows: usize) -> Result<Value, String> {
        let (dtype, _) = cx.input_type(0)?;
        let k = cx.reserve_scratch(self.scratch_bytes(rows))?;
        let p = SvmKernelParams {
            rows: rows as i64,
            features: self.features as i64,
            vectors: self.count as i64,
            x_elem: dtype.onnx_code() as i64,
            kernel: self.kernel,
            gamma: self.gamma,
            coef0: self.coef0,
            degree: self.degree,
        };
        let p = cx.params(&p)?;
        let vectors = cx.table(&self.vectors)?;
        let x = cx.input_ptr(0)?;
        cx.call_checked(kernels::onnxc_svm_kernels, (p, Ptr(vectors), Ptr(x), Ptr(k)))?;
        Ok(k)
    }
}

fn rows_of(cx: &Lower) -> Result<usize, String> {
    let (_, shape) = cx.input_type(0)?;
    Ok(if shape.len() == 1 { 1 } else { shape[0] })
}

/// SVMRegressor.
#[derive(Clone, Debug)]
pub struct SvmRegressor {
    pub kernel: SvmKernel,
    pub coefficients: Vec<f32>,
    pub rho: f64,
    pub one_class: bool,
}

pub fn import_svm_regressor(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let supports = a.int_or("n_supports", 0)?;
    let supports = usize::try_from(supports).map_err(|_| format!("attribute \"n_supports\" is {supports}"))?;
    let coefficients = floats(a, "coefficients")?;
    let rho = *floats(a, "rho")?.first().ok_or("attribute \"rho\" needs a value")?;
    let (kernel, coefficients) = if supports > 0 {
        if coefficients.len() != supports {
            return Err(format!("there are {} coefficients for {supports} support vectors", coefficients.len()));
        }
        (SvmKernel::import(a, floats(a, "support_vectors")?, supports, false)?, coefficients)
    } else {
        // Linear: the coefficients are the one vector, weighted by 1.
        (SvmKernel::import(a, coefficients, 1, true)?, vec![1.0])
    };
    let one_class = a.int_or("one_class", 0)? != 0;
    Ok(Op::SvmRegressor(SvmRegressor { kernel, coefficients, rho: f64::from(rho), one_class }))
}

impl Operator for SvmRegressor {
    fn name(&self) -> &'static str {
        "SVMRegressor"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let rows = self.kernel.infer(cx)?;
        Ok(vec![Inferred::new(DType::F32, vec![rows, 1])])
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        self.kernel.infer(cx).map_or(0, |rows| self.kernel.scratch_bytes(rows))
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let rows = rows_of(cx)?;
        let k = self.kernel.emit(cx, rows)?;
        let p = SvmRegressParams {
            rows: rows as i64,
            vectors: self.kernel.count as i64,
            rho: self.rho,
            one_class: self.one_class as i64,
        };
        let p = cx.params(&p)?;
        let coefficients = cx.table(&self.coefficients)?;
        let y = cx.output_ptr(0)?;
        cx.call_checked(kernels::onnxc_svm_regress, (p, Ptr(coefficients), Ptr(k), Ptr(y)))
    }
}

/// SVMClassifier.
#[derive(Clone, Debug)]
pub struct SvmClassifier {
    pub kernel: SvmKernel,
    pub labels: ClassLabels,
    /// `rows` is filled in at lowering.
    pub params: SvmClassifyParams,
    /// Each class's first support vector, then the vector count.
    pub starts: Vec<i64>,
    pub coefficients: Vec<f32>,
    pub rho: Vec<f32>,
    pub prob_a: Vec<f32>,
    pub prob_b: Vec<f32>,
}

pub fn import_svm_classifier(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let labels = ClassLabels::import(a, "classlabels_ints")?;
    let classes = labels.count();
    if classes < 2 {
        return Err(format!("there are {classes} class labels, expected at least 2"));
    }
    let pairs = classes * (classes - 1) / 2;
    let per_class = a.ints("vectors_per_class")?.unwrap_or_default();
    let coefficients = floats(a, "coefficients")?;
    let rho = floats(a, "rho")?;
    let (prob_a, prob_b) = (floats(a, "prob_a")?, floats(a, "prob_b")?);
    if prob_a.len() != prob_b.len() {
        return Err(format!("\"prob_a\" has {} values, \"prob_b\" {}", prob_a.len(), prob_b.len()));
    }
    let mut starts = vec![0i64];
    for &n in &per_class {
        if n < 0 {
            return Err(format!("attribute \"vectors_per_class\" has a negative count {n}"));
        }
        let last = *starts.last().unwrap_or(&0);
        starts.push(last.checked_add(n).ok_or("attribute \"vectors_per_class\" overflows")?);
    }
    let vectors = *starts.last().unwrap_or(&0) as usize;
    let svc = vectors > 0;
    let (kernel, mode) = if svc {
        if per_class.len() != classes {
            return Err(format!("\"vectors_per_class\" has {} values for {classes} classes", per_class.len()));
        }
        if coefficients.len() != (classes - 1) * vectors {
            return Err(format!(
                "there are {} coefficients, expected {} ({} classes - 1 times {vectors} support vectors)",
                coefficients.len(),
                (classes - 1) * vectors,
                classes
            ));
        }
        if rho.len() != pairs || !prob_a.is_empty() && prob_a.len() != pairs {
            return Err(format!(
                "\"rho\" (and \"prob_a\"/\"prob_b\" when given) must have {pairs} values, one per class pair"
            ));
        }
        (SvmKernel::import(a, floats(a, "support_vectors")?, vectors, false)?, SVM_MODE_SVC)
    } else {
        if rho.is_empty() {
            return Err("attribute \"rho\" needs a value".into());
        }
        (SvmKernel::import(a, coefficients.clone(), classes, true)?, SVM_MODE_LINEAR)
    };
    let have_proba = !prob_a.is_empty();
    let score_columns = match (svc, have_proba) {
        (true, false) if classes > 2 => pairs,
        (true, false) => 2,
        _ => classes,
    };
    let params = SvmClassifyParams {
        rows: 0,
        classes: classes as i64,
        vectors: kernel.count as i64,
        mode,
        have_proba: have_proba as i64,
        post_transform: post_transform(a)?,
        all_positive: coefficients.iter().all(|&c| c >= 0.0) as i64,
        score_columns: score_columns as i64,
    };
    let coefficients = if svc { coefficients } else { Vec::new() };
    Ok(Op::SvmClassifier(SvmClassifier { kernel, labels, params, starts, coefficients, rho, prob_a, prob_b }))
}

impl SvmClassifier {
    fn work_bytes(&self) -> usize {
        round8(svm_work_len(self.labels.count()) * 4)
    }
}

impl Operator for SvmClassifier {
    fn name(&self) -> &'static str {
        "SVMClassifier"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let rows = self.kernel.infer(cx)?;
        let mut out = vec![
            Inferred::new(self.labels.dtype(), vec![rows]),
            Inferred::new(DType::F32, vec![rows, self.params.score_columns as usize]),
        ];
        out.truncate(cx.output_count.max(1));
        Ok(out)
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let rows = self.kernel.infer(cx).unwrap_or(0);
        self.kernel.scratch_bytes(rows)
            + self.work_bytes()
            + round8(rows * 8)
            + round8(rows * self.params.score_columns as usize * 4)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let rows = rows_of(cx)?;
        let k = self.kernel.emit(cx, rows)?;
        let work = cx.reserve_scratch(self.work_bytes())?;
        let index = cx.reserve_scratch(round8(rows * 8))?;
        let scores_scratch = cx.reserve_scratch(round8(rows * self.params.score_columns as usize * 4))?;
        let z = if cx.has_output(1) { cx.output_ptr(1)? } else { scores_scratch };
        let p = cx.params(&SvmClassifyParams { rows: rows as i64, ..self.params })?;
        let starts = cx.table(&self.starts)?;
        let coefficients = cx.table(&self.coefficients)?;
        let rho = cx.table(&self.rho)?;
        let prob_a = cx.table(&self.prob_a)?;
        let prob_b = cx.table(&self.prob_b)?;
        cx.call_checked(
            kernels::onnxc_svm_classify,
            (
                p,
                Ptr(starts),
                Ptr(coefficients),
                Ptr(rho),
                Ptr(prob_a),
                Ptr(prob_b),
                Ptr(k),
                Ptr(work),
                Ptr(index),
                Ptr(z),
            ),
        )?;
        lower_labels(cx, &self.labels, index, rows)
    }
}
