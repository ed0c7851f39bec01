/* test_world.h — several "processes" inside one test program, for tests of training as
 * several processes without MPI: each rank is a thread with its own model and trainer, joined
 * by an in-memory communicator (cn_comm) that also checks that every rank makes the same
 * collective calls with the same sizes, and counts the bytes each rank sends and receives (what
 * a network would carry). Used by test_dist.c and test_model_random.c; the real Open MPI runs
 * are in tests/cli_mpi.sh. Include after testutil.h. */
#ifndef CN_TEST_WORLD_H
#define CN_TEST_WORLD_H

#include <pthread.h>

#include "train/dist.h"

#define MAX_RANKS 8

typedef struct {
    int size;
    pthread_barrier_t barrier;
    unsigned char *shared;
    size_t capacity;
    size_t block_of[MAX_RANKS]; /* the block size each rank passed to the current call */
    int calls[MAX_RANKS];       /* collectives each rank made */
    int64_t bytes[MAX_RANKS];   /* sent plus received by each rank, what a network would carry */
    int mismatched[MAX_RANKS];  /* a call where a rank saw another block size than its own */
    int aborted[MAX_RANKS];
} world;

typedef struct {
    world *w;
    int rank;
    cn_comm comm;
} rank_ctx;

static inline int world_allgather(void *ctx, void *blocks, size_t block, cn_error *err)
{
    rank_ctx *r = ctx;
    world *w = r->w;
    unsigned char *bytes = blocks;
    if (block * (size_t)w->size > w->capacity)
        return cn_fail(err, "test communicator: %zu bytes is too big", block);
    w->block_of[r->rank] = block;
    w->calls[r->rank]++;
    memcpy(w->shared + block * r->rank, bytes + block * r->rank, block);
    pthread_barrier_wait(&w->barrier);
    for (int p = 0; p < w->size; p++)
        if (w->block_of[p] != block) w->mismatched[r->rank] = 1;
    memcpy(bytes, w->shared, block * (size_t)w->size);
    w->bytes[r->rank] += 2 * (int64_t)(w->size - 1) * (int64_t)block;
    pthread_barrier_wait(&w->barrier);
    return 0;
}

/* Rank p's send lands in the shared buffer at p * size blocks; rank q takes block q of each. */
static inline int world_alltoall(void *ctx, const void *send, void *recv, size_t block, cn_error *err)
{
    rank_ctx *r = ctx;
    world *w = r->w;
    size_t size = (size_t)w->size, row = block * size;
    if (row * size > w->capacity)
        return cn_fail(err, "test communicator: %zu bytes is too big", block);
    w->block_of[r->rank] = block;
    w->calls[r->rank]++;
    memcpy(w->shared + row * (size_t)r->rank, send, row);
    pthread_barrier_wait(&w->barrier);
    for (int p = 0; p < w->size; p++) {
        if (w->block_of[p] != block) w->mismatched[r->rank] = 1;
        memcpy((unsigned char *)recv + block * p, w->shared + row * p + block * r->rank, block);
    }
    w->bytes[r->rank] += 2 * (int64_t)(w->size - 1) * (int64_t)block;
    pthread_barrier_wait(&w->barrier);
    return 0;
}

static inline void world_abort(void *ctx, const char *message)
{
    rank_ctx *r = ctx;
    fprintf(stderr, "test communicator: rank %d aborts: %s\n", r->rank, message);
    r->w->aborted[r->rank] = 1;
}

static inline void world_init(world *w, int size, rank_ctx ranks[])
{
    memset(w, 0, sizeof *w);
    w->size = size;
    w->capacity = 8u << 20;
    w->shared = malloc(w->capacity);
    assert_non_null(w->shared);
    assert_int_equal(pthread_barrier_init(&w->barrier, NULL, (unsigned)size), 0);
    for (int p = 0; p < size; p++)
        ranks[p] = (rank_ctx){w, p, {.rank = p, .size = size, .ctx = &ranks[p],
                                     .allgather = world_allgather,
                                     .alltoall = world_alltoall, .abort = world_abort}};
}

/* Asserts that the ranks stayed in step, then frees the world. */
static inline void world_finish(world *w)
{
    for (int p = 0; p < w->size; p++) {
        assert_int_equal(w->calls[p], w->calls[0]);
        assert_false(w->mismatched[p]);
    }
    for (int p = 0; p < w->size; p++) assert_false(w->aborted[p]);
    pthread_barrier_destroy(&w->barrier);
    free(w->shared);
}

/* Runs fn(arg[p]) for every rank p on its own thread and waits for all. */
static inline void run_ranks(int size, void *(*fn)(void *), void *args, size_t arg_size)
{
    pthread_t threads[MAX_RANKS];
    for (int p = 0; p < size; p++)
        assert_int_equal(pthread_create(&threads[p], NULL, fn, (char *)args + p * arg_size), 0);
    for (int p = 0; p < size; p++) pthread_join(threads[p], NULL);
}

#endif /* CN_TEST_WORLD_H */
