/* mpi_exchange.c — what one training step's communication costs on this machine, without the
 * training: the allgather cnnc makes every step (each rank's replicas' gradients, BatchNorm batch
 * statistics and losses: R/P records of 21,962 floats, MPI_IN_PLACE as in cli/dist_mpi.c), an
 * MPI_Allreduce of the 21,900 gradient floats for comparison (what an inexact all-reduce would
 * send), and a 4-byte allgather (the latency floor). Prints microseconds per call from rank 0:
 * the median of the rounds, and for the step's allgather also the mean, which a busy machine's
 * scheduling pushes up. It measures; it asserts nothing.
 * Run: mpirun -np P build/mpi_exchange [R]. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARAMS 21900
#define RECORD (PARAMS + 2 * 30 + 2) /* gradient, bn1+bn2 mean and var, loss, right answers */
#define ROUNDS 200

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*collective_fn)(void *ctx);

/* Seconds of one collective over ROUNDS calls, every rank timing the same calls after a
 * barrier: the median, and the mean in *mean; each the largest over the ranks. */
static double median_seconds(collective_fn fn, void *ctx, double *mean)
{
    static double t[ROUNDS];
    double sum = 0, figures[2], worst[2];
    for (int i = 0; i < 10; i++) fn(ctx); /* warm-up */
    for (int i = 0; i < ROUNDS; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        fn(ctx);
        t[i] = MPI_Wtime() - start;
        sum += t[i];
    }
    qsort(t, ROUNDS, sizeof t[0], compare_doubles);
    figures[0] = t[ROUNDS / 2], figures[1] = sum / ROUNDS;
    MPI_Allreduce(figures, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (mean) *mean = worst[1];
    return worst[0];
}

typedef struct {
    float *buf;
    int count; /* floats per rank (allgather) or in all (allreduce) */
    float *out;
} buffers;

static void step_allgather(void *ctx)
{
    buffers *b = ctx;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b->buf, b->count, MPI_FLOAT,
                  MPI_COMM_WORLD);
}

static void gradient_allreduce(void *ctx)
{
    buffers *b = ctx;
    MPI_Allreduce(b->buf, b->out, b->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int replicas = argc > 1 ? atoi(argv[1]) : 8;
    if (replicas < size || replicas % size != 0) {
        if (rank == 0)
            fprintf(stderr, "mpi_exchange: %d replicas among %d ranks\n", replicas, size);
        MPI_Finalize();
        return 2;
    }
    int local = replicas / size;
    buffers gather = {calloc((size_t)replicas * RECORD, sizeof(float)), local * RECORD, NULL};
    buffers reduce = {calloc(PARAMS, sizeof(float)), PARAMS, calloc(PARAMS, sizeof(float))};
    buffers tiny = {calloc((size_t)size, sizeof(float)), 1, NULL};
    if (!gather.buf || !reduce.buf || !reduce.out || !tiny.buf) MPI_Abort(MPI_COMM_WORLD, 1);
    double mean_gather;
    double t_gather = median_seconds(step_allgather, &gather, &mean_gather);
    double t_reduce = median_seconds(gradient_allreduce, &reduce, NULL);
    double t_tiny = median_seconds(step_allgather, &tiny, NULL);
    if (rank == 0) {
        double sent = (double)local * RECORD * 4, received = sent * (size - 1);
        printf("ranks=%d replicas=%d step_allgather_us=%.1f step_allgather_mean_us=%.1f "
               "bytes_per_rank=%.0f bytes_received_per_rank=%.0f allgather_GBps=%.2f "
               "allreduce_us=%.1f allreduce_bytes=%d latency_us=%.1f\n",
               size, replicas, t_gather * 1e6, mean_gather * 1e6, sent, received,
               t_gather > 0 ? received / t_gather / 1e9 : 0, t_reduce * 1e6, PARAMS * 4,
               t_tiny * 1e6);
    }
    free(gather.buf);
    free(reduce.buf);
    free(reduce.out);
    free(tiny.buf);
    MPI_Finalize();
    return 0;
}
