/* dist.h — what the trainer needs to run its replicas in several processes: the exchange of
 * every replica's step results and the gathering of an array whose parts the ranks computed
 * (evaluation). In the exchange the values summed over replicas (the gradient, then the layers'
 * shares of their running statistics) are cut into one slice per rank: each rank receives every
 * replica's part of its slice (alltoall), sums them in replica order 0..R-1 as one process does
 * and divides by R, and the means are gathered back to every rank (allgather) with each
 * replica's loss and right answers, which stay per replica. A single process keeps its
 * replicas' whole results here and the trainer sums them. Built on cn_comm's collectives; no
 * MPI here. */
#ifndef CN_DIST_H
#define CN_DIST_H

#include "cnnc.h"

static inline int cn_comm_is_distributed(const cn_comm *c)
{
    return c && c->size > 1;
}

/* What one replica's step produced, wherever it is kept; dparams and report are NULL with
 * several processes (their sums are made where they are owned). */
typedef struct {
    const float *dparams;          /* [num_params] */
    const float *loss;             /* one value */
    const float *correct;          /* one value: right answers of the batch (exact below 2^24) */
    const float *report;           /* [num_report] the layers' batch statistics */
} cn_replica_result;

typedef struct {
    const cn_comm *comm;
    int replicas;       /* R, all ranks together */
    int local;          /* replicas per rank */
    size_t num_params;
    size_t num_report;
    size_t record;      /* one process: floats per replica: dparams, report, loss, correct */
    float *blocks;      /* one process: [R][record] every replica's results; else NULL */
    /* Several processes (NULL for one): of the num_params + num_report summed floats rank q
     * owns cn_comm_share's part q, at most `slice` of them. */
    size_t slice;
    float *scatter;     /* [size][local][slice] this rank's replicas' parts of each rank's slice */
    float *owned;       /* [size][local][slice] every rank's replicas' parts of this rank's slice */
    float *gathered;    /* [size][slice + 2 * local] each rank's mean slice, then the loss and
                           right answers of each of its replicas */
    unsigned char *flags; /* [size] one byte per rank: cn_exchange_wait, cn_exchange_any */
} cn_exchange;

/* For replicas a multiple of comm->size (size 1: one process); -1 when out of memory. */
int cn_exchange_init(cn_exchange *x, const cn_comm *comm, int replicas, size_t num_params,
                     size_t num_report);
void cn_exchange_free(cn_exchange *x);
/* Copies this rank's local replica i's results into the exchange; distinct i may run at once.
 * With several processes report is summed over the replicas like the gradient: the trainer
 * puts the layers' running shares there. */
void cn_exchange_put(cn_exchange *x, int i, const float *dparams, float loss, int correct,
                     const float *report);
/* Returns when every rank has reached it (a one-byte allgather): what comes after it measures
 * the exchange alone, without the wait for the slowest rank. */
int cn_exchange_wait(cn_exchange *x, cn_error *err);
/* *any = whether flag is set on any rank (a one-byte allgather; nothing allocated). */
int cn_exchange_any(cn_exchange *x, int flag, int *any, cn_error *err);
/* Several processes, once every local replica is put: every rank receives every replica's part
 * of its own slice (an alltoall). */
int cn_exchange_scatter(cn_exchange *x, cn_error *err);
/* Sums each float of this rank's slice over replicas 0..R-1, left to right from 0, and divides
 * by R: the arithmetic of one process's reduction, on a part of the values. */
void cn_exchange_reduce(cn_exchange *x);
/* Every rank's mean slice into mean_params[num_params] and mean_report[num_report], and every
 * replica's loss and right answers to every rank (an allgather). */
int cn_exchange_gather(cn_exchange *x, float *mean_params, float *mean_report, cn_error *err);
/* Replica r's results (0..R-1), as of the last step. */
cn_replica_result cn_exchange_result(const cn_exchange *x, int replica);
/* Bytes sent plus received by this rank in scatter and gather; 0 for one process. */
int64_t cn_exchange_bytes(const cn_exchange *x);

/* items holds total items of item_size bytes in units of `unit` consecutive items; rank p has
 * filled in the items of units cn_comm_share(units, p, size). Afterwards every rank holds all
 * of them. The same call on every rank. */
int cn_comm_allgather_shares(const cn_comm *c, void *items, size_t item_size, int total,
                             int unit, cn_error *err);

#endif /* CN_DIST_H */
