/* test_train_checkpoint.c — training checkpoints: what the file holds (model, momentum buffers,
 * metadata), exact round trips, bit-identical resume at an epoch boundary and inside an epoch,
 * refusal of non-finite values and of every damaged tensor or metadata value (with the model
 * and momentum left untouched), and the checkpoint folder: names, newest, pruning, temporaries.
 * The safetensors format itself is tested in tests/test_safetensors.c. */
#include "testutil.h"

#include <limits.h>
#include <sys/stat.h>

#define N_TRAIN 640 /* with R = 2, B = 16: 20 steps per epoch */
#define R 2
#define B 16
#define STEPS 20
#define MAX_TENSORS 48

/* ---------------------------------------------------------------- fixtures */

typedef struct {
    cn_dataset train;
    cn_model *model;
    cn_trainer *trainer;
} rig;

static void make_dataset(cn_dataset *ds, int n, uint64_t seed)
{
    cn_rng rng;
    cn_rng_seed(&rng, seed);
    memset(ds, 0, sizeof *ds);
    ds->count = n;
    ds->channels = 1, ds->classes = 10;
    ds->height = ds->width = 28;
    ds->pixels = malloc((size_t)n * 784);
    ds->labels = malloc((size_t)n);
    assert_non_null(ds->pixels);
    assert_non_null(ds->labels);
    for (size_t i = 0; i < (size_t)n * 784; i++) ds->pixels[i] = (uint8_t)cn_rng_below(&rng, 256);
    for (int i = 0; i < n; i++) ds->labels[i] = (uint8_t)cn_rng_below(&rng, 10);
}

static cn_train_config config(void)
{
    return (cn_train_config){.batch_size = B, .num_replicas = R, .threads = 2,
                             .learning_rate = 0.01f, .momentum = 0.5f, .seed = 3};
}

/* AdamW with decay and a cosine schedule after a warmup, over 2 epochs. */
static cn_train_config adamw_config(void)
{
    cn_train_config cfg = config();
    cfg.optimizer = CN_OPTIMIZER_ADAMW;
    cfg.learning_rate = 0.001f;
    cfg.weight_decay = 0.01f;
    cfg.lr_schedule = (cn_lr_schedule){.kind = CN_LR_COSINE, .warmup_steps = 6,
                                       .total_steps = 2 * STEPS};
    return cfg;
}

static void rig_open_with(rig *g, cn_train_config cfg)
{
    cn_error err = {{0}};
    make_dataset(&g->train, N_TRAIN, 11);
    g->model = cn_model_fashion_mnist(&err);
    assert_non_null(g->model);
    cn_model_init(g->model, 3);
    g->trainer = cn_trainer_create(g->model, &cfg, &err);
    if (!g->trainer) fail_msg("%s", err.msg);
}

static void rig_open(rig *g)
{
    rig_open_with(g, config());
}

static void rig_close(rig *g)
{
    cn_trainer_free(g->trainer);
    cn_model_free(g->model);
    cn_dataset_free(&g->train);
}

static int stop_after(void *ctx)
{
    int *left = ctx;
    return --*left <= 0;
}

/* Runs pos->epoch from pos->step, stopping after `steps` steps (0: to the end). */
static void run(rig *g, cn_epoch_position *pos, int steps)
{
    cn_error err = {{0}};
    int left = steps;
    if (cn_trainer_run_epoch(g->trainer, &g->train, pos, NULL, steps ? stop_after : NULL, &left,
                             NULL, &err) != 0)
        fail_msg("%s", err.msg);
}

/* Everything a step changes: the state_dict bytes and the momentum, concatenated. */
static uint8_t *snapshot(rig *g, size_t *len)
{
    cn_tensor_ref refs[MAX_TENSORS];
    int n = cn_model_tensors(g->model, refs, MAX_TENSORS);
    return tu_concat_tensors(refs, n, cn_trainer_momentum(g->trainer),
                             cn_model_num_params(g->model) * sizeof(float), len);
}

/* Asserts that two rigs hold the same weights, statistics and momentum. */
static void assert_same_state(rig *a, rig *b)
{
    size_t la, lb;
    uint8_t *sa = snapshot(a, &la), *sb = snapshot(b, &lb);
    tu_assert_same_bytes(sa, la, sb, lb);
}

static int exists(const char *dir, const char *name)
{
    char *p = tu_join(dir, name);
    struct stat st;
    int yes = stat(p, &st) == 0;
    free(p);
    return yes;
}

static void touch(const char *dir, const char *name)
{
    char *p = tu_join(dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
    free(p);
}

static void save(rig *g, const cn_epoch_position *pos, const char *path)
{
    cn_error err = {{0}};
    cn_train_state s;
    cn_train_config cfg = config();
    cn_train_state_init(&s, &cfg, &g->train);
    s.position = *pos;
    if (cn_train_checkpoint_save(g->model, cn_trainer_momentum(g->trainer), &s, NULL, 0, path,
                                 &err))
        fail_msg("%s", err.msg);
}

/* Restores path into g; returns the state it holds. */
static cn_train_state restore(rig *g, const char *path)
{
    cn_error err = {{0}};
    cn_train_state s;
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f) fail_msg("%s", err.msg);
    if (cn_train_checkpoint_state(f, path, &s, &err) != 0 ||
        cn_train_checkpoint_restore(g->model, cn_trainer_momentum(g->trainer), CN_OPTIMIZER_SGD,
                                    f, path, &err))
        fail_msg("%s", err.msg);
    cn_safetensors_free(f);
    return s;
}

/* A checkpoint file in a folder of its own, and the position it was saved at. */
typedef struct {
    cn_epoch_position pos;
    char *dir, *path;
} saved;

/* Trains g from the start through `steps` steps of `epoch` (0: the whole epoch) and saves a
 * checkpoint there as `name` in a fresh folder. */
static saved train_and_save(rig *g, int epoch, int steps, const char *name)
{
    saved ck = {{.epoch = 1}, tu_make_temp_dir("tck"), NULL};
    for (; ck.pos.epoch < epoch; ck.pos = (cn_epoch_position){.epoch = ck.pos.epoch + 1})
        run(g, &ck.pos, 0);
    run(g, &ck.pos, steps);
    ck.path = tu_join(ck.dir, name);
    save(g, &ck.pos, ck.path);
    return ck;
}

static void saved_remove(saved *ck)
{
    free(ck->path);
    tu_remove_dir(ck->dir);
}

/* The tensors of a safetensors file, copied to refs (their data stays in the returned file). */
static cn_safetensors *read_tensors(const char *path, cn_tensor_ref refs[MAX_TENSORS], int *n)
{
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(path, &err);
    if (!f) fail_msg("%s", err.msg);
    *n = cn_safetensors_count(f);
    assert_in_range(*n, 0, MAX_TENSORS);
    for (int i = 0; i < *n; i++) refs[i] = *cn_safetensors_at(f, i);
    return f;
}

/* Writes the tensors and metadata pairs to a new temporary file (its malloc'd name in *path)
 * and reads it back. */
static cn_safetensors *write_and_read(const cn_tensor_ref *refs, int n, const char *const *meta,
                                      int num_meta, char **path)
{
    cn_error err = {{0}};
    *path = tu_write_temp("", 0, ".safetensors");
    if (cn_safetensors_write(*path, refs, n, meta, num_meta, &err) != 0) fail_msg("%s", err.msg);
    cn_safetensors *f = cn_safetensors_read(*path, &err);
    assert_non_null(f);
    return f;
}

/* ---------------------------------------------------------------- the file */

static void test_file_holds_model_momentum_and_position(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    saved ck = train_and_save(&g, 1, 7, "c.safetensors");
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(ck.path, &err);
    if (!f) fail_msg("%s", err.msg);
    assert_int_equal(cn_safetensors_count(f), 18 + 12);
    const cn_tensor_ref *m = cn_safetensors_get(f, "optimizer.conv1.weight.momentum_buffer");
    assert_non_null(m);
    assert_int_equal(m->ndim, 4);
    assert_int_equal(m->shape[0], 10);
    assert_int_equal(m->shape[3], 5);
    assert_memory_equal(m->data, cn_trainer_momentum(g.trainer), 250 * sizeof(float));
    const cn_tensor_ref *fc2 = cn_safetensors_get(f, "optimizer.fc2.bias.momentum_buffer");
    assert_non_null(fc2);
    assert_int_equal(fc2->shape[0], 10);
    assert_memory_equal(fc2->data, cn_trainer_momentum(g.trainer) + 21890, 10 * sizeof(float));
    assert_null(cn_safetensors_get(f, "optimizer.bn1.running_mean.momentum_buffer"));
    assert_non_null(cn_safetensors_get(f, "bn2.num_batches_tracked"));
    assert_string_equal(cn_safetensors_meta(f, "format"), "pt");
    assert_string_equal(cn_safetensors_meta(f, "cnnc_checkpoint"), "training v1");
    assert_string_equal(cn_safetensors_meta(f, "epoch"), "1");
    assert_string_equal(cn_safetensors_meta(f, "epoch_step"), "7");
    assert_string_equal(cn_safetensors_meta(f, "step"), "7");
    assert_string_equal(cn_safetensors_meta(f, "steps_per_epoch"), "20");
    assert_string_equal(cn_safetensors_meta(f, "seed"), "3");
    assert_string_equal(cn_safetensors_meta(f, "num_cores"), "2");
    assert_string_equal(cn_safetensors_meta(f, "batch_size"), "16");
    assert_string_equal(cn_safetensors_meta(f, "learning_rate"), "0.01");
    assert_string_equal(cn_safetensors_meta(f, "momentum"), "0.5");
    assert_string_equal(cn_safetensors_meta(f, "train_samples"), "640");
    assert_int_equal(strlen(cn_safetensors_meta(f, "train_data_crc32")), 8);
    assert_true(strtod(cn_safetensors_meta(f, "epoch_loss_sum"), NULL) == ck.pos.loss_sum);
    cn_safetensors_free(f);
    saved_remove(&ck);
    rig_close(&g);
}

static void test_round_trip_is_exact(void **state)
{
    (void)state;
    rig a, b;
    rig_open(&a);
    rig_open(&b);
    saved ck = train_and_save(&a, 2, 5, "c.safetensors");
    cn_train_state s = restore(&b, ck.path);
    assert_int_equal(s.position.epoch, 2);
    assert_int_equal(s.position.step, 5);
    assert_true(s.position.loss_sum == ck.pos.loss_sum);
    assert_int_equal(s.steps_per_epoch, STEPS);
    assert_int_equal(s.num_replicas, R);
    assert_int_equal(s.batch_size, B);
    assert_true(s.learning_rate == 0.01f && s.momentum == 0.5f);
    assert_int_equal(s.seed, 3);
    assert_int_equal(s.train_samples, N_TRAIN);
    cn_train_state now;
    cn_train_config cfg = config();
    cn_train_state_init(&now, &cfg, &a.train);
    assert_int_equal(s.train_crc32, now.train_crc32);
    assert_string_equal(s.isa, cn_isa_name(cn_isa_active()));
    if (cn_precision_supported(CN_PRECISION_BF16)) { /* bf16 names its products' kernels too */
        char want[40];
        snprintf(want, sizeof want, "%s/%s", cn_isa_name(cn_isa_active()),
                 cn_bf16_kernel_name(cn_bf16_kernel_active()));
        cfg.precision = CN_PRECISION_BF16;
        cn_train_state_init(&now, &cfg, &a.train);
        assert_string_equal(now.isa, want);
    }
    assert_same_state(&a, &b);
    saved_remove(&ck);
    rig_close(&a);
    rig_close(&b);
}

static void test_crc_sees_one_changed_label(void **state)
{
    (void)state;
    cn_dataset ds;
    make_dataset(&ds, 100, 5);
    cn_train_config cfg = config();
    cn_train_state a, b;
    cn_train_state_init(&a, &cfg, &ds);
    ds.labels[99] ^= 1;
    cn_train_state_init(&b, &cfg, &ds);
    assert_int_not_equal(a.train_crc32, b.train_crc32);
    assert_int_equal(a.steps_per_epoch, 100 / R / B);
    cn_dataset_free(&ds);
}

/* ---------------------------------------------------------------- exact resume */

/* Two epochs straight against: stop after stop_step steps of epoch stop_epoch, save, restore into
 * a fresh model and trainer, finish. Weights, statistics, momentum and loss sums must match. */
static void check_resume(int stop_epoch, int stop_step)
{
    rig straight, first, second;
    rig_open(&straight);
    rig_open(&first);
    rig_open(&second);
    double straight_sum[2];
    for (int e = 1; e <= 2; e++) {
        cn_epoch_position p = {.epoch = e};
        run(&straight, &p, 0);
        straight_sum[e - 1] = p.loss_sum;
    }
    saved ck = train_and_save(&first, stop_epoch, stop_step, "c.safetensors");
    assert_int_equal(ck.pos.epoch, stop_epoch);
    assert_int_equal(ck.pos.step, stop_step);
    cn_train_state s = restore(&second, ck.path);
    cn_epoch_position p = s.position;
    if (p.step == STEPS) p = (cn_epoch_position){.epoch = p.epoch + 1};
    for (; p.epoch <= 2; p = (cn_epoch_position){.epoch = p.epoch + 1}) {
        run(&second, &p, 0);
        assert_true(p.loss_sum == straight_sum[p.epoch - 1]);
    }
    assert_same_state(&straight, &second);
    saved_remove(&ck);
    rig_close(&straight);
    rig_close(&first);
    rig_close(&second);
}

static void test_resume_at_epoch_boundary_is_bit_identical(void **state)
{
    (void)state;
    check_resume(1, STEPS);
}

static void test_resume_inside_an_epoch_is_bit_identical(void **state)
{
    (void)state;
    check_resume(2, 7);
    check_resume(1, 1);
}

static void test_stop_request_ends_after_the_step(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    cn_epoch_position p = {.epoch = 1};
    run(&g, &p, 3);
    assert_int_equal(p.step, 3);
    assert_int_equal(p.epoch, 1);
    run(&g, &p, 0);
    assert_int_equal(p.step, STEPS);
    cn_error err = {{0}};
    p = (cn_epoch_position){.epoch = 1, .step = STEPS + 1};
    assert_int_equal(cn_trainer_run_epoch(g.trainer, &g.train, &p, NULL, NULL, NULL, NULL, &err),
                     -1);
    assert_non_null(strstr(err.msg, "cannot start at epoch 1 step 21"));
    rig_close(&g);
}

/* ---------------------------------------------------------------- refusals */

static void test_save_refuses_non_finite_and_keeps_the_old_file(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    saved ck = train_and_save(&g, 1, 2, "checkpoint-epoch-0001.safetensors");
    const char *path = ck.path;
    cn_error err = {{0}};
    cn_safetensors *before = cn_safetensors_read(path, &err);
    assert_non_null(before);
    cn_train_state s = {.position = ck.pos, .steps_per_epoch = STEPS};
    float *mom = cn_trainer_momentum(g.trainer);
    float keep = mom[300];
    mom[300] = NAN;
    assert_int_equal(cn_train_checkpoint_save(g.model, mom, &s, NULL, 0, path, &err), -1);
    assert_non_null(strstr(err.msg, "not saved: tensor optimizer.conv2.weight.momentum_buffer "
                                    "holds non-finite values"));
    mom[300] = keep;
    cn_model_params(g.model)[21000] = INFINITY;
    assert_int_equal(cn_train_checkpoint_save(g.model, mom, &s, NULL, 0, path, &err), -1);
    assert_non_null(strstr(err.msg, "not saved: tensor fc1.weight holds non-finite values"));
    cn_safetensors *after = cn_safetensors_read(path, &err);
    assert_non_null(after);
    for (int i = 0; i < cn_safetensors_count(before); i++) {
        const cn_tensor_ref *x = cn_safetensors_at(before, i), *y = cn_safetensors_at(after, i);
        assert_string_equal(x->name, y->name);
        assert_memory_equal(x->data, y->data, tu_ref_bytes(x));
    }
    cn_safetensors_free(before);
    cn_safetensors_free(after);
    char name[CN_CHECKPOINT_NAME_MAX];
    assert_int_equal(cn_checkpoint_find(ck.dir, name, &err), 1); /* and no temporary left */
    saved_remove(&ck);
    rig_close(&g);
}

/* The 24 metadata pairs of a valid checkpoint, with key `change` given `value` (NULL: left out). */
#define NUM_KEYS 24
static const char *const meta_keys[NUM_KEYS] = {
    "cnnc_checkpoint", "cnnc_version", "epoch", "epoch_step", "steps_per_epoch", "step",
    "epoch_loss_sum", "seed", "num_cores", "batch_size", "learning_rate", "momentum",
    "train_samples", "train_data_crc32", "sampler", "isa", "label_smoothing", "optimizer",
    "nesterov", "weight_decay", "optimizer_steps", "lr_schedule", "lr_total_steps", "augment"};

/* The first OLD_KEYS of them: what a file from before the optimiser's keys holds. */
#define OLD_KEYS 17

/* valid's tensors and first num_keys metadata pairs, with the change, written to *path and
 * read back. */
static cn_safetensors *rewritten_keys(const char *valid, int num_keys, const char *change,
                                      const char *value, char **path)
{
    cn_tensor_ref refs[MAX_TENSORS];
    int count;
    cn_safetensors *f = read_tensors(valid, refs, &count);
    const char *meta[2 * NUM_KEYS];
    int n = 0;
    for (int i = 0; i < num_keys; i++) {
        const char *v = strcmp(meta_keys[i], change) == 0 ? value : cn_safetensors_meta(f, meta_keys[i]);
        assert_true(v || strcmp(meta_keys[i], change) == 0);
        if (!v) continue;
        meta[2 * n] = meta_keys[i];
        meta[2 * n + 1] = v;
        n++;
    }
    cn_safetensors *changed = write_and_read(refs, count, meta, n, path);
    cn_safetensors_free(f);
    return changed;
}

static cn_safetensors *rewritten(const char *valid, const char *change, const char *value,
                                 char **path)
{
    return rewritten_keys(valid, NUM_KEYS, change, value, path);
}

static void expect_state_refused(const char *valid, const char *change, const char *value,
                                 const char *what)
{
    char *path;
    cn_safetensors *changed = rewritten(valid, change, value, &path);
    cn_error err = {{0}};
    cn_train_state s;
    assert_int_equal(cn_train_checkpoint_state(changed, path, &s, &err), -1);
    if (!strstr(err.msg, what) || !strstr(err.msg, path))
        fail_msg("%s=%s: expected \"%s\", got \"%s\"", change, value ? value : "(none)", what,
                 err.msg);
    cn_safetensors_free(changed);
    unlink(path);
    free(path);
}

static void test_state_refuses_bad_metadata(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    saved ck = train_and_save(&g, 1, 4, "c.safetensors");
    const char *path = ck.path;
    expect_state_refused(path, "epoch", NULL, "__metadata__ has no \"epoch\"");
    expect_state_refused(path, "epoch", "abc", "\"epoch\" is \"abc\", not an integer in 1..");
    expect_state_refused(path, "epoch", "0", "\"epoch\" is \"0\", not an integer in 1..");
    expect_state_refused(path, "epoch", " 1", "not an integer");
    expect_state_refused(path, "epoch_step", "21", "\"epoch_step\" 21 is past \"steps_per_epoch\" 20");
    expect_state_refused(path, "step", "5", "\"step\" 5 does not match epoch 1 step 4 of 20");
    expect_state_refused(path, "epoch_loss_sum", "nan", "not a finite number");
    expect_state_refused(path, "seed", "-1", "\"seed\" is \"-1\", not an integer in 0..2^64-1");
    expect_state_refused(path, "num_cores", "0", "\"num_cores\" is \"0\"");
    expect_state_refused(path, "learning_rate", "-0.5", "not a positive number");
    expect_state_refused(path, "momentum", "1", "not a number in [0, 1)");
    expect_state_refused(path, "label_smoothing", "1", "not a number in [0, 1)");
    expect_state_refused(path, "label_smoothing", "-0.1", "not a number in [0, 1)");
    expect_state_refused(path, "label_smoothing", "abc", "not a finite number");
    expect_state_refused(path, "augment", "crop=2,vflip",
                         "__metadata__ \"augment\": 'crop=2,vflip': unknown item 'vflip'");
    expect_state_refused(path, "augment", "crop=x", "P of crop=P must be an integer");
    expect_state_refused(path, "augment", "hflip,hflip", "hflip is given twice");
    expect_state_refused(path, "optimizer", "adam", "\"optimizer\" is \"adam\", not sgd or adamw");
    expect_state_refused(path, "nesterov", "2", "\"nesterov\" is \"2\", not an integer in 0..1");
    expect_state_refused(path, "weight_decay", "-1", "\"weight_decay\" is \"-1\"");
    expect_state_refused(path, "optimizer_steps", "-3", "\"optimizer_steps\" is \"-3\"");
    expect_state_refused(path, "lr_schedule", "linear", "not constant, step, cosine or onecycle");
    expect_state_refused(path, "lr_schedule", "cosine", "cosine needs at least 2 steps");
    expect_state_refused(path, "train_data_crc32", "1234", "not 8 lower-case hex digits");
    expect_state_refused(path, "sampler", "numpy", "\"sampler\" is \"numpy\"; this cnnc reads");
    expect_state_refused(path, "cnnc_checkpoint", "training v2",
                         "\"cnnc_checkpoint\" is \"training v2\"; this cnnc reads \"training v1\"");
    expect_state_refused(path, "cnnc_checkpoint", NULL, "not a training checkpoint");
    expect_state_refused(path, "train_samples", "700",
                         "\"steps_per_epoch\" 20 does not match 700 samples, 2 replicas and batch 16");
    saved_remove(&ck);
    rig_close(&g);
}

/* ---------------------------------------------------------------- adamw */

/* AdamW's state (exp_avg, exp_avg_sq), the model and the optimiser's steps of g. */
static uint8_t *adamw_snapshot(rig *g, size_t *len)
{
    cn_tensor_ref refs[MAX_TENSORS];
    int n = cn_model_tensors(g->model, refs, MAX_TENSORS);
    float *state = cn_trainer_momentum(g->trainer);
    int64_t steps = cn_trainer_optimizer_steps(g->trainer);
    size_t bytes = 2 * cn_model_num_params(g->model) * sizeof(float);
    float *copy = malloc(bytes + sizeof steps);
    assert_non_null(copy);
    memcpy(copy, state, bytes);
    memcpy((char *)copy + bytes, &steps, sizeof steps);
    uint8_t *all = tu_concat_tensors(refs, n, copy, bytes + sizeof steps, len);
    free(copy);
    return all;
}

/* An AdamW run with a cosine schedule trained 1 epoch and 5 steps, saved with its steps. */
static saved adamw_train_and_save(rig *g)
{
    saved ck = {{.epoch = 1}, tu_make_temp_dir("tck"), NULL};
    run(g, &ck.pos, 0);
    ck.pos = (cn_epoch_position){.epoch = 2};
    run(g, &ck.pos, 5);
    ck.path = tu_join(ck.dir, "adamw.safetensors");
    cn_error err = {{0}};
    cn_train_state s;
    cn_train_config cfg = adamw_config();
    cn_train_state_init(&s, &cfg, &g->train);
    s.position = ck.pos;
    s.optimizer_steps = cn_trainer_optimizer_steps(g->trainer);
    if (cn_train_checkpoint_save(g->model, cn_trainer_momentum(g->trainer), &s, NULL, 0, ck.path,
                                 &err))
        fail_msg("%s", err.msg);
    return ck;
}

/* Saved mid-schedule and restored into a fresh AdamW trainer, the run continues bit for bit:
 * weights, exp_avg, exp_avg_sq and steps as the straight run's. */
static void test_adamw_round_trip_and_resume_are_exact(void **state)
{
    (void)state;
    rig straight, first, second;
    rig_open_with(&straight, adamw_config());
    rig_open_with(&first, adamw_config());
    rig_open_with(&second, adamw_config());
    saved ck = adamw_train_and_save(&first);
    cn_error err = {{0}};
    cn_safetensors *f = cn_safetensors_read(ck.path, &err);
    assert_non_null(f);
    assert_string_equal(cn_safetensors_meta(f, "optimizer"), "adamw");
    assert_string_equal(cn_safetensors_meta(f, "optimizer_steps"), "25");
    assert_string_equal(cn_safetensors_meta(f, "lr_schedule"), "cosine");
    assert_string_equal(cn_safetensors_meta(f, "warmup_steps"), "6");
    assert_string_equal(cn_safetensors_meta(f, "lr_total_steps"), "40");
    assert_string_equal(cn_safetensors_meta(f, "weight_decay"), "0.01");
    assert_null(cn_safetensors_get(f, "optimizer.fc2.bias.momentum_buffer"));
    const cn_tensor_ref *sq = cn_safetensors_get(f, "optimizer.fc2.bias.exp_avg_sq");
    assert_non_null(sq);
    size_t n = cn_model_num_params(first.model);
    assert_memory_equal(sq->data, cn_trainer_momentum(first.trainer) + n + 21890,
                        10 * sizeof(float));
    cn_train_state s;
    assert_int_equal(cn_train_checkpoint_state(f, ck.path, &s, &err), 0);
    assert_int_equal(s.optimizer, CN_OPTIMIZER_ADAMW);
    assert_int_equal(s.optimizer_steps, 25);
    assert_true(s.weight_decay == 0.01f && s.beta1 == 0.9f && s.beta2 == 0.999f &&
                s.eps == 1e-8f);
    assert_int_equal(s.lr_schedule.kind, CN_LR_COSINE);
    assert_int_equal(s.lr_schedule.total_steps, 40);
    assert_int_equal(s.lr_schedule.warmup_steps, 6);
    if (cn_train_checkpoint_restore(second.model, cn_trainer_momentum(second.trainer),
                                    CN_OPTIMIZER_ADAMW, f, ck.path, &err) ||
        cn_trainer_set_optimizer_steps(second.trainer, s.optimizer_steps, &err))
        fail_msg("%s", err.msg);
    cn_safetensors_free(f);
    size_t la, lb;
    uint8_t *a = adamw_snapshot(&first, &la), *b = adamw_snapshot(&second, &lb);
    tu_assert_same_bytes(a, la, b, lb);
    cn_epoch_position p = s.position, q = {.epoch = 1};
    run(&second, &p, 0);
    run(&straight, &q, 0);
    q = (cn_epoch_position){.epoch = 2};
    run(&straight, &q, 0);
    assert_true(p.loss_sum == q.loss_sum);
    a = adamw_snapshot(&straight, &la), b = adamw_snapshot(&second, &lb);
    tu_assert_same_bytes(a, la, b, lb);
    saved_remove(&ck);
    rig_close(&straight), rig_close(&first), rig_close(&second);
}

/* An AdamW file restored with its state damaged, or into an SGD trainer: refused, nothing
 * changed. */
static void expect_adamw_refused(const char *valid, const char *name, float *data,
                                 cn_optimizer o, const char *what)
{
    cn_tensor_ref refs[MAX_TENSORS + 1];
    int count, n = 0;
    cn_safetensors *f = read_tensors(valid, refs, &count);
    for (int i = 0; i < count; i++)
        if (strcmp(refs[i].name, name) != 0) refs[n++] = refs[i];
        else if (data) refs[i].data = data, refs[n++] = refs[i];
    const char *meta[] = {"optimizer", cn_safetensors_meta(f, "optimizer")};
    char *path;
    cn_safetensors *damaged = write_and_read(refs, n, meta, 1, &path);
    cn_safetensors_free(f);
    rig g;
    rig_open_with(&g, o == CN_OPTIMIZER_ADAMW ? adamw_config() : config());
    size_t lb, la;
    uint8_t *before = snapshot(&g, &lb);
    cn_error err = {{0}};
    assert_int_equal(cn_train_checkpoint_restore(g.model, cn_trainer_momentum(g.trainer), o,
                                                 damaged, path, &err), -1);
    if (!strstr(err.msg, what)) fail_msg("%s: expected \"%s\", got \"%s\"", name, what, err.msg);
    uint8_t *after = snapshot(&g, &la);
    tu_assert_same_bytes(before, lb, after, la);
    cn_safetensors_free(damaged);
    rig_close(&g);
    unlink(path);
    free(path);
}

static void test_adamw_restore_refuses_damaged_state(void **state)
{
    (void)state;
    rig g;
    rig_open_with(&g, adamw_config());
    saved ck = adamw_train_and_save(&g);
    rig_close(&g);
    static float negative[10] = {0, 0, -1e-3f}, infinite[10] = {INFINITY};
    expect_adamw_refused(ck.path, "optimizer.fc2.bias.exp_avg_sq", NULL, CN_OPTIMIZER_ADAMW,
                         "tensor optimizer.fc2.bias.exp_avg_sq is missing");
    expect_adamw_refused(ck.path, "optimizer.fc2.bias.exp_avg_sq", negative, CN_OPTIMIZER_ADAMW,
                         "tensor optimizer.fc2.bias.exp_avg_sq holds a negative variance");
    expect_adamw_refused(ck.path, "optimizer.conv1.bias.exp_avg", infinite, CN_OPTIMIZER_ADAMW,
                         "tensor optimizer.conv1.bias.exp_avg holds non-finite values");
    expect_adamw_refused(ck.path, "none", NULL, CN_OPTIMIZER_SGD,
                         "holds the state of optimizer \"adamw\", not sgd");
    saved_remove(&ck);
}

/* valid's tensors under "optimizer" label, restored into a trainer of that optimiser: refused
 * with what. */
static void expect_relabelled_refused(const char *valid, const char *label, cn_optimizer o,
                                      const char *what)
{
    cn_tensor_ref refs[MAX_TENSORS];
    int count;
    cn_safetensors *f = read_tensors(valid, refs, &count);
    const char *meta[] = {"optimizer", label};
    char *path;
    cn_safetensors *relabelled = write_and_read(refs, count, meta, 1, &path);
    rig g;
    rig_open_with(&g, o == CN_OPTIMIZER_ADAMW ? adamw_config() : config());
    cn_error err = {{0}};
    assert_int_equal(cn_train_checkpoint_restore(g.model, cn_trainer_momentum(g.trainer), o,
                                                 relabelled, path, &err), -1);
    if (!strstr(err.msg, what)) fail_msg("expected \"%s\", got \"%s\"", what, err.msg);
    cn_safetensors_free(relabelled), cn_safetensors_free(f);
    unlink(path), free(path);
    rig_close(&g);
}

/* An AdamW file relabelled sgd holds no momentum buffers, and an SGD file relabelled adamw holds
 * a momentum buffer that is not AdamW's: both refused. */
static void test_restore_refuses_state_of_another_optimizer(void **state)
{
    (void)state;
    rig g;
    rig_open_with(&g, adamw_config());
    saved ck = adamw_train_and_save(&g);
    rig_close(&g);
    expect_relabelled_refused(ck.path, "sgd", CN_OPTIMIZER_SGD, "momentum_buffer is missing");
    saved_remove(&ck);
    rig_open(&g);
    ck = train_and_save(&g, 1, 2, "sgd.safetensors");
    rig_close(&g);
    expect_relabelled_refused(ck.path, "adamw", CN_OPTIMIZER_ADAMW, "exp_avg is missing");
    saved_remove(&ck);
}

/* A file from before the optimiser's keys: SGD without Nesterov or decay, a constant rate, one
 * optimiser step per step of its position; its momentum restores. */
static void test_old_file_reads_as_sgd(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    saved ck = train_and_save(&g, 2, 3, "c.safetensors");
    char *path;
    cn_safetensors *old = rewritten_keys(ck.path, OLD_KEYS, "none", NULL, &path);
    assert_null(cn_safetensors_meta(old, "optimizer"));
    assert_null(cn_safetensors_meta(old, "lr_schedule"));
    cn_error err = {{0}};
    cn_train_state s;
    memset(&s, 0xff, sizeof s);
    if (cn_train_checkpoint_state(old, path, &s, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(s.optimizer, CN_OPTIMIZER_SGD);
    assert_int_equal(s.nesterov, 0);
    assert_true(s.weight_decay == 0);
    assert_int_equal(s.optimizer_steps, STEPS + 3);
    assert_int_equal(s.lr_schedule.kind, CN_LR_CONSTANT);
    assert_int_equal(s.lr_schedule.warmup_steps, 0);
    rig h;
    rig_open(&h);
    if (cn_train_checkpoint_restore(h.model, cn_trainer_momentum(h.trainer), CN_OPTIMIZER_SGD,
                                    old, path, &err))
        fail_msg("%s", err.msg);
    assert_same_state(&g, &h);
    cn_safetensors_free(old);
    unlink(path), free(path);
    saved_remove(&ck);
    rig_close(&g), rig_close(&h);
}

/* Label smoothing is recorded and read back; a file without the key had none. */
static void test_state_records_label_smoothing(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    cn_error err = {{0}};
    cn_train_config cfg = config();
    cfg.label_smoothing = 0.25f;
    cn_train_state s, back;
    cn_train_state_init(&s, &cfg, &g.train);
    char *dir = tu_make_temp_dir("tck"), *file = tu_join(dir, "smooth.safetensors"), *path;
    assert_int_equal(cn_train_checkpoint_save(g.model, cn_trainer_momentum(g.trainer), &s, NULL,
                                              0, file, &err), 0);
    cn_safetensors *f = cn_safetensors_read(file, &err);
    assert_non_null(f);
    assert_string_equal(cn_safetensors_meta(f, "label_smoothing"), "0.25");
    assert_int_equal(cn_train_checkpoint_state(f, file, &back, &err), 0);
    assert_true(back.label_smoothing == 0.25f);
    cn_safetensors_free(f);
    f = rewritten(file, "label_smoothing", NULL, &path);
    assert_null(cn_safetensors_meta(f, "label_smoothing"));
    if (cn_train_checkpoint_state(f, path, &back, &err) != 0) fail_msg("%s", err.msg);
    assert_true(back.label_smoothing == 0.0f);
    cn_safetensors_free(f);
    unlink(path), unlink(file), rmdir(dir);
    free(path), free(file), free(dir);
    rig_close(&g);
}

/* The augmentation is recorded and read back; a file without the key had none. */
static void test_state_records_augment(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    cn_error err = {{0}};
    cn_train_config cfg = config();
    const cn_augment settings[] = {{0, 0}, {3, 0}, {0, 1}, {2, 1}}; /* the last one stays */
    const char *texts[] = {"none", "crop=3", "hflip", "crop=2,hflip"};
    char *dir = tu_make_temp_dir("tck"), *file = tu_join(dir, "augment.safetensors"), *path;
    for (int k = 0; k < 4; k++) {
        cfg.augment = settings[k];
        cn_train_state s, back;
        cn_train_state_init(&s, &cfg, &g.train);
        assert_true(s.augment.crop_padding == settings[k].crop_padding &&
                    s.augment.hflip == settings[k].hflip);
        assert_int_equal(cn_train_checkpoint_save(g.model, cn_trainer_momentum(g.trainer), &s,
                                                  NULL, 0, file, &err), 0);
        cn_safetensors *f = cn_safetensors_read(file, &err);
        assert_non_null(f);
        assert_string_equal(cn_safetensors_meta(f, "augment"), texts[k]);
        memset(&back, 0xff, sizeof back);
        assert_int_equal(cn_train_checkpoint_state(f, file, &back, &err), 0);
        assert_int_equal(back.augment.crop_padding, settings[k].crop_padding);
        assert_int_equal(back.augment.hflip, settings[k].hflip);
        cn_safetensors_free(f);
    }
    cn_safetensors *f = rewritten(file, "augment", NULL, &path);
    assert_null(cn_safetensors_meta(f, "augment"));
    cn_train_state back;
    memset(&back, 0xff, sizeof back);
    if (cn_train_checkpoint_state(f, path, &back, &err) != 0) fail_msg("%s", err.msg);
    assert_true(back.augment.crop_padding == 0 && back.augment.hflip == 0);
    cn_safetensors_free(f);
    unlink(path), unlink(file), rmdir(dir);
    free(path), free(file), free(dir);
    rig_close(&g);
}

/* A copy of valid's tensors with one left out, reshaped or added; restoring it into a fresh rig
 * must fail with what and change nothing. */
typedef enum { DROP, RESHAPE, ADD } damage;

static void expect_restore_refused(const char *valid, const char *name, damage how,
                                   const char *what)
{
    cn_tensor_ref refs[MAX_TENSORS + 1];
    int count, n = 0;
    static float spare[64];
    cn_safetensors *f = read_tensors(valid, refs, &count);
    for (int i = 0; i < count; i++) {
        refs[n] = refs[i];
        if (strcmp(refs[n].name, name) != 0) {
            n++;
            continue;
        }
        if (how == RESHAPE) {
            refs[n].shape[0] += 1;
            refs[n].data = spare;
        }
        if (how != DROP) n++;
    }
    if (how == ADD) {
        refs[n] = refs[0];
        snprintf(refs[n].name, sizeof refs[n].name, "%s", name);
        refs[n].ndim = 1;
        refs[n].shape[0] = 4;
        refs[n].dtype = CN_F32;
        refs[n].data = spare;
        n++;
    }
    char *path;
    cn_safetensors *damaged = write_and_read(refs, n, NULL, 0, &path);
    cn_safetensors_free(f);
    rig g;
    rig_open(&g);
    size_t lb, la;
    uint8_t *before = snapshot(&g, &lb);
    cn_error err = {{0}};
    assert_int_equal(cn_train_checkpoint_restore(g.model, cn_trainer_momentum(g.trainer),
                                                 CN_OPTIMIZER_SGD, damaged, path, &err), -1);
    if (!strstr(err.msg, what) || !strstr(err.msg, path))
        fail_msg("%s: expected \"%s\", got \"%s\"", name, what, err.msg);
    uint8_t *after = snapshot(&g, &la);
    tu_assert_same_bytes(before, lb, after, la);
    cn_safetensors_free(damaged);
    rig_close(&g);
    unlink(path);
    free(path);
}

static void test_restore_refuses_damaged_tensors(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    saved ck = train_and_save(&g, 1, 4, "c.safetensors");
    const char *path = ck.path;
    rig_close(&g);
    expect_restore_refused(path, "optimizer.fc2.bias.momentum_buffer", DROP,
                           "tensor optimizer.fc2.bias.momentum_buffer is missing");
    expect_restore_refused(path, "optimizer.fc2.bias.momentum_buffer", RESHAPE,
                           "tensor optimizer.fc2.bias.momentum_buffer has shape [11] in the "
                           "file, the model expects [10]");
    expect_restore_refused(path, "optimizer.bn1.running_mean.momentum_buffer", ADD,
                           "tensor optimizer.bn1.running_mean.momentum_buffer is not part of "
                           "sgd's state for this model");
    expect_restore_refused(path, "bn1.running_var", DROP, "tensor bn1.running_var is missing");
    expect_restore_refused(path, "fc3.weight", ADD, "tensor fc3.weight is not part of this model");
    saved_remove(&ck);
}

static void test_restore_refuses_non_finite_momentum(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    saved ck = train_and_save(&g, 1, 1, "c.safetensors");
    cn_tensor_ref refs[MAX_TENSORS];
    static float buffer[10];
    buffer[4] = INFINITY;
    /* every tensor as saved, but fc2.bias's momentum buffer */
    int n;
    cn_safetensors *f = read_tensors(ck.path, refs, &n);
    for (int i = 0; i < n; i++)
        if (strcmp(refs[i].name, "optimizer.fc2.bias.momentum_buffer") == 0) refs[i].data = buffer;
    char *bad;
    cn_safetensors *damaged = write_and_read(refs, n, NULL, 0, &bad);
    cn_safetensors_free(f);
    cn_error err = {{0}};
    assert_int_equal(cn_train_checkpoint_restore(g.model, cn_trainer_momentum(g.trainer),
                                                 CN_OPTIMIZER_SGD, damaged, bad, &err), -1);
    assert_non_null(strstr(err.msg, "tensor optimizer.fc2.bias.momentum_buffer holds non-finite "
                                    "values"));
    cn_safetensors_free(damaged);
    unlink(bad);
    free(bad);
    saved_remove(&ck);
    rig_close(&g);
}

static void test_model_only_file_is_not_a_training_checkpoint(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    char *dir = tu_make_temp_dir("tck"), *path = tu_join(dir, "model.safetensors");
    cn_error err = {{0}};
    assert_int_equal(cn_model_save(g.model, path, &err), 0);
    cn_safetensors *f = cn_safetensors_read(path, &err);
    assert_non_null(f);
    cn_train_state s;
    assert_int_equal(cn_train_checkpoint_state(f, path, &s, &err), -1);
    assert_non_null(strstr(err.msg, "not a training checkpoint"));
    cn_safetensors_free(f);
    /* and a training checkpoint is still a model for cn_model_load */
    cn_epoch_position p = {.epoch = 1};
    run(&g, &p, 1);
    save(&g, &p, path);
    cn_model *m = cn_model_fashion_mnist(&err);
    if (cn_model_load(m, path, &err) != 0) fail_msg("%s", err.msg);
    assert_memory_equal(cn_model_params(m), cn_model_params(g.model),
                        cn_model_num_params(m) * sizeof(float));
    cn_model_free(m);
    free(path);
    tu_remove_dir(dir);
    rig_close(&g);
}

/* ---------------------------------------------------------------- folders */

static void test_names_sort_by_position(void **state)
{
    (void)state;
    char name[CN_CHECKPOINT_NAME_MAX];
    cn_checkpoint_name(name, &(cn_epoch_position){.epoch = 7, .step = 20}, 20);
    assert_string_equal(name, "checkpoint-epoch-0007.safetensors");
    cn_checkpoint_name(name, &(cn_epoch_position){.epoch = 8, .step = 12}, 20);
    assert_string_equal(name, "checkpoint-epoch-0008-step-00012.safetensors");
    cn_checkpoint_name(name, &(cn_epoch_position){.epoch = 12345, .step = 3}, 20);
    assert_string_equal(name, "checkpoint-epoch-12345-step-00003.safetensors");
    int e, s;
    assert_int_equal(cn_checkpoint_parse_name("checkpoint-epoch-0007.safetensors", &e, &s), 1);
    assert_int_equal(e, 7);
    assert_int_equal(s, -1);
    assert_int_equal(cn_checkpoint_parse_name(name, &e, &s), 1);
    assert_int_equal(e, 12345);
    assert_int_equal(s, 3);
    static const char *const not_names[] = {
        "checkpoint-epoch-7.safetensors", "checkpoint-epoch-00007.safetensors",
        "checkpoint-epoch-0000.safetensors", "checkpoint-epoch-0007.safetensors.tmp.42.0",
        "checkpoint-epoch-0007-step-12.safetensors", "checkpoint-epoch-0007.safetensor",
        "checkpoint-epoch--007.safetensors", "checkpoint-epoch-99999999999.safetensors",
        "xcheckpoint-epoch-0007.safetensors", "checkpoint-epoch-0007-step-00012", ""};
    for (size_t i = 0; i < sizeof not_names / sizeof not_names[0]; i++)
        if (cn_checkpoint_parse_name(not_names[i], &e, &s))
            fail_msg("\"%s\" taken for a checkpoint name", not_names[i]);
    assert_true(cn_checkpoint_compare(7, -1, 7, 12) > 0);
    assert_true(cn_checkpoint_compare(7, 12, 7, 13) < 0);
    assert_true(cn_checkpoint_compare(8, 1, 7, -1) > 0);
    assert_true(cn_checkpoint_compare(7, -1, 7, -1) == 0);
}

static void test_find_and_prune(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("tck");
    cn_error err = {{0}};
    char newest[CN_CHECKPOINT_NAME_MAX];
    assert_int_equal(cn_checkpoint_find(dir, newest, &err), 0);
    touch(dir, "checkpoint-epoch-0002.safetensors");
    touch(dir, "checkpoint-epoch-0010.safetensors");
    touch(dir, "checkpoint-epoch-0009.safetensors");
    touch(dir, "checkpoint-epoch-0010-step-00004.safetensors");
    touch(dir, "checkpoint-epoch-0011.safetensors.tmp.99.0"); /* a write that was killed */
    touch(dir, "notes.txt");
    touch(dir, "model.safetensors");
    assert_int_equal(cn_checkpoint_find(dir, newest, &err), 4);
    assert_string_equal(newest, "checkpoint-epoch-0010.safetensors");

    assert_int_equal(cn_checkpoint_prune(dir, INT_MAX, &err), 0); /* temporaries only */
    assert_false(exists(dir, "checkpoint-epoch-0011.safetensors.tmp.99.0"));
    assert_true(exists(dir, "checkpoint-epoch-0002.safetensors"));
    assert_int_equal(cn_checkpoint_prune(dir, 2, &err), 0);
    assert_false(exists(dir, "checkpoint-epoch-0002.safetensors"));
    assert_false(exists(dir, "checkpoint-epoch-0009.safetensors"));
    assert_true(exists(dir, "checkpoint-epoch-0010-step-00004.safetensors"));
    assert_true(exists(dir, "checkpoint-epoch-0010.safetensors"));
    assert_true(exists(dir, "notes.txt"));
    assert_true(exists(dir, "model.safetensors"));
    assert_int_equal(cn_checkpoint_prune(dir, 0, &err), -1);
    assert_non_null(strstr(err.msg, "cannot keep 0 checkpoints"));
    char *missing = tu_join(dir, "absent");
    assert_int_equal(cn_checkpoint_find(missing, newest, &err), -1);
    assert_non_null(strstr(err.msg, "absent: cannot open the folder: No such file"));
    free(missing);
    tu_remove_dir(dir);
}

/* A checkpoint's name on a folder, a named pipe or a link: the listing fails naming it (a run
 * would otherwise meet it only at that position's save), and pruning deletes nothing. */
static void expect_listing_refused(const char *dir, const char *name, const char *kind)
{
    cn_error err = {{0}};
    char newest[CN_CHECKPOINT_NAME_MAX], want[256];
    snprintf(want, sizeof want, "/%s: named like a checkpoint but is %s, not a regular file",
             name, kind);
    assert_int_equal(cn_checkpoint_find(dir, newest, &err), -1);
    if (!strstr(err.msg, want)) fail_msg("message \"%s\", expected \"%s\"", err.msg, want);
    assert_int_equal(cn_checkpoint_prune(dir, 1, &err), -1);
    assert_non_null(strstr(err.msg, want));
    assert_true(exists(dir, "checkpoint-epoch-0001.safetensors"));
}

static void test_listing_refuses_what_is_not_a_file(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("tck");
    touch(dir, "checkpoint-epoch-0001.safetensors");
    char *path = tu_join(dir, "checkpoint-epoch-0002.safetensors");
    assert_int_equal(mkdir(path, 0700), 0);
    expect_listing_refused(dir, "checkpoint-epoch-0002.safetensors", "a folder");
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_listing_refused(dir, "checkpoint-epoch-0002.safetensors", "a named pipe");
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink("checkpoint-epoch-0001.safetensors", path), 0);
    expect_listing_refused(dir, "checkpoint-epoch-0002.safetensors", "a symbolic link");
    assert_int_equal(unlink(path), 0);
    free(path);
    tu_remove_dir(dir);
}

int main(void)
{
    if (tu_isa_unavailable()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_holds_model_momentum_and_position),
        cmocka_unit_test(test_round_trip_is_exact),
        cmocka_unit_test(test_crc_sees_one_changed_label),
        cmocka_unit_test(test_resume_at_epoch_boundary_is_bit_identical),
        cmocka_unit_test(test_resume_inside_an_epoch_is_bit_identical),
        cmocka_unit_test(test_stop_request_ends_after_the_step),
        cmocka_unit_test(test_save_refuses_non_finite_and_keeps_the_old_file),
        cmocka_unit_test(test_state_refuses_bad_metadata),
        cmocka_unit_test(test_state_records_label_smoothing),
        cmocka_unit_test(test_state_records_augment),
        cmocka_unit_test(test_adamw_round_trip_and_resume_are_exact),
        cmocka_unit_test(test_adamw_restore_refuses_damaged_state),
        cmocka_unit_test(test_restore_refuses_state_of_another_optimizer),
        cmocka_unit_test(test_old_file_reads_as_sgd),
        cmocka_unit_test(test_restore_refuses_damaged_tensors),
        cmocka_unit_test(test_restore_refuses_non_finite_momentum),
        cmocka_unit_test(test_model_only_file_is_not_a_training_checkpoint),
        cmocka_unit_test(test_names_sort_by_position),
        cmocka_unit_test(test_find_and_prune),
        cmocka_unit_test(test_listing_refuses_what_is_not_a_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
