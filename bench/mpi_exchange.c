/* mpi_exchange.c — what one training step's communication costs on this machine, without the
 * training, for the seed's network (21,900 gradient floats and 60 BatchNorm running shares
 * summed over the replicas; the loss and the right answers per replica): the exchange cnnc
 * makes every step (an alltoall of each rank's replicas' parts of every rank's slice of the
 * summed floats, then an allgather of each rank's summed slice and its replicas' losses and
 * right answers), the allgather of whole replica records that cnnc made before for comparison,
 * and a 4-byte allgather (the latency floor). MPI's own
 * collectives carry the same bytes as cli/dist_mpi.c's messages. Prints microseconds per call
 * from rank 0 (the median of the rounds, and the mean for the step's exchange) and the bytes
 * each rank sends plus receives. It measures; it asserts nothing.
 * Run: mpirun -np P build/mpi_exchange [REPLICAS_PER_RANK]. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define SUMMED (21900 + 2 * 30) /* gradient, bn1+bn2 running shares of mean and var */
#define TAIL 2                  /* loss, right answers: kept per replica */
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
    int scatter_count; /* floats to each rank in the alltoall: local x slice */
    int gather_count;  /* floats from each rank in the allgather */
    float *send, *recv, *gathered;
} buffers;

/* cnnc's step: the reduce-scatter's alltoall, then the allgather of the sums and tails. */
static void step_exchange(void *ctx)
{
    buffers *b = ctx;
    MPI_Alltoall(b->send, b->scatter_count, MPI_FLOAT, b->recv, b->scatter_count, MPI_FLOAT,
                 MPI_COMM_WORLD);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b->gathered, b->gather_count, MPI_FLOAT,
                  MPI_COMM_WORLD);
}

/* An allgather of gather_count floats per rank alone: the old whole records, or 4 bytes. */
static void allgather_only(void *ctx)
{
    buffers *b = ctx;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b->gathered, b->gather_count, MPI_FLOAT,
                  MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int local = argc > 1 ? atoi(argv[1]) : 2;
    if (local < 1) {
        if (rank == 0) fprintf(stderr, "mpi_exchange: replicas per rank must be at least 1\n");
        MPI_Finalize();
        return 2;
    }
    size_t P = (size_t)size, L = (size_t)local, slice = (SUMMED + P - 1) / P;
    buffers step = {(int)(L * slice), (int)(slice + L * TAIL), calloc(P * L * slice, 4),
                    calloc(P * L * slice, 4), calloc(P * (slice + L * TAIL), 4)};
    buffers whole = {0, (int)(L * (SUMMED + TAIL)), NULL, NULL,
                     calloc(P * L * (SUMMED + TAIL), 4)};
    buffers tiny = {0, 1, NULL, NULL, calloc(P, 4)};
    if (!step.send || !step.recv || !step.gathered || !whole.gathered || !tiny.gathered)
        MPI_Abort(MPI_COMM_WORLD, 1);
    double mean_step;
    double t_step = median_seconds(step_exchange, &step, &mean_step);
    double t_whole = median_seconds(allgather_only, &whole, NULL);
    double t_tiny = median_seconds(allgather_only, &tiny, NULL);
    if (rank == 0) {
        double others = (double)(size - 1);
        double bytes = 2 * others * (step.scatter_count + step.gather_count) * 4.0;
        double whole_bytes = 2 * others * whole.gather_count * 4.0;
        printf("ranks=%d replicas_per_rank=%d exchange_bytes=%.0f exchange_us=%.1f "
               "exchange_mean_us=%.1f whole_records_bytes=%.0f whole_records_us=%.1f "
               "latency_us=%.1f\n", size, local, bytes, t_step * 1e6, mean_step * 1e6,
               whole_bytes, t_whole * 1e6, t_tiny * 1e6);
    }
    free(step.send);
    free(step.recv);
    free(step.gathered);
    free(whole.gathered);
    free(tiny.gathered);
    MPI_Finalize();
    return 0;
}
