"""Writes scikit-learn models converted by skl2onnx as backend-test cases.

    python tests/scripts/make_sklearn_cases.py OUT_DIR

Each case is OUT_DIR/<name>/model.onnx + test_data_set_0/{input_K.pb,
output_K.pb}: small models trained on tiny deterministic data (iris, which
scikit-learn ships, and make_classification/make_regression with fixed
seeds), the expected outputs computed by ONNX Runtime on held-out rows.
Classifiers are converted without ZipMap, so their outputs are a label
tensor and a probability tensor. Run by tests/make_sklearn_data.sh.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import numpy_helper
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


def write_case(root, name, model, data):
    x, y, test = data
    model.fit(x, y)
    options = {id(model): {"zipmap": False}}
    if isinstance(model, Pipeline):
        options = {id(model.steps[-1][1]): {"zipmap": False}} if hasattr(model.steps[-1][1], "classes_") else {}
    elif not hasattr(model, "classes_"):
        options = {}
    onx = to_onnx(model, x[:1], options=options, target_opset=TARGET_OPSET)
    folder = os.path.join(root, name)
    data_dir = os.path.join(folder, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    onnx.save(onx, os.path.join(folder, "model.onnx"))
    session = onnxruntime.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    (input_info,) = session.get_inputs()
    outputs = session.run(None, {input_info.name: test})
    with open(os.path.join(data_dir, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(test, input_info.name).SerializeToString())
    for k, (info, value) in enumerate(zip(session.get_outputs(), outputs)):
        with open(os.path.join(data_dir, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(value), info.name).SerializeToString())


def main():
    root = sys.argv[1]
    os.makedirs(root, exist_ok=True)
    for name, model, data in cases():
        write_case(root, name, model, data)
        print(name)


if __name__ == "__main__":
    main()
