"""Writes scikit-learn models converted by skl2onnx as backend-test cases.

    python tests/scripts/make_sklearn_cases.py OUT_DIR

Each case is OUT_DIR/<name>/model.onnx + test_data_set_0/{input_K.pb,
output_K.pb}: small models trained on tiny deterministic data (iris, which
scikit-learn ships, and make_classification/make_regression with fixed
seeds), the expected outputs computed by ONNX Runtime on held-out rows.
Classifiers are converted without ZipMap, so their outputs are a label
tensor and a probability tensor. The ml_* cases are single ai.onnx.ml
nodes in forms the converters do not emit (string keys and labels, other
input types), also checked against ONNX Runtime. Run by tests/make_sklearn_data.sh.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper
from skl2onnx import to_onnx
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_iris, make_classification, make_regression
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import Normalizer, OneHotEncoder, StandardScaler
from sklearn.svm import SVC, SVR

TARGET_OPSET = {"": 17, "ai.onnx.ml": 3}


def iris():
    x, y = load_iris(return_X_y=True)
    x = x.astype(np.float32)
    # Every fifth row is held out for the test inputs.
    test = np.arange(len(x)) % 5 == 0
    return x[~test], y[~test], x[test]


def binary():
    x, y = make_classification(n_samples=120, n_features=5, n_informative=3, random_state=7)
    x = x.astype(np.float32)
    return x[:100], y[:100], x[100:]


def regression():
    x, y = make_regression(n_samples=120, n_features=4, noise=0.5, random_state=3)
    x = x.astype(np.float32)
    return x[:100], y[:100], x[100:]


def mixed():
    """Iris with a categorical fourth column (small integers as floats)."""
    x, y, test = iris()
    bucket = lambda a: np.floor(a[:, 3:4] * 2).astype(np.float32)
    return np.hstack([x[:, :3], bucket(x)]), y, np.hstack([test[:, :3], bucket(test)])


def with_gaps(data):
    """Every seventh value replaced by NaN, for the imputer."""
    x, y, test = data
    x, test = x.copy(), test.copy()
    x.reshape(-1)[::7] = np.nan
    test.reshape(-1)[::7] = np.nan
    return x, y, test


def cases():
    yield "rf_classifier", RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0), iris()
    x, y, test = iris()
    flowers = np.array(["setosa", "versicolor", "virginica"], dtype=object)
    yield "rf_classifier_strings", RandomForestClassifier(n_estimators=3, max_depth=3, random_state=1), (x, flowers[y], test)
    yield "logistic_regression_strings", LogisticRegression(max_iter=500), (x, flowers[y], test)
    yield "rf_classifier_binary", RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0), binary()
    yield "rf_regressor", RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0), regression()
    yield "gb_classifier", GradientBoostingClassifier(n_estimators=6, max_depth=2, random_state=0), iris()
    yield "gb_classifier_binary", GradientBoostingClassifier(n_estimators=6, max_depth=2, random_state=0), binary()
    yield "gb_regressor", GradientBoostingRegressor(n_estimators=8, max_depth=3, random_state=0), regression()
    yield "svc_rbf", SVC(probability=True, random_state=0), iris()
    yield "svc_linear_binary", SVC(kernel="linear", probability=True, random_state=0), binary()
    yield "svc_poly_scores", SVC(kernel="poly", degree=2), iris()
    yield "svc_sigmoid_binary_scores", SVC(kernel="sigmoid", gamma=0.05), binary()
    yield "svr_rbf", SVR(C=10.0), regression()
    yield "svr_poly", SVR(kernel="poly", degree=2, C=1.0), regression()
    yield "linear_regression", LinearRegression(), regression()
    yield "logistic_regression_binary", LogisticRegression(max_iter=500), binary()
    columns = ColumnTransformer(
        [
            ("numbers", StandardScaler(), [0, 1, 2]),
            ("category", OneHotEncoder(handle_unknown="ignore"), [3]),
        ]
    )
    pipeline = Pipeline([("columns", columns), ("classifier", LogisticRegression(max_iter=500))])
    yield "scaler_onehot_logistic_pipeline", pipeline, mixed()
    yield "imputer_normalizer_pipeline", Pipeline(
        [("impute", SimpleImputer(strategy="mean")), ("normalize", Normalizer()), ("regress", LinearRegression())]
    ), with_gaps(regression())


def convert(model, data):
    """Fits `model`, converts it; returns the ONNX model and its test feeds."""
    x, y, test = data
    model.fit(x, y)
    last = model.steps[-1][1] if isinstance(model, Pipeline) else model
    options = {id(last): {"zipmap": False}} if hasattr(last, "classes_") else {}
    onx = to_onnx(model, x[:1], options=options, target_opset=TARGET_OPSET)
    return onx, {onx.graph.input[0].name: test}


def ml_node(op, inputs, outputs, ml_opset=3, **attrs):
    """A model of one ai.onnx.ml node; inputs/outputs are (name, type, shape)."""
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outputs], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", ml_opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def ml_node_cases():
    """Single ai.onnx.ml nodes in forms the converters above do not emit."""
    f32, f64, i64, text = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.STRING
    rng = np.random.default_rng(5)
    words = np.array(["cat", "dog", "fish", "owl"], dtype=object)
    yield "ml_category_mapper_to_int", ml_node(
        "CategoryMapper", [("x", text, [4])], [("y", i64, [4])],
        cats_strings=["cat", "dog", "fish"], cats_int64s=[3, 1, 7], default_int64=-5,
    ), {"x": words}
    yield "ml_category_mapper_to_string", ml_node(
        "CategoryMapper", [("x", i64, [5])], [("y", text, [5])],
        cats_strings=["cat", "dog", "fish"], cats_int64s=[3, 1, 7],
    ), {"x": np.array([7, 2, 3, 1, -1], dtype=np.int64)}
    yield "ml_label_encoder_float_to_string", ml_node(
        "LabelEncoder", [("x", f32, [2, 3])], [("y", text, [2, 3])],
        keys_floats=[0.5, -1.0, 2.25], values_strings=["half", "minus one", "more"], default_string="none",
    ), {"x": np.array([[0.5, 2.25, 3.0], [-1.0, np.nan, 0.5]], dtype=np.float32)}
    yield "ml_label_encoder_int_to_float", ml_node(
        "LabelEncoder", [("x", i64, [6])], [("y", f32, [6])],
        keys_int64s=[10, -3, 99], values_floats=[1.5, -2.0, 0.25], default_float=7.0,
    ), {"x": np.array([99, 10, 0, -3, 10, 5], dtype=np.int64)}
    yield "ml_label_encoder_opset1_to_int", ml_node(
        "LabelEncoder", [("x", text, [4])], [("y", i64, [4])], ml_opset=1,
        classes_strings=["dog", "cat", "fish"], default_int64=-7,
    ), {"x": words}
    yield "ml_label_encoder_opset1_to_string", ml_node(
        "LabelEncoder", [("x", i64, [4])], [("y", text, [4])], ml_opset=1,
        classes_strings=["dog", "cat", "fish"], default_string="?",
    ), {"x": np.array([2, 0, 3, 1], dtype=np.int64)}
    yield "ml_one_hot_strings", ml_node(
        "OneHotEncoder", [("x", text, [2, 2])], [("y", f32, [2, 2, 3])], cats_strings=["owl", "cat", "dog"], zeros=1,
    ), {"x": words.reshape(2, 2)}
    yield "ml_normalizer_max", ml_node(
        "Normalizer", [("x", f32, [3, 4])], [("y", f32, [3, 4])], norm="MAX",
    ), {"x": rng.normal(size=(3, 4)).astype(np.float32)}
    yield "ml_scaler_double", ml_node(
        "Scaler", [("x", f64, [3, 2])], [("y", f32, [3, 2])], offset=[0.5, -0.25], scale=[2.0, -1.0],
    ), {"x": rng.normal(size=(3, 2))}
    yield "ml_feature_vectorizer", ml_node(
        "FeatureVectorizer", [("a", i64, [3, 2]), ("b", i64, [3, 3]), ("c", i64, [3, 1])], [("y", f32, [3, 6])],
        inputdimensions=[2, 2, 2],
    ), {
        "a": np.array([[1, -2], [3, 4], [5, 6]], dtype=np.int64),
        "b": np.arange(9, dtype=np.int64).reshape(3, 3),
        "c": np.array([[7], [8], [9]], dtype=np.int64),
    }
    yield "ml_linear_classifier_one_score", ml_node(
        "LinearClassifier", [("x", f32, [4, 2])], [("label", text, [4]), ("scores", f32, [4, 2])],
        coefficients=[1.0, -2.0], intercepts=[0.5], classlabels_strings=["no", "yes"], post_transform="LOGISTIC",
    ), {"x": rng.normal(size=(4, 2)).astype(np.float32)}


def write_case(root, name, onx, feeds):
    folder = os.path.join(root, name)
    data_dir = os.path.join(folder, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    onnx.save(onx, os.path.join(folder, "model.onnx"))
    session = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    for k, info in enumerate(session.get_inputs()):
        with open(os.path.join(data_dir, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[info.name], info.name).SerializeToString())
    for k, (info, value) in enumerate(zip(session.get_outputs(), outputs)):
        with open(os.path.join(data_dir, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(value), info.name).SerializeToString())


def main():
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    for name, model, data in cases():
        write_case(root, name, *convert(model, data))
        print(name)
    for name, onx, feeds in ml_node_cases():
        write_case(root, name, onx, feeds)
        print(name)


if __name__ == "__main__":
    main()
