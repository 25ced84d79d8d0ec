//! Operators: the closed [`Op`] enum, one file per operator family, and the
//! registry that maps ONNX `op_type`s to their importers.
//!
//! Each family file holds, for its operators: the typed attribute struct,
//! the importer (attribute parsing and opset-version normalisation), shape
//! and type inference, and the lowering to code through
//! [`crate::codegen::Lower`]. Adding an operator touches its family file, one
//! line in [`REGISTRY`], one line in the `ops!` list below, and the
//! conformance list; adding an elementwise function is one row in
//! `elementwise/table.rs` (which [`importer`] reads after the registries).

pub mod attention;
pub mod control;
pub mod conv;
pub mod einsum;
pub mod elementwise;
pub mod flex_attention;
pub mod fused;
pub mod gather;
pub mod gradient;
pub mod image;
pub mod layout;
pub mod linalg;
pub mod loss;
pub mod ml;
pub mod norm;
pub mod pool;
pub mod quant;
pub mod random;
pub mod reduce;
pub mod resize;
pub mod rnn;
pub mod scatter;
pub mod select;
pub mod sequence;
pub mod shape_ops;
pub mod signal;
pub mod softmax;
pub mod strings;
pub mod training;

use crate::codegen::Lower;
use crate::import::NodeImport;
use crate::ir::attributes::Attribute;
use crate::ir::dim_expr::{DimExpr, SymbolFacts};
use crate::ir::{DType, Dim, Tensor, TensorType};

/// What inference knows about one input of a node.
pub struct InputInfo<'a> {
    pub dtype: DType,
    /// The dims, when all are known; empty when some is symbolic (only
    /// operators that infer over [`InferCx::dims`] see such inputs).
    pub shape: &'a [usize],
    /// The value, when it is known at compile time.
    pub value: Option<&'a Tensor>,
}

/// What inference learns about one output of a node.
#[derive(Clone, Debug)]
pub struct Inferred {
    pub dtype: DType,
    /// The shape; for a data-dependent output, its largest possible shape
    /// (0 along unbounded dims).
    pub shape: Vec<usize>,
    /// Set by operators whose result is known from shapes alone (Shape, Size).
    pub value: Option<Tensor>,
    /// Set for outputs whose shape depends on tensor data (NonZero, ...):
    /// the dims, some [`Dim::Dynamic`]; in symbolic inference, for
    /// outputs whose shape depends on symbols: some [`Dim::Sym`].
    pub runtime_shape: Option<Vec<Dim>>,
    /// Symbolic inference: the elements of a small integer output as
    /// expressions (Shape of a tensor of symbolic dims, and what computes
    /// on it), when some is not a constant.
    pub elements: Option<Vec<DimExpr>>,
}

impl Inferred {
    pub fn new(dtype: DType, shape: Vec<usize>) -> Inferred {
        Inferred { dtype, shape, value: None, runtime_shape: None, elements: None }
    }

    /// An output of dims given as expressions: [`Inferred::new`] when
    /// all are constants, else symbolic dims.
    pub fn of_dims(dtype: DType, dims: Vec<DimExpr>) -> Result<Inferred, String> {
        if let Some(shape) = dims.iter().map(DimExpr::as_size).collect::<Option<Vec<usize>>>() {
            return Ok(Inferred::new(dtype, shape));
        }
        let dims = dims.into_iter().map(|d| Dim::from_expr(d.clone()).ok_or_else(|| format!("a dim is {d}")));
        Ok(Inferred::data_dependent(dtype, dims.collect::<Result<_, _>>()?))
    }

    /// This output holding `elements`: symbolic ones, or when all are
    /// constants (symbolic inference binding some symbols), the i64
    /// constant they make.
    pub fn with_elements(self, elements: Option<Vec<DimExpr>>) -> Inferred {
        let Some(elements) = elements else { return self };
        let count = crate::ir::shape::element_count(&self.shape);
        match elements.iter().map(DimExpr::as_const).collect::<Option<Vec<i64>>>() {
            Some(values) if self.dtype == DType::I64 && self.runtime_shape.is_none() && count == Some(values.len()) => {
                Inferred::constant(Tensor::from_i64s(self.shape, &values))
            }
            _ => Inferred { elements: Some(elements), ..self },
        }
    }

    /// The 1-D output whose elements are `elements`: an i64 constant when
    /// all are constants, else symbolic elements.
    pub fn of_elements(dtype: DType, elements: Vec<DimExpr>) -> Inferred {
        Inferred::new(dtype, vec![elements.len()]).with_elements(Some(elements))
    }

    /// An output known at compile time.
    pub fn constant(value: Tensor) -> Inferred {
        Inferred {
            dtype: value.dtype,
            shape: value.shape.clone(),
            value: Some(value),
            runtime_shape: None,
            elements: None,
        }
    }

    /// An output whose dims are computed at run time where `dims` says so.
    pub fn data_dependent(dtype: DType, dims: Vec<Dim>) -> Inferred {
        let shape = dims
            .iter()
            .map(|d| match d {
                Dim::Known(n) | Dim::Dynamic(Some(n)) => *n,
                Dim::Sym(_) | Dim::Dynamic(None) => 0,
            })
            .collect();
        Inferred { dtype, shape, value: None, runtime_shape: Some(dims), elements: None }
    }

    /// The most bytes the output can take (`None`: unbounded).
    pub fn max_bytes(&self) -> Option<usize> {
        match &self.runtime_shape {
            Some(dims) => TensorType { dtype: self.dtype, shape: dims.clone() }.max_bytes(),
            None => crate::ir::shape::element_count(&self.shape).and_then(|n| self.dtype.bytes_for(n)),
        }
    }

    pub fn tensor_type(&self) -> TensorType {
        match &self.runtime_shape {
            Some(dims) => TensorType { dtype: self.dtype, shape: dims.clone() },
            None => TensorType::known(self.dtype, &self.shape),
        }
    }
}

/// The inputs of one node during inference; `None` marks omitted inputs.
pub struct InferCx<'a> {
    pub inputs: Vec<Option<InputInfo<'a>>>,
    pub output_count: usize,
    /// Inputs the operator asked for as constants but whose value is not
    /// known; `infer` reports them so callers can specialise on them.
    pub missing_values: std::cell::RefCell<Vec<usize>>,
    /// Largest output an operator may compute into [`Inferred::value`]
    /// itself (0 outside `infer`: nothing is materialised).
    pub max_fold_bytes: usize,
    /// Symbolic inference: each input's dims and symbolic elements (empty
    /// otherwise: [`InferCx::dims`] reads `shape`, [`InferCx::elements`]
    /// the constant value).
    pub exprs: Vec<Option<InputExprs>>,
    /// What is known of the symbols (`None`: that each is at least 1).
    pub facts: Option<&'a SymbolFacts>,
}

/// An input as symbolic inference sees it.
#[derive(Clone, Debug)]
pub struct InputExprs {
    pub dims: Vec<DimExpr>,
    /// A small integer tensor's elements as expressions, when some is
    /// symbolic (Shape's output and what computes on it).
    pub elements: Option<Vec<DimExpr>>,
}

impl<'a> InferCx<'a> {
    pub fn input(&self, i: usize) -> Result<&InputInfo<'a>, String> {
        self.inputs.get(i).and_then(Option::as_ref).ok_or_else(|| format!("input {i} is required"))
    }

    pub fn opt_input(&self, i: usize) -> Option<&InputInfo<'a>> {
        self.inputs.get(i).and_then(Option::as_ref)
    }

    /// An input whose value must be known at compile time (a shape, axes,
    /// pads...); data-dependent shapes are not compiled yet.
    pub fn const_input(&self, i: usize) -> Result<&'a Tensor, String> {
        self.input(i)?.value.ok_or_else(|| self.missing(i))
    }

    pub fn opt_const_input(&self, i: usize) -> Result<Option<&'a Tensor>, String> {
        match self.opt_input(i) {
            None => Ok(None),
            Some(info) => info.value.map(Some).ok_or_else(|| self.missing(i)),
        }
    }

    /// Input `i`'s dims as expressions (constants outside symbolic
    /// inference): what operators that infer symbolically compute with.
    pub fn dims(&self, i: usize) -> Result<Vec<DimExpr>, String> {
        match self.exprs.get(i).and_then(Option::as_ref) {
            Some(e) => Ok(e.dims.clone()),
            None => Ok(self.input(i)?.shape.iter().map(|&d| DimExpr::from(d)).collect()),
        }
    }

    /// The elements of integer input `i`, which must be known at compile
    /// time, as expressions: symbolic ones, or the constant's.
    pub fn elements(&self, i: usize) -> Result<Vec<DimExpr>, String> {
        if let Some(elements) = self.exprs.get(i).and_then(Option::as_ref).and_then(|e| e.elements.clone()) {
            return Ok(elements);
        }
        let t = self.const_input(i)?;
        if !t.dtype.is_int() {
            return Err(format!("input {i} is {}, expected integers", t.dtype));
        }
        Ok((0..t.len()).map(|k| DimExpr::constant(t.get_i64(k))).collect())
    }

    /// Input `i`'s elements when they are symbolic (then its value is not
    /// known as a tensor).
    pub fn symbolic_elements(&self, i: usize) -> Option<Vec<DimExpr>> {
        self.exprs.get(i).and_then(Option::as_ref).and_then(|e| e.elements.clone())
    }

    pub fn facts(&self) -> &SymbolFacts {
        self.facts.unwrap_or_else(|| SymbolFacts::none())
    }

    fn missing(&self, i: usize) -> String {
        self.missing_values.borrow_mut().push(i);
        format!("input {i} must be a compile-time constant (data-dependent shapes are not supported yet)")
    }
}

/// The behaviour every operator's attribute struct provides.
pub trait Operator: std::fmt::Debug {
    /// The ONNX op_type (or, for table-driven families, the table entry's name).
    fn name(&self) -> &'static str;

    /// Output element types and shapes from the inputs'.
    fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String>;

    /// True when [`Operator::infer`] computes over [`InferCx::dims`] (and
    /// [`InferCx::elements`] for shape-like inputs), never reading an
    /// input's `shape` (constant inputs such as axes it may still read as
    /// values), so that it takes symbolic dims too.
    /// Symbolic inference refuses a symbolic dim to the others.
    fn infers_symbolically(&self) -> bool {
        false
    }

    /// Emits code computing the outputs from the inputs.
    fn lower(&self, cx: &mut Lower) -> Result<(), String>;

    /// Scratch bytes the lowering needs during this node (aligned by the plan).
    fn scratch_bytes(&self, _cx: &InferCx) -> usize {
        0
    }

    /// True when output 0 is input 0's bytes reinterpreted (Reshape and kin):
    /// the plan then aliases instead of copying.
    fn is_view(&self) -> bool {
        false
    }

    /// False for operators that must not be evaluated at compile time.
    fn foldable(&self) -> bool {
        true
    }

    /// True when the lowering takes memory of a data-dependent size from
    /// the run-time allocator ([`Lower::alloc_scratch`]) even though its
    /// outputs have static shapes (string bytes): the plan then provides
    /// the allocator and counts the model's workspace as unbounded.
    fn allocates_at_run_time(&self) -> bool {
        false
    }

    /// Most bytes the lowering takes from the run-time allocator besides
    /// its data-dependent outputs (`None`: no bound); the plan adds them
    /// to the workspace's dynamic part and provides the allocator.
    fn run_time_bytes(&self, _cx: &InferCx) -> Option<usize> {
        Some(0)
    }

    /// True when the lowering computes only f32 of the float types and its
    /// f16/bf16 tensors are to be staged through f32 copies ([`staging`]).
    fn stages_halves(&self) -> bool {
        false
    }

    /// True when the lowering takes packed sub-byte tensors (int4, int2,
    /// float4) as i32/f32 copies ([`staging`]).
    fn stages_packed(&self) -> bool {
        false
    }

    /// True when the lowering reads and writes packed sub-byte tensors
    /// itself. Operators that neither stage nor read them reject them.
    fn reads_packed(&self) -> bool {
        false
    }

    /// The error the generated code would return on every run, given the
    /// inputs known at compile time (a constant index out of range, a
    /// constant integer divisor of zero): inference reports it as a
    /// compile error for nodes that run whenever the model does.
    fn fails_on_constants(&self, _cx: &InferCx) -> Result<(), String> {
        Ok(())
    }

    /// The attributes the textual mid-IR prints (`--emit mir`), by name and
    /// in order: by default every field of the struct that does more than
    /// repeat the operator's name, read from its derived `Debug` form
    /// ([`crate::ir::attributes`]); a family whose fields are bulky or hold
    /// subgraphs prints a summary instead.
    fn attributes(&self) -> Vec<Attribute> {
        crate::ir::attributes::of_operator(self, self.name())
    }
}

macro_rules! ops {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// Every operator the mid-IR knows, with its typed attributes.
        #[derive(Clone, Debug)]
        pub enum Op { $($variant($ty)),* }

        impl Op {
            fn inner(&self) -> &dyn Operator {
                match self { $(Op::$variant(op) => op),* }
            }
        }
        $(impl From<$ty> for Op { fn from(op: $ty) -> Op { Op::$variant(op) } })*
    };
}

ops! {
    Elementwise(elementwise::Elementwise),
    FusedElementwise(fused::FusedElementwise),
    MatMul(linalg::MatMul),
    Gemm(linalg::Gemm),
    Conv(conv::Conv),
    ConvTranspose(conv::ConvTranspose),
    DeformConv(conv::DeformConv),
    Col2Im(conv::Col2Im),
    Reorder(layout::Reorder),
    Pool(pool::Pool),
    MaxUnpool(pool::MaxUnpool),
    RoiPool(pool::RoiPool),
    BatchNorm(norm::BatchNorm),
    Lrn(norm::Lrn),
    Normalize(norm::Normalize),
    Softmax(softmax::Softmax),
    Reduce(reduce::Reduce),
    ArgReduce(reduce::ArgReduce),
    Reshape(shape_ops::Reshape),
    Transpose(shape_ops::Transpose),
    Concat(shape_ops::Concat),
    Split(shape_ops::Split),
    Slice(shape_ops::Slice),
    Expand(shape_ops::Expand),
    Pad(shape_ops::Pad),
    Shape(shape_ops::Shape),
    Size(shape_ops::Size),
    ConstantOfShape(shape_ops::ConstantOfShape),
    Range(shape_ops::Range),
    Tile(shape_ops::Tile),
    Gather(gather::Gather),
    Attention(attention::Attention),
    RotaryEmbedding(attention::RotaryEmbedding),
    Swiglu(attention::Swiglu),
    LinearAttention(attention::LinearAttention),
    CausalConvWithState(attention::CausalConvWithState),
    GatherElements(gather::GatherElements),
    GatherNd(gather::GatherNd),
    OneHot(gather::OneHot),
    TopK(gather::TopK),
    NonZero(select::NonZero),
    If(control::If),
    Loop(control::Loop),
    Scan(control::Scan),
    SequenceMap(control::SequenceMap),
    Sequence(sequence::SequenceOp),
    WriteComposite(sequence::WriteComposite),
    Guard(control::Guard),
    EndGuard(control::EndGuard),
    LoopStart(control::LoopStart),
    LoopEnd(control::LoopEnd),
    Linear(quant::Linear),
    DynamicQuantize(quant::DynamicQuantize),
    IntegerProduct(quant::IntegerProduct),
    QLinearBinary(quant::QLinearBinary),
    QLinearLookup(quant::QLinearLookup),
    Compress(select::Compress),
    Unique(select::Unique),
    NonMaxSuppression(select::NonMaxSuppression),
    ScatterElements(scatter::ScatterElements),
    ScatterNd(scatter::ScatterNd),
    TensorScatter(scatter::TensorScatter),
    Trilu(scatter::Trilu),
    EyeLike(scatter::EyeLike),
    Cumulative(scatter::Cumulative),
    ReverseSequence(scatter::ReverseSequence),
    SpaceDepth(scatter::SpaceDepth),
    CenterCropPad(scatter::CenterCropPad),
    Loss(loss::Loss),
    Resize(resize::Resize),
    GridSample(resize::GridSample),
    AffineGrid(resize::AffineGrid),
    Rnn(rnn::Rnn),
    Dft(signal::Dft),
    Stft(signal::Stft),
    SignalGenerator(signal::Generator),
    Einsum(einsum::Einsum),
    Det(linalg::Det),
    RandomFill(random::RandomFill),
    Bernoulli(random::Bernoulli),
    Multinomial(random::Multinomial),
    TrainingDropout(random::TrainingDropout),
    Optimizer(training::Optimizer),
    TreeEnsemble(ml::tree_ensemble::TreeEnsemble),
    ZipMap(ml::maps::ZipMap),
    DictVectorizer(ml::maps::DictVectorizer),
    VocabularyLookup(ml::maps::VocabularyLookup),
    CastMap(ml::maps::CastMap),
    CastMapEntries(ml::maps::CastMapEntries),
    FlexAttention(flex_attention::FlexAttention),
    Gradient(gradient::Gradient),
    StringConcat(strings::StringConcat),
    StringNormalizer(strings::StringNormalizer),
    StringSplit(strings::StringSplit),
    RegexFullMatch(strings::RegexFullMatch),
    TfIdfVectorizer(strings::TfIdfVectorizer),
    LabelEncoder(ml::encoders::LabelEncoder),
    CategoryMapper(ml::encoders::CategoryMapper),
    CategoryOneHot(ml::encoders::CategoryOneHot),
    TreeClassifier(ml::trees::TreeClassifier),
    LinearRegressor(ml::linear::LinearRegressor),
    LinearClassifier(ml::linear::LinearClassifier),
    FeatureTransform(ml::linear::FeatureTransform),
    FeatureVectorizer(ml::linear::FeatureVectorizer),
    SvmRegressor(ml::svm::SvmRegressor),
    SvmClassifier(ml::svm::SvmClassifier),
    ImageDecoder(image::ImageDecoder),
}

impl Op {
    pub fn name(&self) -> &'static str {
        self.inner().name()
    }
    pub fn infer(&self, cx: &InferCx) -> Result<Vec<Inferred>, String> {
        let op = self.inner();
        let outputs = op.infer(cx)?;
        if !op.stages_packed() && !op.reads_packed() {
            let mut types = cx.inputs.iter().flatten().map(|i| i.dtype).chain(outputs.iter().map(|o| o.dtype));
            if let Some(packed) = types.find(|d| d.is_packed()) {
                let name = DType::onnx_name(packed.onnx_code());
                return Err(format!("{} on {name} tensors is not supported yet", op.name()));
            }
        }
        Ok(outputs)
    }
    pub fn fails_on_constants(&self, cx: &InferCx) -> Result<(), String> {
        self.inner().fails_on_constants(cx)
    }
    pub fn infers_symbolically(&self) -> bool {
        self.inner().infers_symbolically()
    }
    pub fn attributes(&self) -> Vec<Attribute> {
        self.inner().attributes()
    }
    pub fn lower(&self, cx: &mut Lower) -> Result<(), String> {
        let op = self.inner();
        if crate::codegen::staging::stages(op) {
            crate::codegen::staging::lower(op, cx)
        } else {
            op.lower(cx)
        }
    }
    pub fn scratch_bytes(&self, cx: &InferCx) -> usize {
        let op = self.inner();
        let staged =
            if crate::codegen::staging::stages(op) { crate::codegen::staging::scratch_bytes(op, cx) } else { 0 };
        staged + op.scratch_bytes(cx)
    }
    pub fn is_view(&self) -> bool {
        self.inner().is_view()
    }
    pub fn foldable(&self) -> bool {
        self.inner().foldable()
    }
    pub fn allocates_at_run_time(&self) -> bool {
        self.inner().allocates_at_run_time()
    }
    pub fn run_time_bytes(&self, cx: &InferCx) -> Option<usize> {
        self.inner().run_time_bytes(cx)
    }

    /// If, Loop, Scan, SequenceMap, FlexAttention, ZipMap, DictVectorizer and the sequence/optional operators:
    /// resolved by inference into ordinary operators.
    pub fn is_control_flow(&self) -> bool {
        matches!(
            self,
            Op::If(_)
                | Op::Loop(_)
                | Op::Scan(_)
                | Op::SequenceMap(_)
                | Op::Sequence(_)
                | Op::FlexAttention(_)
                | Op::Gradient(_)
                | Op::ZipMap(_)
                | Op::DictVectorizer(_)
                | Op::CastMap(_)
        )
    }

    /// The subgraphs of If, Loop, Scan, SequenceMap and FlexAttention, for
    /// the textual mid-IR; empty for other operators.
    pub fn subgraphs(&self) -> Vec<(&'static str, &control::Subgraph)> {
        use control::ControlFlow;
        match self {
            Op::If(op) => op.subgraphs(),
            Op::Loop(op) => op.subgraphs(),
            Op::Scan(op) => op.subgraphs(),
            Op::SequenceMap(op) => op.subgraphs(),
            Op::FlexAttention(op) => op.subgraphs(),
            _ => Vec::new(),
        }
    }

    /// The subgraphs of If, Loop, Scan, SequenceMap and FlexAttention;
    /// `None` for other operators.
    pub fn subgraphs_mut(&mut self) -> Option<Vec<&mut control::Subgraph>> {
        use control::ControlFlow;
        match self {
            Op::If(op) => Some(op.subgraphs_mut()),
            Op::Loop(op) => Some(op.subgraphs_mut()),
            Op::Scan(op) => Some(op.subgraphs_mut()),
            Op::SequenceMap(op) => Some(op.subgraphs_mut()),
            Op::FlexAttention(op) => Some(op.subgraphs_mut()),
            _ => None,
        }
    }
}

/// Builds an [`Op`] from one ONNX node (attributes, opset version, inputs).
pub type Importer = fn(&mut NodeImport) -> Result<Op, String>;

/// Default-domain operators onnxc compiles: op_type → importer.
pub static REGISTRY: &[(&str, Importer)] = &[
    ("Dropout", random::import_dropout),
    ("MatMul", linalg::import_matmul),
    ("Gemm", linalg::import_gemm),
    ("Conv", conv::import),
    ("ConvTranspose", conv::import_conv_transpose),
    ("DeformConv", conv::import_deform_conv),
    ("Col2Im", conv::import_col2im),
    ("MaxPool", pool::import),
    ("AveragePool", pool::import),
    ("LpPool", pool::import),
    ("GlobalAveragePool", pool::import),
    ("GlobalMaxPool", pool::import),
    ("GlobalLpPool", pool::import),
    ("MaxUnpool", pool::import_max_unpool),
    ("RoiAlign", pool::import_roi),
    ("MaxRoiPool", pool::import_roi),
    ("BatchNormalization", norm::import_batchnorm),
    ("LRN", norm::import_lrn),
    ("InstanceNormalization", norm::import_normalize),
    ("LayerNormalization", norm::import_normalize),
    ("GroupNormalization", norm::import_normalize),
    ("RMSNormalization", norm::import_normalize),
    ("MeanVarianceNormalization", norm::import_normalize),
    ("LpNormalization", norm::import_normalize),
    ("Softmax", softmax::import),
    ("LogSoftmax", softmax::import),
    ("Hardmax", softmax::import),
    ("ReduceSum", reduce::import),
    ("ReduceMean", reduce::import),
    ("ReduceMax", reduce::import),
    ("ReduceMin", reduce::import),
    ("ReduceProd", reduce::import),
    ("ReduceL1", reduce::import),
    ("ReduceL2", reduce::import),
    ("ReduceLogSum", reduce::import),
    ("ReduceLogSumExp", reduce::import),
    ("ReduceSumSquare", reduce::import),
    ("ArgMax", reduce::import_arg),
    ("ArgMin", reduce::import_arg),
    ("Reshape", shape_ops::import_reshape),
    ("Flatten", shape_ops::import_flatten),
    ("Squeeze", shape_ops::import_squeeze),
    ("Unsqueeze", shape_ops::import_unsqueeze),
    ("Transpose", shape_ops::import_transpose),
    ("Concat", shape_ops::import_concat),
    ("Split", shape_ops::import_split),
    ("Slice", shape_ops::import_slice),
    ("Expand", shape_ops::import_expand),
    ("Pad", shape_ops::import_pad),
    ("Shape", shape_ops::import_shape),
    ("Size", shape_ops::import_size),
    ("ConstantOfShape", shape_ops::import_constant_of_shape),
    ("Range", shape_ops::import_range),
    ("Tile", shape_ops::import_tile),
    ("Gather", gather::import),
    ("Attention", attention::import_attention),
    ("RotaryEmbedding", attention::import_rotary),
    ("SwiGLU", attention::import_swiglu),
    ("LinearAttention", attention::import_linear_attention),
    ("CausalConvWithState", attention::import_causal_conv),
    ("GatherElements", gather::import_gather_elements),
    ("GatherND", gather::import_gather_nd),
    ("OneHot", gather::import_one_hot),
    ("TopK", gather::import_topk),
    ("NonZero", select::import_nonzero),
    ("ImageDecoder", image::import),
    ("SequenceConstruct", sequence::import),
    ("SequenceEmpty", sequence::import),
    ("SequenceInsert", sequence::import),
    ("SequenceErase", sequence::import),
    ("SequenceAt", sequence::import),
    ("SequenceLength", sequence::import),
    ("ConcatFromSequence", sequence::import),
    ("SplitToSequence", sequence::import),
    ("Optional", sequence::import),
    ("OptionalHasElement", sequence::import),
    ("OptionalGetElement", sequence::import),
    ("QuantizeLinear", quant::import_linear),
    ("DequantizeLinear", quant::import_linear),
    ("DynamicQuantizeLinear", quant::import_dynamic),
    ("MatMulInteger", quant::import_integer),
    ("ConvInteger", quant::import_integer),
    ("QLinearMatMul", quant::import_integer),
    ("QLinearConv", quant::import_integer),
    ("Compress", select::import_compress),
    ("Unique", select::import_unique),
    ("NonMaxSuppression", select::import_nms),
    ("Scatter", scatter::import_scatter_elements),
    ("ScatterElements", scatter::import_scatter_elements),
    ("ScatterND", scatter::import_scatter_nd),
    ("TensorScatter", scatter::import_tensor_scatter),
    ("Trilu", scatter::import_trilu),
    ("EyeLike", scatter::import_eye_like),
    ("CumSum", scatter::import_cumulative),
    ("CumProd", scatter::import_cumulative),
    ("ReverseSequence", scatter::import_reverse_sequence),
    ("SpaceToDepth", scatter::import_space_depth),
    ("DepthToSpace", scatter::import_space_depth),
    ("CenterCropPad", scatter::import_center_crop_pad),
    ("NegativeLogLikelihoodLoss", loss::import),
    ("SoftmaxCrossEntropyLoss", loss::import),
    ("Resize", resize::import_resize),
    ("Upsample", resize::import_resize),
    ("GridSample", resize::import_grid_sample),
    ("AffineGrid", resize::import_affine_grid),
    ("RNN", rnn::import),
    ("GRU", rnn::import),
    ("LSTM", rnn::import),
    ("DFT", signal::import_dft),
    ("STFT", signal::import_stft),
    ("HannWindow", signal::import_generator),
    ("HammingWindow", signal::import_generator),
    ("BlackmanWindow", signal::import_generator),
    ("MelWeightMatrix", signal::import_generator),
    ("Einsum", einsum::import),
    ("Det", linalg::import_det),
    ("RandomUniform", random::import_fill),
    ("RandomNormal", random::import_fill),
    ("RandomUniformLike", random::import_fill),
    ("RandomNormalLike", random::import_fill),
    ("Bernoulli", random::import_bernoulli),
    ("Multinomial", random::import_multinomial),
    ("StringConcat", strings::import_concat),
    ("StringNormalizer", strings::import_normalizer),
    ("StringSplit", strings::import_split),
    ("RegexFullMatch", strings::import_regex),
    ("TfIdfVectorizer", strings::import_tfidf),
];

/// Operators of the other domains onnxc compiles: (domain, op_type) → importer.
pub static DOMAIN_REGISTRY: &[(&str, &str, Importer)] = &[
    ("ai.onnx.ml", "ArrayFeatureExtractor", gather::import_array_feature_extractor),
    ("ai.onnx.ml", "CategoryMapper", ml::encoders::import_category_mapper),
    ("ai.onnx.ml", "FeatureVectorizer", ml::linear::import_feature_vectorizer),
    ("ai.onnx.ml", "Imputer", ml::linear::import_imputer),
    ("ai.onnx.ml", "LabelEncoder", ml::encoders::import_label_encoder),
    ("ai.onnx.ml", "LinearClassifier", ml::linear::import_linear_classifier),
    ("ai.onnx.ml", "LinearRegressor", ml::linear::import_linear_regressor),
    ("ai.onnx.ml", "Normalizer", ml::linear::import_normalizer),
    ("ai.onnx.ml", "OneHotEncoder", ml::encoders::import_one_hot_encoder),
    ("ai.onnx.ml", "Scaler", ml::linear::import_scaler),
    ("ai.onnx.ml", "SVMClassifier", ml::svm::import_svm_classifier),
    ("ai.onnx.ml", "SVMRegressor", ml::svm::import_svm_regressor),
    ("ai.onnx.ml", "TreeEnsemble", ml::tree_ensemble::import),
    ("ai.onnx.ml", "TreeEnsembleClassifier", ml::trees::import_classifier),
    ("ai.onnx.ml", "TreeEnsembleRegressor", ml::trees::import_regressor),
    ("ai.onnx.ml", "ZipMap", ml::maps::import),
    ("ai.onnx.ml", "DictVectorizer", ml::maps::import_dict_vectorizer),
    ("ai.onnx.ml", "CastMap", ml::maps::import_cast_map),
    ("ai.onnx.preview.training", "Adagrad", training::import),
    ("ai.onnx.preview.training", "Gradient", gradient::import),
    ("ai.onnx.preview.training", "Adam", training::import),
    ("ai.onnx.preview.training", "Momentum", training::import),
];

/// The importer of `op_type` in `domain` (`""` for the default domain).
/// The elementwise functions' rows come after the registries, so that
/// Dropout goes to `random::import_dropout` first.
pub fn importer(domain: &str, op_type: &str) -> Option<Importer> {
    let registered = if domain.is_empty() {
        REGISTRY.iter().find(|(name, _)| *name == op_type).map(|(_, f)| *f)
    } else {
        DOMAIN_REGISTRY.iter().find(|(d, name, _)| *d == domain && *name == op_type).map(|(_, _, f)| *f)
    };
    let elementwise = || elementwise::row_named(op_type).filter(|row| row.domain == domain);
    registered.or_else(|| elementwise().map(|_| elementwise::import as Importer))
}
