/* test_lr_schedule.c — cn_lr_at against the rates PyTorch's torch.optim.lr_scheduler gives each
 * optimiser step (tests/fixtures/lr_schedule.safetensors, written by tools/gen_fixtures.py):
 * constant, StepLR, CosineAnnealingLR and OneCycleLR, with and without a LinearLR warmup; and
 * cn_lr_schedule_check's refusals. It does not test a trainer using a schedule.
 * Tolerance: atol 1e-9, rtol 1e-6 (PyTorch computes in double; both sides rounded to float).
 * The fixture folder is tests/fixtures, or $CNNC_FIXTURES. */
#include "testutil.h"

#define MAX_STEPS 64

static cn_safetensors *fixture;

static const char *meta(int i, const char *key)
{
    char name[64];
    snprintf(name, sizeof name, "case%d.%s", i, key);
    const char *v = cn_safetensors_meta(fixture, name);
    if (!v) fail_msg("fixture metadata %s missing: rerun tools/gen_fixtures.py", name);
    return v ? v : "";
}

static cn_lr_kind kind_of(const char *name)
{
    static const char *const names[] = {"constant", "step", "cosine", "onecycle"};
    for (int k = 0; k < 4; k++)
        if (strcmp(name, names[k]) == 0) return (cn_lr_kind)k;
    fail_msg("unknown schedule kind %s in the fixture", name);
    return CN_LR_CONSTANT;
}

static void expect_case(int i)
{
    cn_lr_schedule s = {.kind = kind_of(meta(i, "kind")), .warmup_steps = atol(meta(i, "warmup")),
                        .step_size = atol(meta(i, "step_size")),
                        .gamma = strtof(meta(i, "gamma"), NULL),
                        .total_steps = atol(meta(i, "total"))};
    float base = strtof(meta(i, "base"), NULL), want[MAX_STEPS], got[MAX_STEPS];
    cn_error err = {{0}};
    if (cn_lr_schedule_check(&s, &err) != 0) fail_msg("case %d: %s", i, err.msg);
    char name[32];
    snprintf(name, sizeof name, "case%d.lr", i);
    const cn_tensor_ref *t = cn_safetensors_get(fixture, name);
    assert_non_null(t);
    assert_int_equal(t->dtype, CN_F32);
    size_t n = (size_t)t->shape[0];
    assert_in_range(n, 2, MAX_STEPS);
    memcpy(want, t->data, n * sizeof *want);
    for (size_t k = 0; k < n; k++) got[k] = cn_lr_at(&s, base, (long)k);
    snprintf(name, sizeof name, "case%d (%s)", i, meta(i, "kind"));
    tu_expect_close(name, got, want, n, 1e-9, 1e-6);
}

static void test_rates_match_pytorch(void **state)
{
    (void)state;
    int cases = atoi(cn_safetensors_meta(fixture, "cases"));
    assert_in_range(cases, 4, 100);
    for (int i = 0; i < cases; i++) expect_case(i);
}

static void expect_refused(cn_lr_schedule s, const char *what)
{
    cn_error err = {{0}};
    assert_int_equal(cn_lr_schedule_check(&s, &err), -1);
    if (!strstr(err.msg, what)) fail_msg("expected \"%s\", got \"%s\"", what, err.msg);
}

static void test_check_refuses_bad_schedules(void **state)
{
    (void)state;
    expect_refused((cn_lr_schedule){.kind = (cn_lr_kind)7}, "unknown kind 7");
    expect_refused((cn_lr_schedule){.kind = CN_LR_STEP, .step_size = 0, .gamma = 0.1f},
                   "step size >= 1");
    expect_refused((cn_lr_schedule){.kind = CN_LR_STEP, .step_size = 2, .gamma = 0},
                   "gamma > 0");
    expect_refused((cn_lr_schedule){.kind = CN_LR_COSINE, .warmup_steps = 5, .total_steps = 6},
                   "cosine needs at least 2 steps after the warmup");
    expect_refused((cn_lr_schedule){.kind = CN_LR_CONSTANT, .warmup_steps = -1},
                   "warmup steps below 0");
    expect_refused((cn_lr_schedule){.kind = CN_LR_CONSTANT, .warmup_start = 2},
                   "warmup start factor");
    cn_error err = {{0}};
    assert_int_equal(cn_lr_schedule_check(&(cn_lr_schedule){.kind = CN_LR_CONSTANT}, &err), 0);
}

/* OneCycleLR past its last step keeps its last rate; a constant rate with no warmup is base. */
static void test_ends(void **state)
{
    (void)state;
    cn_lr_schedule one = {.kind = CN_LR_ONECYCLE, .total_steps = 10};
    assert_true(cn_lr_at(&one, 0.1f, 9) == cn_lr_at(&one, 0.1f, 50));
    assert_true(cn_lr_at(&one, 0.1f, 9) < 1e-5f);
    cn_lr_schedule flat = {.kind = CN_LR_CONSTANT};
    assert_true(cn_lr_at(&flat, 0.1f, 0) == 0.1f && cn_lr_at(&flat, 0.1f, 1000) == 0.1f);
}

static int load_fixture(void **state)
{
    (void)state;
    fixture = tu_read_fixture("lr_schedule.safetensors");
    return fixture ? 0 : -1;
}

static int free_fixture(void **state)
{
    (void)state;
    cn_safetensors_free(fixture);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rates_match_pytorch),
        cmocka_unit_test(test_check_refuses_bad_schedules),
        cmocka_unit_test(test_ends),
    };
    return cmocka_run_group_tests(tests, load_fixture, free_fixture);
}
