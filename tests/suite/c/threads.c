/* The same compiled model called from several threads at once, each call
 * with its own workspace and output, must give the bits of a single-threaded
 * call (the generated code keeps no state between calls). Built against any
 * model.h whose model has one f32 input and one f32 output; the input is a
 * fixed pattern. Exits 0 when every call matched, 1 otherwise. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

enum { THREADS = 4, RUNS_PER_THREAD = 5 };

static float input[MODEL_INPUT0_ELEMENTS];
static float reference[MODEL_OUTPUT0_ELEMENTS];

/* Runs the model once into `out` with a workspace of its own. */
static int run_once(float *out) {
    void *workspace = aligned_alloc(64, (MODEL_WORKSPACE_BYTES / 64 + 1) * 64);
    if (!workspace) return -1;
    onnxc_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.workspace = workspace;
    ctx.workspace_bytes = MODEL_WORKSPACE_BYTES;
    const void *inputs[1] = {input};
    void *outputs[1] = {out};
    int status = model_run(&ctx, inputs, outputs);
    free(workspace);
    return status;
}

static void *worker(void *arg) {
    intptr_t mismatches = 0;
    static float out[THREADS][MODEL_OUTPUT0_ELEMENTS];
    float *mine = out[(intptr_t)arg];
    for (int i = 0; i < RUNS_PER_THREAD; i++) {
        memset(mine, 0xff, sizeof out[0]);
        if (run_once(mine) != 0 || memcmp(mine, reference, sizeof reference) != 0) mismatches++;
    }
    return (void *)mismatches;
}

int main(void) {
    for (size_t i = 0; i < MODEL_INPUT0_ELEMENTS; i++) input[i] = (float)((i * 7919u) % 255u) / 255.0f - 0.5f;
    if (run_once(reference) != 0) {
        fprintf(stderr, "the single-threaded call failed\n");
        return 1;
    }
    pthread_t threads[THREADS];
    for (intptr_t t = 0; t < THREADS; t++) {
        if (pthread_create(&threads[t], NULL, worker, (void *)t) != 0) return 1;
    }
    intptr_t mismatches = 0;
    for (int t = 0; t < THREADS; t++) {
        void *result;
        pthread_join(threads[t], &result);
        mismatches += (intptr_t)result;
    }
    printf("%ld of %d concurrent calls differ from the single-threaded call\n", (long)mismatches,
           THREADS * RUNS_PER_THREAD);
    return mismatches == 0 ? 0 : 1;
}
