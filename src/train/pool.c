/* pool.c — a persistent pool of worker threads for the trainer. A job is a number of tasks;
 * task i always runs on thread i % threads (the caller is thread 0), so per-thread scratch is
 * safe and placement does not depend on timing. Synchronisation is a mutex and two condition
 * variables: workers sleep between jobs, nothing spins. No work stealing, no nested jobs. */
#include <pthread.h>
#include <stdlib.h>

#include "cnnc.h"

struct cn_pool {
    int threads;
    pthread_t *workers;        /* threads - 1 of them */
    pthread_mutex_t lock;
    pthread_cond_t job_ready;  /* workers wait here for a new generation */
    pthread_cond_t job_done;   /* the caller waits here for pending == 0 */
    unsigned long generation;  /* bumped for every job; guarded by lock */
    int pending;               /* workers still running the current job */
    int stopping;
    cn_task_fn fn;
    void *ctx;
    int num_tasks;
};

typedef struct {
    cn_pool *pool;
    int thread;
} worker_arg;

static void run_share(cn_pool *p, int thread)
{
    for (int task = thread; task < p->num_tasks; task += p->threads) p->fn(p->ctx, task, thread);
}

static void *worker_main(void *arg)
{
    worker_arg self = *(worker_arg *)arg;
    free(arg);
    cn_pool *p = self.pool;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->generation == seen && !p->stopping) pthread_cond_wait(&p->job_ready, &p->lock);
        if (p->stopping) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        run_share(p, self.thread);
        pthread_mutex_lock(&p->lock);
        if (--p->pending == 0) pthread_cond_signal(&p->job_done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void stop_workers(cn_pool *p, int started)
{
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->job_ready);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < started; i++) pthread_join(p->workers[i], NULL);
}

cn_pool *cn_pool_create(int threads, cn_error *err)
{
    if (threads < 1) {
        cn_fail(err, "thread pool: %d threads requested, need at least 1", threads);
        return NULL;
    }
    cn_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->workers = calloc((size_t)threads, sizeof *p->workers))) {
        free(p);
        cn_fail(err, "thread pool: out of memory");
        return NULL;
    }
    p->threads = threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->job_ready, NULL);
    pthread_cond_init(&p->job_done, NULL);
    for (int i = 0; i < threads - 1; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (arg) *arg = (worker_arg){p, i + 1};
        if (!arg || pthread_create(&p->workers[i], NULL, worker_main, arg) != 0) {
            free(arg);
            stop_workers(p, i);
            p->threads = 0;
            cn_pool_free(p);
            cn_fail(err, "thread pool: cannot start thread %d of %d", i + 2, threads);
            return NULL;
        }
    }
    return p;
}

void cn_pool_run(cn_pool *p, int num_tasks, cn_task_fn fn, void *ctx)
{
    if (p->threads == 1 || num_tasks <= 1) {
        for (int task = 0; task < num_tasks; task++) fn(ctx, task, task % p->threads);
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->num_tasks = num_tasks;
    p->pending = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->job_ready);
    pthread_mutex_unlock(&p->lock);

    run_share(p, 0);

    pthread_mutex_lock(&p->lock);
    while (p->pending > 0) pthread_cond_wait(&p->job_done, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

int cn_pool_threads(const cn_pool *p) { return p->threads; }

void cn_pool_free(cn_pool *p)
{
    if (!p) return;
    if (p->threads > 1) stop_workers(p, p->threads - 1);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->job_ready);
    pthread_cond_destroy(&p->job_done);
    free(p->workers);
    free(p);
}
