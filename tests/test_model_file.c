/* test_model_file.c — the text model format (cn_model_from_text / cn_model_from_file): the
 * seed's file builds exactly cn_model_fashion_mnist, other stacks get PyTorch's Sequential
 * names and shapes, and every refusal names the source and the line. Training with a model
 * file is tested by tests/cli_model_file.sh. */
#include <sys/stat.h>

#include "testutil.h"

#include "model/model.h" /* cn_model_normalize, cn_model_set_classes_text */

#define SEED_FILE "models/fashion_mnist.model"
#define INPUT "input channels=1 height=28 width=28 mean=0.1307 std=0.3081\n"

static cn_model *from_text(const char *text)
{
    cn_error err = {{0}};
    cn_model *m = cn_model_from_text(text, strlen(text), "test.model", &err);
    if (!m) fail_msg("%s", err.msg);
    return m;
}

/* Same tensors (names, dtypes, shapes, bytes) in the same order. */
static void assert_same_model(cn_model *a, cn_model *b)
{
    cn_tensor_ref ra[64], rb[64];
    int n = cn_model_tensors(a, ra, 64);
    assert_int_equal(cn_model_tensors(b, rb, 64), n);
    assert_int_equal(cn_model_num_params(a), cn_model_num_params(b));
    for (int i = 0; i < n; i++) {
        assert_string_equal(ra[i].name, rb[i].name);
        assert_int_equal(ra[i].dtype, rb[i].dtype);
        assert_int_equal(ra[i].ndim, rb[i].ndim);
        for (int d = 0; d < 4; d++) assert_int_equal(ra[i].shape[d], rb[i].shape[d]);
        assert_memory_equal(ra[i].data, rb[i].data, tu_ref_bytes(&ra[i]));
    }
}

static void test_seed_file_is_the_builtin_model(void **state)
{
    (void)state;
    cn_error err = {{0}};
    cn_model *file = cn_model_from_file(SEED_FILE, &err);
    if (!file) fail_msg("%s", err.msg);
    cn_model *builtin = cn_model_fashion_mnist(&err);
    assert_non_null(builtin);
    assert_int_equal(cn_model_num_params(file), 21900);
    assert_int_equal(cn_model_num_layers(file), cn_model_num_layers(builtin));
    for (int i = 0; i < cn_model_num_layers(file); i++)
        assert_string_equal(cn_model_layer_name(file, i), cn_model_layer_name(builtin, i));
    for (uint64_t seed = 1; seed <= 7; seed += 6) {
        cn_model_init(file, seed), cn_model_init(builtin, seed);
        assert_same_model(file, builtin);
    }
    assert_string_equal(cn_model_text(file), cn_model_text(builtin));
    float mean[2] = {0, 0}, std[2] = {0, 0};
    assert_int_equal(cn_model_normalization(file, mean, std, 2), 1);
    assert_true(mean[0] == 0.1307f && std[0] == 0.3081f);
    cn_model_free(file);
    cn_model_free(builtin);
}

/* cn_model_text: one canonical form, which builds the same model again. */
static void test_text_round_trip(void **state)
{
    (void)state;
    static const char *const files[] = {SEED_FILE, "models/lenet5.model"};
    for (int i = 0; i < 2; i++) {
        cn_error err = {{0}};
        cn_model *m = cn_model_from_file(files[i], &err);
        if (!m) fail_msg("%s", err.msg);
        const char *text = cn_model_text(m);
        cn_model *again = from_text(text);
        assert_string_equal(cn_model_text(again), text);
        cn_model_init(m, 5), cn_model_init(again, 5);
        assert_same_model(m, again);
        cn_model_free(m), cn_model_free(again);
    }
    cn_error err = {{0}};
    cn_model *seed = cn_model_fashion_mnist(&err);
    assert_string_equal(cn_model_text(seed),
                        "input channels=1 height=28 width=28 mean=0.1307 std=0.3081\n"
                        "conv2d name=conv1 out=10 kernel=5\nmaxpool2d kernel=2\nrelu\n"
                        "batchnorm2d name=bn1\nconv2d name=conv2 out=20 kernel=5\n"
                        "maxpool2d kernel=2\nrelu\nbatchnorm2d name=bn2\nflatten\n"
                        "linear name=fc1 out=50\nrelu\nlinear name=fc2 out=10\nlog_softmax\n");
    cn_model_free(seed);
}

static void assert_tensor(cn_model *m, int i, const char *name, int ndim, int64_t d0, int64_t d1)
{
    cn_tensor_ref refs[64];
    assert_true(cn_model_tensors(m, refs, 64) > i);
    assert_string_equal(refs[i].name, name);
    assert_int_equal(refs[i].ndim, ndim);
    assert_int_equal(refs[i].shape[0], d0);
    if (ndim > 1) assert_int_equal(refs[i].shape[1], d1);
}

/* models/lenet5.model: unnamed layers take their Sequential positions; it runs forward. */
static void test_lenet5_file(void **state)
{
    (void)state;
    cn_error err = {{0}};
    cn_model *m = cn_model_from_file("models/lenet5.model", &err);
    if (!m) fail_msg("%s", err.msg);
    assert_int_equal(cn_model_num_params(m), 156 + 2416 + 30840 + 10164 + 850);
    assert_int_equal(cn_model_tensors(m, NULL, 0), 10);
    assert_tensor(m, 0, "0.weight", 4, 6, 1);
    assert_tensor(m, 2, "3.weight", 4, 16, 6);
    assert_tensor(m, 4, "7.weight", 2, 120, 256);
    assert_tensor(m, 6, "9.weight", 2, 84, 120);
    assert_tensor(m, 8, "11.weight", 2, 10, 84);
    assert_tensor(m, 9, "11.bias", 1, 10, 0);
    cn_model_init(m, 3);
    cn_dataset ds = tu_synthetic_set(4, 5);
    float out[4 * 10];
    assert_int_equal(cn_model_predict(m, ds.pixels, 4, out, &err), 0);
    for (int i = 0; i < 4; i++) {
        double sum = 0;
        for (int c = 0; c < 10; c++) sum += exp(out[i * 10 + c]);
        assert_true(fabs(sum - 1) < 1e-4);
    }
    cn_dataset_free(&ds);
    cn_model_free(m);
}

/* Names mixed with positions, comments, blank lines, tabs and CRLF; another input shape. */
static void test_other_shapes_and_layout(void **state)
{
    (void)state;
    cn_model *m = from_text("# a comment line\r\n\r\n"
                            "input channels=3 height=9 width=7 mean=0.1307,0.1307,0.1307 "
                            "std=0.3081\r\n"
                            "\tconv2d out=4 kernel=3 stride=1 padding=0 bias=1 # 0\n"
                            "batchnorm2d momentum=0.1 eps=1e-5\n"
                            "maxpool2d kernel=2 stride=2\n"
                            "relu\nflatten\n"
                            "linear name=head out=5 bias=1\n"
                            "log_softmax");
    assert_int_equal(cn_model_input_size(m), 3 * 9 * 7);
    assert_int_equal(cn_model_num_outputs(m), 5);
    assert_tensor(m, 0, "0.weight", 4, 4, 3);
    assert_tensor(m, 2, "1.weight", 1, 4, 0);
    assert_tensor(m, 4, "1.running_mean", 1, 4, 0);
    assert_tensor(m, 7, "head.weight", 2, 5, 4 * 3 * 2);
    float mean[3], std[3];
    assert_int_equal(cn_model_normalization(m, mean, std, 3), 3);
    assert_true(mean[2] == 0.1307f && std[2] == 0.3081f);
    cn_model_free(m);
}

/* mean= and std= per channel: recorded in the model's text, read back the same, and what each
 * channel's pixels become. */
static void test_per_channel_normalization(void **state)
{
    (void)state;
    cn_model *m = from_text("input channels=3 height=4 width=4 mean=0.4914,0.4822,0.4465 "
                            "std=0.247,0.2435,0.2616\nflatten\nlinear out=2\nlog_softmax\n");
    float mean[3], std[3];
    assert_int_equal(cn_model_normalization(m, mean, std, 3), 3);
    assert_true(mean[1] == 0.4822f && std[2] == 0.2616f);
    const char *text = cn_model_text(m);
    assert_non_null(strstr(text, "mean=0.4914,0.4822,0.4465 std=0.247,0.2435,0.2616\n"));
    cn_model *again = from_text(text);
    assert_string_equal(cn_model_text(again), text);
    uint8_t pixels[2 * 3 * 16];
    float out[2 * 3 * 16];
    for (int i = 0; i < 2 * 3 * 16; i++) pixels[i] = (uint8_t)(i * 37);
    cn_model_normalize(m, out, pixels, 2);
    for (int i = 0; i < 2 * 3 * 16; i++) {
        int c = i / 16 % 3;
        assert_true(out[i] == ((float)pixels[i] / 255.0f - mean[c]) / std[c]);
    }
    cn_model_free(again);
    cn_model_free(m);
}

/* Class names: none at first, set and read back, refused when a name does not do. */
static void test_class_names(void **state)
{
    (void)state;
    cn_model *m = from_text("input channels=1 height=2 width=2 mean=0 std=1\nflatten\n"
                            "linear out=3\nlog_softmax\n");
    cn_error err = {{0}};
    assert_null(cn_model_class_name(m, 0));
    const char *abc[] = {"cat", "dog", "bird"}, *bad[] = {"cat", "", "bird"};
    assert_int_equal(cn_model_set_class_names(m, abc, &err), 0);
    assert_string_equal(cn_model_class_name(m, 2), "bird");
    assert_null(cn_model_class_name(m, 3));
    assert_int_equal(cn_model_set_class_names(m, bad, &err), -1);
    assert_string_equal(err.msg, "class 1: a name must have 1 to 63 bytes");
    assert_string_equal(cn_model_class_name(m, 1), "dog"); /* kept */
    assert_int_equal(cn_model_set_classes_text(m, "a\nb\nc", "f", &err), 0);
    assert_string_equal(cn_model_class_name(m, 1), "b");
    assert_int_equal(cn_model_set_classes_text(m, "a\nb", "f", &err), -1);
    assert_string_equal(err.msg, "f: __metadata__ \"classes\" names 2 classes, the model has 3");
    cn_model_free(m);
}

typedef struct {
    const char *text;
    const char *message; /* the whole message */
} refusal;

static const refusal refusals[] = {
    {"", "test.model:1: no input line: a model starts with input"},
    {"# nothing\n\n", "test.model:2: no input line: a model starts with input"},
    {"relu\n", "test.model:1: relu before input: the first line must be input"},
    {INPUT INPUT, "test.model:2: input: a second input line"},
    {INPUT "relu\nflatten\nlinear out=10\n", "test.model:4: the model must end with log_softmax"},
    {INPUT "flatten\nlog_softmax\nrelu\n",
     "test.model:4: relu after log_softmax: log_softmax must be the last line"},
    {INPUT "conv3d out=2 kernel=3\n", "test.model:2: unknown layer kind 'conv3d'"},
    {INPUT "conv2d out=2 kernel=3 size=4\n", "test.model:2: conv2d: unknown key 'size'"},
    {INPUT "relu inplace=1\n", "test.model:2: relu: unknown key 'inplace'"},
    {INPUT "conv2d out=2 kernel\n", "test.model:2: conv2d: 'kernel' is not key=value"},
    {INPUT "conv2d out=2 kernel=\n", "test.model:2: conv2d: 'kernel' has no value"},
    {INPUT "conv2d out=2\n", "test.model:2: conv2d: missing kernel="},
    {INPUT "conv2d out=2 kernel=3 out=4\n", "test.model:2: conv2d: key 'out' given twice"},
    {INPUT "conv2d out=two kernel=3\n",
     "test.model:2: conv2d: out=two: expected a whole number"},
    {INPUT "conv2d out=-2 kernel=3\n", "test.model:2: conv2d: out=-2: expected a whole number"},
    {INPUT "conv2d out=0 kernel=3\n", "test.model:2: conv2d: out=0: must be 1 to 65536"},
    {INPUT "flatten\nlinear out=2000000000\n",
     "test.model:3: linear: out=2000000000: must be 1 to 65536"},
    {INPUT "conv2d out=2 kernel=3 stride=1000000000000000000000002\n",
     "test.model:2: conv2d: stride=1000000000000000000000002: must be 1 to 65536"},
    {INPUT "conv2d out=2 kernel=3 bias=yes\n", "test.model:2: conv2d: bias=yes: expected 0 or 1"},
    {INPUT "conv2d name=a.b out=2 kernel=3\n",
     "test.model:2: conv2d: name=a.b: expected a name of letters, digits and _ (at most 39)"},
    {"input channels=1 height=28 width=28 mean=0.1307,x std=0.3081\n",
     "test.model:1: input: mean=0.1307,x: expected numbers separated by commas"},
    {"input channels=1 height=28 width=28 mean=0.5\n",
     "test.model:1: input: give mean= and std= together, or neither (then they are computed "
     "from the training images)"},
    {"input channels=2 height=28 width=28 mean=0.5 std=0.3,0\n",
     "test.model:1: input: std=0.3,0: every value must be above 0"},
    {"input channels=2 height=28 width=28 mean=0.1307,0.1307,0.1307 std=0.3081\n",
     "test.model:1: input: mean= has 3 values for 2 channels (give 1 or 2)"},
    {INPUT "batchnorm2d momentum=0\n",
     "test.model:2: batchnorm2d: momentum=0: must be above 0 (and finite in single precision)"},
    {INPUT "batchnorm2d eps=-1\n",
     "test.model:2: batchnorm2d: eps=-1: must be above 0 (and finite in single precision)"},
    {INPUT "batchnorm2d eps=1e-50\n",
     "test.model:2: batchnorm2d: eps=1e-50: must be above 0 (and finite in single precision)"},
    {INPUT "batchnorm2d eps=1e300\n",
     "test.model:2: batchnorm2d: eps=1e+300: must be above 0 (and finite in single precision)"},
    {"input channels=3 height=28 width=28 mean=0.4914,0.28,40.24e65 std=0.3\n",
     "test.model:1: input: mean=0.4914,0.28,40.24e65: a value out of single precision's range"},
    {INPUT "batchnorm2d momentum=1.5\n",
     "test.model:2: batchnorm2d: momentum=1.5 eps=1e-05: momentum must be in (0, 1], eps above 0"},
    {INPUT "batchnorm1d\n",
     "test.model:2: batchnorm1d: needs a flat input, not 1x28x28: put flatten before it"},
    {INPUT "conv2d out=2 kernel=3 padding=70000\n",
     "test.model:2: conv2d: padding=70000: must be 0 to 65536"},
    {INPUT "conv2d out=2 kernel=31 padding=1\nflatten\nlog_softmax\n",
     "test.model:2: conv2d: kernel=31 does not fit its input 1x28x28"},
    {INPUT "dropout p=1.5\n", "test.model:2: dropout: p=1.5: must be at least 0 and below 1"},
    {INPUT "dropout\n", "test.model:2: dropout: missing p="},
    {INPUT "conv2d out=2 kernel=29\n",
     "test.model:2: conv2d: kernel=29 does not fit its input 1x28x28"},
    {INPUT "maxpool2d kernel=7\nmaxpool2d kernel=5\n",
     "test.model:3: maxpool2d: kernel=5 does not fit its input 1x4x4"},
    {INPUT "linear out=10\n",
     "test.model:2: linear: needs a flat input, not 1x28x28: put flatten before it"},
    {INPUT "log_softmax\n",
     "test.model:2: log_softmax: needs a flat input, not 1x28x28: put flatten before it"},
    {INPUT "flatten\nconv2d out=2 kernel=1\n",
     "test.model:3: conv2d: needs a [C,H,W] input, not the flat 784 features of flatten or "
     "linear"},
    {INPUT "flatten\nbatchnorm2d\n",
     "test.model:3: batchnorm2d: needs a [C,H,W] input, not the flat 784 features of flatten or "
     "linear"},
    {INPUT "conv2d name=a out=2 kernel=3\nbatchnorm2d name=a\n",
     "test.model:3: name 'a' is already the name of the layer on line 2"},
    {INPUT "conv2d out=2 kernel=3\nbatchnorm2d name=0\n",
     "test.model:3: name '0' is already the name of the layer on line 2"},
    {INPUT "flatten\nlinear out=65536\nlinear out=65536\n",
     "test.model:4: linear: the model would have more than 268435456 parameters"},
    {INPUT "relu a=1 b=1 c=1 d=1 e=1 f=1 g=1 h=1 i=1 j=1 k=1 l=1 m=1 n=1 o=1 p=1\n",
     "test.model:2: more than 16 words on a line"},
};

static void test_refusals(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        cn_error err = {{0}};
        const char *text = refusals[i].text;
        cn_model *m = cn_model_from_text(text, strlen(text), "test.model", &err);
        if (m || strcmp(err.msg, refusals[i].message) != 0)
            fail_msg("case %zu: got '%s', want '%s'", i, m ? "(a model)" : err.msg,
                     refusals[i].message);
    }
}

/* A model file without mean= and std= leaves them to the training data: the model has none
 * (its text says none), cannot train or predict until one is set, and records the one set. */
static void test_normalization_left_to_data(void **state)
{
    (void)state;
    const char *text = "input channels=3 height=4 width=4\nflatten\nlinear out=2\nlog_softmax\n";
    cn_error err = {{0}};
    cn_model *m = cn_model_from_text(text, strlen(text), "test.model", &err);
    assert_non_null(m);
    assert_int_equal(cn_model_has_normalization(m), 0);
    assert_null(strstr(cn_model_text(m), "mean="));
    cn_train_config cfg = {.batch_size = 2, .num_replicas = 1, .threads = 1,
                           .learning_rate = 0.1f, .momentum = 0.5f, .seed = 1};
    assert_null(cn_trainer_create(m, &cfg, &err));
    assert_non_null(strstr(err.msg, "no normalisation"));
    uint8_t pixels[48] = {0};
    float logp[2];
    assert_int_equal(cn_model_predict(m, pixels, 1, logp, &err), -1);
    const float bad_std[3] = {0.2f, 0.0f, 0.3f}, mean[3] = {0.5f, 0.25f, 0.125f};
    assert_int_equal(cn_model_set_normalization(m, mean, bad_std, &err), -1);
    assert_int_equal(cn_model_has_normalization(m), 0);
    const float std[3] = {0.5f, 0.25f, 0.2f};
    assert_int_equal(cn_model_set_normalization(m, mean, std, &err), 0);
    assert_int_equal(cn_model_has_normalization(m), 1);
    assert_non_null(strstr(cn_model_text(m), "mean=0.5,0.25,0.125 std=0.5,0.25,0.2"));
    cn_model *again = cn_model_from_text(cn_model_text(m), strlen(cn_model_text(m)), "t", &err);
    assert_non_null(again);
    float got_mean[3], got_std[3];
    assert_int_equal(cn_model_normalization(again, got_mean, got_std, 3), 3);
    assert_memory_equal(got_mean, mean, sizeof mean);
    assert_memory_equal(got_std, std, sizeof std);
    assert_int_equal(cn_model_predict(again, pixels, 1, logp, &err), 0);
    cn_model_free(again);
    cn_model_free(m);
}

static void test_refused_bytes_and_sizes(void **state)
{
    (void)state;
    cn_error err = {{0}};
    static const char nul[] = INPUT "relu\0\nflatten\nlog_softmax\n";
    assert_null(cn_model_from_text(nul, sizeof nul - 1, "m", &err));
    assert_string_equal(err.msg, "m:2: a NUL byte: not a text file");
    /* What a model file is mistaken for: each named, not a NUL byte on line 1. */
    static const struct {
        const char *bytes;
        size_t len;
        const char *message;
    } others[] = {
        {"\x1f\x8b\x08\0\0\0\0\0", 8, "m: not a model file but gzip data: decompress it first"},
        {"PK\3\4\x14\0\0\0", 8,
         "m: not a model file but a zip archive (torch.save's format?): cnnc reads weights "
         "from safetensors"},
        {"\x02\0\0\0\0\0\0\0{}", 10,
         "m: not a model file but safetensors weights: give a checkpoint or saved model as the "
         "checkpoint"},
        {"\x03\0\0\0\0\0\0\0{}", 10, "m:1: a NUL byte: not a text file"}, /* too long */
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        assert_null(cn_model_from_text(others[i].bytes, others[i].len, "m", &err));
        assert_string_equal(err.msg, others[i].message);
    }
    char many[300 * 5 + 128];
    size_t len = (size_t)snprintf(many, sizeof many, "%s", INPUT);
    for (int i = 0; i < 300; i++) len += (size_t)snprintf(many + len, sizeof many - len, "relu\n");
    assert_null(cn_model_from_text(many, len, "m", &err));
    assert_string_equal(err.msg, "m:258: more than 256 layers");
}

static void test_file_refusals(void **state)
{
    (void)state;
    cn_error err = {{0}};
    assert_null(cn_model_from_file("/nonexistent/x.model", &err));
    assert_non_null(strstr(err.msg, "/nonexistent/x.model: cannot open"));
    char *dir = tu_make_temp_dir("model-file");
    char *fifo = tu_join(dir, "pipe.model");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_null(cn_model_from_file(fifo, &err)); /* must not wait for a writer */
    assert_non_null(strstr(err.msg, "not a regular file (a named pipe)"));
    unlink(fifo);
    size_t big = 1024 * 1024 + 1;
    char *bytes = calloc(1, big);
    assert_non_null(bytes);
    memset(bytes, '#', big);
    char *path = tu_write_temp(bytes, big, ".model");
    assert_null(cn_model_from_file(path, &err));
    assert_non_null(strstr(err.msg, "1048577 bytes: too large for a model file"));
    static const char no_end[] = INPUT "flatten\nlinear out=10\n";
    char *bad = tu_write_temp(no_end, strlen(no_end), ".model");
    assert_null(cn_model_from_file(bad, &err));
    char want[512];
    snprintf(want, sizeof want, "%s:3: the model must end with log_softmax", bad);
    assert_string_equal(err.msg, want);
    unlink(path), unlink(bad);
    free(path), free(bad), free(bytes), free(fifo);
    tu_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_file_is_the_builtin_model),
        cmocka_unit_test(test_lenet5_file),
        cmocka_unit_test(test_text_round_trip),
        cmocka_unit_test(test_other_shapes_and_layout),
        cmocka_unit_test(test_per_channel_normalization),
        cmocka_unit_test(test_class_names),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_normalization_left_to_data),
        cmocka_unit_test(test_refused_bytes_and_sizes),
        cmocka_unit_test(test_file_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
