/* dist.c — the collectives the library builds on cn_comm's allgather and alltoall: sharing work
 * among ranks, agreeing on failures (so that no rank goes on alone into a collective the others
 * have left), exchanging replica results each step (a reduce-scatter in replica order, then an
 * allgather), and gathering the parts of an array. It never calls MPI; the only arithmetic is
 * the exchange's sum of the gradient, the same as one process's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/dist.h"

void cn_comm_share(int total, int rank, int size, int *begin, int *end)
{
    *begin = (int)((long long)total * rank / size);
    *end = (int)((long long)total * (rank + 1) / size);
}

/* What each rank contributes to an agreement: 256 bytes. */
typedef struct {
    int32_t failed;
    char message[252];
} agree_record;

/* Out of memory in the middle of a collective: the others are already in it. */
static int abort_all(const cn_comm *c, const char *what, cn_error *err)
{
    char message[160];
    snprintf(message, sizeof message, "rank %d: out of memory for %s", c->rank, what);
    c->abort(c->ctx, message); /* does not return in a real run */
    return cn_fail(err, "%s", message);
}

int cn_comm_agree(const cn_comm *c, int failed, cn_error *err)
{
    if (!cn_comm_is_distributed(c))
        return failed ? -1 : 0;
    agree_record *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return abort_all(c, "agreeing on the run's state", err);
    agree_record *own = &all[c->rank];
    own->failed = failed != 0;
    if (failed) {
        const char *why = err ? err->msg : "failed";
        memcpy(own->message, why, strnlen(why, sizeof own->message - 1)); /* NUL from calloc */
    }
    int rc = c->allgather(c->ctx, all, sizeof *all, err);
    for (int k = 0; rc == 0 && k < c->size; k++) {
        if (!all[k].failed)
            continue;
        all[k].message[sizeof all[k].message - 1] = '\0';
        rc = cn_fail(err, "rank %d: %s", k, all[k].message);
    }
    free(all);
    return rc;
}

/* ------------------------------------------------------------------ replica exchange */

/* Each replica's loss and right answers: kept per replica with several processes. */
enum { TAIL = 2 };

/* One process: every replica's whole record, summed by the trainer. */
static int init_alone(cn_exchange *x)
{
    x->blocks = calloc((size_t)x->replicas * x->record, sizeof *x->blocks);
    return x->blocks ? 0 : -1;
}

/* Several: the buffers of the reduce-scatter and of the allgather. */
static int init_distributed(cn_exchange *x)
{
    size_t P = (size_t)x->comm->size, L = (size_t)x->local;
    x->slice = (x->num_params + x->num_report + P - 1) / P;
    x->scatter = calloc(P * L * x->slice, sizeof *x->scatter);
    x->owned = calloc(P * L * x->slice, sizeof *x->owned);
    x->gathered = calloc(P * (x->slice + L * TAIL), sizeof *x->gathered);
    return x->scatter && x->owned && x->gathered ? 0 : -1;
}

int cn_exchange_init(cn_exchange *x, const cn_comm *comm, int replicas, size_t num_params,
                     size_t num_report)
{
    *x = (cn_exchange){.comm = comm, .replicas = replicas, .local = replicas / comm->size,
                       .num_params = num_params, .num_report = num_report};
    x->record = num_params + num_report + TAIL;
    x->flags = calloc((size_t)comm->size, 1);
    if (!x->flags) return -1;
    return cn_comm_is_distributed(comm) ? init_distributed(x) : init_alone(x);
}

void cn_exchange_free(cn_exchange *x)
{
    free(x->blocks);
    free(x->scatter);
    free(x->owned);
    free(x->gathered);
    free(x->flags);
    *x = (cn_exchange){0};
}

/* The summed floats [*begin, *end) that rank q owns: cn_comm_share's split, in size_t. */
static void slice_bounds(const cn_exchange *x, int q, size_t *begin, size_t *end)
{
    size_t n = x->num_params + x->num_report, P = (size_t)x->comm->size;
    *begin = n * (size_t)q / P;
    *end = n * (size_t)(q + 1) / P;
}

/* The summed floats [begin, end) are the params [begin, split) and then the report's floats
 * from report_begin on: *params floats of the one, *reports of the other. */
typedef struct {
    size_t begin, params, report_begin, reports;
} summed_part;

static summed_part part_of(const cn_exchange *x, int q)
{
    size_t begin, end, n = x->num_params;
    slice_bounds(x, q, &begin, &end);
    size_t split = begin > n ? begin : end < n ? end : n;
    return (summed_part){begin, split - begin, split >= n ? split - n : 0, end - split};
}

/* Rank p's block of the allgather: its mean slice, then its replicas' loss and right answers. */
static float *gathered_block(const cn_exchange *x, int p)
{
    return x->gathered + (size_t)p * (x->slice + (size_t)x->local * TAIL);
}

/* Where replica r's loss and right answers are kept. */
static float *tail_of(const cn_exchange *x, int replica)
{
    if (x->blocks) return x->blocks + (size_t)(replica + 1) * x->record - TAIL;
    return gathered_block(x, replica / x->local) + x->slice + (size_t)(replica % x->local) * TAIL;
}

/* Local replica i's part of each rank q's slice, at [q][i] of the scatter. */
static void scatter_put(cn_exchange *x, int i, const float *dparams, const float *report)
{
    for (int q = 0; q < x->comm->size; q++) {
        summed_part s = part_of(x, q);
        float *to = x->scatter + ((size_t)q * x->local + i) * x->slice;
        if (s.params) memcpy(to, dparams + s.begin, s.params * sizeof *to);
        if (s.reports) memcpy(to + s.params, report + s.report_begin, s.reports * sizeof *to);
    }
}

void cn_exchange_put(cn_exchange *x, int i, const float *dparams, float loss, int correct,
                     const float *report)
{
    int replica = x->comm->rank * x->local + i;
    float *tail = tail_of(x, replica);
    if (x->blocks) {
        float *rec = x->blocks + (size_t)replica * x->record;
        memcpy(rec, dparams, x->num_params * sizeof *rec);
        memcpy(rec + x->num_params, report, x->num_report * sizeof *rec);
    } else {
        scatter_put(x, i, dparams, report);
    }
    tail[0] = loss;
    tail[1] = (float)correct;
}

int cn_exchange_wait(cn_exchange *x, cn_error *err)
{
    return x->comm->allgather(x->comm->ctx, x->flags, 1, err);
}

int cn_exchange_any(cn_exchange *x, int flag, int *any, cn_error *err)
{
    x->flags[x->comm->rank] = flag != 0;
    if (x->comm->allgather(x->comm->ctx, x->flags, 1, err)) return -1;
    *any = 0;
    for (int p = 0; p < x->comm->size; p++) *any |= x->flags[p];
    return 0;
}

int cn_exchange_scatter(cn_exchange *x, cn_error *err)
{
    size_t block = (size_t)x->local * x->slice * sizeof *x->scatter;
    return x->comm->alltoall(x->comm->ctx, x->scatter, x->owned, block, err);
}

/* owned holds rank p's local replica i, replica p * local + i, at [p][i]: walking the rows in
 * order visits the replicas 0..R-1 in order, as the trainer's sum for one process does. */
void cn_exchange_reduce(cn_exchange *x)
{
    size_t begin, end;
    slice_bounds(x, x->comm->rank, &begin, &end);
    float *mean = gathered_block(x, x->comm->rank);
    for (size_t j = 0; j < end - begin; j++) {
        float sum = 0.0f;
        for (int r = 0; r < x->replicas; r++) sum += x->owned[(size_t)r * x->slice + j];
        mean[j] = sum / (float)x->replicas;
    }
}

int cn_exchange_gather(cn_exchange *x, float *mean_params, float *mean_report, cn_error *err)
{
    size_t block = (x->slice + (size_t)x->local * TAIL) * sizeof *x->gathered;
    if (x->comm->allgather(x->comm->ctx, x->gathered, block, err)) return -1;
    for (int q = 0; q < x->comm->size; q++) {
        summed_part s = part_of(x, q);
        const float *from = gathered_block(x, q);
        if (s.params) memcpy(mean_params + s.begin, from, s.params * sizeof *from);
        if (s.reports)
            memcpy(mean_report + s.report_begin, from + s.params, s.reports * sizeof *from);
    }
    return 0;
}

cn_replica_result cn_exchange_result(const cn_exchange *x, int replica)
{
    const float *tail = tail_of(x, replica);
    if (!x->blocks) return (cn_replica_result){NULL, tail, tail + 1, NULL};
    const float *rec = x->blocks + (size_t)replica * x->record;
    return (cn_replica_result){rec, tail, tail + 1, rec + x->num_params};
}

/* Each of the size - 1 other ranks: one block sent and one received, in each collective. */
int64_t cn_exchange_bytes(const cn_exchange *x)
{
    if (x->blocks) return 0;
    int64_t scatter = (int64_t)x->local * (int64_t)x->slice;
    int64_t gather = (int64_t)x->slice + (int64_t)x->local * TAIL;
    return 2 * (int64_t)(x->comm->size - 1) * (scatter + gather) * (int64_t)sizeof(float);
}

/* ------------------------------------------------------------------ shares of an array */

/* The items [*begin, *end) of rank's share. */
static void items_of(int total, int unit, int rank, int size, size_t *begin, size_t *end)
{
    int units = (total + unit - 1) / unit, first, last;
    cn_comm_share(units, rank, size, &first, &last);
    *begin = (size_t)first * unit;
    *end = (size_t)last * unit < (size_t)total ? (size_t)last * unit : (size_t)total;
    if (*begin > *end)
        *begin = *end;
}

int cn_comm_allgather_shares(const cn_comm *c, void *items, size_t item_size, int total,
                             int unit, cn_error *err)
{
    if (!cn_comm_is_distributed(c) || total < 1)
        return 0;
    int units = (total + unit - 1) / unit;
    size_t block = (size_t)((units + c->size - 1) / c->size) * unit * item_size;
    unsigned char *buf = malloc(block * (size_t)c->size), *bytes = items;
    if (!buf)
        return abort_all(c, "gathering results", err);
    size_t begin, end;
    items_of(total, unit, c->rank, c->size, &begin, &end);
    memcpy(buf + block * c->rank, bytes + begin * item_size, (end - begin) * item_size);
    int rc = c->allgather(c->ctx, buf, block, err);
    for (int p = 0; rc == 0 && p < c->size; p++) {
        items_of(total, unit, p, c->size, &begin, &end);
        memcpy(bytes + begin * item_size, buf + block * p, (end - begin) * item_size);
    }
    free(buf);
    return rc;
}
