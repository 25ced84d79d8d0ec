/* Calls a compiled model with a sequence input and a sequence output
 * through the C ABI: xs: seq(float[?]) compiled for two elements of 3 and
 * 2 floats, t: float[2]; ys = SequenceInsert(xs, t) (three elements) and
 * cat = ConcatFromSequence(ys) (7 floats). The caller fills the input's
 * descriptors on the stack; the model fills the output's from the
 * workspace. Also: a wrong count and a wrong dim give status 7 naming
 * input 0. Built and run by tests/suite/sequences.rs; prints "ok". */
#include "model.h"

#include <stdio.h>
#include <string.h>

static float x0[3] = {1.0f, 2.0f, 3.0f};
static float x1[2] = {4.0f, 5.0f};
static const float t[2] = {6.0f, 7.0f};

static int32_t run(onnxc_sequence *xs, onnxc_sequence *ys, float cat[7]) {
    static _Alignas(64) unsigned char workspace[MODEL_WORKSPACE_BYTES];
    onnxc_context ctx = {workspace, sizeof workspace, NULL, NULL};
    const void *inputs[] = {xs, t};
    void *outputs[] = {ys, cat};
    return model_run(&ctx, inputs, outputs);
}

int main(void) {
    int64_t d0[1] = {3}, d1[1] = {2};
    onnxc_tensor elements[2] = {{x0, 1, d0}, {x1, 1, d1}};
    onnxc_sequence xs = {2, elements};
    onnxc_sequence ys = {0, NULL};
    float cat[7];
    int failures = 0;

    int32_t status = run(&xs, &ys, cat);
    const float want[7] = {1, 2, 3, 4, 5, 6, 7};
    if (status != 0 || memcmp(cat, want, sizeof want) != 0) {
        printf("run: status %d\n", status);
        return 1;
    }
    if (ys.count != MODEL_OUTPUT0_COUNT || ys.count != 3) {
        printf("ys: count %zu\n", ys.count);
        return 1;
    }
    const int64_t lengths[3] = {3, 2, 2};
    const float *at = want;
    for (size_t i = 0; i < ys.count; i++) {
        const onnxc_tensor *e = &ys.elements[i];
        if (e->rank != 1 || e->dims[0] != lengths[i] || memcmp(e->data, at, (size_t)lengths[i] * sizeof(float))) {
            printf("ys[%zu]: rank %zu\n", i, e->rank);
            failures++;
        }
        at += lengths[i];
    }

    /* Status 7 (a sequence input does not match) for input 0: (0 + 1) << 8 | 7. */
    xs.count = 1;
    status = run(&xs, &ys, cat);
    if (status != (1 << 8 | 7)) {
        printf("wrong count: status %d\n", status);
        failures++;
    }
    xs.count = 2;
    d1[0] = 5; /* x1 holds 2 floats: the model must not read 5 */
    status = run(&xs, &ys, cat);
    if (status != (1 << 8 | 7)) {
        printf("wrong dim: status %d\n", status);
        failures++;
    }
    if (failures == 0) {
        printf("ok\n");
    }
    return failures != 0;
}
