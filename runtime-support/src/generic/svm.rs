//! ai.onnx.ml support vector machines (SVMClassifier, SVMRegressor): the
//! kernel of every row with every support vector, the regressor's weighted
//! sum, and the classifier's one-vs-one votes with Platt scaling coupled
//! into class probabilities (Wu, Lin and Weng's method, as libsvm). The
//! classifier follows ONNX Runtime, in f32 where it computes in f32, so
//! the coupling's stopping test sees the same numbers.

use super::ml::{load_number, slice};
use super::tree::post_transform;
use crate::abi::svm::*;
use crate::abi::tree::{POST_NONE, POST_PROBIT};
use crate::abi::{STATUS_INVALID_PARAMS, STATUS_OK};

/// Does the work of the C entry point [`crate::abi::onnxc_svm_kernels`].
pub(crate) unsafe fn svm_kernels(p: *const SvmKernelParams, vectors: *const f32, x: *const u8, k: *mut f32) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if p.rows < 0 || p.features < 0 || p.vectors < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let (features, count) = (p.features as usize, p.vectors as usize);
    let vectors = slice(vectors, p.features * p.vectors);
    for r in 0..p.rows as usize {
        for (v, support) in vectors.chunks_exact(features.max(1)).take(count).enumerate() {
            let at = |f: usize| load_number(x, p.x_elem, r * features + f);
            let value = if p.kernel == SVM_RBF {
                let distance: f64 = (0..features).map(|f| at(f) - f64::from(support[f])).map(|d| d * d).sum();
                libm::exp(-p.gamma * distance)
            } else {
                let dot: f64 = (0..features).map(|f| at(f) * f64::from(support[f])).sum();
                match p.kernel {
                    SVM_POLY => libm::pow(p.gamma * dot + p.coef0, p.degree),
                    SVM_SIGMOID => libm::tanh(p.gamma * dot + p.coef0),
                    _ => dot,
                }
            };
            *k.add(r * count + v) = value as f32;
        }
    }
    STATUS_OK
}

/// Does the work of the C entry point [`crate::abi::onnxc_svm_regress`].
pub(crate) unsafe fn svm_regress(
    p: *const SvmRegressParams,
    coefficients: *const f32,
    k: *const f32,
    y: *mut f32,
) -> i32 {
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if p.rows < 0 || p.vectors < 0 {
        return STATUS_INVALID_PARAMS;
    }
    let coefficients = slice(coefficients, p.vectors);
    for r in 0..p.rows as usize {
        let row = slice(k.add(r * p.vectors as usize), p.vectors);
        let score = p.rho + row.iter().zip(coefficients).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum::<f64>();
        *y.add(r) = if p.one_class != 0 {
            if score > 0.0 {
                1.0
            } else {
                -1.0
            }
        } else {
            score as f32
        };
    }
    STATUS_OK
}

/// f32 values of scratch one row of [`onnxc_svm_classify`] needs.
pub fn svm_work_len(classes: usize) -> usize {
    classes * (classes - 1) / 2 + classes + 3 * classes * classes + classes
}

/// Does the work of the C entry point [`crate::abi::onnxc_svm_classify`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn svm_classify(
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
    let Some(p) = p.as_ref() else { return STATUS_INVALID_PARAMS };
    if p.rows < 0 || p.classes < 2 || p.vectors < 0 || p.score_columns < 1 {
        return STATUS_INVALID_PARAMS;
    }
    let classes = p.classes as usize;
    let pairs = classes * (classes - 1) / 2;
    let vectors = p.vectors as usize;
    let svc = p.mode == SVM_MODE_SVC;
    let starts = if svc { slice(starts, p.classes + 1) } else { &[] };
    if svc && (starts.len() != classes + 1 || starts.windows(2).any(|w| w[0] > w[1] || w[1] as usize > vectors)) {
        return STATUS_INVALID_PARAMS;
    }
    let coefficients = slice(coefficients, if svc { (p.classes - 1) * p.vectors } else { 0 });
    let rho = slice(rho, if svc { pairs as i64 } else { 1 });
    let have_proba = p.have_proba != 0;
    let proba_len = if have_proba { pairs as i64 } else { 0 };
    let (prob_a, prob_b) = (slice(prob_a, proba_len), slice(prob_b, proba_len));
    let work = core::slice::from_raw_parts_mut(work, svm_work_len(classes));
    let (pair_scores, rest) = work.split_at_mut(pairs);
    let (votes, coupling) = rest.split_at_mut(classes);
    let columns = p.score_columns as usize;
    for r in 0..p.rows as usize {
        let kr = core::slice::from_raw_parts(k.add(r * vectors), vectors);
        let out = core::slice::from_raw_parts_mut(z.add(r * columns), columns);
        let winner = if svc {
            votes.fill(0.0);
            let mut index = 0;
            for i in 0..classes - 1 {
                for j in i + 1..classes {
                    let side = |c: usize, row: usize| -> f64 {
                        (starts[c] as usize..starts[c + 1] as usize)
                            .map(|v| f64::from(coefficients[row * vectors + v]) * f64::from(kr[v]))
                            .sum()
                    };
                    let score = (side(i, j - 1) + side(j, i) + f64::from(rho[index])) as f32;
                    pair_scores[index] = score;
                    votes[if score > 0.0 { i } else { j }] += 1.0;
                    index += 1;
                }
            }
            if have_proba {
                couple(classes, pair_scores, prob_a, prob_b, coupling, out);
                post_transform(p.post_transform, out);
            } else if pairs == 1 {
                let s = pair_scores[0];
                out.copy_from_slice(&match p.post_transform {
                    POST_PROBIT => {
                        let mut v = [s];
                        post_transform(POST_PROBIT, &mut v);
                        [v[0], 0.0]
                    }
                    POST_NONE => [-s, s],
                    _ => [1.0 - s, s],
                });
            } else {
                out.copy_from_slice(pair_scores);
                post_transform(p.post_transform, out);
            }
            first_max(votes)
        } else {
            for (o, &v) in out.iter_mut().zip(kr) {
                *o = v + rho[0];
            }
            let best = first_max(out);
            let top = out[best];
            let winner = if classes == 2 && !have_proba {
                let positive = if p.all_positive != 0 { top >= 0.5 } else { top > 0.0 };
                if positive {
                    1
                } else {
                    best
                }
            } else {
                best
            };
            post_transform(p.post_transform, out);
            winner
        };
        *label.add(r) = winner as i64;
    }
    STATUS_OK
}

/// The index of the first largest value.
fn first_max(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// Class probabilities `p` from the pair scores by Platt scaling and
/// pairwise coupling (`work`: `3 * classes²` f32).
fn couple(classes: usize, scores: &[f32], prob_a: &[f32], prob_b: &[f32], work: &mut [f32], p: &mut [f32]) {
    let n = classes;
    let (r, rest) = work.split_at_mut(n * n);
    let (q, rest) = rest.split_at_mut(n * n);
    let qp = &mut rest[..n];
    r.fill(0.0);
    let mut index = 0;
    for i in 0..n - 1 {
        for j in i + 1..n {
            let logistic = {
                let v = scores[index] * prob_a[index] + prob_b[index];
                let e = 1.0 / (1.0 + libm::expf(-v.abs()));
                if v < 0.0 {
                    1.0 - e
                } else {
                    e
                }
            };
            let clamped = (1.0 - logistic).clamp(1.0e-7, 1.0 - 1.0e-7);
            r[i * n + j] = clamped;
            r[j * n + i] = 1.0 - clamped;
            index += 1;
        }
    }
    q.fill(0.0);
    for i in 0..n {
        p[i] = 1.0 / n as f32;
        for j in 0..n {
            if j != i {
                q[i * n + i] += r[j * n + i] * r[j * n + i];
            }
            if j < i {
                q[i * n + j] = q[j * n + i];
            } else if j > i {
                q[i * n + j] = -r[j * n + i] * r[i * n + j];
            }
        }
    }
    let eps = 0.005 / n as f32;
    for _ in 0..100 {
        let mut pqp = 0.0;
        for i in 0..n {
            qp[i] = (0..n).map(|j| q[i * n + j] * p[j]).sum();
            pqp += p[i] * qp[i];
        }
        if qp.iter().map(|&v| (v - pqp).abs()).fold(0.0, f32::max) < eps {
            break;
        }
        for i in 0..n {
            let diff = (-qp[i] + pqp) / q[i * n + i];
            p[i] += diff;
            pqp = (pqp + diff * (diff * q[i * n + i] + 2.0 * qp[i])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..n {
                qp[j] = (qp[j] + diff * q[i * n + j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_coupling_gives_probabilities() {
        let mut work = [0f32; 27];
        let mut p = [0f32; 3];
        couple(3, &[1.0, -0.5, 2.0], &[-2.0; 3], &[0.0; 3], &mut work, &mut p);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{p:?}");
        assert!(p.iter().all(|&v| v > 0.0 && v < 1.0));
        assert_eq!(first_max(&[1.0, 3.0, 3.0]), 1);
    }
}
