/* Passes string tensors to a compiled model and reads the strings it
 * returns through the C ABI: onnxc_string records in, onnxc_string records
 * out (pointing into the workspace, the model's read-only data or the
 * inputs), and a data-dependent string output through its descriptor. */
#include "model.h"
#include <stdio.h>
#include <string.h>

static _Alignas(64) unsigned char workspace[MODEL_ARENA_BYTES + 4096];

static onnxc_string str(const char *s) {
    onnxc_string r = { (const uint8_t *)s, strlen(s) };
    return r;
}

static int same(onnxc_string got, const char *want) {
    if (got.len != strlen(want) || (got.len && memcmp(got.data, want, got.len) != 0)) {
        printf("got \"%.*s\", expected \"%s\"\n", (int)got.len, (const char *)got.data, want);
        return 0;
    }
    return 1;
}

int main(void) {
#ifndef MODEL_DYNAMIC_UNBOUNDED
    puts("string bytes should make the workspace unbounded");
    return 1;
#endif
    onnxc_string x[3] = { str("ab-cd"), str("xyz"), str("\xc3\x9f-q") }; /* "ß-q" */
    onnxc_string loud[3], upper[3];
    uint8_t ok[3];
    int64_t counts[3], parts_dims[MODEL_OUTPUT2_RANK];
    onnxc_dynamic_output parts = { NULL, parts_dims };
    const void *inputs[] = { x };
    void *outputs[] = { loud, ok, &parts, counts, upper };
    onnxc_context ctx = { workspace, sizeof workspace, NULL, NULL };
    int32_t status = model_run(&ctx, inputs, outputs);
    if (status != 0) {
        printf("status %d\n", status);
        return 1;
    }
    int good = same(loud[0], "ab-cd!") && same(loud[1], "xyz!") && same(loud[2], "\xc3\x9f-q!");
    good = good && ok[0] == 1 && ok[1] == 0 && ok[2] == 0;
    good = good && parts_dims[0] == 3 && parts_dims[1] == 2 && counts[0] == 2 && counts[1] == 1 && counts[2] == 2;
    const onnxc_string *p = parts.data;
    good = good && same(p[0], "ab") && same(p[1], "cd") && same(p[2], "xyz") && same(p[3], "");
    good = good && same(p[4], "\xc3\x9f") && same(p[5], "q");
    good = good && same(upper[0], "AB-CD") && same(upper[1], "XYZ") && same(upper[2], "SS-Q");
    /* Too little workspace for the string bytes: status 5 (out of memory). */
    onnxc_context tight = { workspace, MODEL_ARENA_BYTES, NULL, NULL };
    good = good && (model_run(&tight, inputs, outputs) & 0xff) == 5;
    puts(good ? "ok" : "wrong results");
    return good ? 0 : 1;
}
