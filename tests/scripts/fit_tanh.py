"""Fits the rational tanh of runtime-support's vector math and measures it.

    tests/.venv/bin/python tests/scripts/fit_tanh.py [NP NQ]

tanh(x) ~ x P(x^2) / Q(x^2) on [0, 9] with P(0) = Q(0) = 1 and NP / NQ
coefficients (default 7 / 4): a linearised weighted least-squares fit
(each step weighted by the last denominator, then reweighted toward the
largest relative error, Lawson's way), solved in u = x^2 / 81 so that the
powers stay well scaled. Prints the f64 relative error, the coefficients
rounded to f32 (as `TANH_P` / `TANH_Q` take them), and the worst error in
ulp of the f32 evaluation the kernels do (Horner steps as fused
multiply-adds, the argument clamped to 8.5) against the f64 tanh.
"""

import sys

import numpy as np

HI = 9.0
CLAMP = np.float32(8.5)


def fit(np_, nq):
    x = np.concatenate([np.linspace(0, HI, 100001)[1:], np.geomspace(1e-4, 1, 5000)])
    t, u = np.tanh(x), x * x / (HI * HI)
    a = np.concatenate([x[:, None] * u[:, None] ** np.arange(1, np_), -t[:, None] * u[:, None] ** np.arange(1, nq)], axis=1)
    b = t - x
    denominator, emphasis = np.ones_like(x), np.ones_like(x)
    for step in range(40):
        w = emphasis / (t * denominator)
        sol, *_ = np.linalg.lstsq(a * w[:, None], b * w, rcond=None)
        p, q = np.concatenate([[1.0], sol[: np_ - 1]]), np.concatenate([[1.0], sol[np_ - 1 :]])
        denominator = np.polyval(q[::-1], u)
        relative = np.abs(x * np.polyval(p[::-1], u) / denominator / t - 1)
        if step >= 10:
            emphasis = emphasis * (relative / relative.max()) ** 0.2 + 1e-12
    scale = lambda c: c / (HI * HI) ** np.arange(len(c))
    return scale(p).astype(np.float32), scale(q).astype(np.float32), relative.max()


def fused_horner(c, s):
    acc = np.full_like(s, c[-1])
    for k in c[-2::-1]:
        acc = (acc.astype(np.float64) * s + np.float64(k)).astype(np.float32)
    return acc


def tanh_f32(p, q, x):
    x = np.minimum(CLAMP, np.maximum(-CLAMP, x.astype(np.float32)))
    s = (x.astype(np.float64) * x).astype(np.float32)
    numerator = (x.astype(np.float64) * fused_horner(p, s)).astype(np.float32)
    return (numerator.astype(np.float64) / fused_horner(q, s)).astype(np.float32)


def main():
    np_, nq = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) == 3 else (7, 4)
    p, q, relative = fit(np_, nq)
    print(f"max relative error in f64: {relative:.3g}")
    print("TANH_P", [float(v) for v in p])
    print("TANH_Q", [float(v) for v in q])
    xs = np.concatenate([np.linspace(-12, 12, 2000001), np.geomspace(1e-30, 12, 200000)]).astype(np.float32)
    xs = np.concatenate([xs, -xs])
    want = np.tanh(xs.astype(np.float64))
    rounded = np.abs(want.astype(np.float32))
    ulp = (np.nextafter(rounded, np.float32(np.inf)) - rounded).astype(np.float64)
    error = np.abs(tanh_f32(p, q, xs).astype(np.float64) - want) / ulp
    print(f"worst f32 error: {error.max():.2f} ulp at {xs[np.argmax(error)]}")


if __name__ == "__main__":
    sys.exit(main())
