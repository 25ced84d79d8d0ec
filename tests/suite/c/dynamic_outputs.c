/* Calls a compiled NonZero model (x: float[2][3] -> y: int64[2][?]) through
 * the C ABI for data-dependent outputs: the default allocator over the
 * workspace, a caller-supplied allocator hook, and both running out. Built
 * and run by tests/suite/dynamic.rs; prints "ok" and exits 0 when all agree. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float x[6] = {0.0f, 2.0f, 0.0f, 3.0f, 0.0f, 4.0f};
static const int64_t want[6] = {0, 1, 1, 1, 0, 2};

static int hook_calls;

static void *counting_alloc(void *user, size_t bytes, size_t align) {
    (void)user;
    hook_calls++;
    size_t rounded = (bytes + align - 1) / align * align;
    return aligned_alloc(align, rounded);
}

static void *no_memory(void *user, size_t bytes, size_t align) {
    (void)user;
    (void)bytes;
    (void)align;
    return NULL;
}

/* Runs the model; returns its status and leaves the result in *out. */
static int32_t run(size_t workspace_bytes, void *(*alloc)(void *, size_t, size_t), onnxc_dynamic_output *out,
                   int64_t dims[MODEL_OUTPUT0_RANK]) {
    static _Alignas(64) unsigned char workspace[4096];
    if (workspace_bytes > sizeof workspace) {
        return -1;
    }
    onnxc_context ctx = {workspace, workspace_bytes, alloc, NULL};
    out->data = NULL;
    out->dims = dims;
    const void *inputs[] = {x};
    void *outputs[] = {out};
    return model_run(&ctx, inputs, outputs);
}

static int check(const char *what, int32_t status, const onnxc_dynamic_output *out, const int64_t *dims) {
    if (status != 0) {
        printf("%s: status %d\n", what, status);
        return 1;
    }
    if (dims[0] != 2 || dims[1] != 3 || memcmp(out->data, want, sizeof want) != 0) {
        printf("%s: got dims [%lld, %lld]\n", what, (long long)dims[0], (long long)dims[1]);
        return 1;
    }
    return 0;
}

int main(void) {
    onnxc_dynamic_output out;
    int64_t dims[MODEL_OUTPUT0_RANK];
    int failures = 0;

    failures += check("workspace", run(MODEL_WORKSPACE_BYTES, NULL, &out, dims), &out, dims);

    failures += check("hook", run(MODEL_ARENA_BYTES, counting_alloc, &out, dims), &out, dims);
    free(out.data);
    if (hook_calls != 1) {
        printf("hook: called %d times\n", hook_calls);
        failures++;
    }

    /* Status 5 (out of memory) in node 0: (0 + 1) << 8 | 5. */
    int32_t status = run(MODEL_ARENA_BYTES, NULL, &out, dims);
    if (status != (1 << 8 | 5)) {
        printf("small workspace: status %d\n", status);
        failures++;
    }
    status = run(MODEL_WORKSPACE_BYTES, no_memory, &out, dims);
    if (status != (1 << 8 | 5)) {
        printf("hook without memory: status %d\n", status);
        failures++;
    }
    if (failures == 0) {
        printf("ok\n");
    }
    return failures != 0;
}
