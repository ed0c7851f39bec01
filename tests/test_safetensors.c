/* test_safetensors.c — the safetensors reader and writer: round trips, the exact byte layout,
 * one rejection per kind of malformed file, writer argument checks and atomic replacement,
 * including a process killed in the middle of a write (the CNNC_TEST_STALL_WRITE test hook).
 * It does not test model checkpoints (tests/test_checkpoint.c does). */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* ---------------------------------------------------------------- helpers */

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size >= 0);
    rewind(f);
    uint8_t *bytes = malloc((size_t)size + 1);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return bytes;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static cn_tensor_ref ref_of(const char *name, cn_dtype dtype, int ndim, const int64_t *shape,
                            void *data)
{
    cn_tensor_ref r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", name);
    r.dtype = dtype;
    r.ndim = ndim;
    for (int d = 0; d < ndim; d++) r.shape[d] = shape[d];
    r.data = data;
    return r;
}

/* A file with the given declared header length, header text and data_len bytes of data. */
static char *file_with_length(uint64_t header_len, const char *header, size_t data_len)
{
    size_t hlen = strlen(header);
    size_t total = 8 + hlen + data_len;
    uint8_t *bytes = calloc(total, 1);
    assert_non_null(bytes);
    for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)(header_len >> (8 * i));
    memcpy(bytes + 8, header, hlen);
    for (size_t i = 0; i < data_len; i++) bytes[8 + hlen + i] = (uint8_t)(i + 1);
    char *path = tu_write_temp(bytes, total, ".safetensors");
    free(bytes);
    return path;
}

static char *file_with_header(const char *header, size_t data_len)
{
    return file_with_length(strlen(header), header, data_len);
}

static void expect_rejected(char *path, const char *what)
{
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(path, &err);
    int as_expected = !f && strstr(err.msg, what) && strstr(err.msg, path) &&
                      !strchr(err.msg, '\n');
    cn_safetensors_free(f);
    unlink(path);
    free(path);
    if (!as_expected)
        fail_msg("expected rejection containing \"%s\", got \"%s\"", what, err.msg);
}

/* ---------------------------------------------------------------- round trip */

typedef struct {
    float a[3];
    float b[5];
    float conv[2 * 3 * 4 * 5];
    int64_t steps;
    cn_tensor_ref refs[4];
} sample;

static void make_sample(sample *s)
{
    static const int64_t shape_a[] = {3}, shape_b[] = {5}, shape_conv[] = {2, 3, 4, 5};
    for (int i = 0; i < 3; i++) s->a[i] = 0.5f * (float)i - 1.0f;
    for (int i = 0; i < 5; i++) s->b[i] = 1e-3f * (float)(i * i) + 7.0f;
    for (int i = 0; i < 120; i++) s->conv[i] = (float)i / 7.0f - 3.0f;
    s->steps = 12345678901LL;
    s->refs[0] = ref_of("fc.weight", CN_F32, 1, shape_a, s->a);
    s->refs[1] = ref_of("b", CN_F32, 1, shape_b, s->b);
    s->refs[2] = ref_of("conv1.weight", CN_F32, 4, shape_conv, s->conv);
    s->refs[3] = ref_of("bn.num_batches_tracked", CN_I64, 0, NULL, &s->steps);
}

static void assert_same_tensor(const cn_tensor_ref *got, const cn_tensor_ref *want)
{
    assert_string_equal(got->name, want->name);
    assert_int_equal(got->dtype, want->dtype);
    assert_int_equal(got->ndim, want->ndim);
    for (int d = 0; d < want->ndim; d++) assert_int_equal(got->shape[d], want->shape[d]);
    assert_memory_equal(got->data, want->data, tu_ref_bytes(want));
}

static void test_round_trip(void **state)
{
    (void)state;
    sample s;
    make_sample(&s);
    static const char *const meta[] = {"epoch", "7", "note", "h\xc3\xa9llo \"quoted\""};
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "model.safetensors");
    cn_error err = {{0}};
    assert_int_equal(cn_safetensors_write(path, s.refs, 4, meta, 2, &err), 0);

    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_int_equal(cn_safetensors_count(f), 4);
    for (int i = 0; i < 4; i++) assert_same_tensor(cn_safetensors_at(f, i), &s.refs[i]);
    assert_ptr_equal(cn_safetensors_get(f, "conv1.weight"), cn_safetensors_at(f, 2));
    assert_null(cn_safetensors_get(f, "absent"));
    assert_null(cn_safetensors_at(f, -1));
    assert_null(cn_safetensors_at(f, 4));
    int64_t steps;
    memcpy(&steps, cn_safetensors_get(f, "bn.num_batches_tracked")->data, sizeof steps);
    assert_int_equal(steps, 12345678901LL);
    assert_string_equal(cn_safetensors_meta(f, "format"), "pt");
    assert_string_equal(cn_safetensors_meta(f, "epoch"), "7");
    assert_string_equal(cn_safetensors_meta(f, "note"), meta[3]);
    assert_null(cn_safetensors_meta(f, "absent"));
    cn_safetensors_free(f);
    assert_int_equal(tu_count_entries(dir), 1);
    free(path);
    tu_remove_dir(dir);
}

static void test_no_tensors(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "empty.safetensors");
    cn_error err = {{0}};
    assert_int_equal(cn_safetensors_write(path, NULL, 0, NULL, 0, &err), 0);
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_int_equal(cn_safetensors_count(f), 0);
    assert_null(cn_safetensors_at(f, 0));
    assert_string_equal(cn_safetensors_meta(f, "format"), "pt");
    cn_safetensors_free(f);
    free(path);
    tu_remove_dir(dir);
}

/* The header as JSON, checked against what was written. */
static void check_header_json(const uint8_t *header, size_t len)
{
    json_error_t jerr;
    json_t *root = json_loadb((const char *)header, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) fail_msg("header does not parse: %s", jerr.text);
    assert_int_equal(json_object_size(root), 5);
    json_t *conv = json_object_get(root, "conv1.weight");
    assert_string_equal(json_string_value(json_object_get(conv, "dtype")), "F32");
    json_t *shape = json_object_get(conv, "shape");
    assert_int_equal(json_array_size(shape), 4);
    assert_int_equal(json_integer_value(json_array_get(shape, 3)), 5);
    json_t *offsets = json_object_get(conv, "data_offsets");
    assert_int_equal(json_integer_value(json_array_get(offsets, 0)), 32);
    assert_int_equal(json_integer_value(json_array_get(offsets, 1)), 32 + 480);
    json_t *steps = json_object_get(root, "bn.num_batches_tracked");
    assert_string_equal(json_string_value(json_object_get(steps, "dtype")), "I64");
    assert_int_equal(json_array_size(json_object_get(steps, "shape")), 0);
    json_t *meta = json_object_get(root, "__metadata__");
    assert_string_equal(json_string_value(json_object_get(meta, "format")), "pt");
    json_decref(root);
}

static void test_byte_layout(void **state)
{
    (void)state;
    sample s;
    make_sample(&s);
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "layout.safetensors");
    cn_error err = {{0}};
    assert_int_equal(cn_safetensors_write(path, s.refs, 4, NULL, 0, &err), 0);
    size_t len;
    uint8_t *bytes = slurp(path, &len);
    uint64_t header_len = le64(bytes);
    assert_int_equal((8 + header_len) % 8, 0);
    size_t data_len = 12 + 20 + 480 + 8;
    assert_int_equal(len, 8 + header_len + data_len);
    assert_int_equal(bytes[8], '{');
    check_header_json(bytes + 8, (size_t)header_len);
    const uint8_t *data = bytes + 8 + header_len;
    assert_memory_equal(data, s.a, 12);
    assert_memory_equal(data + 12, s.b, 20);
    assert_memory_equal(data + 32, s.conv, 480);
    assert_memory_equal(data + 512, &s.steps, 8);
    free(bytes);
    free(path);
    tu_remove_dir(dir);
}

/* Every name length gives an 8-aligned data section padded with spaces. */
static void test_header_alignment(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "align.safetensors");
    float v = 1.5f;
    static const int64_t one[] = {1};
    for (int len = 1; len <= 16; len++) {
        char name[32];
        memset(name, 'n', (size_t)len);
        name[len] = '\0';
        cn_tensor_ref r = ref_of(name, CN_F32, 1, one, &v);
        cn_error err = {{0}};
        assert_int_equal(cn_safetensors_write(path, &r, 1, NULL, 0, &err), 0);
        size_t size;
        uint8_t *bytes = slurp(path, &size);
        uint64_t header_len = le64(bytes);
        assert_int_equal((8 + header_len) % 8, 0);
        assert_int_equal(size, 8 + header_len + 4);
        assert_int_equal(bytes[8 + header_len - 1] == '}' || bytes[8 + header_len - 1] == ' ', 1);
        cn_safetensors *f = cn_safetensors_read(path, &err);
        if (!f) fail_msg("%s", err.msg);
        cn_safetensors_free(f);
        free(bytes);
    }
    free(path);
    tu_remove_dir(dir);
}

/* ---------------------------------------------------------------- malformed files */

static void test_too_short(void **state)
{
    (void)state;
    expect_rejected(tu_write_temp("\x05\0\0\0\0", 5, ".st"), "too short");
    expect_rejected(tu_write_temp("", 0, ".st"), "is 0 bytes");
}

static void test_header_past_file(void **state)
{
    (void)state;
    expect_rejected(file_with_length(1000, "{}", 8), "runs past the end of the file");
}

static void test_huge_header_length(void **state)
{
    (void)state;
    expect_rejected(file_with_length(1ULL << 62, "{}", 0), "over the limit");
    expect_rejected(file_with_length(100000001, "{}", 0), "over the limit");
}

static void test_not_json(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": nope}", 0), "not valid JSON");
    expect_rejected(file_with_header("{} x", 0), "not valid JSON");
    expect_rejected(file_with_header("", 0), "not valid JSON");
}

static void test_not_object(void **state)
{
    (void)state;
    expect_rejected(file_with_header("[1, 2]", 0), "not a JSON object");
    expect_rejected(file_with_header("\"text\"", 0), "not a JSON object");
}

static void test_bad_entries(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": 3}", 0), "tensor a: entry is not an object");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [0, 4], \"extra\": 1}}",
                                     4),
                    "unexpected key \"extra\"");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4),
                    "\"data_offsets\" is missing");
    expect_rejected(file_with_header("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4),
                    "tensor a: \"dtype\" is missing");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4),
                    "tensor a: \"shape\" is missing");
}

static void test_dtypes(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"Q7\", \"shape\": [1], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "tensor a: unknown dtype \"Q7\"");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F16\", \"shape\": [2], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "tensor a: dtype F16 is not supported (cnnc reads F32 and I64)");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": 4, \"shape\": [1], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "dtype is not a string");
}

static void test_bad_shapes(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "at most 4");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "shape[0] is not a non-negative integer");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1.0], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "shape[0] is not a non-negative integer");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": 4, "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "shape is not a list");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": "
                                     "[4294967296, 4294967296, 4294967296], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "is too large");
}

static void test_size_mismatch(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], "
                                     "\"data_offsets\": [0, 12]}}",
                                     12),
                    "tensor a: shape [2, 2] of F32 takes 16 bytes but data_offsets [0, 12] "
                    "span 12");
    expect_rejected(file_with_header("{\"s\": {\"dtype\": \"I64\", \"shape\": [], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "shape [] of I64 takes 8 bytes");
}

static void test_bad_offsets(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [0], "
                                     "\"data_offsets\": [4, 0]}}",
                                     4),
                    "data_offsets is not [begin, end]");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [0, 4, 8]}}",
                                     4),
                    "data_offsets is not [begin, end]");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [-4, 0]}}",
                                     4),
                    "data_offsets is not [begin, end]");
}

static void test_overlap(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], "
                                     "\"data_offsets\": [0, 8]}, "
                                     "\"b\": {\"dtype\": \"F32\", \"shape\": [2], "
                                     "\"data_offsets\": [4, 12]}}",
                                     12),
                    "tensors a and b overlap");
}

static void test_gap(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [0, 4]}, "
                                     "\"b\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [8, 12]}}",
                                     12),
                    "bytes 4..8 of the data belong to no tensor");
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [4, 8]}}",
                                     8),
                    "bytes 0..4 of the data belong to no tensor");
}

static void test_trailing_bytes(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [0, 4]}}",
                                     8),
                    "4 trailing bytes");
    expect_rejected(file_with_header("{}", 3), "3 trailing bytes");
}

static int refused_for_trailing_bytes(const void *path)
{
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(path, &err);
    int ok = !f && strstr(err.msg, "trailing bytes after the last tensor's data");
    if (!ok) fprintf(stderr, "child: \"%s\"\n", err.msg);
    cn_safetensors_free(f);
    return ok;
}

/* A file far larger than its tensors (a sparse 1 GiB file after a good header) is refused from
 * its header and size alone: in a child whose address space is capped at 128 MiB, a reader that
 * loaded the file before checking the header would fail with "cannot read" instead. */
static void test_trailing_gigabyte_refused_before_reading(void **state)
{
    (void)state;
    char *path = file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                  "\"data_offsets\": [0, 4]}}",
                                  4);
    assert_int_equal(truncate(path, (off_t)1 << 30), 0);
    int ok = tu_in_small_memory(refused_for_trailing_bytes, path);
    unlink(path);
    free(path);
    assert_true(ok);
}

static void test_offsets_past_data(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], "
                                     "\"data_offsets\": [0, 8]}}",
                                     4),
                    "tensor a: data_offsets [0, 8] run past the end of the data (4 bytes)");
}

static void test_duplicate_keys(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [0, 4]}, "
                                     "\"a\": {\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [4, 8]}}",
                                     8),
                    "duplicate");
}

static void test_bad_metadata(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"__metadata__\": {\"format\": \"pt\", \"epoch\": 3}}", 0),
                    "__metadata__ value for \"epoch\" is not a string");
    expect_rejected(file_with_header("{\"__metadata__\": [\"pt\"]}", 0),
                    "__metadata__ is not an object");
}

static void test_bad_names(void **state)
{
    (void)state;
    expect_rejected(file_with_header("{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": "
                                     "{\"dtype\": \"F32\", \"shape\": [1], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "is longer than 63 bytes");
    /* a newline in a name must not split the message */
    expect_rejected(file_with_header("{\"a\\nb\": {\"dtype\": \"Q\", \"shape\": [1], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4),
                    "tensor a?b: unknown dtype");
}

static void test_longest_name(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "long.safetensors");
    char name[64];
    memset(name, 'x', 63);
    name[63] = '\0';
    static const int64_t one[] = {1};
    float v = 4.0f;
    cn_tensor_ref r = ref_of(name, CN_F32, 1, one, &v);
    cn_error err = {{0}};
    assert_int_equal(cn_safetensors_write(path, &r, 1, NULL, 0, &err), 0);
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_non_null(cn_safetensors_get(f, name));
    cn_safetensors_free(f);
    free(path);
    tu_remove_dir(dir);
}

static void test_missing_file(void **state)
{
    (void)state;
    cn_error err = {{0}};
    assert_null(cn_safetensors_read("/nonexistent/cnnc/file.safetensors", &err));
    assert_non_null(strstr(err.msg, "/nonexistent/cnnc/file.safetensors: cannot open"));
    assert_null(cn_safetensors_read("/tmp", &err));
    assert_non_null(strstr(err.msg, "not a regular file"));
    assert_null(cn_safetensors_read("/tmp", NULL));
}

/* A file written elsewhere with zero-size tensors and unaligned data is accepted. */
static void test_accepts_foreign_layout(void **state)
{
    (void)state;
    char *path = file_with_header("{\"e\": {\"dtype\": \"F32\", \"shape\": [0, 3], "
                                  "\"data_offsets\": [0, 0]}, "
                                  "\"s\": {\"dtype\": \"I64\", \"shape\": [], "
                                  "\"data_offsets\": [0, 8]}, "
                                  "\"__metadata__\": {\"k\": \"v\"}}",
                                  8);
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_int_equal(cn_safetensors_count(f), 2);
    assert_string_equal(cn_safetensors_at(f, 0)->name, "e");
    assert_int_equal(cn_safetensors_at(f, 0)->shape[1], 3);
    const uint8_t *s = cn_safetensors_get(f, "s")->data;
    assert_int_equal(s[0], 1);
    assert_int_equal(s[7], 8);
    assert_null(cn_safetensors_meta(f, "format"));
    assert_string_equal(cn_safetensors_meta(f, "k"), "v");
    cn_safetensors_free(f);
    unlink(path);
    free(path);
}

/* ---------------------------------------------------------------- writer checks */

static void expect_write_refused(const cn_tensor_ref *refs, int n, const char *const *meta,
                                 int num_meta, const char *what)
{
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "refused.safetensors");
    cn_error err = {{0}};
    assert_int_equal(cn_safetensors_write(path, refs, n, meta, num_meta, &err), -1);
    if (!strstr(err.msg, what) || !strstr(err.msg, path))
        fail_msg("expected \"%s\", got \"%s\"", what, err.msg);
    assert_int_equal(tu_count_entries(dir), 0);
    free(path);
    tu_remove_dir(dir);
}

static void test_write_refuses_bad_tensors(void **state)
{
    (void)state;
    float v[4] = {0};
    static const int64_t four[] = {1, 1, 1, 1}, neg[] = {-2}, one[] = {1};
    cn_tensor_ref r = ref_of("x", CN_F32, 4, four, v);
    r.ndim = 5;
    expect_write_refused(&r, 1, NULL, 0, "ndim 5");
    r = ref_of("x", CN_F32, 1, neg, v);
    expect_write_refused(&r, 1, NULL, 0, "negative dimension");
    r = ref_of("x", CN_F32, 1, one, NULL);
    expect_write_refused(&r, 1, NULL, 0, "data is NULL");
    r = ref_of("x", (cn_dtype)7, 1, one, v);
    expect_write_refused(&r, 1, NULL, 0, "unknown dtype");
    r = ref_of("__metadata__", CN_F32, 1, one, v);
    expect_write_refused(&r, 1, NULL, 0, "reserved");
    cn_tensor_ref two[2] = {ref_of("x", CN_F32, 1, one, v), ref_of("x", CN_F32, 1, one, v)};
    expect_write_refused(two, 2, NULL, 0, "appears twice");
    static const char *const fmt[] = {"format", "np"};
    expect_write_refused(two, 1, fmt, 1, "metadata key \"format\"");
    static const char *const null_value[] = {"k", NULL};
    expect_write_refused(two, 1, null_value, 1, "NULL");
    static const char *const bad_utf8[] = {"k", "\xff"};
    expect_write_refused(two, 1, bad_utf8, 1, "not UTF-8");
}

/* ---------------------------------------------------------------- atomic replacement */

static void write_one(const char *path, float value)
{
    static const int64_t one[] = {1};
    cn_tensor_ref r = ref_of("v", CN_F32, 1, one, &value);
    cn_error err = {{0}};
    if (cn_safetensors_write(path, &r, 1, NULL, 0, &err) != 0) fail_msg("%s", err.msg);
}

static void test_replace_existing(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "m.safetensors");
    write_one(path, 1.0f);
    write_one(path, 2.0f);
    assert_int_equal(tu_count_entries(dir), 1);
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(path, &err);
    assert_non_null(f);
    float v;
    memcpy(&v, cn_safetensors_at(f, 0)->data, sizeof v);
    assert_true(v == 2.0f);
    cn_safetensors_free(f);
    mode_t mask = umask(022);
    umask(mask);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
    free(path);
    tu_remove_dir(dir);
}

static void test_missing_folder(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "absent/m.safetensors");
    static const int64_t one[] = {1};
    float v = 1;
    cn_tensor_ref r = ref_of("v", CN_F32, 1, one, &v);
    cn_error err = {{0}};
    assert_int_equal(cn_safetensors_write(path, &r, 1, NULL, 0, &err), -1);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, ": cannot write: No such file or directory"));
    assert_int_equal(tu_count_entries(dir), 0);
    free(path);
    tu_remove_dir(dir);
}

/* The rename fails when PATH is a folder: the temporary must go, the folder stay. */
static void test_failed_rename_leaves_nothing(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "m.safetensors");
    assert_int_equal(mkdir(path, 0700), 0);
    char *inside = tu_join(path, "keep");
    write_one(inside, 1.0f);
    static const int64_t one[] = {1};
    float v = 1;
    cn_tensor_ref r = ref_of("v", CN_F32, 1, one, &v);
    cn_error err = {{0}};
    assert_int_equal(cn_safetensors_write(path, &r, 1, NULL, 0, &err), -1);
    assert_non_null(strstr(err.msg, ": cannot write: "));
    assert_int_equal(tu_count_entries(dir), 1);
    assert_int_equal(tu_count_entries(path), 1);
    assert_int_equal(unlink(inside), 0);
    free(inside);
    free(path);
    tu_remove_dir(dir);
}

/* In a child limited to small files, a large write fails half-way (EFBIG): the existing file
 * must keep its bytes and no temporary may remain. */
static void test_failed_write_keeps_old_file(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "m.safetensors");
    write_one(path, 3.0f);
    size_t old_len;
    uint8_t *old = slurp(path, &old_len);

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit limit = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(3);
        static float big[100000];
        static const int64_t shape[] = {100000};
        cn_tensor_ref r = ref_of("big", CN_F32, 1, shape, big);
        cn_error err = {{0}};
        int rc = cn_safetensors_write(path, &r, 1, NULL, 0, &err);
        _exit(rc == -1 && strstr(err.msg, ": cannot write: ") ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    size_t new_len;
    uint8_t *now = slurp(path, &new_len);
    tu_assert_same_bytes(now, new_len, old, old_len);
    assert_int_equal(tu_count_entries(dir), 1);
    free(path);
    tu_remove_dir(dir);
}

/* Reads fd until text has come by; 0 when it did, -1 at the end of the stream. */
static int wait_for_text(int fd, const char *text)
{
    char buf[4096];
    size_t used = 0;
    for (;;) {
        ssize_t n = read(fd, buf + used, sizeof buf - 1 - used);
        if (n <= 0) return -1;
        used += (size_t)n;
        buf[used] = '\0';
        if (strstr(buf, text)) return 0;
        if (used == sizeof buf - 1) used = 0;
    }
}

/* Finds the one entry of dir other than keep; its name goes to out. */
static void other_entry(const char *dir, const char *keep, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    out[0] = '\0';
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep))
            snprintf(out, cap, "%s", e->d_name);
    closedir(d);
}

/* With the test hook on, a child stops half-way through writing its temporary and is killed
 * there: the old file must be whole, and the temporary must be nothing a checkpoint search or
 * a reader takes for a checkpoint. */
static void test_killed_mid_write_keeps_old_file(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("st");
    char *path = tu_join(dir, "checkpoint-epoch-0001.safetensors");
    write_one(path, 3.0f);
    size_t old_len;
    uint8_t *old = slurp(path, &old_len);
    int out[2];
    assert_int_equal(pipe(out), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        dup2(out[1], 2);
        setenv("CNNC_TEST_STALL_WRITE", "1", 1);
        static float big[4][10000];
        static const int64_t shape[] = {10000};
        cn_tensor_ref r[4];
        for (int i = 0; i < 4; i++) {
            char name[8] = {'t', (char)('0' + i), 0};
            r[i] = ref_of(name, CN_F32, 1, shape, big[i]);
        }
        cn_safetensors_write(path, r, 4, NULL, 0, NULL);
        _exit(1); /* the hook never returns */
    }
    close(out[1]);
    int stalled = wait_for_text(out[0], "test hook CNNC_TEST_STALL_WRITE: stalled writing");
    kill(child, SIGKILL);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    close(out[0]);
    assert_int_equal(stalled, 0);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    size_t now_len;
    uint8_t *now = slurp(path, &now_len);
    tu_assert_same_bytes(now, now_len, old, old_len);
    assert_int_equal(tu_count_entries(dir), 2);
    char tmp_name[256];
    other_entry(dir, "checkpoint-epoch-0001.safetensors", tmp_name, sizeof tmp_name);
    assert_int_equal(strncmp(tmp_name, "checkpoint-epoch-0001.safetensors.tmp.", 38), 0);
    size_t len = strlen(tmp_name);
    assert_false(len >= 12 && strcmp(tmp_name + len - 12, ".safetensors") == 0);
    char *tmp = tu_join(dir, tmp_name);
    size_t tmp_len;
    free(slurp(tmp, &tmp_len));
    assert_true(tmp_len > 8 && tmp_len < 8 + 4 * 40000);
    cn_error err = {{0}};
    assert_null(cn_safetensors_read(tmp, &err)); /* a half-written file is refused */
    assert_non_null(strstr(err.msg, "run past the end of the data"));
    char newest[CN_CHECKPOINT_NAME_MAX];
    assert_int_equal(cn_checkpoint_find(dir, newest, &err), 1);
    assert_string_equal(newest, "checkpoint-epoch-0001.safetensors");
    assert_int_equal(cn_checkpoint_prune(dir, INT_MAX, &err), 0);
    assert_int_equal(tu_count_entries(dir), 1);
    free(tmp);
    free(path);
    tu_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_no_tensors),
        cmocka_unit_test(test_byte_layout),
        cmocka_unit_test(test_header_alignment),
        cmocka_unit_test(test_too_short),
        cmocka_unit_test(test_header_past_file),
        cmocka_unit_test(test_huge_header_length),
        cmocka_unit_test(test_not_json),
        cmocka_unit_test(test_not_object),
        cmocka_unit_test(test_bad_entries),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_size_mismatch),
        cmocka_unit_test(test_bad_offsets),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_gap),
        cmocka_unit_test(test_trailing_bytes),
        cmocka_unit_test(test_trailing_gigabyte_refused_before_reading),
        cmocka_unit_test(test_offsets_past_data),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_bad_names),
        cmocka_unit_test(test_longest_name),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_accepts_foreign_layout),
        cmocka_unit_test(test_write_refuses_bad_tensors),
        cmocka_unit_test(test_replace_existing),
        cmocka_unit_test(test_missing_folder),
        cmocka_unit_test(test_failed_rename_leaves_nothing),
        cmocka_unit_test(test_failed_write_keeps_old_file),
        cmocka_unit_test(test_killed_mid_write_keeps_old_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
