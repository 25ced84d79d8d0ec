#ifndef ONNXC_CONTEXT_DEFINED
#define ONNXC_CONTEXT_DEFINED
/* Everything a compiled model needs from its caller. The model keeps no
 * state of its own: give each concurrent call its own workspace. */
typedef struct onnxc_context {
    void *workspace;          /* at least PREFIX_ARENA_BYTES bytes, 64-byte aligned */
    size_t workspace_bytes;   /* its size */
    /* Memory for values whose shape depends on the data (NonZero, ...):
     * NULL to take it from the workspace past PREFIX_ARENA_BYTES, or a
     * function returning `bytes` bytes aligned to `align`, or NULL when
     * it has none (the model then fails with status 5). */
    void *(*alloc)(void *user, size_t bytes, size_t align);
    void *alloc_user;         /* passed to alloc */
    /* Runs task(env, i) for every i in [0, count) and returns when all
     * have run, on as many threads as it likes (each thread needs 512 KiB
     * of stack for the kernels); NULL runs them in turn on the calling
     * thread. Results are bit-identical either way. The pool below, in
     * libonnxc_runtime_std.a, is one: onnxc_thread_pool_parallel_for. */
    void (*parallel_for)(void *user, size_t count, void (*task)(void *env, size_t i), void *env);
    void *parallel_user;      /* passed to parallel_for */
} onnxc_context;

/* outputs[k] of an output whose shape depends on the data points to one
 * of these; the model sets `data` (memory from the allocator above) and
 * writes the actual shape to the caller's array `dims` of RANK entries. */
typedef struct onnxc_dynamic_output {
    void *data;
    int64_t *dims;
} onnxc_dynamic_output;

/* One element of a string tensor: `len` bytes of UTF-8 at `data`, not
 * NUL-terminated. Input strings point into the caller's memory; strings
 * a model writes point into its read-only data, its inputs, the workspace
 * past PREFIX_ARENA_BYTES or memory from ctx->alloc, valid until that
 * memory is reused. */
typedef struct onnxc_string {
    const uint8_t *data;
    size_t len;
} onnxc_string;

/* Sequences and optionals. A sequence or optional input is passed as
 * inputs[k] = &descriptor, filled by the caller (its memory, no heap
 * needed); the model was compiled for the element count, ranks, dims and
 * presence listed below and checks them before anything runs (status 7
 * naming the input otherwise). For a sequence or optional output,
 * outputs[k] = &descriptor: the model fills it, and everything it points
 * to (tensor descriptors, dims, element bytes) comes from the allocator
 * above (the workspace past PREFIX_ARENA_BYTES or ctx->alloc), valid
 * until that memory is reused. Element bytes are dense and row-major. */
typedef struct onnxc_tensor {
    void *data;               /* the element bytes */
    size_t rank;
    int64_t *dims;            /* rank dims */
} onnxc_tensor;
typedef struct onnxc_sequence {
    size_t count;
    onnxc_tensor *elements;   /* count tensors (NULL when count is 0) */
} onnxc_sequence;
typedef struct onnxc_optional {
    size_t has_value;         /* 0: the optional is empty */
    void *value;              /* an onnxc_tensor * (optional tensor) or an
                               * onnxc_sequence * (optional sequence) */
} onnxc_optional;
/* A sequence of maps (ai.onnx.ml ZipMap's output) is an onnxc_sequence
 * whose elements point to count onnxc_map records instead (cast them).
 * The keys are the same for every map, in the model's label order. A map
 * input (ai.onnx.ml DictVectorizer's) is an onnxc_map the caller fills,
 * with the entry count it was compiled for (status 7 otherwise). */
typedef struct onnxc_map {
    size_t count;
    void *keys;               /* count int64_t or onnxc_string keys */
    void *values;             /* count values, the i-th for the i-th key */
} onnxc_map;

/* A persistent thread pool for parallel_for (link libonnxc_runtime_std.a):
 * ctx.parallel_for = onnxc_thread_pool_parallel_for; ctx.parallel_user = pool.
 * onnxc_thread_pool_new counts the calling thread; NULL if a thread
 * cannot be started. */
typedef struct onnxc_thread_pool onnxc_thread_pool;
onnxc_thread_pool *onnxc_thread_pool_new(size_t threads);
void onnxc_thread_pool_parallel_for(void *pool, size_t count, void (*task)(void *env, size_t i), void *env);
void onnxc_thread_pool_free(onnxc_thread_pool *pool);
#endif
