/* test_layer_info.c — cn_model_layer_info, what `cnnc summary` prints of each layer: for the
 * seed's network every layer's kind word, name, output shape, parameters (PyTorch's counts) and
 * forward and backward FLOP (2 per multiply-add, worked out here from the shapes), totals that
 * agree with cn_model_num_params and cn_model_flops, unnamed layers of a model file, and -1 for
 * an index out of range. The command's table is tested by tests/cli_summary.sh. */
#include "testutil.h"

typedef struct {
    const char *kind, *name;
    int c, h, w;
    size_t params;
    double macs; /* multiply-adds of one sample's forward pass */
} expected_layer;

/* The seed's network as PyTorch describes it: conv1 Conv2d(1, 10, 5) has 10*1*5*5 + 10
 * parameters and 10*24*24 outputs of 1*5*5 multiply-adds each, and so on. */
static const expected_layer seed_layers[] = {
    {"conv2d", "conv1", 10, 24, 24, 260, 10.0 * 24 * 24 * 25},
    {"maxpool2d", NULL, 10, 12, 12, 0, 0},
    {"relu", NULL, 10, 12, 12, 0, 0},
    {"batchnorm2d", "bn1", 10, 12, 12, 20, 0},
    {"conv2d", "conv2", 20, 8, 8, 5020, 20.0 * 8 * 8 * 10 * 25},
    {"maxpool2d", NULL, 20, 4, 4, 0, 0},
    {"relu", NULL, 20, 4, 4, 0, 0},
    {"batchnorm2d", "bn2", 20, 4, 4, 40, 0},
    {"flatten", NULL, 320, 1, 1, 0, 0},
    {"linear", "fc1", 50, 1, 1, 16050, 320.0 * 50},
    {"relu", NULL, 50, 1, 1, 0, 0},
    {"linear", "fc2", 10, 1, 1, 510, 50.0 * 10},
    {"log_softmax", NULL, 10, 1, 1, 0, 0},
};
#define SEED_LAYERS ((int)(sizeof seed_layers / sizeof seed_layers[0]))

static void test_seed_layers(void **state)
{
    (void)state;
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    assert_int_equal(cn_model_num_layers(m), SEED_LAYERS);
    size_t params = 0;
    double forward = 0, backward = 0, want_forward, want_backward;
    for (int i = 0; i < SEED_LAYERS; i++) {
        const expected_layer *e = &seed_layers[i];
        cn_layer_info info;
        memset(&info, 0xff, sizeof info);
        assert_int_equal(cn_model_layer_info(m, i, &info), 0);
        assert_string_equal(info.kind, e->kind);
        assert_string_equal(info.name, e->name ? e->name : cn_model_layer_name(m, i));
        assert_int_equal(info.channels, e->c);
        assert_int_equal(info.height, e->h);
        assert_int_equal(info.width, e->w);
        assert_int_equal(info.params, e->params);
        assert_true(info.forward_flops == 2 * e->macs);
        /* the first layer computes no input gradient: its weight gradient only */
        assert_true(info.backward_flops == (i == 0 ? 2 : 4) * e->macs);
        params += info.params;
        forward += info.forward_flops, backward += info.backward_flops;
    }
    assert_int_equal(params, 21900);
    assert_int_equal(params, cn_model_num_params(m));
    cn_model_flops(m, &want_forward, &want_backward);
    assert_true(forward == want_forward && backward == want_backward);
    assert_true(forward == 961000); /* 0.48 M multiply-adds, as the specification says */
    cn_model_free(m);
}

/* A model file's unnamed layers: tensors named by position, the rest by kind and index. */
static void test_model_file_names(void **state)
{
    (void)state;
    const char *text = "input channels=1 height=8 width=8 mean=0.1307 std=0.3081\n"
                       "conv2d out=4 kernel=3\nrelu\nflatten\nlinear out=2\nlog_softmax\n";
    cn_error err = {{0}};
    cn_model *m = cn_model_from_text(text, strlen(text), "t.model", &err);
    if (!m) fail_msg("%s", err.msg);
    cn_layer_info info;
    assert_int_equal(cn_model_layer_info(m, 0, &info), 0);
    assert_string_equal(info.name, "0");
    assert_int_equal(info.params, 4 * 1 * 3 * 3 + 4);
    assert_true(info.channels == 4 && info.height == 6 && info.width == 6);
    assert_int_equal(cn_model_layer_info(m, 3, &info), 0);
    assert_string_equal(info.name, "3");
    assert_string_equal(info.kind, "linear");
    assert_int_equal(info.params, 4 * 6 * 6 * 2 + 2);
    assert_int_equal(cn_model_layer_info(m, 1, &info), 0);
    assert_string_equal(info.name, cn_model_layer_name(m, 1));
    assert_true(info.params == 0 && info.forward_flops == 0 && info.backward_flops == 0);
    cn_model_free(m);
}

static void test_out_of_range(void **state)
{
    (void)state;
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    cn_layer_info info;
    assert_int_equal(cn_model_layer_info(m, -1, &info), -1);
    assert_int_equal(cn_model_layer_info(m, cn_model_num_layers(m), &info), -1);
    assert_int_equal(cn_model_layer_info(m, 1 << 30, &info), -1);
    assert_int_equal(cn_model_layer_info(m, cn_model_num_layers(m) - 1, &info), 0);
    cn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_layers),
        cmocka_unit_test(test_model_file_names),
        cmocka_unit_test(test_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
