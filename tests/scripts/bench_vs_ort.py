"""Times onnxc and ONNX Runtime on the same models, interleaved.

    tests/.venv/bin/python tests/scripts/bench_vs_ort.py [--rounds 5] [--iters 5] [--threads 1] MODEL...

A MODEL is a .onnx file or a case folder (model.onnx, test_data_set_0/
input_K.pb, as the benchmark suite's folders are); a folder of case folders
stands for all of them (e.g. the suite made by bench_suite/make.sh).

Each round runs `onnxc bench MODEL --iters N` (a JIT build of the model,
warm-up, then N timed runs; it prints their median) and then, the same way
in a child process of this script, an ONNX Runtime session with `--threads`
intra-op threads and one inter-op thread (onnxc gets the same `--threads`),
so both see the same machine load. Each side's process exits before the
other's starts: a live ORT session's idle threads cost onnxc 10-20 % of its
2-thread time on a 2-core host, and onnxc's pool would cost ORT the same. The figure per model is the median over rounds
of each side's median, and the ratio onnxc / ORT (below 1: onnxc faster).
A case folder's inputs go to both sides (`onnxc bench MODEL INPUTS...`), so
token ids and masks are valid; for a bare .onnx file the inputs are uniform
in [-1, 1) (onnxc bench uses its own pseudo-random inputs of the same shape;
CNN latency does not depend on the values). The last lines give the
geometric mean and the maximum of the ratios.
"""

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import math

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[2]


def ort_session(model, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def ort_median(session, feeds, iters):
    """Median ms of `iters` runs after one warm-up run."""
    session.run(None, feeds)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def ort_worker(model, inputs, iters, threads):
    """The child's side of `ort_median_isolated`: prints the median."""
    session = ort_session(model, threads)
    feeds = feeds_for(session, inputs, np.random.default_rng(0))
    print(ort_median(session, feeds, iters))


def ort_median_isolated(model, inputs, iters, threads):
    """`ort_median` of a fresh session in a child process that then exits."""
    command = [sys.executable, __file__, "--ort-worker", "--iters", str(iters), "--threads", str(threads), str(model)]
    out = subprocess.run(command + [str(p) for p in inputs], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ONNX Runtime on {model} failed:\n{out.stderr}")
    return float(out.stdout.split()[-1])


def onnxc_median(onnxc, model, inputs, iters, threads, isa):
    command = [onnxc, "bench", str(model), *map(str, inputs), "--iters", str(iters), "--threads", str(threads)]
    if isa:
        command += ["--isa", isa]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"onnxc bench {model} failed:\n{out.stderr}")
    found = re.search(r"median ([0-9.]+) ms", out.stdout)
    if not found:
        sys.exit(f"onnxc bench {model}: no median in {out.stdout!r}")
    return float(found.group(1))


def cases(paths):
    """(name, model.onnx, input files) for every model the arguments name."""
    for path in paths:
        if path.suffix == ".onnx":
            yield path.stem, path, []
        elif (path / "model.onnx").is_file():
            yield path.name, path / "model.onnx", sorted((path / "test_data_set_0").glob("input_*.pb"))
        else:
            yield from cases(sorted(p for p in path.iterdir() if (p / "model.onnx").is_file()))


def feeds_for(session, inputs, rng):
    if inputs:
        tensors = [onnx.load_tensor(str(p)) for p in inputs]
        return {i.name: numpy_helper.to_array(t) for i, t in zip(session.get_inputs(), tensors)}
    shape = lambda i: [d if isinstance(d, int) else 1 for d in i.shape]
    return {i.name: rng.uniform(-1, 1, shape(i)).astype(np.float32) for i in session.get_inputs()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--isa", help="onnxc's kernel level (onnxc bench --isa), e.g. avx2-fma on an AVX-512 host")
    parser.add_argument("--onnxc", default=str(ROOT / "target/release/onnxc"))
    parser.add_argument("--ort-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ort_worker:
        model, *inputs = args.models
        return ort_worker(model, inputs, args.iters, args.threads)
    print(f"{'model':<34} {'onnxc ms':>9} {'ORT ms':>9} {'ratio':>6}", flush=True)
    ratios = []
    for name, model, inputs in cases(args.models):
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(onnxc_median(args.onnxc, model, inputs, args.iters, args.threads, args.isa))
            theirs.append(ort_median_isolated(model, inputs, args.iters, args.threads))
        a, b = statistics.median(ours), statistics.median(theirs)
        ratios.append(a / b)
        print(f"{name:<34} {a:9.2f} {b:9.2f} {a / b:6.2f}", flush=True)
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"{'geometric mean':<54} {geomean:6.2f}")
    print(f"{'maximum':<54} {max(ratios):6.2f}")


if __name__ == "__main__":
    main()
