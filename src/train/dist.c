/* dist.c — the collectives the library builds on cn_comm's allgather: sharing work among ranks,
 * agreeing on failures (so that no rank goes on alone into a collective the others have left),
 * exchanging replica results each step, and gathering the parts of an array. It never calls MPI
 * and never decides what to do with what it gathered. */
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

int cn_exchange_init(cn_exchange *x, const cn_comm *comm, int replicas, size_t num_params,
                     size_t num_report)
{
    *x = (cn_exchange){.comm = comm, .local = replicas / comm->size, .num_params = num_params,
                       .num_report = num_report};
    x->record = num_params + num_report + 2;
    x->blocks = calloc((size_t)replicas * x->record, sizeof *x->blocks);
    x->flags = calloc((size_t)comm->size, 1);
    return x->blocks && x->flags ? 0 : -1;
}

void cn_exchange_free(cn_exchange *x)
{
    free(x->blocks);
    free(x->flags);
    x->blocks = NULL;
    x->flags = NULL;
}

static float *record_of(const cn_exchange *x, int replica)
{
    return x->blocks + (size_t)replica * x->record;
}

void cn_exchange_put(cn_exchange *x, int i, const float *dparams, float loss, int correct,
                     const float *report)
{
    float *rec = record_of(x, x->comm->rank * x->local + i);
    memcpy(rec, dparams, x->num_params * sizeof *rec);
    memcpy(rec + x->num_params, report, x->num_report * sizeof *rec);
    rec[x->record - 2] = loss;
    rec[x->record - 1] = (float)correct;
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

int cn_exchange_run(cn_exchange *x, cn_error *err)
{
    size_t block = (size_t)x->local * x->record * sizeof *x->blocks;
    return x->comm->allgather(x->comm->ctx, x->blocks, block, err);
}

cn_replica_result cn_exchange_result(const cn_exchange *x, int replica)
{
    const float *rec = record_of(x, replica);
    return (cn_replica_result){rec, rec + x->record - 2, rec + x->record - 1,
                               rec + x->num_params};
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
