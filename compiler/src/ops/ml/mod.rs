//! The ai.onnx.ml operator families: classifier labels and post-transforms
//! (`classify`), encoders (`encoders`), linear models and feature vectors
//! (`linear`), support vector machines (`svm`), tree ensembles (`trees`
//! for TreeEnsembleClassifier/Regressor, `tree_ensemble` for TreeEnsemble
//! and the tables both lower to), and map values (`maps`).

pub mod classify;
pub mod encoders;
pub mod linear;
pub mod maps;
pub mod svm;
pub mod tree_ensemble;
pub mod trees;
