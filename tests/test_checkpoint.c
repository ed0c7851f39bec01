/* test_checkpoint.c — cn_model_save / cn_model_load on the seed's Fashion-MNIST model: the
 * PyTorch state_dict names and shapes in the file, exact round trips, and every refusal leaving
 * the model untouched. The safetensors format itself is tested in tests/test_safetensors.c. */
#include "testutil.h"

#define NUM_STATE_TENSORS 18

static cn_model *seeded_model(uint64_t seed)
{
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    if (!m) fail_msg("%s", err.msg);
    cn_model_init(m, seed);
    return m;
}

static int model_refs(cn_model *m, cn_tensor_ref refs[NUM_STATE_TENSORS + 2])
{
    int n = cn_model_tensors(m, NULL, 0);
    assert_int_equal(n, NUM_STATE_TENSORS);
    assert_int_equal(cn_model_tensors(m, refs, n), n);
    return n;
}

static cn_tensor_ref *find_ref(cn_tensor_ref *refs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(refs[i].name, name) == 0) return &refs[i];
    fail_msg("model has no tensor %s", name);
    return NULL;
}

/* All state_dict bytes of m, concatenated (malloc'd). */
static uint8_t *snapshot(cn_model *m, size_t *len)
{
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(m, refs);
    return tu_concat_tensors(refs, n, NULL, 0, len);
}

static char *temp_path(const char *tag)
{
    char *path = malloc(256);
    assert_non_null(path);
    snprintf(path, 256, "/tmp/cnnc-ckpt-%d-%s.safetensors", (int)getpid(), tag);
    return path;
}

static void write_refs(const char *path, const cn_tensor_ref *refs, int n)
{
    cn_error err = {{0}};
    if (cn_safetensors_write(path, refs, n, NULL, 0, &err) != 0) fail_msg("%s", err.msg);
}

/* Loading path into a fresh model must fail with what in the message and change nothing. */
static void expect_load_refused(const char *path, const char *what)
{
    cn_model *m = seeded_model(2);
    size_t before_len, after_len;
    uint8_t *before = snapshot(m, &before_len);
    cn_error err = {{0}};
    assert_int_equal(cn_model_load(m, path, &err), -1);
    if (!strstr(err.msg, what) || !strstr(err.msg, path) || strchr(err.msg, '\n'))
        fail_msg("expected \"%s\", got \"%s\"", what, err.msg);
    uint8_t *after = snapshot(m, &after_len);
    tu_assert_same_bytes(after, after_len, before, before_len);
    cn_model_free(m);
}

static void test_file_has_state_dict(void **state)
{
    (void)state;
    cn_model *m = seeded_model(1);
    char *path = temp_path("names");
    cn_error err = {{0}};
    assert_int_equal(cn_model_save(m, path, &err), 0);
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_int_equal(cn_safetensors_count(f), NUM_STATE_TENSORS);
    static const char *const order[NUM_STATE_TENSORS] = {
        "conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "bn1.running_mean",
        "bn1.running_var", "bn1.num_batches_tracked", "conv2.weight", "conv2.bias",
        "bn2.weight", "bn2.bias", "bn2.running_mean", "bn2.running_var",
        "bn2.num_batches_tracked", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    for (int i = 0; i < NUM_STATE_TENSORS; i++)
        assert_string_equal(cn_safetensors_at(f, i)->name, order[i]);
    const cn_tensor_ref *conv1 = cn_safetensors_get(f, "conv1.weight");
    assert_int_equal(conv1->ndim, 4);
    assert_int_equal(conv1->shape[0], 10);
    assert_int_equal(conv1->shape[1], 1);
    assert_int_equal(conv1->shape[3], 5);
    const cn_tensor_ref *fc1 = cn_safetensors_get(f, "fc1.weight");
    assert_int_equal(fc1->ndim, 2);
    assert_int_equal(fc1->shape[0], 50);
    assert_int_equal(fc1->shape[1], 320);
    const cn_tensor_ref *tracked = cn_safetensors_get(f, "bn2.num_batches_tracked");
    assert_int_equal(tracked->dtype, CN_I64);
    assert_int_equal(tracked->ndim, 0);
    assert_string_equal(cn_safetensors_meta(f, "format"), "pt");
    cn_safetensors_free(f);
    unlink(path);
    free(path);
    cn_model_free(m);
}

static void test_round_trip(void **state)
{
    (void)state;
    cn_model *a = seeded_model(1);
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(a, refs);
    int64_t tracked = 58;
    memcpy(find_ref(refs, n, "bn1.num_batches_tracked")->data, &tracked, sizeof tracked);
    ((float *)find_ref(refs, n, "bn2.running_mean")->data)[3] = 0.25f;
    char *path = temp_path("round");
    cn_error err = {{0}};
    assert_int_equal(cn_model_save(a, path, &err), 0);

    cn_model *b = seeded_model(2);
    if (cn_model_load(b, path, &err) != 0) fail_msg("%s", err.msg);
    size_t la, lb;
    uint8_t *sa = snapshot(a, &la), *sb = snapshot(b, &lb);
    tu_assert_same_bytes(sa, la, sb, lb);
    unlink(path);
    free(path);
    cn_model_free(a);
    cn_model_free(b);
}

static void test_missing_tensor(void **state)
{
    (void)state;
    cn_model *a = seeded_model(1);
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(a, refs);
    cn_tensor_ref *gone = find_ref(refs, n, "bn2.running_var");
    memmove(gone, gone + 1, (size_t)(refs + n - gone - 1) * sizeof *gone);
    char *path = temp_path("missing");
    write_refs(path, refs, n - 1);
    expect_load_refused(path, "tensor bn2.running_var is missing");
    unlink(path);
    free(path);
    cn_model_free(a);
}

static void test_wrong_shape(void **state)
{
    (void)state;
    cn_model *a = seeded_model(1);
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(a, refs);
    float eleven[11] = {0};
    cn_tensor_ref *bias = find_ref(refs, n, "fc2.bias");
    bias->shape[0] = 11;
    bias->data = eleven;
    char *path = temp_path("shape");
    write_refs(path, refs, n);
    expect_load_refused(path, "tensor fc2.bias has shape [11] in the file, the model expects [10]");

    cn_tensor_ref *w = find_ref(refs, n, "fc1.weight");
    w->shape[0] = 320;
    w->shape[1] = 50;
    bias->shape[0] = 10;
    write_refs(path, refs, n);
    expect_load_refused(path, "tensor fc1.weight has shape [320, 50] in the file, the model "
                              "expects [50, 320]");
    unlink(path);
    free(path);
    cn_model_free(a);
}

static void test_wrong_dtype(void **state)
{
    (void)state;
    cn_model *a = seeded_model(1);
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(a, refs);
    float as_float[2] = {1.0f, 0.0f};
    cn_tensor_ref *tracked = find_ref(refs, n, "bn1.num_batches_tracked");
    tracked->dtype = CN_F32;
    tracked->data = as_float;
    char *path = temp_path("dtype");
    write_refs(path, refs, n);
    expect_load_refused(path, "tensor bn1.num_batches_tracked is F32 in the file, the model "
                              "expects I64");
    unlink(path);
    free(path);
    cn_model_free(a);
}

static void test_extra_tensors(void **state)
{
    (void)state;
    cn_model *a = seeded_model(1);
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(a, refs);
    float extra[3] = {1, 2, 3};
    refs[n] = refs[n - 1];
    snprintf(refs[n].name, sizeof refs[n].name, "fc3.bias");
    refs[n].shape[0] = 3;
    refs[n].data = extra;
    char *path = temp_path("extra");
    write_refs(path, refs, n + 1);
    expect_load_refused(path, "tensor fc3.bias is not part of this model");

    snprintf(refs[n].name, sizeof refs[n].name, "optimizer.momentum_buffer");
    write_refs(path, refs, n + 1);
    cn_model *b = seeded_model(2);
    cn_error err = {{0}};
    if (cn_model_load(b, path, &err) != 0) fail_msg("%s", err.msg);
    size_t la, lb;
    uint8_t *sa = snapshot(a, &la), *sb = snapshot(b, &lb);
    tu_assert_same_bytes(sa, la, sb, lb);
    cn_model_free(b);
    unlink(path);
    free(path);
    cn_model_free(a);
}

static void test_non_finite(void **state)
{
    (void)state;
    cn_model *a = seeded_model(1);
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(a, refs);
    char *path = temp_path("nan");
    float *w = find_ref(refs, n, "fc1.weight")->data;
    w[5] = NAN;
    cn_error err = {{0}};
    assert_int_equal(cn_model_save(a, path, &err), 0);
    expect_load_refused(path, "tensor fc1.weight holds non-finite values");
    w[5] = 0.0f;
    float *var = find_ref(refs, n, "bn2.running_var")->data;
    var[19] = -INFINITY;
    assert_int_equal(cn_model_save(a, path, &err), 0);
    expect_load_refused(path, "tensor bn2.running_var holds non-finite values");
    unlink(path);
    free(path);
    cn_model_free(a);
}

static void test_negative_variance(void **state)
{
    (void)state;
    cn_model *a = seeded_model(1);
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(a, refs);
    char *path = temp_path("negvar");
    float *var = find_ref(refs, n, "bn1.running_var")->data;
    var[7] = -0.5f;
    cn_error err = {{0}};
    assert_int_equal(cn_model_save(a, path, &err), 0);
    expect_load_refused(path, "tensor bn1.running_var holds a negative variance (element 7)");
    var[7] = 0.0f; /* a variance of zero is a variance */
    assert_int_equal(cn_model_save(a, path, &err), 0);
    cn_model *b = seeded_model(2);
    if (cn_model_load(b, path, &err) != 0) fail_msg("%s", err.msg);
    cn_model_free(b);
    unlink(path);
    free(path);
    cn_model_free(a);
}

/* Outputs that overflow (finite but huge weights) are an error of evaluate and predict, not a
 * NaN loss or probability. */
static void test_non_finite_outputs_refused(void **state)
{
    (void)state;
    cn_model *m = seeded_model(1);
    cn_tensor_ref refs[NUM_STATE_TENSORS + 2];
    int n = model_refs(m, refs);
    float *w = find_ref(refs, n, "fc2.weight")->data;
    for (int i = 0; i < 10 * 50; i++) w[i] = (i % 2 ? -3e38f : 3e38f);
    uint8_t images[3 * 784];
    for (size_t i = 0; i < sizeof images; i++) images[i] = (uint8_t)(i * 7);
    float logp[3 * 10];
    cn_error err = {{0}};
    assert_int_equal(cn_model_predict(m, images, 3, logp, &err), -1);
    assert_non_null(strstr(err.msg, "not finite"));

    uint8_t labels[3] = {1, 2, 3};
    cn_dataset ds = {.count = 3, .channels = 1, .height = 28, .width = 28, .classes = 10,
                     .pixels = images, .labels = labels};
    cn_train_config cfg = {.batch_size = 2, .num_replicas = 1, .threads = 1,
                           .learning_rate = 0.01f, .momentum = 0.5f, .seed = 1};
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    if (!t) fail_msg("%s", err.msg);
    double loss = 0, accuracy = 0;
    err.msg[0] = '\0';
    assert_int_equal(cn_evaluate(t, &ds, 3, &loss, &accuracy, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "not finite"));
    cn_trainer_free(t);
    cn_model_free(m);
}

static void test_bad_files(void **state)
{
    (void)state;
    char *junk = tu_write_temp("\x10\0\0\0", 4, ".safetensors");
    expect_load_refused(junk, "too short");
    unlink(junk);
    free(junk);
    expect_load_refused("/nonexistent/cnnc.safetensors", "cannot open");
    /* text read as a header length: named for what it is, not a number over a limit */
    const char text[] = "root:x:0:0:root:/root:/bin/bash\n";
    char *passwd = tu_write_temp(text, sizeof text - 1, ".txt");
    expect_load_refused(passwd, "not a safetensors file");
    unlink(passwd);
    free(passwd);

    cn_model *a = seeded_model(1);
    cn_error err = {{0}};
    assert_int_equal(cn_model_save(a, "/nonexistent/cnnc.safetensors", &err), -1);
    assert_non_null(strstr(err.msg, "/nonexistent/cnnc.safetensors: cannot write: "));
    cn_model_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_has_state_dict),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_missing_tensor),
        cmocka_unit_test(test_wrong_shape),
        cmocka_unit_test(test_wrong_dtype),
        cmocka_unit_test(test_extra_tensors),
        cmocka_unit_test(test_non_finite),
        cmocka_unit_test(test_negative_variance),
        cmocka_unit_test(test_non_finite_outputs_refused),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
