//! What the ai.onnx.ml classifiers (TreeEnsembleClassifier,
//! LinearClassifier) share: the `post_transform` attribute, the class
//! labels (`classlabels_int64s` or `classlabels_strings`), and the last
//! step from raw scores to the two outputs, label `[N]` and scores.
//!
//! That step is one call to `onnxc_ml_classify` (base values, the binary
//! cases ONNX Runtime defines, the post transform, the winning class as an
//! index) and one to `onnxc_ml_pick_labels` (index → int64 label, or a
//! string record pointing into the labels' blob in read-only data).

use super::encoders::string_table;
use crate::codegen::kernels::{self, Ptr, Ref};
use crate::codegen::{Lower, Value};
use crate::import::attrs::Attrs;
use crate::ir::DType;
use crate::ops::InferCx;
use onnxc_runtime::abi::ml::{ClassifyParams, PickLabelsParams, LABELS_INT, LABELS_STRING};
use onnxc_runtime::abi::tree::{POST_LOGISTIC, POST_NONE, POST_PROBIT, POST_SOFTMAX, POST_SOFTMAX_ZERO};

/// The `post_transform` attribute as a `POST_*` code.
pub fn post_transform(a: &Attrs) -> Result<i64, String> {
    match a.string_or("post_transform", "NONE")?.as_str() {
        "NONE" => Ok(POST_NONE),
        "SOFTMAX" => Ok(POST_SOFTMAX),
        "LOGISTIC" => Ok(POST_LOGISTIC),
        "SOFTMAX_ZERO" => Ok(POST_SOFTMAX_ZERO),
        "PROBIT" => Ok(POST_PROBIT),
        other => Err(format!(
            "attribute \"post_transform\" is \"{other}\", expected NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT"
        )),
    }
}

/// The class labels of a classifier.
#[derive(Clone, Debug)]
pub enum ClassLabels {
    Ints(Vec<i64>),
    Strings(Vec<Vec<u8>>),
}

impl ClassLabels {
    /// From `ints_name` (`classlabels_int64s`, LinearClassifier's
    /// `classlabels_ints`) or `classlabels_strings`.
    pub fn import(a: &Attrs, ints_name: &str) -> Result<ClassLabels, String> {
        match (a.ints(ints_name)?, a.strings("classlabels_strings")?) {
            (Some(v), None) if !v.is_empty() => Ok(ClassLabels::Ints(v)),
            (None, Some(v)) if !v.is_empty() => {
                Ok(ClassLabels::Strings(v.into_iter().map(String::into_bytes).collect()))
            }
            _ => Err(format!("exactly one of \"{ints_name}\" and \"classlabels_strings\" must list the classes")),
        }
    }

    pub fn count(&self) -> usize {
        match self {
            ClassLabels::Ints(v) => v.len(),
            ClassLabels::Strings(v) => v.len(),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            ClassLabels::Ints(_) => DType::I64,
            ClassLabels::Strings(_) => DType::String,
        }
    }
}

/// The last step of a classifier, decided at import.
#[derive(Clone, Debug)]
pub struct ClassifierFinish {
    pub labels: ClassLabels,
    /// `rows` is filled in at lowering.
    pub params: ClassifyParams,
    pub base_values: Vec<f64>,
    /// Per score column: 1 when the class can win.
    pub scored: Vec<i64>,
    /// Columns of the scores output.
    pub score_columns: usize,
}

/// `n` rounded up to a multiple of 8 (scratch parts stay 8-byte aligned).
pub fn round8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

impl ClassifierFinish {
    /// Scratch for `rows` rows: label indices and a scores buffer for when
    /// an output is not wanted.
    pub fn scratch_bytes(&self, rows: usize) -> usize {
        round8(rows * 8) + round8(rows * self.score_columns * 4)
    }

    /// The outputs' types: label `[rows]` and scores `[rows, columns]`.
    pub fn infer(&self, cx: &InferCx, rows: usize) -> Vec<crate::ops::Inferred> {
        let mut out = vec![
            crate::ops::Inferred::new(self.labels.dtype(), vec![rows]),
            crate::ops::Inferred::new(DType::F32, vec![rows, self.score_columns]),
        ];
        out.truncate(cx.output_count.max(1));
        out
    }

    /// Labels and scores from the raw scores at `raw` (`[rows, classes]` f32).
    pub fn lower(&self, cx: &mut Lower, raw: Value, rows: usize) -> Result<(), String> {
        let index = cx.reserve_scratch(round8(rows * 8))?;
        let scores_scratch = cx.reserve_scratch(round8(rows * self.score_columns * 4))?;
        let z = if cx.has_output(1) { cx.output_ptr(1)? } else { scores_scratch };
        let p = cx.params(&ClassifyParams { rows: rows as i64, ..self.params })?;
        let base = cx.table(&self.base_values)?;
        let scored = cx.table(&self.scored)?;
        cx.call_checked(kernels::onnxc_ml_classify, (p, Ptr(base), Ptr(scored), Ptr(raw), Ptr(index), Ptr(z)))?;
        lower_labels(cx, &self.labels, index, rows)
    }
}

/// Output 0 (when wanted): the labels of the class indices at `index`.
pub fn lower_labels(cx: &mut Lower, labels: &ClassLabels, index: Value, rows: usize) -> Result<(), String> {
    if !cx.has_output(0) {
        return Ok(());
    }
    let (kind, ints, refs, blob) = match labels {
        ClassLabels::Ints(v) => (LABELS_INT, v.clone(), Vec::new(), Vec::new()),
        ClassLabels::Strings(v) => {
            let (refs, blob) = string_table(v);
            (LABELS_STRING, Vec::new(), refs, blob)
        }
    };
    let p = PickLabelsParams { count: rows as i64, labels: labels.count() as i64, kind, blob: blob.len() as i64 };
    let p = cx.params(&p)?;
    let ints = cx.table(&ints)?;
    let refs = Ref::to(cx.table(&refs)?);
    let blob = cx.data_bytes(&blob)?;
    let y = cx.output_ptr(0)?;
    cx.call_checked(kernels::onnxc_ml_pick_labels, (p, Ptr(index), Ptr(ints), refs, Ptr(blob), Ptr(y)))
}
