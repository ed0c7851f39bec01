/* trainer.c — data-parallel training and evaluation of a cn_model. R replicas each run forward
 * and backward on their own batch in the workspace of the thread that runs them and leave their
 * results in the exchange (dist.h); the gradients are then summed in replica
 * order and averaged, BatchNorm running statistics become the mean of the replicas' updates,
 * and one optimiser step (optimizer.c: SGD or AdamW, at the rate its cfg.lr_schedule gives that
 * step of the run) updates the single model. When the threads
 * divide the replicas, replica r runs on pool thread r % T; otherwise the replicas run one after
 * another, each spreading the chunks of its batch over the threads. Every sum has a fixed order
 * either way, so the weights do not depend on the thread count. With a communicator each process
 * runs its share of the replicas; each then sums one slice of the gradient and of the replicas'
 * shares of the running statistics over all replicas in the same order, and the sums are
 * gathered back (dist.c) with every replica's loss, so the weights do not depend on the process
 * count either. Threads and their workspaces follow
 * the work, not the thread count asked for: the first call that needs them (a step, an
 * evaluation) makes as many as it can give work to, for the samples it runs, and later calls
 * reuse them; the step loop allocates nothing. A training sample is cropped and flipped
 * (augment.c) before its normalisation when cfg.augment asks, as its (seed, epoch, index) draws;
 * evaluation never augments. An epoch can start at any of its steps (what a resumed run needs);
 * writing checkpoints is not done here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "train/dist.h"
#include "train/optimizer.h"
#include "model/executor.h"
#include "layers/layers.h"

struct cn_trainer {
    cn_model *m;
    cn_train_config cfg;
    const cn_comm *comm; /* NULL: this process alone */
    cn_pool *pool;       /* NULL until the first job; then one thread per workspace */
    cn_plan plan;        /* how a batch goes through the model, shared by all workspaces: for
                            batch_size samples, or fewer while the trainer has only evaluated */
    int first_replica, local_replicas; /* this process's replicas: all R when alone */
    int step_threads;    /* the threads a training step can give work to */
    int num_workspaces;  /* made so far: ws[0 .. num_workspaces) */
    cn_workspace *ws;    /* [cfg.threads] */
    double (*part_seconds)[3]; /* [local] thread-seconds of data, forward, backward this step */
    cn_exchange exchange;      /* every replica's results, from this and the other processes */
    cn_replica_result *result; /* [R] where replica r's results of the step are read from */
    float *mean_report;  /* several processes: [num_report] the mean of the replicas' running
                            shares (the running statistics to take); NULL alone */
    const float **reports; /* [R] one layer's part of each replica's report (running stats) */
    float *grad;         /* [num_params] averaged gradient, then the candidate momentum */
    float *momentum;     /* [num_params] sgd; adamw: exp_avg then exp_avg_sq [2 x num_params] */
    float *next_state2;  /* adamw: [num_params] the candidate exp_avg_sq; NULL for sgd */
    int64_t optimizer_steps; /* steps taken (adamw's bias correction) */
    cn_optim_rule rule;  /* the step being taken */
    float *next_params;  /* [num_params] candidate weights, kept only when all are finite */
    uint8_t *slice_bad;  /* [cfg.threads] 1 where a task's slice of the step's gradient (reduce)
                            or of its candidate weights (optimiser) holds a non-finite value */
    uint32_t *batch_index; /* [R*B] dataset indices of the current step, replica-major */
    int epoch, step;     /* the step being run: what its random draws (dropout, augmentation)
                            depend on */
    int direct_steps;    /* cn_trainer_step's steps so far: their step numbers */
    uint8_t *augmented;  /* [cfg.threads x input size] workspace i's augmented sample; NULL:
                            no augmentation */
};

/* ------------------------------------------------------------------ set-up */

static int check_optimizer(const cn_train_config *c, cn_error *err)
{
    if ((unsigned)c->optimizer >= CN_OPTIMIZER_COUNT)
        return cn_fail(err, "optimizer %d is not one of sgd, adamw", (int)c->optimizer);
    if (c->nesterov != 0 && (c->nesterov != 1 || c->optimizer != CN_OPTIMIZER_SGD ||
                             !(c->momentum > 0)))
        return cn_fail(err, "nesterov is 0 or 1, and 1 needs sgd with a momentum above 0");
    if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
        return cn_fail(err, "weight decay must be a number >= 0");
    if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
        return cn_fail(err, "adamw's betas must be in [0, 1) (0: 0.9, 0.999)");
    if (!(c->eps >= 0) || !isfinite(c->eps))
        return cn_fail(err, "adamw's eps must be a number >= 0 (0: 1e-8)");
    return 0;
}

static int check_config(const cn_train_config *c, cn_error *err)
{
    if (c->batch_size < 1 || c->batch_size > 65536)
        return cn_fail(err, "batch size %d is outside 1..65536", c->batch_size);
    if (c->num_replicas < 1 || c->num_replicas > 1024)
        return cn_fail(err, "replica count %d is outside 1..1024", c->num_replicas);
    if (c->threads < 1 || c->threads > 1024)
        return cn_fail(err, "thread count %d is outside 1..1024", c->threads);
    if (!(c->learning_rate > 0) || !isfinite(c->learning_rate))
        return cn_fail(err, "learning rate must be a positive number");
    if (!(c->momentum >= 0 && c->momentum < 1))
        return cn_fail(err, "momentum must be in [0, 1)");
    if (!(c->label_smoothing >= 0 && c->label_smoothing < 1))
        return cn_fail(err, "label smoothing must be in [0, 1)");
    if (check_optimizer(c, err) || cn_lr_schedule_check(&c->lr_schedule, err)) return -1;
    if (!cn_precision_supported(c->precision))
        return cn_fail(err, "precision %s: this CPU cannot run it%s",
                       cn_precision_name(c->precision),
                       c->precision == CN_PRECISION_BF16 ? " (it needs AVX512_BF16)" : "");
    return 0;
}

static int check_comm(const cn_comm *comm, int replicas, cn_error *err)
{
    if (!cn_comm_is_distributed(comm)) return 0;
    if (comm->rank < 0 || comm->rank >= comm->size || !comm->allgather || !comm->alltoall ||
        !comm->abort)
        return cn_fail(err, "communicator: rank %d of %d without allgather, alltoall and abort",
                       comm->rank, comm->size);
    if (replicas % comm->size != 0)
        return cn_fail(err, "%d replicas cannot be shared evenly among %d processes (use a "
                       "multiple of %d)", replicas, comm->size, comm->size);
    return 0;
}

/* The one process of a run without others. */
static const cn_comm solo = {.rank = 0, .size = 1};

/* Replica r's results are in the exchange: each replica's pass copies them there, so that its
 * workspace is free for the next replica on the same thread; with other processes the exchange
 * also carries them between processes. */
static int plan_results(cn_trainer *t)
{
    int R = t->cfg.num_replicas;
    const cn_comm *c = cn_comm_is_distributed(t->comm) ? t->comm : &solo;
    t->result = calloc((size_t)R, sizeof *t->result);
    t->reports = calloc((size_t)R, sizeof *t->reports);
    if (!t->result || !t->reports) return -1;
    if (cn_exchange_init(&t->exchange, c, R, t->m->num_params, t->m->num_report)) return -1;
    if (c != &solo && !(t->mean_report = calloc(t->m->num_report + 1, sizeof(float))))
        return -1;
    for (int r = 0; r < R; r++) t->result[r] = cn_exchange_result(&t->exchange, r);
    return 0;
}

/* A training step gives work to one thread per local replica when they run side by side, or to
 * one per chunk of a segment when each replica's batch is split: never to more than the larger
 * of the two, whatever the thread count asked for. Needs the plan for batch_size. */
static int most_step_threads(const cn_trainer *t)
{
    int most = t->local_replicas;
    for (int s = 0; s < t->plan.num_segments; s++)
        if (t->plan.segments[s].num_chunks > most) most = t->plan.segments[s].num_chunks;
    return most < t->cfg.threads ? most : t->cfg.threads;
}

/* An evaluation of n samples gives one batch to each thread: as many threads as the batches of
 * the largest process's share, so that every process plans the same. */
static int eval_threads(const cn_trainer *t, int n)
{
    int B = t->cfg.batch_size, batches = n / B + (n % B != 0);
    int size = cn_comm_is_distributed(t->comm) ? t->comm->size : 1;
    int share = batches / size + (batches % size != 0);
    return share < 1 ? 1 : share < t->cfg.threads ? share : t->cfg.threads;
}

/* The plan for batches of up to batch samples, with the loss of the configuration. */
static int make_plan(cn_trainer *t, int batch)
{
    if (cn_plan_init(&t->plan, t->m, batch, t->cfg.precision)) return -1;
    t->plan.label_smoothing = t->cfg.label_smoothing;
    return 0;
}

static int allocate(cn_trainer *t)
{
    int R = t->cfg.num_replicas, B = t->cfg.batch_size;
    size_t n = t->m->num_params;
    const cn_comm *c = t->comm;
    int end = R;
    if (cn_comm_is_distributed(c)) cn_comm_share(R, c->rank, c->size, &t->first_replica, &end);
    int local = t->local_replicas = end - t->first_replica;
    if (make_plan(t, B)) return -1;
    t->step_threads = most_step_threads(t);
    t->ws = calloc((size_t)t->cfg.threads, sizeof *t->ws); /* made by use_workspaces */
    t->part_seconds = calloc((size_t)local, sizeof *t->part_seconds);
    t->grad = calloc(n, sizeof *t->grad);
    int adamw = t->cfg.optimizer == CN_OPTIMIZER_ADAMW;
    t->momentum = calloc(adamw ? 2 * n : n, sizeof *t->momentum);
    if (adamw && !(t->next_state2 = calloc(n, sizeof *t->next_state2))) return -1;
    t->next_params = calloc(n, sizeof *t->next_params);
    t->slice_bad = calloc((size_t)t->cfg.threads, sizeof *t->slice_bad);
    t->batch_index = calloc((size_t)R * B, sizeof *t->batch_index);
    if (!t->ws || !t->part_seconds || !t->grad || !t->momentum || !t->next_params ||
        !t->slice_bad || !t->batch_index)
        return -1;
    const cn_augment *a = &t->cfg.augment;
    if ((a->crop_padding > 0 || a->hflip) &&
        !(t->augmented = malloc((size_t)t->cfg.threads * cn_model_input_size(t->m))))
        return -1;
    return plan_results(t);
}

static void drop_workspaces(cn_trainer *t)
{
    for (int i = 0; i < t->num_workspaces; i++) cn_workspace_free(&t->ws[i]);
    t->num_workspaces = 0;
}

/* Makes workspaces 0..count-1 ready for batches of up to batch samples, and a pool of as many
 * threads (count is raised to the workspaces already there). An untouched trainer plans for the
 * batch it is first asked for; workspaces planned for fewer samples than asked are all planned
 * again. Returns at once when everything is there. The pool never has more threads than there
 * are workspaces, even after a failure: thread i works in workspace i. */
static int use_workspaces(cn_trainer *t, int batch, int count, cn_error *err)
{
    if (count < t->num_workspaces) count = t->num_workspaces;
    int replan = batch > t->plan.batch || (t->num_workspaces == 0 && batch < t->plan.batch);
    if (!replan && count == t->num_workspaces && t->pool) return 0;
    if (replan) {
        cn_pool_free(t->pool);
        t->pool = NULL;
        drop_workspaces(t);
        cn_plan_free(&t->plan);
        if (make_plan(t, batch))
            return cn_fail(err, "trainer: out of memory for a batch of %d", batch);
    }
    for (; t->num_workspaces < count; t->num_workspaces++)
        if (cn_workspace_init(&t->ws[t->num_workspaces], &t->plan))
            return cn_fail(err, "trainer: out of memory for %d threads' buffers for a batch of "
                           "%d", count, batch);
    if (t->pool && cn_pool_threads(t->pool) >= count) return 0;
    cn_pool *bigger = cn_pool_create(count, err);
    if (!bigger) return -1;
    cn_pool_free(t->pool);
    t->pool = bigger;
    return 0;
}

/* What a training step needs; the first step makes it, every process alike (every one of them
 * drives its trainer with the same calls), so the agreement is reached on every rank or none. */
static int ready_to_train(cn_trainer *t, cn_error *err)
{
    if (t->plan.batch == t->cfg.batch_size && t->num_workspaces >= t->step_threads && t->pool)
        return 0;
    int failed = use_workspaces(t, t->cfg.batch_size, t->step_threads, err) != 0;
    return cn_comm_agree(t->comm, failed, err);
}

cn_trainer *cn_trainer_create_distributed(cn_model *m, const cn_train_config *cfg,
                                          const cn_comm *comm, cn_error *err)
{
    int channels, height, width;
    cn_model_input_shape(m, &channels, &height, &width);
    if (check_config(cfg, err) || cn_augment_check(&cfg->augment, height, width, err) ||
        check_comm(comm, cfg->num_replicas, err))
        return NULL;
    if (!cn_model_has_normalization(m)) {
        cn_fail(err, "trainer: the model has no normalisation of its input (its model file "
                "gives no mean= and std=): set one with cn_model_set_normalization, e.g. from "
                "cn_dataset_normalization of the training set");
        return NULL;
    }
    cn_trainer *t = calloc(1, sizeof *t);
    if (!t) {
        cn_fail(err, "trainer: out of memory");
        return NULL;
    }
    t->m = m, t->cfg = *cfg, t->comm = comm;
    if (allocate(t)) {
        cn_trainer_free(t);
        cn_fail(err, "trainer: out of memory for %d replicas of batch %d", cfg->num_replicas,
                cfg->batch_size);
        return NULL;
    }
    return t;
}

cn_trainer *cn_trainer_create(cn_model *m, const cn_train_config *cfg, cn_error *err)
{
    return cn_trainer_create_distributed(m, cfg, NULL, err);
}

void cn_trainer_free(cn_trainer *t)
{
    if (!t) return;
    cn_pool_free(t->pool);
    if (t->ws) drop_workspaces(t);
    free(t->ws);
    cn_plan_free(&t->plan);
    free(t->part_seconds);
    free(t->grad);
    free(t->momentum);
    free(t->next_state2);
    free(t->next_params);
    free(t->slice_bad);
    free(t->batch_index);
    free(t->augmented);
    free(t->result);
    free(t->reports);
    free(t->mean_report);
    cn_exchange_free(&t->exchange);
    free(t);
}

/* ------------------------------------------------------------------ one step */

typedef struct {
    cn_trainer *t;
    const uint8_t *images, *labels; /* the dataset (or the batch itself when index is NULL) */
    const uint32_t *index;          /* [R*B] sample indices, replica-major, or NULL */
} step_job;

/* Sample `sample` (its index in the training set, or in cn_trainer_step's batch) cropped and
 * flipped as it draws in this epoch, into the augmentation scratch of workspace w. */
static const uint8_t *augment_sample(cn_trainer *t, const cn_workspace *w,
                                     const uint8_t *pixels, size_t sample)
{
    int c, h, wd;
    cn_model_input_shape(t->m, &c, &h, &wd);
    uint8_t *out = t->augmented + (size_t)(w - t->ws) * c * h * wd;
    cn_augment_draw d = cn_augment_draw_sample(&t->cfg.augment, t->cfg.seed, t->epoch,
                                               (uint32_t)sample);
    cn_augment_image(&t->cfg.augment, &d, pixels, out, c, h, wd);
    return out;
}

/* Local replica i (replica first_replica + i of all R) into workspace w. */
static void load_batch(const step_job *job, int i, cn_workspace *w)
{
    cn_trainer *t = job->t;
    int r = t->first_replica + i, B = t->cfg.batch_size, size = cn_model_input_size(t->m);
    w->key = (cn_step_key){t->cfg.seed, t->epoch, t->step, r};
    for (int k = 0; k < B; k++) {
        size_t at = (size_t)r * B + k;
        size_t sample = job->index ? job->index[at] : at;
        const uint8_t *pixels = job->images + sample * size;
        if (k + 1 < B) { /* the next sample is somewhere else in memory: ask for it now */
            const uint8_t *next = job->images + (job->index ? job->index[at + 1] : at + 1) * size;
            for (int j = 0; j < size; j += 64) __builtin_prefetch(next + j);
        }
        if (t->augmented) pixels = augment_sample(t, w, pixels, sample);
        cn_model_normalize(t->m, w->input + (size_t)k * size, pixels, 1);
        w->labels[k] = job->labels[sample];
    }
}

/* Local replica i's results into the exchange. With other processes each layer's report
 * becomes, in place, this replica's share of the running statistics (running_share), which the
 * exchange sums like the gradient. */
static void put_results(cn_trainer *t, int i, cn_workspace *w, float loss, int correct)
{
    for (int k = 0; t->mean_report && k < t->m->num_layers; k++) {
        const cn_layer *l = &t->m->layers[k];
        if (l->type->running_share)
            l->type->running_share(l, t->m->running + l->running, w->report + l->report,
                                   w->report + l->report);
    }
    cn_exchange_put(&t->exchange, i, w->dparams, loss, correct, w->report);
}

/* One local replica's whole share of a step — its batch, forward, loss and backward — in one
 * task, in the workspace of the thread, so that what forward leaves for backward is still in
 * this core's caches. The thread-seconds of each part go to t->part_seconds[i]; the results go
 * into this process's block of the exchange. */
static void replica_pass(void *ctx, int i, int thread)
{
    const step_job *job = ctx;
    cn_trainer *t = job->t;
    cn_workspace *w = &t->ws[thread];
    int B = t->cfg.batch_size, last = t->m->num_layers - 1;
    double *part = t->part_seconds[i], start = cn_seconds();
    load_batch(job, i, w);
    double loaded = cn_seconds();
    cn_forward(&t->plan, w, B, 1);
    int classes = t->m->layers[last].out.c;
    float loss = cn_smoothed_nll_loss(w->out[last], w->labels, B, classes,
                                      t->cfg.label_smoothing);
    int correct = cn_count_correct(w->out[last], w->labels, B, classes);
    double forwarded = cn_seconds();
    cn_backward(&t->plan, w);
    put_results(t, i, w, loss, correct);
    part[0] = loaded - start, part[1] = forwarded - loaded, part[2] = cn_seconds() - forwarded;
}

/* One segment's chunks of replica r's batch, spread over the pool: chunk c runs on thread
 * c % T with that thread's workspace as its scratch. */
typedef struct {
    cn_trainer *t;
    cn_workspace *w;
    int seg;
} chunk_job;

static void forward_chunk_task(void *ctx, int chunk, int thread)
{
    const chunk_job *j = ctx;
    cn_forward_chunk(&j->t->plan, j->w, &j->t->ws[thread], j->seg, chunk, j->t->cfg.batch_size, 1);
}

static void backward_chunk_task(void *ctx, int chunk, int thread)
{
    const chunk_job *j = ctx;
    cn_backward_chunk(&j->t->plan, j->w, &j->t->ws[thread], j->seg, chunk);
}

static void run_chunks(cn_trainer *t, chunk_job *j, cn_task_fn fn)
{
    int chunks = cn_segment_chunks(&t->plan, j->seg, t->cfg.batch_size);
    if (chunks == 1)
        fn(j, 0, 0); /* a BatchNorm layer or a small segment: not worth a hand-off */
    else
        cn_pool_run(t->pool, chunks, fn, j);
}

/* Local replica i's share of a step with all threads on its batch, segment by segment; the
 * same arithmetic as replica_pass. */
static void replica_split_pass(const step_job *job, int i, cn_phase_times *tm)
{
    cn_trainer *t = job->t;
    const cn_plan *p = &t->plan;
    int B = t->cfg.batch_size, last = t->m->num_layers - 1;
    chunk_job j = {t, &t->ws[0], 0}; /* the batch in thread 0's workspace, its scratch too */
    double start = cn_seconds();
    load_batch(job, i, j.w);
    double loaded = cn_seconds();
    for (j.seg = 0; j.seg < p->num_segments; j.seg++) run_chunks(t, &j, forward_chunk_task);
    int classes = t->m->layers[last].out.c;
    float loss = cn_smoothed_nll_loss(j.w->out[last], j.w->labels, B, classes,
                                      t->cfg.label_smoothing);
    int correct = cn_count_correct(j.w->out[last], j.w->labels, B, classes);
    double forwarded = cn_seconds();
    cn_backward_start(p, j.w);
    for (j.seg = p->num_segments - 1; j.seg >= 0; j.seg--) {
        run_chunks(t, &j, backward_chunk_task);
        cn_backward_segment_done(p, j.w, j.seg);
    }
    put_results(t, i, j.w, loss, correct);
    tm->data += loaded - start;
    tm->forward += forwarded - loaded;
    tm->backward += cn_seconds() - forwarded;
}

/* Shares the wall time of the replica job among data, forward and backward in proportion to
 * the thread-seconds each took. */
static void account_parts(const cn_trainer *t, double wall, cn_phase_times *tm)
{
    double sum[3] = {0, 0, 0};
    for (int i = 0; i < t->local_replicas; i++)
        for (int k = 0; k < 3; k++) sum[k] += t->part_seconds[i][k];
    double total = sum[0] + sum[1] + sum[2];
    if (!(total > 0)) return;
    tm->data += wall * sum[0] / total;
    tm->forward += wall * sum[1] / total;
    tm->backward += wall * sum[2] / total;
}

/* Each task owns a contiguous slice of the parameters; within it the replicas are summed in
 * order 0..R-1, so the result does not depend on how many tasks there are (nor, since
 * cn_exchange_reduce does the same sums on its slice, on how many processes). */
static void slice_of(const cn_trainer *t, int task, size_t *begin, size_t *end)
{
    size_t n = t->m->num_params, T = (size_t)cn_pool_threads(t->pool);
    *begin = n * (size_t)task / T;
    *end = n * (size_t)(task + 1) / T;
}

/* sum [m] += x [m]: whole vectors (sum and x never overlap). */
static void add_block(float *restrict sum, const float *restrict x, size_t m)
{
    for (size_t i = 0; i < m; i++) sum[i] += x[i];
}

/* The step's loops over the parameters go a block of this many floats at a time. */
#define STEP_BLOCK 512

/* 1 when every x[i] is finite: x - x is 0 for those and NaN for infinities and NaNs, tested
 * without a branch an element so that the test runs in whole vectors, a block at a time. */
static int all_finite(const float *x, size_t n)
{
    for (size_t j = 0; j < n; j += STEP_BLOCK) {
        size_t m = n - j < STEP_BLOCK ? n - j : STEP_BLOCK;
        int bad = 0;
        for (size_t i = 0; i < m; i++) bad |= x[j + i] - x[j + i] != 0.0f;
        if (bad) return 0;
    }
    return 1;
}

/* 1 when a task of the last job found a non-finite value in its slice (slice_bad). */
static int any_slice_bad(const cn_trainer *t, int tasks)
{
    int bad = 0;
    for (int i = 0; i < tasks; i++) bad |= t->slice_bad[i];
    return bad;
}

/* The mean of the replicas' gradients over one slice, a block at a time: each replica's block is
 * added as whole vectors, every element still summed from 0 in replica order and divided by
 * their count (the bits of an element's own loop). Each block is tested for non-finite values
 * while it is in cache (slice_bad). */
static void reduce_slice(void *ctx, int task, int thread)
{
    (void)thread;
    cn_trainer *t = ((const step_job *)ctx)->t;
    size_t begin, end;
    slice_of(t, task, &begin, &end);
    int R = t->cfg.num_replicas, finite = 1;
    for (size_t j = begin; j < end; j += STEP_BLOCK) {
        size_t m = end - j < STEP_BLOCK ? end - j : STEP_BLOCK;
        float sum[STEP_BLOCK] = {0};
        for (int r = 0; r < R; r++) add_block(sum, t->result[r].dparams + j, m);
        float *restrict grad = t->grad + j;
        for (size_t i = 0; i < m; i++) grad[i] = sum[i] / (float)R;
        finite &= all_finite(grad, m);
    }
    t->slice_bad[task] = !finite;
}

/* The optimiser's step into candidate buffers: the new momentum or exp_avg in t->grad, adamw's
 * exp_avg_sq in t->next_state2, the weights in t->next_params; commit_slice keeps them. */
static void optimizer_slice(void *ctx, int task, int thread)
{
    (void)thread;
    cn_trainer *t = ((const step_job *)ctx)->t;
    size_t begin, end, n = t->m->num_params;
    slice_of(t, task, &begin, &end);
    int adamw = t->next_state2 != NULL;
    cn_optim_buffers b = {t->m->params + begin, t->grad + begin, t->momentum + begin,
                          adamw ? t->momentum + n + begin : NULL,
                          adamw ? t->next_state2 + begin : NULL, t->next_params + begin};
    cn_optimizer_step(&t->rule, &b, end - begin);
    t->slice_bad[task] = !all_finite(t->next_params + begin, end - begin);
}

static void commit_slice(void *ctx, int task, int thread)
{
    (void)thread;
    cn_trainer *t = ((const step_job *)ctx)->t;
    size_t begin, end;
    slice_of(t, task, &begin, &end);
    memcpy(t->momentum + begin, t->grad + begin, (end - begin) * sizeof(float));
    if (t->next_state2)
        memcpy(t->momentum + t->m->num_params + begin, t->next_state2 + begin,
               (end - begin) * sizeof(float));
    memcpy(t->m->params + begin, t->next_params + begin, (end - begin) * sizeof(float));
}

/* Each layer with running statistics combines every replica's report, in replica order; with
 * other processes the exchange has made that combination, the mean of the running shares. */
static void update_running_stats(cn_trainer *t)
{
    cn_model *m = t->m;
    int R = t->cfg.num_replicas;
    for (int i = 0; i < m->num_layers; i++) {
        const cn_layer *l = &m->layers[i];
        if (!l->type->update_running) continue;
        if (t->mean_report) {
            memcpy(m->running + l->running, t->mean_report + l->report,
                   l->num_running * sizeof *m->running);
            m->counters[l->counter] += 1;
            continue;
        }
        for (int r = 0; r < R; r++) t->reports[r] = t->result[r].report + l->report;
        l->type->update_running(l, m->running + l->running, &m->counters[l->counter],
                                t->reports, R);
    }
}

/* 1 when the batch statistics that the running ones are about to take in are all finite:
 * huge weights can overflow BatchNorm's variance while the loss, normalised, stays finite. */
static int reports_finite(const cn_trainer *t)
{
    size_t n = t->m->num_report;
    if (t->mean_report) return all_finite(t->mean_report, n);
    for (int r = 0; r < t->cfg.num_replicas; r++)
        if (!all_finite(t->result[r].report, n)) return 0;
    return 1;
}

/* With other processes: waits for all of them; then this process's slice of the gradient and
 * running shares is summed over every replica (reduce), and every slice's mean lands in
 * t->grad and t->mean_report, with every replica's loss and right answers (communicate). */
static int exchange_results(cn_trainer *t, cn_phase_times *tm, cn_error *err)
{
    cn_exchange *x = &t->exchange;
    double start = cn_seconds();
    if (cn_exchange_wait(x, err)) return -1;
    double ready = cn_seconds();
    if (cn_exchange_scatter(x, err)) return -1;
    double scattered = cn_seconds();
    cn_exchange_reduce(x);
    double reduced = cn_seconds();
    if (cn_exchange_gather(x, t->grad, t->mean_report, err)) return -1;
    tm->wait += ready - start;
    tm->reduce += reduced - scattered;
    tm->communicate += scattered - ready + cn_seconds() - reduced;
    return 0;
}

/* Runs one pool job and adds its wall time to *phase. */
static void timed_run(cn_trainer *t, int tasks, cn_task_fn fn, step_job *job, double *phase)
{
    double start = cn_seconds();
    cn_pool_run(t->pool, tasks, fn, job);
    *phase += cn_seconds() - start;
}

/* The rate per replica of optimiser step n of the run: the base rate itself, untouched, when
 * there is no schedule. */
static float step_rate(const cn_trainer *t, long n)
{
    const cn_lr_schedule *s = &t->cfg.lr_schedule;
    if (s->kind == CN_LR_CONSTANT && s->warmup_steps == 0) return t->cfg.learning_rate;
    return cn_lr_at(s, t->cfg.learning_rate, n);
}

/* One step at rate lr per replica; *loss gets the global loss, *correct the right answers of
 * all replicas. */
static int train_step(cn_trainer *t, step_job *job, float lr, float *loss, int *correct,
                      cn_phase_times *times, cn_error *err)
{
    cn_phase_times local = {0};
    cn_phase_times *tm = times ? times : &local;
    int R = t->cfg.num_replicas, T = cn_pool_threads(t->pool);
    int L = t->local_replicas;
    if (L % t->step_threads != 0) { /* whole replicas per thread would leave threads idle */
        for (int i = 0; i < L; i++) replica_split_pass(job, i, tm);
    } else {
        double replicas_wall = 0;
        timed_run(t, L, replica_pass, job, &replicas_wall);
        account_parts(t, replicas_wall, tm);
    }
    int distributed = cn_comm_is_distributed(t->comm);
    if (distributed && exchange_results(t, tm, err)) return -1;

    float sum = 0.0f;
    *correct = 0;
    for (int r = 0; r < R; r++) sum += *t->result[r].loss, *correct += (int)*t->result[r].correct;
    *loss = sum / (float)R;
    if (!isfinite(*loss)) /* before the update: the model keeps its last finite weights */
        return cn_fail(err, "training diverged: the loss is %f (try a smaller --learning-rate)",
                       (double)*loss);

    if (!distributed) /* with other processes the exchange has summed it */
        timed_run(t, T, reduce_slice, job, &tm->reduce);
    if (distributed ? !all_finite(t->grad, t->m->num_params) : any_slice_bad(t, T))
        return cn_fail(err, "training diverged: the gradient holds non-finite values (try a "
                       "smaller --learning-rate)");
    if (!reports_finite(t))
        return cn_fail(err, "training diverged: BatchNorm's batch statistics hold non-finite "
                       "values (try a smaller --learning-rate)");
    double start = cn_seconds();
    cn_optim_rule_init(&t->rule, &t->cfg, lr, t->optimizer_steps + 1);
    cn_pool_run(t->pool, T, optimizer_slice, job);
    if (any_slice_bad(t, T))
        return cn_fail(err, "training diverged: the step would make weights non-finite (try a "
                       "smaller --learning-rate)");
    cn_pool_run(t->pool, T, commit_slice, job);
    t->optimizer_steps++;
    update_running_stats(t);
    tm->optimizer += cn_seconds() - start;
    return 0;
}

int cn_trainer_step(cn_trainer *t, const uint8_t *images, const uint8_t *labels, float *loss,
                    cn_phase_times *times, cn_error *err)
{
    step_job job = {t, images, labels, NULL};
    int correct;
    if (ready_to_train(t, err)) return -1;
    t->epoch = 0, t->step = t->direct_steps; /* steps outside epochs draw as epoch 0 */
    int rc = train_step(t, &job, step_rate(t, t->direct_steps), loss, &correct, times, err);
    t->direct_steps += rc == 0;
    return rc;
}

int cn_trainer_layer_times(const cn_trainer *t, double *forward, double *backward, int max)
{
    int L = t->m->num_layers;
    for (int i = 0; i < L && i < max; i++) {
        forward[i] = backward[i] = 0;
        for (int r = 0; r < t->num_workspaces; r++) {
            forward[i] += t->ws[r].layer_forward[i];
            backward[i] += t->ws[r].layer_backward[i];
        }
    }
    return L;
}

void cn_trainer_reset_layer_times(cn_trainer *t)
{
    for (int r = 0; r < t->num_workspaces; r++)
        for (int i = 0; i < t->m->num_layers; i++)
            t->ws[r].layer_forward[i] = t->ws[r].layer_backward[i] = 0;
}

int cn_trainer_threads(const cn_trainer *t, int training, int eval_samples)
{
    int most = training ? t->step_threads : 1;
    int eval = eval_samples > 0 ? eval_threads(t, eval_samples) : 1;
    return eval > most ? eval : most;
}

int64_t cn_trainer_exchange_bytes(const cn_trainer *t)
{
    return cn_exchange_bytes(&t->exchange);
}

int cn_trainer_steps_per_epoch(const cn_trainer *t, const cn_dataset *train)
{
    uint32_t shard = cn_sampler_shard_size((uint32_t)train->count, t->cfg.num_replicas);
    return (int)(shard / (uint32_t)t->cfg.batch_size);
}

/* Replica r's k-th sample of step s is the (s*B + k)-th entry of its shard. */
static void fill_batch_index(cn_trainer *t, const uint32_t *perm, int step)
{
    int R = t->cfg.num_replicas, B = t->cfg.batch_size;
    for (int r = 0; r < R; r++)
        for (int k = 0; k < B; k++)
            t->batch_index[(size_t)r * B + k] = perm[((size_t)step * B + k) * R + r];
}

static int check_epoch_data(const cn_trainer *t, const cn_dataset *train, int steps,
                            cn_error *err)
{
    if (steps < 1)
        return cn_fail(err, "%d training samples are fewer than one step needs (%d replicas x "
                       "batch %d)", train->count, t->cfg.num_replicas, t->cfg.batch_size);
    return cn_model_fits_data(t->m, train, err);
}

/* A stop asked for on any rank stops every rank after the same step. */
static int stop_here(cn_trainer *t, int asked, int *rc, cn_error *err)
{
    int any = asked != 0;
    if (cn_comm_is_distributed(t->comm) && cn_exchange_any(&t->exchange, asked, &any, err))
        *rc = -1, any = 1;
    return any;
}

int cn_trainer_run_epoch(cn_trainer *t, const cn_dataset *train, cn_epoch_position *pos,
                         cn_step_fn on_step, cn_stop_fn should_stop, void *ctx,
                         cn_phase_times *times, cn_error *err)
{
    int steps = cn_trainer_steps_per_epoch(t, train);
    if (check_epoch_data(t, train, steps, err)) return -1;
    if (pos->epoch < 1 || pos->step < 0 || pos->step > steps)
        return cn_fail(err, "cannot start at epoch %d step %d (an epoch has %d steps)",
                       pos->epoch, pos->step, steps);
    uint32_t *perm = malloc((size_t)train->count * sizeof *perm);
    if (!perm) cn_fail(err, "out of memory for the sampler of %d samples", train->count);
    if (cn_comm_agree(t->comm, !perm, err) || ready_to_train(t, err)) { /* all stop, or none */
        free(perm);
        return -1;
    }
    cn_sampler_permutation(perm, (uint32_t)train->count, t->cfg.seed, pos->epoch);
    step_job job = {t, train->pixels, train->labels, t->batch_index};
    int rc = 0;
    cn_step_report report = {pos->epoch, 0, steps, 0, 0, t->cfg.num_replicas * t->cfg.batch_size,
                             0};
    while (pos->step < steps) {
        fill_batch_index(t, perm, pos->step);
        t->epoch = pos->epoch, t->step = pos->step;
        report.learning_rate = step_rate(t, (long)(pos->epoch - 1) * steps + pos->step);
        rc = train_step(t, &job, report.learning_rate, &report.loss, &report.correct, times,
                        err);
        if (rc != 0) break;
        pos->loss_sum += report.loss;
        pos->correct += report.correct;
        report.step = pos->step++;
        if (on_step) on_step(ctx, &report);
        if (should_stop && stop_here(t, should_stop(ctx), &rc, err)) break;
    }
    free(perm);
    return rc;
}

int cn_trainer_epoch(cn_trainer *t, const cn_dataset *train, int epoch, cn_step_fn on_step,
                     void *ctx, float *mean_loss, cn_phase_times *times, cn_error *err)
{
    cn_epoch_position pos = {.epoch = epoch};
    int rc = cn_trainer_run_epoch(t, train, &pos, on_step, NULL, ctx, times, err);
    if (mean_loss && pos.step > 0) *mean_loss = (float)(pos.loss_sum / pos.step);
    return rc;
}

float *cn_trainer_momentum(cn_trainer *t)
{
    return t->momentum;
}

int64_t cn_trainer_optimizer_steps(const cn_trainer *t)
{
    return t->optimizer_steps;
}

int cn_trainer_set_optimizer_steps(cn_trainer *t, int64_t steps, cn_error *err)
{
    if (steps < 0) return cn_fail(err, "optimizer steps %lld is below 0", (long long)steps);
    t->optimizer_steps = steps;
    return 0;
}

int cn_trainer_set_learning_rate(cn_trainer *t, float learning_rate, cn_error *err)
{
    if (!(learning_rate > 0) || !isfinite(learning_rate))
        return cn_fail(err, "learning rate must be a positive number");
    t->cfg.learning_rate = learning_rate;
    return 0;
}

/* ------------------------------------------------------------------ evaluation */

typedef struct {
    cn_trainer *t;
    const cn_dataset *ds;
    int n;
    int first_chunk;     /* this process's first chunk: task k scores chunk first_chunk + k */
    double *chunk_loss;  /* [chunks] summed NLL of each chunk */
    int *chunk_correct;  /* [chunks] */
    uint8_t *predictions;
} eval_job;

static void eval_chunk(void *ctx, int task, int thread)
{
    eval_job *job = ctx;
    cn_trainer *t = job->t;
    int chunk = job->first_chunk + task;
    cn_workspace *w = &t->ws[thread];
    int B = t->cfg.batch_size, first = chunk * B, size = cn_model_input_size(t->m);
    int count = job->n - first < B ? job->n - first : B, last = t->m->num_layers - 1;
    int classes = t->m->layers[last].out.c;
    cn_model_normalize(t->m, w->input, job->ds->pixels + (size_t)first * size, (size_t)count);
    cn_forward(&t->plan, w, count, 0);
    double loss = 0;
    int correct = 0;
    for (int k = 0; k < count; k++) {
        const float *logp = w->out[last] + (size_t)k * classes;
        int label = job->ds->labels[first + k], guess = cn_argmax(logp, classes);
        loss -= logp[label];
        correct += guess == label;
        if (job->predictions) job->predictions[first + k] = (uint8_t)guess;
    }
    job->chunk_loss[chunk] = loss;
    job->chunk_correct[chunk] = correct;
}

/* Scores this process's share of the chunks (all of them when alone); with other processes,
 * every rank then gathers every chunk's figures and predictions, so that the sums below run over
 * the same chunks in the same order as for one process. */
static int score_chunks(eval_job *job, int chunks, cn_error *err)
{
    const cn_comm *c = job->t->comm;
    int end = chunks;
    if (cn_comm_is_distributed(c)) cn_comm_share(chunks, c->rank, c->size, &job->first_chunk, &end);
    cn_pool_run(job->t->pool, end - job->first_chunk, eval_chunk, job);
    if (cn_comm_allgather_shares(c, job->chunk_loss, sizeof(double), chunks, 1, err) ||
        cn_comm_allgather_shares(c, job->chunk_correct, sizeof(int), chunks, 1, err))
        return -1;
    if (!job->predictions) return 0;
    return cn_comm_allgather_shares(c, job->predictions, 1, job->n, job->t->cfg.batch_size, err);
}

int cn_evaluate(cn_trainer *t, const cn_dataset *ds, int n, double *loss, double *accuracy,
                uint8_t *predictions, cn_error *err)
{
    if (n < 1 || n > ds->count)
        return cn_fail(err, "cannot evaluate %d samples of a set of %d", n, ds->count);
    if (cn_model_fits_data(t->m, ds, err)) return -1;
    int chunks = (n + t->cfg.batch_size - 1) / t->cfg.batch_size;
    eval_job job = {t, ds, n, 0, calloc((size_t)chunks, sizeof(double)),
                    calloc((size_t)chunks, sizeof(int)), predictions};
    int failed = !job.chunk_loss || !job.chunk_correct;
    if (failed) cn_fail(err, "out of memory for evaluation");
    int batch = n < t->cfg.batch_size ? n : t->cfg.batch_size;
    if (!failed) failed = use_workspaces(t, batch, eval_threads(t, n), err) != 0;
    if (cn_comm_agree(t->comm, failed, err) || score_chunks(&job, chunks, err)) {
        free(job.chunk_loss);
        free(job.chunk_correct);
        return -1;
    }
    double sum = 0;
    long correct = 0;
    for (int c = 0; c < chunks; c++) sum += job.chunk_loss[c], correct += job.chunk_correct[c];
    free(job.chunk_loss);
    free(job.chunk_correct);
    if (!isfinite(sum))
        return cn_fail(err, "the model's outputs are not finite (its weights or statistics are "
                       "out of range): no loss or accuracy can be given");
    *loss = sum / n;
    *accuracy = 100.0 * (double)correct / n;
    return 0;
}
