/* Runs a CNN compiled by onnxc and checks its output.
 *
 *   onnxc compile model.onnx -o model.o --emit obj,header,archive
 *   cc -std=c11 -I. main.c model.a -o cnn
 *   ./cnn input.bin expected.bin
 *
 * input.bin and expected.bin hold raw little-endian float32 values. The
 * program links nothing but the archive onnxc wrote: the model code and the
 * kernels it calls. All scratch memory is the workspace we hand it. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int read_floats(const char *path, float *dst, size_t count) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t got = fread(dst, sizeof(float), count, f);
    fclose(f);
    if (got != count) {
        fprintf(stderr, "%s: expected %zu floats, read %zu\n", path, count, got);
        return -1;
    }
    return 0;
}

/* The rule `onnxc test` uses: a NaN matches only a NaN, an infinity only the
 * same infinity, finite values within 1e-4 + 1e-3 |want|. (A plain
 * `fabsf(got - want) > tol` would let a NaN output through as a match.) */
static int agrees(float got, float want) {
    if (isnan(got) || isnan(want))
        return isnan(got) && isnan(want);
    if (isinf(got) || isinf(want))
        return got == want;
    return fabsf(got - want) <= 1e-4f + 1e-3f * fabsf(want);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s INPUT.bin EXPECTED.bin\n", argv[0]);
        return 2;
    }
    static float input[MODEL_INPUT0_ELEMENTS];
    static float output[MODEL_OUTPUT0_ELEMENTS];
    static float expected[MODEL_OUTPUT0_ELEMENTS];
    if (read_floats(argv[1], input, MODEL_INPUT0_ELEMENTS) || read_floats(argv[2], expected, MODEL_OUTPUT0_ELEMENTS))
        return 2;

    size_t bytes = (MODEL_WORKSPACE_BYTES + 63) / 64 * 64;
    void *workspace = aligned_alloc(64, bytes ? bytes : 64);
    if (!workspace) {
        fprintf(stderr, "out of memory\n");
        return 2;
    }
    onnxc_context ctx = {workspace, MODEL_WORKSPACE_BYTES, NULL, NULL};
    const void *inputs[] = {input};
    void *outputs[] = {output};
    int32_t status = model_run(&ctx, inputs, outputs);
    free(workspace);
    if (status != 0) {
        fprintf(stderr, "model_run failed with status %d\n", (int)status);
        return 1;
    }

    int best = 0, mismatches = 0;
    for (int i = 0; i < MODEL_OUTPUT0_ELEMENTS; i++) {
        if (output[i] > output[best])
            best = i;
        if (!agrees(output[i], expected[i])) {
            fprintf(stderr, "output[%d] = %g, expected %g\n", i, output[i], expected[i]);
            mismatches++;
        }
    }
    printf("class %d (p = %.4f), %d of %d outputs differ from ONNX Runtime\n", best, output[best], mismatches,
           MODEL_OUTPUT0_ELEMENTS);
    return mismatches ? 1 : 0;
}
