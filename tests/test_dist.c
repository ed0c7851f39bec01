/* test_dist.c — training as several processes, without MPI: each "rank" is a thread with its
 * own model and trainer, joined by an in-memory communicator that also checks that every rank
 * makes the same collective calls with the same sizes, and counts the bytes each rank sends and
 * receives. Checks that 2 and 4 ranks end with the weights, statistics, step losses and
 * evaluation of one process, bit for bit; that the exchange's reduce-scatter and allgather give
 * one process's sums bit for bit for 2 to 8 ranks, uneven slices included, with per-rank bytes
 * that do not grow with the ranks; and the sharing, agreement and gathering helpers. The real
 * Open MPI runs are in tests/cli_mpi.sh. */
#include "testutil.h"

#include "test_world.h"

/* ------------------------------------------------------------------ a short run */

enum { REPLICAS = 4, BATCH = 16, EPOCHS = 2, TRAIN = 300, TEST = 70, MAX_STEPS = 16 };


/* What one rank (or the single process) ends with. */
typedef struct {
    const cn_comm *comm;   /* NULL: one process */
    int threads;
    const cn_dataset *train, *test;
    int rc;
    float params[21900];
    float stats[60];       /* running mean and var of bn1 and bn2 */
    int64_t tracked[2];
    float step_loss[EPOCHS * MAX_STEPS];
    int step_correct[EPOCHS * MAX_STEPS]; /* right answers of each step, over all ranks */
    float epoch_loss[EPOCHS];
    double test_loss, accuracy;
    uint8_t predictions[TEST];
    int64_t exchange_bytes;
    cn_phase_times times;
    char error[1024];
} run_result;

static void record_step(void *ctx, const cn_step_report *r)
{
    run_result *res = ctx; /* on a rank's thread: no cmocka assertions here */
    if (r->steps <= MAX_STEPS) {
        res->step_loss[(r->epoch - 1) * MAX_STEPS + r->step] = r->loss;
        res->step_correct[(r->epoch - 1) * MAX_STEPS + r->step] = r->correct;
    }
}

static void copy_state(cn_model *m, run_result *res)
{
    cn_tensor_ref refs[18];
    cn_model_tensors(m, refs, 18);
    memcpy(res->params, cn_model_params(m), sizeof res->params);
    memcpy(res->stats, refs[4].data, 20 * sizeof(float)); /* bn1 running mean and var */
    memcpy(res->stats + 20, refs[11].data, 40 * sizeof(float));
    res->tracked[0] = *(int64_t *)refs[6].data;
    res->tracked[1] = *(int64_t *)refs[13].data;
}

static int train_and_score(cn_trainer *t, run_result *res, cn_error *err)
{
    for (int e = 1; e <= EPOCHS; e++)
        if (cn_trainer_epoch(t, res->train, e, record_step, res, &res->epoch_loss[e - 1],
                             &res->times, err))
            return -1;
    return cn_evaluate(t, res->test, TEST, &res->test_loss, &res->accuracy, res->predictions,
                       err);
}

static void *train_one(void *arg)
{
    run_result *res = arg;
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    cn_model_init(m, 9);
    cn_train_config cfg = {.batch_size = BATCH, .num_replicas = REPLICAS,
                           .threads = res->threads,
                           .learning_rate = 0.01f, .momentum = 0.5f, .seed = 9};
    cn_trainer *t = cn_trainer_create_distributed(m, &cfg, res->comm, &err);
    res->rc = t ? train_and_score(t, res, &err) : -1;
    res->exchange_bytes = t ? cn_trainer_exchange_bytes(t) : -1;
    copy_state(m, res);
    snprintf(res->error, sizeof res->error, "%s", err.msg);
    cn_trainer_free(t);
    cn_model_free(m);
    return NULL;
}

static void expect_same_run(const run_result *a, const run_result *b)
{
    assert_int_equal(b->rc, 0);
    assert_memory_equal(a->params, b->params, sizeof a->params);
    assert_memory_equal(a->stats, b->stats, sizeof a->stats);
    assert_memory_equal(a->tracked, b->tracked, sizeof a->tracked);
    assert_memory_equal(a->step_loss, b->step_loss, sizeof a->step_loss);
    assert_memory_equal(a->step_correct, b->step_correct, sizeof a->step_correct);
    assert_memory_equal(a->epoch_loss, b->epoch_loss, sizeof a->epoch_loss);
    assert_memory_equal(&a->test_loss, &b->test_loss, sizeof a->test_loss);
    assert_memory_equal(&a->accuracy, &b->accuracy, sizeof a->accuracy);
    assert_memory_equal(a->predictions, b->predictions, sizeof a->predictions);
}

static void check_ranks_match_one_process(int size)
{
    cn_dataset train = tu_synthetic_set(TRAIN, 31), test = tu_synthetic_set(TEST, 32);
    run_result *one = calloc(1, sizeof *one), *ranks = calloc(MAX_RANKS, sizeof *ranks);
    assert_non_null(one);
    assert_non_null(ranks);
    *one = (run_result){.threads = 2, .train = &train, .test = &test};
    train_one(one);
    assert_int_equal(one->rc, 0);
    assert_int_equal(one->tracked[0], EPOCHS * (TRAIN / REPLICAS / BATCH));
    assert_true(one->times.communicate == 0);
    assert_int_equal(one->exchange_bytes, 0);

    world w;
    rank_ctx ctx[MAX_RANKS];
    world_init(&w, size, ctx);
    for (int p = 0; p < size; p++)
        ranks[p] = (run_result){.comm = &ctx[p].comm, .threads = 1 + p % 2, .train = &train,
                                .test = &test};
    run_ranks(size, train_one, ranks, sizeof *ranks);
    world_finish(&w);
    /* 21,900 parameters and 60 BatchNorm running shares summed; loss and right answers */
    int local = REPLICAS / size, slice = (21900 + 60 + size - 1) / size;
    for (int p = 0; p < size; p++) {
        expect_same_run(one, &ranks[p]);
        assert_true(ranks[p].times.communicate > 0);
        assert_int_equal(ranks[p].exchange_bytes,
                         8 * (size - 1) * ((local + 1) * slice + 2 * local));
    }
    free(one);
    free(ranks);
    cn_dataset_free(&train);
    cn_dataset_free(&test);
}

static void test_two_ranks_match_one_process(void **state)
{
    (void)state;
    check_ranks_match_one_process(2);
}

static void test_four_ranks_match_one_process(void **state)
{
    (void)state;
    check_ranks_match_one_process(4);
}

/* The check itself can fail: a different replica count gives other weights. */
static void test_other_replica_count_differs(void **state)
{
    (void)state;
    cn_dataset train = tu_synthetic_set(TRAIN, 31), test = tu_synthetic_set(TEST, 32);
    run_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    *a = (run_result){.threads = 1, .train = &train, .test = &test};
    train_one(a);
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    cn_model_init(m, 9);
    cn_train_config cfg = {.batch_size = BATCH, .num_replicas = REPLICAS / 2,
                           .threads = 1, .learning_rate = 0.01f * 2, .momentum = 0.5f, .seed = 9};
    cn_trainer *t = cn_trainer_create(m, &cfg, &err);
    b->train = &train, b->test = &test;
    assert_int_equal(train_and_score(t, b, &err), 0);
    copy_state(m, b);
    assert_memory_not_equal(a->params, b->params, sizeof a->params);
    cn_trainer_free(t);
    cn_model_free(m);
    free(a);
    free(b);
    cn_dataset_free(&train);
    cn_dataset_free(&test);
}

static void test_replicas_must_divide_among_ranks(void **state)
{
    (void)state;
    world w;
    rank_ctx ctx[MAX_RANKS];
    world_init(&w, 4, ctx);
    cn_error err = {{0}};
    cn_model *m = cn_model_fashion_mnist(&err);
    cn_train_config cfg = {.batch_size = BATCH, .num_replicas = 6,
                           .threads = 1, .learning_rate = 0.01f, .momentum = 0.5f, .seed = 1};
    assert_null(cn_trainer_create_distributed(m, &cfg, &ctx[1].comm, &err));
    assert_non_null(strstr(err.msg, "6 replicas"));
    assert_non_null(strstr(err.msg, "4 processes"));
    cfg.num_replicas = 8;
    cn_trainer *t = cn_trainer_create_distributed(m, &cfg, &ctx[1].comm, &err);
    assert_non_null(t); /* creating makes no collective call */
    cn_trainer_free(t);
    cn_model_free(m);
    world_finish(&w);
}

/* ------------------------------------------------------------------ the exchange alone */

/* Replica r's summed float j (its gradient, then its running shares): values of magnitudes
 * 1e-3 to 1e3 and both signs, so that summing them in another order or association gives
 * other bits. */
static float summed_value(int r, size_t j)
{
    uint32_t h = (uint32_t)(r * 7919 + 1) * 2654435761u ^ (uint32_t)j * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    static const float scale[7] = {1e-3f, 1e-2f, 0.1f, 1.0f, 10.0f, 100.0f, 1000.0f};
    return ((float)(h % 2001u) - 1000.0f) / 997.0f * scale[(h >> 11) % 7u];
}

typedef struct {
    const cn_comm *comm;
    int replicas;
    size_t num_params, num_report;
    float *mean;     /* [num_params + num_report] what this rank ends with */
    int tails_ok;    /* every replica's loss and right answers came through */
    int64_t bytes;   /* cn_exchange_bytes */
    int rc;
} exchange_case;

/* The exchange's step on one rank, once its buffers are there and values holds room for one
 * replica's summed floats. */
static int exchange_step(exchange_case *c, cn_exchange *x, float *values, cn_error *err)
{
    int local = c->replicas / c->comm->size;
    size_t total = c->num_params + c->num_report;
    for (int i = 0; i < local; i++) {
        int r = c->comm->rank * local + i;
        for (size_t j = 0; j < total; j++) values[j] = summed_value(r, j);
        cn_exchange_put(x, i, values, 0.5f * (float)r, 3 * r, values + c->num_params);
    }
    if (cn_exchange_scatter(x, err)) return -1;
    cn_exchange_reduce(x);
    if (cn_exchange_gather(x, c->mean, c->mean + c->num_params, err)) return -1;
    c->tails_ok = 1;
    for (int r = 0; r < c->replicas; r++) {
        cn_replica_result res = cn_exchange_result(x, r);
        c->tails_ok &= *res.loss == 0.5f * (float)r && *res.correct == (float)(3 * r);
    }
    c->bytes = cn_exchange_bytes(x);
    return 0;
}

static void *exchange_one(void *arg)
{
    exchange_case *c = arg;
    cn_error err = {{0}};
    cn_exchange x;
    float *values = malloc((c->num_params + c->num_report) * sizeof *values);
    c->rc = !values || cn_exchange_init(&x, c->comm, c->replicas, c->num_params, c->num_report);
    if (c->rc == 0) c->rc = exchange_step(c, &x, values, &err);
    cn_exchange_free(&x);
    free(values);
    return NULL;
}

/* One process's mean: each float summed over replicas 0..R-1 from 0, then divided by R (the
 * trainer's reduce_slice, BatchNorm's update_running); reversed: the same from replica R-1. */
static void one_process_mean(int replicas, size_t n, int reversed, float *mean)
{
    for (size_t j = 0; j < n; j++) {
        float sum = 0.0f;
        for (int k = 0; k < replicas; k++)
            sum += summed_value(reversed ? replicas - 1 - k : k, j);
        mean[j] = sum / (float)replicas;
    }
}

/* size ranks of `local` replicas each exchange n gradient floats and m running shares; each
 * ends with one process's means bit for bit. Returns the bytes each rank moved. */
static int64_t check_exchange(int size, int local, size_t n, size_t m)
{
    int replicas = size * local;
    float *want = malloc((n + m) * sizeof *want);
    float *means = malloc((size_t)size * (n + m) * sizeof *means);
    assert_non_null(want);
    assert_non_null(means);
    one_process_mean(replicas, n + m, 0, want);
    world w;
    rank_ctx ctx[MAX_RANKS];
    exchange_case cases[MAX_RANKS];
    world_init(&w, size, ctx);
    for (int p = 0; p < size; p++)
        cases[p] = (exchange_case){&ctx[p].comm, replicas, n, m, means + (size_t)p * (n + m),
                                   0, 0, 0};
    run_ranks(size, exchange_one, cases, sizeof cases[0]);
    int64_t moved = w.bytes[0];
    for (int p = 0; p < size; p++) {
        assert_int_equal(cases[p].rc, 0);
        assert_true(cases[p].tails_ok);
        assert_memory_equal(cases[p].mean, want, (n + m) * sizeof *want);
        assert_int_equal(cases[p].bytes, w.bytes[p]); /* what it reports is what it moved */
        assert_int_equal(w.bytes[p], moved);
    }
    world_finish(&w);
    free(want);
    free(means);
    return moved;
}

static void test_exchange_sums_like_one_process(void **state)
{
    (void)state;
    static const size_t lengths[][2] = {{1, 0}, {2, 1}, {10, 0}, {997, 4}, {21900, 60}};
    for (int size = 2; size <= MAX_RANKS; size++) /* slices of every size, some empty */
        for (int local = 1; local <= 3; local++)
            for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++)
                check_exchange(size, local, lengths[k][0], lengths[k][1]);
}

/* The check above can fail: the same sums in another order give other bits. */
static void test_order_of_the_sum_matters(void **state)
{
    (void)state;
    enum { R = 8, N = 1001 };
    float forward[N], backward[N];
    one_process_mean(R, N, 0, forward);
    one_process_mean(R, N, 1, backward);
    assert_memory_not_equal(forward, backward, sizeof forward);
}

/* With a fixed number L of replicas per rank, each rank moves 8 (P - 1) ((L + 1) ceil(N / P)
 * + 2 L) bytes for N summed floats: below 8 (L + 1) (N + P) + 16 (P - 1) L however many ranks
 * there are, the last term the loss and right answers of each replica (the whole replicas'
 * records to every rank would be 8 (P - 1) L (N + 2)). */
static void test_exchange_bytes_do_not_grow_with_ranks(void **state)
{
    (void)state;
    const int64_t n = 1001, m = 4, N = n + m;
    for (int local = 1; local <= 2; local++)
        for (int size = 2; size <= MAX_RANKS; size++) {
            int64_t moved = check_exchange(size, local, (size_t)n, (size_t)m);
            int64_t slice = (N + size - 1) / size, per_replica = 16 * (size - 1) * local;
            assert_int_equal(moved, 8 * (size - 1) * ((local + 1) * slice + 2 * local));
            assert_true(moved - per_replica <= 8 * (local + 1) * (N + size));
            assert_true(moved - per_replica >= 8 * (local + 1) * N / 2); /* and it is moved */
        }
}

/* ------------------------------------------------------------------ helpers */

static void test_share_covers_everything_once(void **state)
{
    (void)state;
    for (int total = 0; total <= 23; total++)
        for (int size = 1; size <= 6; size++) {
            int expected = 0;
            for (int p = 0; p < size; p++) {
                int begin, end;
                cn_comm_share(total, p, size, &begin, &end);
                assert_int_equal(begin, expected); /* contiguous, in rank order */
                assert_true(end - begin == total / size || end - begin == total / size + 1);
                expected = end;
            }
            assert_int_equal(expected, total);
        }
}

typedef struct {
    const cn_comm *comm;
    int failed;
    int rc;
    char message[1024];
} agree_case;

static void *agree_one(void *arg)
{
    agree_case *a = arg;
    cn_error err = {{0}};
    if (a->failed) snprintf(err.msg, sizeof err.msg, "failure on rank %d", a->comm->rank);
    a->rc = cn_comm_agree(a->comm, a->failed, &err);
    snprintf(a->message, sizeof a->message, "%s", err.msg);
    return NULL;
}

static void check_agreement(const int failed[4], int expected_rc, const char *expected)
{
    world w;
    rank_ctx ctx[MAX_RANKS];
    agree_case cases[MAX_RANKS];
    world_init(&w, 4, ctx);
    for (int p = 0; p < 4; p++) cases[p] = (agree_case){&ctx[p].comm, failed[p], 0, ""};
    run_ranks(4, agree_one, cases, sizeof cases[0]);
    world_finish(&w);
    for (int p = 0; p < 4; p++) {
        assert_int_equal(cases[p].rc, expected_rc);
        if (expected) assert_string_equal(cases[p].message, expected);
    }
}

static void test_agreement_reports_the_first_failing_rank_everywhere(void **state)
{
    (void)state;
    check_agreement((const int[4]){0, 0, 0, 0}, 0, NULL);
    check_agreement((const int[4]){0, 0, 1, 1}, -1, "rank 2: failure on rank 2");
    check_agreement((const int[4]){1, 0, 0, 0}, -1, "rank 0: failure on rank 0");
    cn_error err = {{0}};
    assert_int_equal(cn_comm_agree(NULL, 0, &err), 0);
    assert_int_equal(cn_comm_agree(NULL, 1, &err), -1);
}

typedef struct {
    const cn_comm *comm;
    int values[10];
    int rc;
} gather_case;

/* Rank p fills in its share of ten items in units of three and scribbles on the rest. */
static void *gather_one(void *arg)
{
    gather_case *g = arg;
    int begin, end;
    cn_comm_share(4, g->comm->rank, g->comm->size, &begin, &end);
    for (int i = 0; i < 10; i++)
        g->values[i] = i >= begin * 3 && i < end * 3 ? 100 + i : -1;
    cn_error err = {{0}};
    g->rc = cn_comm_allgather_shares(g->comm, g->values, sizeof(int), 10, 3, &err);
    return NULL;
}

static void test_gathering_shares_fills_in_every_item(void **state)
{
    (void)state;
    for (int size = 2; size <= 4; size++) {
        world w;
        rank_ctx ctx[MAX_RANKS];
        gather_case cases[MAX_RANKS];
        world_init(&w, size, ctx);
        for (int p = 0; p < size; p++) cases[p] = (gather_case){.comm = &ctx[p].comm};
        run_ranks(size, gather_one, cases, sizeof cases[0]);
        world_finish(&w);
        for (int p = 0; p < size; p++) {
            assert_int_equal(cases[p].rc, 0);
            for (int i = 0; i < 10; i++) assert_int_equal(cases[p].values[i], 100 + i);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share_covers_everything_once),
        cmocka_unit_test(test_agreement_reports_the_first_failing_rank_everywhere),
        cmocka_unit_test(test_gathering_shares_fills_in_every_item),
        cmocka_unit_test(test_replicas_must_divide_among_ranks),
        cmocka_unit_test(test_exchange_sums_like_one_process),
        cmocka_unit_test(test_order_of_the_sum_matters),
        cmocka_unit_test(test_exchange_bytes_do_not_grow_with_ranks),
        cmocka_unit_test(test_two_ranks_match_one_process),
        cmocka_unit_test(test_four_ranks_match_one_process),
        cmocka_unit_test(test_other_replica_count_differs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
