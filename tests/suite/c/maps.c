/* Passes maps through the C ABI. A map input: vectorize.h, m: map(int64,
 * float) compiled for 2 entries -> y = DictVectorizer(m) over the
 * vocabulary (3, 1, 9); a map with 3 entries or a NULL keys array gives
 * status 7 naming input 0.
 * Reads sequences of maps (ai.onnx.ml ZipMap's output):
 * two models compiled from x: float[2, 3] -> ZipMap(x), one with string
 * labels ("a", "bb", "ccc"), one with int64 labels (5, 6, 7). The model
 * fills the output's onnxc_sequence; its elements are onnxc_map records
 * (one per row of x: the labels as keys, the row as values), all in the
 * workspace past the arena. Built and run by tests/suite/maps.rs; prints
 * "ok". */
#include "ints.h"
#include "strings.h"
#include "vectorize.h"

#include <stdio.h>
#include <string.h>

static const float x[2][3] = {{0.5f, 1.5f, -2.0f}, {3.0f, 0.0f, 4.25f}};

/* The row of x each map holds, and its count, or a message. */
static const char *check_values(const onnxc_sequence *maps, size_t expected_count) {
    if (maps->count != 2 || maps->elements == NULL) {
        return "sequence count";
    }
    const onnxc_map *m = (const onnxc_map *)maps->elements;
    for (size_t i = 0; i < 2; i++) {
        if (m[i].count != expected_count || memcmp(m[i].values, x[i], sizeof x[i]) != 0) {
            return "map values";
        }
    }
    return NULL;
}

int main(void) {
    static _Alignas(64) unsigned char workspace[STRINGS_WORKSPACE_BYTES + INTS_WORKSPACE_BYTES + VECTORIZE_WORKSPACE_BYTES];
    onnxc_context ctx = {workspace, sizeof workspace, NULL, NULL};
    const void *inputs[] = {x};
    int failures = 0;

    onnxc_sequence maps = {0, NULL};
    void *outputs[] = {&maps};
    int32_t status = strings_run(&ctx, inputs, outputs);
    const char *problem = status != 0 ? "status" : check_values(&maps, STRINGS_OUTPUT0_MAP_ENTRIES);
    if (problem == NULL) {
        const char *labels[3] = {"a", "bb", "ccc"};
        const onnxc_map *m = (const onnxc_map *)maps.elements;
        for (size_t i = 0; i < 2; i++) {
            const onnxc_string *keys = m[i].keys;
            for (size_t j = 0; j < 3; j++) {
                if (keys[j].len != strlen(labels[j]) || memcmp(keys[j].data, labels[j], keys[j].len) != 0) {
                    problem = "string keys";
                }
            }
        }
    }
    if (problem != NULL) {
        printf("strings: %s (status %d)\n", problem, status);
        failures++;
    }

    maps = (onnxc_sequence){0, NULL};
    status = ints_run(&ctx, inputs, outputs);
    problem = status != 0 ? "status" : check_values(&maps, INTS_OUTPUT0_MAP_ENTRIES);
    if (problem == NULL) {
        const onnxc_map *m = (const onnxc_map *)maps.elements;
        const int64_t labels[3] = {5, 6, 7};
        for (size_t i = 0; i < 2; i++) {
            if (memcmp(m[i].keys, labels, sizeof labels) != 0) {
                problem = "int64 keys";
            }
        }
    }
    if (problem != NULL) {
        printf("ints: %s (status %d)\n", problem, status);
        failures++;
    }
    int64_t keys[2] = {9, 4};
    float values[2] = {2.5f, -1.0f};
    onnxc_map m = {VECTORIZE_INPUT0_MAP_ENTRIES, keys, values};
    const void *map_inputs[] = {&m};
    float y[3] = {7, 7, 7};
    void *map_outputs[] = {y};
    status = vectorize_run(&ctx, map_inputs, map_outputs);
    if (status != 0 || y[0] != 0.0f || y[1] != 0.0f || y[2] != 2.5f) {
        printf("vectorize: status %d, y %g %g %g\n", status, y[0], y[1], y[2]);
        failures++;
    }
    m.count = 3; /* the model must not read a third entry */
    status = vectorize_run(&ctx, map_inputs, map_outputs);
    m.count = 2;
    m.keys = NULL;
    int32_t null_status = vectorize_run(&ctx, map_inputs, map_outputs);
    if (status != (1 << 8 | 7) || null_status != (1 << 8 | 7)) {
        printf("vectorize: refused with %d and %d\n", status, null_status);
        failures++;
    }

    if (failures == 0) {
        printf("ok\n");
    }
    return failures != 0;
}
