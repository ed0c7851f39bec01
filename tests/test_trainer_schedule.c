/* test_trainer_schedule.c — the learning-rate schedule inside the trainer: a trainer given a
 * schedule takes the same steps, to the bit, as one at a constant rate that is set before every
 * step to cn_lr_at of that step (in epochs, in a run started mid-epoch and in direct steps),
 * and each step's report gives that rate. The schedules' rates themselves are test_lr_schedule's
 * business. */
#include "testutil.h"

#define N 256 /* with R = 2, B = 16: 8 steps an epoch */
#define R 2
#define B 16
#define STEPS 8
#define EPOCHS 2
#define BASE 0.02f

typedef struct {
    cn_dataset train;
    cn_model *model;
    cn_trainer *trainer;
    float rates[EPOCHS * STEPS]; /* the reports' rates, by step of the run */
} rig;

static cn_train_config config(cn_optimizer o, cn_lr_schedule s)
{
    return (cn_train_config){.batch_size = B, .num_replicas = R, .threads = 2,
                             .learning_rate = BASE, .momentum = 0.5f, .seed = 5,
                             .optimizer = o, .lr_schedule = s};
}

static void rig_open(rig *g, cn_train_config cfg)
{
    cn_error err = {{0}};
    cn_rng rng;
    cn_rng_seed(&rng, 9);
    memset(g, 0, sizeof *g);
    cn_dataset *ds = &g->train;
    ds->count = N, ds->channels = 1, ds->classes = 10, ds->height = ds->width = 28;
    ds->pixels = malloc((size_t)N * 784);
    ds->labels = malloc(N);
    assert_non_null(ds->pixels);
    assert_non_null(ds->labels);
    for (size_t i = 0; i < (size_t)N * 784; i++) ds->pixels[i] = (uint8_t)cn_rng_below(&rng, 256);
    for (int i = 0; i < N; i++) ds->labels[i] = (uint8_t)cn_rng_below(&rng, 10);
    g->model = cn_model_fashion_mnist(&err);
    assert_non_null(g->model);
    cn_model_init(g->model, 5);
    g->trainer = cn_trainer_create(g->model, &cfg, &err);
    if (!g->trainer) fail_msg("%s", err.msg);
}

static void rig_close(rig *g)
{
    cn_trainer_free(g->trainer);
    cn_model_free(g->model);
    cn_dataset_free(&g->train);
}

static void keep_rate(void *ctx, const cn_step_report *r)
{
    rig *g = ctx;
    g->rates[(r->epoch - 1) * r->steps + r->step] = r->learning_rate;
}

static int stop_now(void *ctx)
{
    (void)ctx;
    return 1;
}

/* Runs pos->epoch from pos->step: to its end, or one step (one non-zero). */
static void run(rig *g, cn_epoch_position *pos, int one)
{
    cn_error err = {{0}};
    if (cn_trainer_run_epoch(g->trainer, &g->train, pos, keep_rate, one ? stop_now : NULL, g,
                             NULL, &err) != 0)
        fail_msg("%s", err.msg);
}

static void assert_same_weights(rig *a, rig *b)
{
    assert_memory_equal(cn_model_params(a->model), cn_model_params(b->model),
                        cn_model_num_params(a->model) * sizeof(float));
}

/* The schedule's trainer against a constant one driven step by step; the first starts its
 * second epoch at step 3, as a resumed run does. */
static void check_schedule(cn_optimizer o, cn_lr_schedule s)
{
    rig scheduled, driven, flat;
    rig_open(&scheduled, config(o, s));
    rig_open(&driven, config(o, (cn_lr_schedule){0}));
    rig_open(&flat, config(o, (cn_lr_schedule){0}));
    cn_error err = {{0}};
    for (int e = 1; e <= EPOCHS; e++) {
        cn_epoch_position p = {.epoch = e};
        if (e == 2) {
            for (int k = 0; k < 3; k++) run(&scheduled, &p, 1);
            assert_int_equal(p.step, 3);
        }
        run(&scheduled, &p, 0);
        p = (cn_epoch_position){.epoch = e};
        run(&flat, &p, 0);
        for (p = (cn_epoch_position){.epoch = e}; p.step < STEPS;) {
            float rate = cn_lr_at(&s, BASE, (long)(e - 1) * STEPS + p.step);
            if (cn_trainer_set_learning_rate(driven.trainer, rate, &err)) fail_msg("%s", err.msg);
            run(&driven, &p, 1);
        }
    }
    assert_same_weights(&scheduled, &driven);
    for (int n = 0; n < EPOCHS * STEPS; n++) {
        assert_true(scheduled.rates[n] == cn_lr_at(&s, BASE, n));
        assert_true(flat.rates[n] == BASE);
    }
    assert_memory_not_equal(cn_model_params(scheduled.model), cn_model_params(flat.model),
                            cn_model_num_params(flat.model) * sizeof(float));
    rig_close(&scheduled), rig_close(&driven), rig_close(&flat);
}

static void test_step_schedule_with_warmup_under_sgd(void **state)
{
    (void)state;
    check_schedule(CN_OPTIMIZER_SGD, (cn_lr_schedule){.kind = CN_LR_STEP, .warmup_steps = 3,
                                                      .step_size = 5, .gamma = 0.5f});
}

static void test_cosine_schedule_with_warmup_under_adamw(void **state)
{
    (void)state;
    check_schedule(CN_OPTIMIZER_ADAMW, (cn_lr_schedule){.kind = CN_LR_COSINE, .warmup_steps = 4,
                                                        .total_steps = EPOCHS * STEPS});
}

/* cn_trainer_step counts its own steps: the k-th call runs at the schedule's step k. */
static void test_direct_steps_follow_their_count(void **state)
{
    (void)state;
    cn_lr_schedule s = {.kind = CN_LR_ONECYCLE, .total_steps = 6};
    rig scheduled, driven;
    rig_open(&scheduled, config(CN_OPTIMIZER_SGD, s));
    rig_open(&driven, config(CN_OPTIMIZER_SGD, (cn_lr_schedule){0}));
    cn_error err = {{0}};
    for (int k = 0; k < 4; k++) {
        const uint8_t *images = scheduled.train.pixels + (size_t)k * R * B * 784;
        const uint8_t *labels = scheduled.train.labels + (size_t)k * R * B;
        float la = 0, lb = 1;
        if (cn_trainer_set_learning_rate(driven.trainer, cn_lr_at(&s, BASE, k), &err) ||
            cn_trainer_step(scheduled.trainer, images, labels, &la, NULL, &err) ||
            cn_trainer_step(driven.trainer, images, labels, &lb, NULL, &err))
            fail_msg("%s", err.msg);
        assert_true(la == lb);
    }
    assert_same_weights(&scheduled, &driven);
    rig_close(&scheduled), rig_close(&driven);
}

/* A schedule out of range is refused when the trainer is made. */
static void test_bad_schedule_is_refused(void **state)
{
    (void)state;
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    assert_non_null(m);
    cn_train_config cfg = config(CN_OPTIMIZER_SGD, (cn_lr_schedule){.kind = CN_LR_COSINE,
                                                                    .total_steps = 1});
    assert_null(cn_trainer_create(m, &cfg, &err));
    assert_non_null(strstr(err.msg, "cosine needs at least 2 steps after the warmup"));
    cn_model_free(m);
}

int main(void)
{
    if (tu_isa_unavailable()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_schedule_with_warmup_under_sgd),
        cmocka_unit_test(test_cosine_schedule_with_warmup_under_adamw),
        cmocka_unit_test(test_direct_steps_follow_their_count),
        cmocka_unit_test(test_bad_schedule_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
