/* test_optimizers.c — the optimisers' update rules (src/train/optimizer.c) against torch.optim:
 * SGD with momentum, with Nesterov momentum and with weight decay, AdamW with and without
 * weight decay, each over the fixed gradients of tests/fixtures/optimizers.safetensors
 * (tools/gen_optimizer_fixtures.py), step after step as the trainer drives them (candidates,
 * then kept); and that cn_trainer_set_learning_rate changes the rate of the next step. The
 * trainer's replicas and threads are test_trainer.c's business. */
#include "testutil.h"

#include "train/optimizer.h"

#define FIXTURE "optimizers.safetensors"
enum { N = 17, STEPS = 5 };

static float meta_float(const cn_safetensors *f, const char *name, const char *key)
{
    char full[96];
    snprintf(full, sizeof full, "%s.%s", name, key);
    const char *v = cn_safetensors_meta(f, full);
    return v ? strtof(v, NULL) : 0.0f;
}

static cn_train_config case_config(const cn_safetensors *f, const char *name)
{
    char key[96];
    snprintf(key, sizeof key, "%s.optimizer", name);
    cn_train_config cfg = {.batch_size = 1, .num_replicas = 1, .threads = 1, .seed = 1};
    assert_int_equal(cn_optimizer_from_name(cn_safetensors_meta(f, key), &cfg.optimizer), 0);
    cfg.learning_rate = meta_float(f, name, "lr");
    cfg.momentum = meta_float(f, name, "momentum");
    cfg.nesterov = (int)meta_float(f, name, "nesterov");
    cfg.weight_decay = meta_float(f, name, "weight_decay");
    cfg.beta1 = meta_float(f, name, "beta1");
    cfg.beta2 = meta_float(f, name, "beta2");
    cfg.eps = meta_float(f, name, "eps");
    return cfg;
}

static void copy_tensor(const cn_safetensors *f, const char *name, float *out, size_t n)
{
    const cn_tensor_ref *t = cn_safetensors_get(f, name);
    assert_non_null(t);
    assert_int_equal(tu_ref_bytes(t), n * sizeof *out);
    memcpy(out, t->data, n * sizeof *out);
}

/* Runs one case's steps as the trainer does and compares each step's parameters. */
static void check_case(const char *name)
{
    cn_safetensors *f = tu_read_fixture(FIXTURE);
    assert_non_null(f);
    cn_train_config cfg = case_config(f, name);
    char key[96];
    snprintf(key, sizeof key, "%s.params", name);
    float params[N], grads[STEPS][N], want[STEPS][N], state[2 * N] = {0};
    float grad[N], next_state2[N], next[N];
    copy_tensor(f, "params", params, N);
    copy_tensor(f, "grads", &grads[0][0], STEPS * N);
    copy_tensor(f, key, &want[0][0], STEPS * N);
    int adamw = cfg.optimizer == CN_OPTIMIZER_ADAMW;
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        cn_optim_rule rule;
        cn_optim_rule_init(&rule, &cfg, cfg.learning_rate, s + 1);
        memcpy(grad, grads[s], sizeof grad);
        cn_optim_buffers b = {params, grad, state, adamw ? state + N : NULL,
                              adamw ? next_state2 : NULL, next};
        cn_optimizer_step(&rule, &b, N);
        memcpy(state, grad, sizeof grad);
        if (adamw) memcpy(state + N, next_state2, sizeof next_state2);
        for (int j = 0; j < N; j++) {
            /* relative to the larger of the weight before and after: a step that nearly
             * cancels a weight leaves only the rounding of the terms */
            double scale = fmax(fmax(fabs(want[s][j]), fabs(params[j])), 1e-3);
            double d = fabs((double)next[j] - want[s][j]) / scale;
            if (d > worst) worst = d;
            if (!(d <= 1e-6))
                fail_msg("%s step %d [%d]: %.9g, PyTorch %.9g", name, s + 1, j,
                         (double)next[j], (double)want[s][j]);
        }
        memcpy(params, next, sizeof next);
    }
    printf("%s: worst relative difference %.3g over %d steps\n", name, worst, STEPS);
    cn_safetensors_free(f);
}

static void test_sgd_momentum(void **state) { (void)state; check_case("sgd_momentum"); }
static void test_sgd_nesterov(void **state) { (void)state; check_case("sgd_nesterov"); }
static void test_sgd_weight_decay(void **state) { (void)state; check_case("sgd_weight_decay"); }
static void test_adamw(void **state) { (void)state; check_case("adamw"); }
static void test_adamw_weight_decay(void **state) { (void)state; check_case("adamw_weight_decay"); }

/* ------------------------------------------------------------------ the trainer's rate */

enum { B = 4, R = 2 };

/* The weights after one step on fixed random data from a trainer made with rate `made` and
 * set to rate `set` (0: left alone) before it. */
static float *weights_after_step(float made, float set, cn_optimizer opt, size_t *n)
{
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    cn_model_init(m, 5);
    cn_train_config cfg = {.batch_size = B, .num_replicas = R, .threads = 1,
                           .learning_rate = made, .momentum = 0.5f, .seed = 5, .optimizer = opt};
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    if (!t) fail_msg("%s", err.msg);
    if (set > 0) assert_int_equal(cn_trainer_set_learning_rate(t, set, &err), 0);
    uint8_t images[R * B * 784], labels[R * B];
    cn_rng rng;
    cn_rng_seed(&rng, 17);
    for (size_t i = 0; i < sizeof images; i++) images[i] = (uint8_t)cn_rng_below(&rng, 256);
    for (size_t i = 0; i < sizeof labels; i++) labels[i] = (uint8_t)cn_rng_below(&rng, 10);
    float loss;
    if (cn_trainer_step(t, images, labels, &loss, NULL, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(cn_trainer_optimizer_steps(t), 1);
    *n = cn_model_num_params(m);
    float *w = malloc(*n * sizeof *w);
    assert_non_null(w);
    memcpy(w, cn_model_params(m), *n * sizeof *w);
    cn_trainer_free(t);
    cn_model_free(m);
    return w;
}

static void check_rate_change(cn_optimizer opt)
{
    size_t n;
    float *fast = weights_after_step(0.05f, 0, opt, &n);
    float *changed = weights_after_step(0.01f, 0.05f, opt, &n);
    float *slow = weights_after_step(0.01f, 0, opt, &n);
    assert_memory_equal(changed, fast, n * sizeof *fast); /* the new rate, bit for bit */
    assert_memory_not_equal(changed, slow, n * sizeof *slow);
    free(fast), free(changed), free(slow);
}

static void test_set_learning_rate_takes_effect(void **state)
{
    (void)state;
    check_rate_change(CN_OPTIMIZER_SGD);
    check_rate_change(CN_OPTIMIZER_ADAMW);
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    cn_train_config cfg = {.batch_size = B, .num_replicas = R, .threads = 1,
                           .learning_rate = 0.01f, .seed = 5};
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    assert_non_null(t);
    assert_int_equal(cn_trainer_set_learning_rate(t, -1.0f, &err), -1);
    assert_non_null(strstr(err.msg, "learning rate must be a positive number"));
    cn_trainer_free(t);
    cn_model_free(m);
}

static void expect_refused(cn_train_config cfg, const char *message)
{
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    assert_null(t);
    if (!strstr(err.msg, message)) fail_msg("message '%s' lacks '%s'", err.msg, message);
    cn_model_free(m);
}

static void test_bad_settings_refused(void **state)
{
    (void)state;
    cn_train_config ok = {.batch_size = B, .num_replicas = R, .threads = 1,
                          .learning_rate = 0.01f, .momentum = 0.5f, .seed = 5};
    cn_train_config c = ok;
    c.optimizer = CN_OPTIMIZER_COUNT;
    expect_refused(c, "is not one of sgd, adamw");
    c = ok, c.nesterov = 1, c.momentum = 0;
    expect_refused(c, "needs sgd with a momentum above 0");
    c = ok, c.nesterov = 1, c.optimizer = CN_OPTIMIZER_ADAMW;
    expect_refused(c, "needs sgd with a momentum above 0");
    c = ok, c.weight_decay = -0.1f;
    expect_refused(c, "weight decay must be a number >= 0");
    c = ok, c.optimizer = CN_OPTIMIZER_ADAMW, c.beta2 = 1.0f;
    expect_refused(c, "betas must be in [0, 1)");
    cn_optimizer o;
    assert_int_equal(cn_optimizer_from_name("adamw", &o), 0);
    assert_int_equal(o, CN_OPTIMIZER_ADAMW);
    assert_int_equal(cn_optimizer_from_name("adam", &o), -1);
    assert_string_equal(cn_optimizer_name(CN_OPTIMIZER_SGD), "sgd");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_momentum),
        cmocka_unit_test(test_sgd_nesterov),
        cmocka_unit_test(test_sgd_weight_decay),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_adamw_weight_decay),
        cmocka_unit_test(test_set_learning_rate_takes_effect),
        cmocka_unit_test(test_bad_settings_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
