/* test_model_random.c — models drawn at random by tools/gen_fixtures.py (random_models:
 * convolutions of any kernel, stride and padding on 1-3 channels of odd sizes, BatchNorm, relus,
 * max and average pools and dropout in the orders models use, then flat layers; the last ones
 * wide enough for Winograd's algorithm), each checked three ways: (1) against PyTorch in
 * float64, which ran it on the same parameters and batch with the very dropout masks cnnc
 * draws: log-probabilities in evaluation and training, the gradient, BatchNorm's batch
 * statistics; (2) the executor's fused and made-a-sample-at-a-time passes against the same
 * model layer by layer (a dropout with p = 0 after every layer keeps every tensor in a buffer);
 * (3) a short training run on generated images, the same bits on 1 and 3 threads and as 2
 * processes (test_world.h's in-memory ranks), and on 1 and 3 threads with bf16's products too
 * where the CPU has them. The hand-written models of test_model_gradients.c and
 * test_model_steps.c pin particular paths; these find the combinations nobody wrote down, and
 * `make soak` (tests/soak.sh) runs this program on thousands more, drawn for the purpose.
 * (Finite differences, tried first, took pools and relus that switch within the step on these
 * tiny batches for wrong gradients, where PyTorch agreed with cnnc to 1e-7.) */
#include "testutil.h"

#include "test_world.h"

#include "kernels/winograd.h"
#include "layers/layer.h"
#include "model/executor.h"
#include "model/model.h"

#define BATCH 6     /* the fixture's batch */
#define TEXT_MAX 2048
/* Against PyTorch in float64: a value may be off by PT_RTOL of itself plus PT_SCALE of the
 * largest of its tensor (a few roundings of the sums it comes from). */
#define PT_RTOL 1e-4
#define PT_SCALE 1e-5

static cn_safetensors *fixture;

static int load_fixture(void **state)
{
    (void)state;
    fixture = tu_read_fixture("random_models.safetensors");
    const char *batch = fixture ? cn_safetensors_meta(fixture, "batch") : NULL;
    const char *count = fixture ? cn_safetensors_meta(fixture, "models") : NULL;
    return batch && count && atoi(batch) == BATCH && atoi(count) > 0 ? 0 : -1;
}

static int free_fixture(void **state)
{
    (void)state;
    cn_safetensors_free(fixture);
    return 0;
}

static int models(void) { return atoi(cn_safetensors_meta(fixture, "models")); }

/* Model k's text. */
static const char *model_text(int k)
{
    char key[32];
    snprintf(key, sizeof key, "model.%d", k);
    const char *text = cn_safetensors_meta(fixture, key);
    assert_non_null(text);
    return text;
}

/* Model k's tensor "k.what", which must hold n values of dtype. */
static const void *tensor(int k, const char *what, cn_dtype dtype, size_t n)
{
    char name[64];
    snprintf(name, sizeof name, "%d.%s", k, what);
    const cn_tensor_ref *t = cn_safetensors_get(fixture, name);
    if (!t) fail_msg("%s: missing from the fixture", name);
    size_t count = tu_ref_bytes(t) / (t->dtype == CN_I64 ? sizeof(int64_t) : sizeof(float));
    if (t->dtype != dtype || count != n) fail_msg("%s: %zu values, %zu expected", name, count, n);
    return t->data;
}

static const float *floats(int k, const char *what, size_t n)
{
    return tensor(k, what, CN_F32, n);
}

/* text with every dropout's p made 0 and, with spaced, a dropout with p = 0 after every layer
 * but the last (input and log_softmax have none after them): the same numbers, layer by layer. */
static void without_dropout(char *out, const char *text, int spaced)
{
    out[0] = '\0';
    const char *at = text;
    for (int n = 0; *at; n++) {
        const char *end = strchr(at, '\n');
        assert_non_null(end);
        size_t len = (size_t)(end - at);
        int drop = strncmp(at, "dropout", 7) == 0, last = strncmp(at, "log_softmax", 11) == 0;
        assert_true(strlen(out) + len + 32 < TEXT_MAX);
        if (drop)
            strcat(out, "dropout p=0\n");
        else
            strncat(out, at, len + 1);
        if (spaced && n > 0 && !last) strcat(out, "dropout p=0\n");
        at = end + 1;
    }
}

/* ------------------------------------------------------------------ running a model */

typedef struct {
    cn_model *m;
    cn_plan plan;
    cn_workspace w;
} net;

/* text with model k's parameters, batch and labels, in the step the fixture's masks are
 * drawn for. */
static net make_net(const char *text, int k)
{
    net n = {0};
    cn_error err = {{0}};
    n.m = cn_model_from_text(text, strlen(text), "random.model", &err);
    if (!n.m) fail_msg("%s\n%s", err.msg, text);
    cn_model_init(n.m, 1);
    assert_int_equal(cn_plan_init(&n.plan, n.m, BATCH, CN_PRECISION_FP32), 0);
    assert_int_equal(cn_workspace_init(&n.w, &n.plan), 0);
    memcpy(n.m->params, floats(k, "params", n.m->num_params), n.m->num_params * sizeof(float));
    size_t in = (size_t)BATCH * cn_model_input_size(n.m);
    memcpy(n.w.input, floats(k, "input", in), in * sizeof(float));
    const char *labels = tensor(k, "labels", CN_I64, BATCH);
    for (int b = 0; b < BATCH; b++) { /* a file's I64 data may lie off 8-byte boundaries */
        int64_t label;
        memcpy(&label, labels + b * sizeof label, sizeof label);
        n.w.labels[b] = (uint8_t)label;
    }
    unsigned seed = 0, epoch = 0, step = 0, replica = 0;
    assert_int_equal(sscanf(cn_safetensors_meta(fixture, "dropout_key"), "%u %u %u %u", &seed,
                            &epoch, &step, &replica), 4);
    n.w.key = (cn_step_key){seed, (int)epoch, (int)step, (int)replica};
    return n;
}

static void free_net(net *n)
{
    cn_workspace_free(&n->w);
    cn_plan_free(&n->plan);
    cn_model_free(n->m);
}

/* How many times the tolerances the fixture allows: 1, or the "tolerance_scale" of a soak's
 * fixture (`make soak`: models from a wider space, screened for conditioning rather than
 * chosen, where a bug shows as tens of times the tolerance or more). */
static double tolerance_scale(void)
{
    const char *scale = cn_safetensors_meta(fixture, "tolerance_scale");
    return scale && atof(scale) >= 1 ? atof(scale) : 1;
}

/* got and want agree within rtol of want plus scale of want's largest value (times the
 * fixture's tolerance scale). */
static void expect_near(const char *what, const float *got, const float *want, size_t n,
                        double rtol, double scale, const char *text)
{
    rtol *= tolerance_scale(), scale *= tolerance_scale();
    double largest = tu_largest_abs(want, n);
    double v = tu_max_violation(got, want, n, scale * largest, rtol);
    if (!(v <= 1)) {
        for (size_t i = 0; i < n; i++)
            if (!(fabs((double)got[i] - want[i]) <= scale * largest + rtol * fabs(want[i])))
                print_error("%s[%zu]: got %.9g, want %.9g\n", what, i, got[i], want[i]);
        fail_msg("%s: worst violation %.3g\n%s", what, v, text);
    }
}

/* (1) The model against what PyTorch computed. */
static void check_against_pytorch(int k)
{
    const char *text = model_text(k);
    net n = make_net(text, k);
    size_t out = (size_t)BATCH * cn_model_num_outputs(n.m);
    const float *logp = n.w.out[n.m->num_layers - 1];
    cn_forward(&n.plan, &n.w, BATCH, 0);
    expect_near("log-probabilities (evaluation)", logp, floats(k, "logp_eval", out), out, PT_RTOL,
                PT_SCALE, text);
    cn_forward(&n.plan, &n.w, BATCH, 1);
    expect_near("log-probabilities (training)", logp, floats(k, "logp", out), out, PT_RTOL,
                PT_SCALE, text);
    cn_backward(&n.plan, &n.w);
    expect_near("gradient", n.w.dparams, floats(k, "grad", n.m->num_params), n.m->num_params,
                PT_RTOL, PT_SCALE, text);
    expect_near("batch statistics", n.w.report, floats(k, "report", n.m->num_report),
                n.m->num_report, PT_RTOL, PT_SCALE, text);
    free_net(&n);
}

/* (2) The model's own passes against the same model layer by layer: the same numbers, within
 * PyTorch's tolerance (a convolution into a pool sums its gradients over the picks when fused,
 * densely, by Winograd's algorithm, when not: 0.73 of 1e-5 of a value plus 1e-6 of the largest
 * apart in one model). */
static void check_against_layers(int k)
{
    char plain[TEXT_MAX], spaced[TEXT_MAX];
    without_dropout(plain, model_text(k), 0);
    without_dropout(spaced, model_text(k), 1);
    net a = make_net(plain, k), b = make_net(spaced, k);
    for (int i = 0; i < b.m->num_layers; i++) assert_int_equal(cn_model_fusion(b.m, i, 0).layers, 0);
    size_t out = (size_t)BATCH * cn_model_num_outputs(a.m);
    for (int training = 0; training <= 1; training++) {
        cn_forward(&a.plan, &a.w, BATCH, training);
        cn_forward(&b.plan, &b.w, BATCH, training);
        expect_near("log-probabilities", a.w.out[a.m->num_layers - 1],
                    b.w.out[b.m->num_layers - 1], out, PT_RTOL, PT_SCALE, plain);
    }
    cn_backward(&a.plan, &a.w);
    cn_backward(&b.plan, &b.w);
    expect_near("gradient", a.w.dparams, b.w.dparams, a.m->num_params, PT_RTOL, PT_SCALE, plain);
    assert_int_equal(a.m->num_report, b.m->num_report);
    expect_near("batch statistics", a.w.report, b.w.report, a.m->num_report, PT_RTOL, PT_SCALE,
                plain);
    free_net(&a);
    free_net(&b);
}

/* count generated images of the input shape of model text, labels 0..classes-1. */
static cn_dataset random_set(const char *text, int count, uint64_t seed)
{
    cn_error err = {{0}};
    cn_model *m = cn_model_from_text(text, strlen(text), "random.model", &err);
    assert_non_null(m);
    int classes = cn_model_num_outputs(m);
    size_t size = cn_model_input_size(m);
    cn_dataset ds = {.count = count, .channels = m->in_c, .height = m->in_h, .width = m->in_w,
                     .classes = classes, .pixels = malloc((size_t)count * size),
                     .labels = malloc((size_t)count)};
    cn_model_free(m);
    assert_non_null(ds.pixels);
    assert_non_null(ds.labels);
    cn_rng rng;
    cn_rng_seed(&rng, seed);
    for (int i = 0; i < count; i++) {
        ds.labels[i] = (uint8_t)cn_rng_below(&rng, (uint32_t)classes);
        for (size_t p = 0; p < size; p++)
            ds.pixels[(size_t)i * size + p] = (uint8_t)cn_rng_below(&rng, 256);
    }
    return ds;
}

/* A short training run of a fresh model: two epochs of 4 replicas x 6 on threads threads, as
 * one process (comm NULL) or one rank of several; state gets the parameters then the running
 * statistics (malloc'd), or rc -1 and err. Runs on a rank's thread: no assertions here. */
typedef struct {
    const char *text;
    const cn_dataset *ds;
    int threads;
    cn_precision precision;
    uint64_t seed;
    const cn_comm *comm;
    float *state;
    size_t count;
    int rc;
    cn_error err;
} short_run;

static void *train_short(void *arg)
{
    short_run *r = arg;
    cn_error *err = &r->err;
    cn_trainer *t = NULL;
    cn_model *m = cn_model_from_text(r->text, strlen(r->text), "random.model", err);
    if (m) {
        cn_model_init(m, r->seed);
        cn_train_config cfg = {.batch_size = 6, .num_replicas = 4, .threads = r->threads,
                               .learning_rate = 0.02f, .momentum = 0.5f, .seed = r->seed,
                               .precision = r->precision};
        t = cn_trainer_create_distributed(m, &cfg, r->comm, err);
    }
    r->rc = t ? 0 : -1;
    for (int e = 1; e <= 2 && r->rc == 0; e++) {
        float loss;
        r->rc = cn_trainer_epoch(t, r->ds, e, NULL, NULL, &loss, NULL, err);
    }
    r->count = r->rc == 0 ? m->num_params + m->num_running : 0;
    if (r->rc == 0 && !(r->state = malloc(r->count * sizeof *r->state))) r->rc = -1;
    if (r->rc == 0) {
        memcpy(r->state, m->params, m->num_params * sizeof *r->state);
        memcpy(r->state + m->num_params, m->running, m->num_running * sizeof *r->state);
    }
    cn_trainer_free(t);
    cn_model_free(m);
    return NULL;
}

/* run's state equals one's, bit for bit. */
static void expect_same_state(const short_run *one, const short_run *run, const char *what)
{
    if (run->rc != 0) fail_msg("%s: %s\n%s", what, run->err.msg, run->text);
    assert_int_equal(one->count, run->count);
    if (memcmp(one->state, run->state, one->count * sizeof *one->state) != 0)
        fail_msg("%s trained other weights than one thread\n%s", what, run->text);
}

/* (3) The same bits on 1 and 3 threads, and (with fp32) as 2 processes (the in-memory
 * communicator of test_world.h, a rank on 1 thread and one on 2), with the model's dropout. */
static void check_threads(int k, cn_precision precision)
{
    const char *text = model_text(k);
    uint64_t seed = 100 + (uint64_t)k;
    cn_dataset ds = random_set(text, 60, seed);
    short_run one = {.text = text, .ds = &ds, .threads = 1, .precision = precision, .seed = seed};
    short_run three = one;
    three.threads = 3;
    train_short(&one);
    if (one.rc != 0) fail_msg("%s\n%s", one.err.msg, text);
    train_short(&three);
    expect_same_state(&one, &three, "3 threads");
    free(three.state);
    if (precision == CN_PRECISION_FP32) {
        world w;
        rank_ctx ctx[MAX_RANKS];
        short_run ranks[2];
        world_init(&w, 2, ctx);
        for (int p = 0; p < 2; p++) {
            ranks[p] = one;
            ranks[p].threads = 1 + p, ranks[p].comm = &ctx[p].comm, ranks[p].state = NULL;
        }
        run_ranks(2, train_short, ranks, sizeof ranks[0]);
        world_finish(&w);
        for (int p = 0; p < 2; p++) {
            expect_same_state(&one, &ranks[p], "2 processes");
            free(ranks[p].state);
        }
    }
    free(one.state);
    cn_dataset_free(&ds);
}

/* ------------------------------------------------------------------ the tests */

/* The fixture's models cover what they are meant to: every layer type, BatchNorm with a pool
 * inside its passes, a relu into a pool, strides, padding, dropout, layers without bias, and
 * convolutions that Winograd's algorithm runs. */
static void test_models_cover_the_layers(void **state)
{
    (void)state;
    static const char *const words[] = {"stride=2", "padding=1", "padding=2", "maxpool2d",
                                        "avgpool2d", "batchnorm2d\nrelu\nmaxpool2d",
                                        "relu\nmaxpool2d", "batchnorm1d", "global_avgpool",
                                        "dropout p=0.25", "relu\nbatchnorm2d", "bias=0"};
    assert_true(models() >= 16);
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        int found = 0;
        for (int k = 0; k < models() && !found; k++) found = strstr(model_text(k), words[w]) != NULL;
        if (!found) fail_msg("no model of the fixture has \"%s\"", words[w]);
    }
    int winograd = 0; /* convolutions that go through Winograd's algorithm */
    for (int k = 0; k < models(); k++) {
        cn_error err = {{0}};
        const char *text = model_text(k);
        cn_model *m = cn_model_from_text(text, strlen(text), "random.model", &err);
        assert_non_null(m);
        for (int i = 0; i < m->num_layers; i++) {
            const cn_layer *l = &m->layers[i];
            if (l->type != &cn_conv2d_type) continue;
            cn_conv_shape cs = cn_conv_shape_of(l->in.c, l->in.h, l->in.w, l->out.c,
                                                l->args.kernel, l->args.stride, l->args.padding);
            winograd += cn_winograd_fits(&cs);
        }
        cn_model_free(m);
    }
    assert_true(winograd >= 4);
}

static void test_models_match_pytorch(void **state)
{
    (void)state;
    for (int k = 0; k < models(); k++) check_against_pytorch(k);
}

static void test_fused_passes_match_layer_by_layer(void **state)
{
    (void)state;
    for (int k = 0; k < models(); k++) check_against_layers(k);
}

static void test_weights_bit_identical_across_threads_and_processes(void **state)
{
    (void)state;
    for (int k = 0; k < models(); k++) check_threads(k, CN_PRECISION_FP32);
}

/* bf16's products, where this CPU has them: the same bits on 1 and 3 threads. (Not against
 * PyTorch: which products are bf16 depends on the plan and the CPU, and a gradient summed with
 * cancellation moved by 11% in one model, as much as PyTorch with the same operands rounded.) */
static void test_bf16_weights_bit_identical_across_threads(void **state)
{
    (void)state;
    if (!cn_precision_supported(CN_PRECISION_BF16)) {
        print_message("bf16 products: not on this CPU, skipped\n");
        return;
    }
    for (int k = 0; k < models(); k++) check_threads(k, CN_PRECISION_BF16);
}

/* Values that are equal meet any tolerance, 0 included: a model whose BatchNorm channels are
 * all zero after a relu reports batch statistics of zeros, 0 off from PyTorch's with a
 * tolerance of 0 (which tu_max_violation took for a NaN, hence a failure, found by `make
 * soak`); values that differ where the tolerance is 0, or a NaN, still fail. */
static void test_equal_values_meet_a_tolerance_of_zero(void **state)
{
    (void)state;
    const float zeros[3] = {0}, tiny[3] = {0, 1e-30f, 0}, nan[3] = {0, NAN, 0};
    assert_true(tu_max_violation(zeros, zeros, 3, 0, 0) == 0);
    assert_true(tu_max_violation(tiny, zeros, 3, 0, 0) > 1);
    assert_true(tu_max_violation(nan, nan, 3, 1, 1) > 1);
}

int main(void)
{
    if (tu_isa_unavailable()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_values_meet_a_tolerance_of_zero),
        cmocka_unit_test(test_models_cover_the_layers),
        cmocka_unit_test(test_models_match_pytorch),
        cmocka_unit_test(test_fused_passes_match_layer_by_layer),
        cmocka_unit_test(test_weights_bit_identical_across_threads_and_processes),
        cmocka_unit_test(test_bf16_weights_bit_identical_across_threads),
    };
    return cmocka_run_group_tests(tests, load_fixture, free_fixture);
}
