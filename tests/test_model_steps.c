/* test_model_steps.c — three data-parallel SGD steps of the seed's model (2 replicas x 16
 * samples, lr 0.01 per replica, momentum 0.5) against PyTorch (tests/fixtures/
 * model_steps.safetensors, written by tools/gen_fixtures.py): each step's loss and the final
 * state_dict (weights, BatchNorm running statistics, num_batches_tracked). Then the same run
 * with 2 threads must give bit-identical results. The same again with label smoothing 0.1
 * (model_steps_smooth.safetensors, its "label_smoothing" in __metadata__).
 * Also the model's flop counts, against a count by hand.
 * It does not test single layers (test_layers.c) or the trainer's epoch loop and evaluation.
 *
 * Tolerances (|got - want| <= atol + rtol * |want|, elementwise):
 *   loss per step             atol 1e-6, rtol 1e-6   (seen: 2.4e-7 absolute)
 *   final parameters and      atol 1e-6, rtol 1e-5   (seen: 6e-8 absolute; float sums in another
 *   running statistics                                order than PyTorch's)
 *   num_batches_tracked       exact
 * The fixture folder is tests/fixtures, or $CNNC_FIXTURES. */
#include "testutil.h"

#define STEPS 3
#define REPLICAS 2
#define BATCH 16
#define PIXELS (28 * 28)
#define MAX_TENSORS 32
#define LOSS_ATOL 1e-6
#define LOSS_RTOL 1e-6
#define STATE_ATOL 1e-6
#define STATE_RTOL 1e-5

static cn_safetensors *fixture;
static float label_smoothing; /* the fixture's; 0 when it does not say */

typedef struct {
    cn_model *model;
    cn_tensor_ref refs[MAX_TENSORS];
    int num_refs;
    float loss[STEPS];
} run_result;

static const cn_tensor_ref *fx_get(const char *name)
{
    const cn_tensor_ref *t = cn_safetensors_get(fixture, name);
    if (!t) fail_msg("fixture tensor %s missing: rerun tools/gen_fixtures.py", name);
    return t;
}

static size_t numel(const cn_tensor_ref *t)
{
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

static size_t elem_size(const cn_tensor_ref *t) { return t->dtype == CN_I64 ? 8 : 4; }

/* Asserts that the fixture tensor has the model tensor's dtype and shape. */
static void expect_same_shape(const cn_tensor_ref *model, const cn_tensor_ref *fx)
{
    if (model->dtype != fx->dtype || model->ndim != fx->ndim)
        fail_msg("%s: dtype or rank differs from the fixture", model->name);
    for (int d = 0; d < model->ndim; d++)
        if (model->shape[d] != fx->shape[d])
            fail_msg("%s: dimension %d is %lld, fixture %lld", model->name, d,
                     (long long)model->shape[d], (long long)fx->shape[d]);
}

static const cn_tensor_ref *fx_state(const char *prefix, const cn_tensor_ref *model)
{
    char name[128];
    snprintf(name, sizeof name, "%s%s", prefix, model->name);
    const cn_tensor_ref *fx = fx_get(name);
    expect_same_shape(model, fx);
    return fx;
}

/* A fresh model holding the fixture's init.* state_dict. */
static void load_initial_model(run_result *r)
{
    cn_error err = {{0}};
    r->model = cn_model_fashion_mnist(&err);
    if (!r->model) fail_msg("cn_model_fashion_mnist: %s", err.msg);
    r->num_refs = cn_model_tensors(r->model, r->refs, MAX_TENSORS);
    assert_in_range(r->num_refs, 1, MAX_TENSORS);
    for (int i = 0; i < r->num_refs; i++) {
        const cn_tensor_ref *fx = fx_state("init.", &r->refs[i]);
        memcpy(r->refs[i].data, fx->data, numel(fx) * elem_size(fx));
    }
}

/* The fixture's images of one step as raw pixels, labels as bytes. */
static void step_data(int step, uint8_t *images, uint8_t *labels)
{
    const cn_tensor_ref *ti = fx_get("steps.images"), *tl = fx_get("steps.labels");
    assert_int_equal(numel(ti), (size_t)STEPS * REPLICAS * BATCH * PIXELS);
    assert_int_equal(numel(tl), (size_t)STEPS * REPLICAS * BATCH);
    size_t n = (size_t)REPLICAS * BATCH;
    for (size_t i = 0; i < n * PIXELS; i++) {
        float v;
        memcpy(&v, (const char *)ti->data + ((size_t)step * n * PIXELS + i) * 4, 4);
        assert_true(v >= 0 && v <= 255 && v == (float)(int)v);
        images[i] = (uint8_t)v;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        memcpy(&v, (const char *)tl->data + ((size_t)step * n + i) * 8, 8);
        assert_in_range(v, 0, 9);
        labels[i] = (uint8_t)v;
    }
}

static void train_steps(run_result *r, int threads)
{
    cn_train_config cfg = {.batch_size = BATCH, .num_replicas = REPLICAS, .threads = threads,
                           .learning_rate = 0.01f, .momentum = 0.5f, .seed = 1,
                           .label_smoothing = label_smoothing};
    cn_error err = {{0}};
    cn_trainer *t = cn_trainer_create(r->model, &cfg, &err);
    if (!t) fail_msg("cn_trainer_create: %s", err.msg);
    static uint8_t images[REPLICAS * BATCH * PIXELS], labels[REPLICAS * BATCH];
    for (int s = 0; s < STEPS; s++) {
        step_data(s, images, labels);
        if (cn_trainer_step(t, images, labels, &r->loss[s], NULL, &err) != 0)
            fail_msg("cn_trainer_step %d: %s", s, err.msg);
    }
    cn_trainer_free(t);
}

static void run(run_result *r, int threads)
{
    load_initial_model(r);
    train_steps(r, threads);
}

static void expect_losses(const run_result *r)
{
    float want[STEPS];
    const cn_tensor_ref *t = fx_get("steps.loss");
    assert_int_equal(numel(t), STEPS);
    memcpy(want, t->data, sizeof want);
    tu_expect_close("steps.loss", r->loss, want, STEPS, LOSS_ATOL, LOSS_RTOL);
}

static void expect_final_tensor(const cn_tensor_ref *model)
{
    const cn_tensor_ref *fx = fx_state("final.", model);
    size_t n = numel(fx);
    if (fx->dtype == CN_I64) {
        if (memcmp(model->data, fx->data, n * 8) != 0)
            fail_msg("%s differs from the fixture", model->name);
        return;
    }
    float *want = malloc(n * sizeof *want);
    assert_non_null(want);
    memcpy(want, fx->data, n * sizeof *want);
    tu_expect_close(model->name, model->data, want, n, STATE_ATOL, STATE_RTOL);
    free(want);
}

static void test_three_steps_match_pytorch(void **state)
{
    (void)state;
    run_result r;
    run(&r, 1);
    expect_losses(&r);
    for (int i = 0; i < r.num_refs; i++) expect_final_tensor(&r.refs[i]);
    cn_model_free(r.model);
}

static void test_threads_do_not_change_results(void **state)
{
    (void)state;
    run_result one, two;
    run(&one, 1);
    run(&two, 2);
    assert_int_equal(one.num_refs, two.num_refs);
    assert_memory_equal(one.loss, two.loss, sizeof one.loss);
    for (int i = 0; i < one.num_refs; i++) {
        const cn_tensor_ref *a = &one.refs[i], *b = &two.refs[i];
        assert_string_equal(a->name, b->name);
        if (memcmp(a->data, b->data, numel(a) * elem_size(a)) != 0)
            fail_msg("%s: 2 threads are not bit-identical to 1 thread", a->name);
    }
    cn_model_free(one.model);
    cn_model_free(two.model);
}

/* The seed's arithmetic, counted by hand: multiply-adds of conv1 (250 x 576), conv2 (5000 x
 * 64), fc1 (16000) and fc2 (500); backward twice the forward except for the first layer (no
 * input gradient); the computed count takes the two pool-fed convolutions' backward passes at a
 * quarter (2x2 windows). */
static void test_flop_counts(void **state)
{
    (void)state;
    cn_error err;
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    double conv1 = 250.0 * 576, conv2 = 5000.0 * 64, fc = 16000.0 + 500, fwd, bwd;
    cn_model_flops(m, &fwd, &bwd);
    assert_true(fwd == 2 * (conv1 + conv2 + fc));
    assert_true(bwd == 2 * (conv1 + 2 * conv2 + 2 * fc));
    cn_model_flops_computed(m, &fwd, &bwd);
    assert_true(fwd == 2 * (conv1 + conv2 + fc));
    assert_true(bwd == 2 * (conv1 / 4 + 2 * conv2 / 4 + 2 * fc));
    cn_model_free(m);
}

static int load_named(const char *name)
{
    fixture = tu_read_fixture(name);
    if (!fixture) return -1;
    const char *a = cn_safetensors_meta(fixture, "label_smoothing");
    label_smoothing = a ? strtof(a, NULL) : 0.0f;
    return 0;
}

static int load_fixture(void **state)
{
    (void)state;
    return load_named("model_steps.safetensors");
}

static int load_smooth_fixture(void **state)
{
    (void)state;
    if (load_named("model_steps_smooth.safetensors") != 0) return -1;
    return label_smoothing > 0 ? 0 : -1;
}

static int free_fixture(void **state)
{
    (void)state;
    cn_safetensors_free(fixture);
    return 0;
}

int main(void)
{
    if (tu_isa_unavailable()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_steps_match_pytorch),
        cmocka_unit_test(test_threads_do_not_change_results),
        cmocka_unit_test(test_flop_counts),
    };
    const struct CMUnitTest smooth[] = {
        cmocka_unit_test(test_three_steps_match_pytorch),
        cmocka_unit_test(test_threads_do_not_change_results),
    };
    int failed = cmocka_run_group_tests(tests, load_fixture, free_fixture);
    return failed + cmocka_run_group_tests(smooth, load_smooth_fixture, free_fixture);
}
