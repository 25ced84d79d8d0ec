//! ai.onnx.ml linear models: LinearRegressor and LinearClassifier, and the
//! per-feature transforms that surround them in converted pipelines:
//! Scaler, Normalizer, Imputer, and FeatureVectorizer (tensor inputs).
//!
//! Coefficients, intercepts, offsets and the like go to read-only data as
//! f64; the kernels (`onnxc_runtime::generic::ml`) read the input in its
//! own type and compute in f64. LinearClassifier's scores go through the
//! shared classifier step ([`ClassifierFinish`]); with one score column and
//! two labels the scores are `(1 - s, s)` (`s` after LOGISTIC, the only
//! transform applied there) and the label is class 1 when the raw score is
//! positive, as in ONNX Runtime. A single-target LinearRegressor applies no
//! post transform but PROBIT (ONNX Runtime).
//!
//! Type constraints (ONNX): X is float, double, int64 or int32, `[N, F]` or
//! `[F]` (one row). LinearRegressor gives float `[N, targets]`;
//! LinearClassifier int64 or string labels `[N]` and float scores; Scaler
//! and Normalizer float of X's shape; Imputer (float or int64) X's type.
//! FeatureVectorizer takes any number of such inputs `[N, C_i]` and gives
//! float `[N, sum(inputdimensions)]`: each input's first
//! `inputdimensions[i]` columns, zeros where it has fewer.

use super::classify::{post_transform, round8, ClassLabels, ClassifierFinish};
use crate::codegen::kernels::{self, Ptr};
use crate::codegen::{Lower, Value};
use crate::import::NodeImport;
use crate::ir::DType;
use crate::ops::{InferCx, Inferred, Op, Operator};
use onnxc_runtime::abi::ml::{
    ClassifyParams, FeaturesParams, MlLinearParams, VectorizeParams, CLASSIFY_ARGMAX, CLASSIFY_LINEAR_BINARY,
    FEATURES_IMPUTE, FEATURES_NORMALIZE_L1, FEATURES_NORMALIZE_L2, FEATURES_NORMALIZE_MAX, FEATURES_SCALE,
};
use onnxc_runtime::abi::tree::{POST_NONE, POST_PROBIT};

/// Rows and features of a numeric `[N, F]` or `[F]` input 0.
fn rows_features(cx: &InferCx, types: &[DType]) -> Result<(usize, usize), String> {
    let x = cx.input(0)?;
    if !types.contains(&x.dtype) {
        return Err(format!("input 0 is {}, expected one of {types:?}", x.dtype));
    }
    match *x.shape {
        [features] => Ok((1, features)),
        [rows, features] => Ok((rows, features)),
        _ => Err(format!("input 0 has shape {:?}, expected [N, features] or [features]", x.shape)),
    }
}

/// Rows of a `[N, F]` or `[F]` shape.
fn rows_of(shape: &[usize]) -> usize {
    if shape.len() == 1 {
        1
    } else {
        shape[0]
    }
}

const NUMBERS: &[DType] = &[DType::F32, DType::F64, DType::I64, DType::I32];

/// Coefficients `[targets, features]` and intercepts of a linear model.
#[derive(Clone, Debug)]
pub struct LinearScores {
    pub coefficients: Vec<f64>,
    pub intercepts: Vec<f64>,
    pub targets: usize,
}

impl LinearScores {
    fn import(cx: &NodeImport, targets: usize) -> Result<LinearScores, String> {
        let a = &cx.attrs;
        let coefficients: Vec<f64> = a
            .floats("coefficients")?
            .ok_or("attribute \"coefficients\" is required")?
            .into_iter()
            .map(f64::from)
            .collect();
        let intercepts: Vec<f64> = a.floats("intercepts")?.unwrap_or_default().into_iter().map(f64::from).collect();
        if !intercepts.is_empty() && intercepts.len() != targets {
            return Err(format!("attribute \"intercepts\" has {} values, expected {targets}", intercepts.len()));
        }
        if targets == 0 || !coefficients.len().is_multiple_of(targets) {
            return Err(format!("{} coefficients do not make {targets} rows", coefficients.len()));
        }
        Ok(LinearScores { coefficients, intercepts, targets })
    }

    /// Checks input 0 against the coefficients; returns its rows.
    fn infer(&self, cx: &InferCx) -> Result<usize, String> {
        let (rows, features) = rows_features(cx, NUMBERS)?;
        if features * self.targets != self.coefficients.len() {
            return Err(format!(
                "input 0 has {features} features, but there are {} coefficients for {} targets",
                self.coefficients.len(),
                self.targets
            ));
        }
        Ok(rows)
    }

    fn emit(&self, cx: &mut Lower, post_transform: i64, y: Value) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let features = shape.last().copied().unwrap_or(0);
        let p = MlLinearParams {
            rows: rows_of(&shape) as i64,
            features: features as i64,
            targets: self.targets as i64,
            x_elem: dtype.onnx_code() as i64,
            post_transform,
        };
        let p = cx.params(&p)?;
        let coefficients = cx.table(&self.coefficients)?;
        let intercepts = cx.table(&self.intercepts)?;
        let x = cx.input_ptr(0)?;
        cx.call_checked(kernels::onnxc_ml_linear, (p, Ptr(coefficients), Ptr(intercepts), Ptr(x), Ptr(y)))
    }
}

/// LinearRegressor.
#[derive(Clone, Debug)]
pub struct LinearRegressor {
    pub scores: LinearScores,
    pub post_transform: i64,
}

pub fn import_linear_regressor(cx: &mut NodeImport) -> Result<Op, String> {
    let targets = cx.attrs.int_or("targets", 1)?;
    let targets = usize::try_from(targets).map_err(|_| format!("attribute \"targets\" is {targets}"))?;
    let scores = LinearScores::import(cx, targets)?;
    let post = post_transform(&cx.attrs)?;
    let post_transform = if targets == 1 && post != POST_PROBIT { POST_NONE } else { post };
    Ok(Op::LinearRegressor(LinearRegressor { scores, post_transform }))
}

impl Operator for LinearRegressor {
    fn name(&self) -> &'static str {
        "LinearRegressor"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let rows = self.scores.infer(cx)?;
        Ok(vec![Inferred::new(DType::F32, vec![rows, self.scores.targets])])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let y = cx.output_ptr(0)?;
        self.scores.emit(cx, self.post_transform, y)
    }
}

/// LinearClassifier.
#[derive(Clone, Debug)]
pub struct LinearClassifier {
    pub scores: LinearScores,
    pub finish: ClassifierFinish,
}

pub fn import_linear_classifier(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let labels = ClassLabels::import(a, "classlabels_ints")?;
    let classes = a.floats("intercepts")?.map_or(0, |v| v.len());
    let post = post_transform(a)?;
    let binary = classes == 1;
    if binary && (labels.count() != 2 || post == POST_PROBIT) {
        return Err("one score column is supported with two class labels and no PROBIT transform".into());
    }
    if !binary && labels.count() != classes {
        return Err(format!("there are {classes} intercepts but {} class labels", labels.count()));
    }
    let scores = LinearScores::import(cx, classes)?;
    let params = ClassifyParams {
        classes: classes as i64,
        mode: if binary { CLASSIFY_LINEAR_BINARY } else { CLASSIFY_ARGMAX },
        post_transform: post,
        ..Default::default()
    };
    let score_columns = if binary { 2 } else { classes };
    let finish = ClassifierFinish { labels, params, base_values: Vec::new(), scored: vec![1; classes], score_columns };
    Ok(Op::LinearClassifier(LinearClassifier { scores, finish }))
}

impl Operator for LinearClassifier {
    fn name(&self) -> &'static str {
        "LinearClassifier"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let rows = self.scores.infer(cx)?;
        Ok(self.finish.infer(cx, rows))
    }

    fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let rows = rows_features(cx, NUMBERS).map_or(0, |(rows, _)| rows);
        round8(rows * self.scores.targets * 4) + self.finish.scratch_bytes(rows)
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, shape) = cx.input_type(0)?;
        let rows = rows_of(&shape);
        let raw = cx.reserve_scratch(round8(rows * self.scores.targets * 4))?;
        self.scores.emit(cx, POST_NONE, raw)?;
        self.finish.lower(cx, raw, rows)
    }
}

/// Scaler, Normalizer and Imputer: one kernel, one mode each.
#[derive(Clone, Debug)]
pub struct FeatureTransform {
    pub mode: i64,
    /// Scaler's offsets, Imputer's values.
    pub a: Vec<f64>,
    /// Scaler's scales.
    pub b: Vec<f64>,
    /// Imputer's replaced value.
    pub replaced: f64,
}

pub fn import_scaler(cx: &mut NodeImport) -> Result<Op, String> {
    let list = |name: &str| -> Result<Vec<f64>, String> {
        Ok(cx.attrs.floats(name)?.unwrap_or_default().into_iter().map(f64::from).collect())
    };
    let (a, b) = (list("offset")?, list("scale")?);
    if a.len() != b.len() {
        return Err(format!("attribute \"offset\" has {} values, \"scale\" {}", a.len(), b.len()));
    }
    Ok(Op::FeatureTransform(FeatureTransform { mode: FEATURES_SCALE, a, b, replaced: 0.0 }))
}

pub fn import_normalizer(cx: &mut NodeImport) -> Result<Op, String> {
    let mode = match cx.attrs.string_or("norm", "MAX")?.as_str() {
        "MAX" => FEATURES_NORMALIZE_MAX,
        "L1" => FEATURES_NORMALIZE_L1,
        "L2" => FEATURES_NORMALIZE_L2,
        other => return Err(format!("attribute \"norm\" is \"{other}\", expected MAX, L1 or L2")),
    };
    Ok(Op::FeatureTransform(FeatureTransform { mode, a: Vec::new(), b: Vec::new(), replaced: 0.0 }))
}

pub fn import_imputer(cx: &mut NodeImport) -> Result<Op, String> {
    let a = &cx.attrs;
    let (values, replaced) = match (a.floats("imputed_value_floats")?, a.ints("imputed_value_int64s")?) {
        (Some(v), None) => {
            (v.into_iter().map(f64::from).collect(), f64::from(a.float_or("replaced_value_float", 0.0)?))
        }
        (None, Some(v)) => (v.into_iter().map(|i| i as f64).collect(), a.int_or("replaced_value_int64", 0)? as f64),
        _ => return Err("exactly one of \"imputed_value_floats\" and \"imputed_value_int64s\" is required".into()),
    };
    Ok(Op::FeatureTransform(FeatureTransform { mode: FEATURES_IMPUTE, a: values, b: Vec::new(), replaced }))
}

impl Operator for FeatureTransform {
    fn name(&self) -> &'static str {
        match self.mode {
            FEATURES_SCALE => "Scaler",
            FEATURES_IMPUTE => "Imputer",
            _ => "Normalizer",
        }
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let types: &[DType] = if self.mode == FEATURES_IMPUTE { &[DType::F32, DType::I64] } else { NUMBERS };
        let (_, features) = rows_features(cx, types)?;
        for (name, list) in [("offset/imputed values", &self.a), ("scale", &self.b)] {
            let needed = self.mode == FEATURES_SCALE || self.mode == FEATURES_IMPUTE && name != "scale";
            if needed && list.len() != 1 && list.len() != features {
                return Err(format!("{} has {} values, expected 1 or {features} (one per feature)", name, list.len()));
            }
        }
        let x = cx.input(0)?;
        let dtype = if self.mode == FEATURES_IMPUTE { x.dtype } else { DType::F32 };
        Ok(vec![Inferred::new(dtype, x.shape.to_vec())])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (dtype, shape) = cx.input_type(0)?;
        let (y_dtype, _) = cx.output_type(0)?;
        let features = shape.last().copied().unwrap_or(0);
        let p = FeaturesParams {
            rows: rows_of(&shape) as i64,
            features: features as i64,
            x_elem: dtype.onnx_code() as i64,
            y_elem: y_dtype.onnx_code() as i64,
            mode: self.mode,
            a_len: self.a.len() as i64,
            b_len: self.b.len() as i64,
            replaced: self.replaced,
        };
        let p = cx.params(&p)?;
        let a = cx.table(&self.a)?;
        let b = cx.table(&self.b)?;
        let (x, y) = (cx.input_ptr(0)?, cx.output_ptr(0)?);
        cx.call_checked(kernels::onnxc_ml_features, (p, Ptr(a), Ptr(b), Ptr(x), Ptr(y)))
    }
}

/// FeatureVectorizer.
#[derive(Clone, Debug)]
pub struct FeatureVectorizer {
    /// Columns each input fills.
    pub dimensions: Vec<usize>,
}

pub fn import_feature_vectorizer(cx: &mut NodeImport) -> Result<Op, String> {
    let dims = cx.attrs.ints("inputdimensions")?.ok_or("attribute \"inputdimensions\" is required")?;
    let dimensions = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("attribute \"inputdimensions\" has {d}")))
        .collect::<Result<Vec<_>, _>>()?;
    if dimensions.len() != cx.inputs.len() {
        return Err(format!("\"inputdimensions\" has {} values for {} inputs", dimensions.len(), cx.inputs.len()));
    }
    Ok(Op::FeatureVectorizer(FeatureVectorizer { dimensions }))
}

impl Operator for FeatureVectorizer {
    fn name(&self) -> &'static str {
        "FeatureVectorizer"
    }

    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let mut rows = None;
        for i in 0..self.dimensions.len() {
            let x = cx.input(i)?;
            if !NUMBERS.contains(&x.dtype) {
                return Err(format!("input {i} is {}, expected float, double, int64 or int32", x.dtype));
            }
            let r = match *x.shape {
                [_] => 1,
                [r, _] => r,
                _ => return Err(format!("input {i} has shape {:?}, expected [N, C] or [C]", x.shape)),
            };
            if rows.replace(r).is_some_and(|before| before != r) {
                return Err(format!("input {i} has {r} rows, the inputs before it {}", rows.unwrap_or(0)));
            }
        }
        let columns = self.dimensions.iter().sum();
        Ok(vec![Inferred::new(DType::F32, vec![rows.unwrap_or(1), columns])])
    }

    fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let (_, out_shape) = cx.output_type(0)?;
        let mut offset = 0;
        for (i, &take) in self.dimensions.iter().enumerate() {
            let (dtype, shape) = cx.input_type(i)?;
            let p = VectorizeParams {
                rows: out_shape[0] as i64,
                in_columns: shape.last().copied().unwrap_or(0) as i64,
                take: take as i64,
                out_columns: out_shape[1] as i64,
                offset: offset as i64,
                x_elem: dtype.onnx_code() as i64,
            };
            offset += take;
            let p = cx.params(&p)?;
            let (x, y) = (cx.input_ptr(i)?, cx.output_ptr(0)?);
            cx.call_checked(kernels::onnxc_ml_vectorize, (p, Ptr(x), Ptr(y)))?;
        }
        Ok(())
    }
}
