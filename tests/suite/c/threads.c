/* The same compiled model called from several threads at once, each call
 * with its own workspace and output, must give the bits of a single-threaded
 * call (the generated code keeps no state between calls). Built against any
 * model.h whose model has one f32 input and one f32 output:
 *
 *   ./threads INPUT.bin REFERENCE.bin
 *
 * reads the input (raw little-endian f32), writes the single-threaded
 * call's output to REFERENCE.bin (for the caller to check against the
 * expected values), then calls the model from the threads. Exits 0 when
 * every call matched, 1 otherwise. */
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

/* Reads or writes exactly `count` floats of `path` ("rb" or "wb"). */
static int transfer(const char *path, const char *mode, float *data, size_t count) {
    FILE *f = fopen(path, mode);
    if (!f) {
        perror(path);
        return -1;
    }
    size_t done = mode[0] == 'r' ? fread(data, sizeof(float), count, f) : fwrite(data, sizeof(float), count, f);
    int closed = fclose(f);
    if (done != count || closed != 0) {
        fprintf(stderr, "%s: %zu of %zu floats\n", path, done, count);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s INPUT.bin REFERENCE.bin\n", argv[0]);
        return 2;
    }
    if (transfer(argv[1], "rb", input, MODEL_INPUT0_ELEMENTS) != 0) return 2;
    if (run_once(reference) != 0) {
        fprintf(stderr, "the single-threaded call failed\n");
        return 1;
    }
    if (transfer(argv[2], "wb", reference, MODEL_OUTPUT0_ELEMENTS) != 0) return 2;
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
