/* dist.h — what the trainer needs to run its replicas in several processes: the exchange of
 * every replica's step results (gradient, loss, BatchNorm batch statistics), after which each
 * rank holds all of them in replica order (a single process keeps its results there too),
 * and the gathering of an array whose parts the ranks computed (evaluation). Built on cn_comm's
 * one collective. No MPI here, and no arithmetic on
 * the results: the trainer sums them, in the same order as for one process. */
#ifndef CN_DIST_H
#define CN_DIST_H

#include "cnnc.h"

static inline int cn_comm_is_distributed(const cn_comm *c)
{
    return c && c->size > 1;
}

/* What one replica's step produced, wherever it is kept. */
typedef struct {
    const float *dparams;          /* [num_params] */
    const float *loss;             /* one value */
    const float *correct;          /* one value: right answers of the batch (exact below 2^24) */
    const float *report;           /* [num_report] the layers' batch statistics */
} cn_replica_result;

typedef struct {
    const cn_comm *comm;
    int local;          /* replicas per rank */
    size_t num_params;
    size_t num_report;
    size_t record;      /* floats per replica: dparams, report, loss, correct */
    float *blocks;      /* [size][local][record]: rank p's block holds replicas p*local... */
    unsigned char *flags; /* [size] one byte per rank: cn_exchange_wait, cn_exchange_any */
} cn_exchange;

/* For a distributed comm and replicas a multiple of its size; -1 when out of memory. */
int cn_exchange_init(cn_exchange *x, const cn_comm *comm, int replicas, size_t num_params,
                     size_t num_report);
void cn_exchange_free(cn_exchange *x);
/* Copies this rank's local replica i's results into its block; distinct i may run at once. */
void cn_exchange_put(cn_exchange *x, int i, const float *dparams, float loss, int correct,
                     const float *report);
/* Returns when every rank has reached it (a one-byte allgather): what comes after it measures
 * the exchange alone, without the wait for the slowest rank. */
int cn_exchange_wait(cn_exchange *x, cn_error *err);
/* *any = whether flag is set on any rank (a one-byte allgather; nothing allocated). */
int cn_exchange_any(cn_exchange *x, int flag, int *any, cn_error *err);
/* Once every local replica is put: every rank gets every rank's block. */
int cn_exchange_run(cn_exchange *x, cn_error *err);
/* Replica r's results (0..R-1), as of the last cn_exchange_run. */
cn_replica_result cn_exchange_result(const cn_exchange *x, int replica);

/* items holds total items of item_size bytes in units of `unit` consecutive items; rank p has
 * filled in the items of units cn_comm_share(units, p, size). Afterwards every rank holds all
 * of them. The same call on every rank. */
int cn_comm_allgather_shares(const cn_comm *c, void *items, size_t item_size, int total,
                             int unit, cn_error *err);

#endif /* CN_DIST_H */
