/* dist_mpi.c — the only file that calls MPI: recognising a process started by mpirun or srun,
 * MPI_Init, the allgather and alltoall the library's communicator runs on (point-to-point
 * messages polled against a deadline, so that a rank that died or hangs stops the others
 * instead of leaving them waiting for ever), stopping every process when a collective fails,
 * and MPI_Finalize. Built without CNNC_MPI (make MPI=0) it still recognises a launcher, so
 * that a build without MPI refuses to run as several processes rather than run several
 * independent trainings. It decides nothing about training and sums nothing: what the message
 * on a lost rank ends with comes from the caller. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dist.h"

/* A number from the environment, or -1. */
static int env_number(const char *name)
{
    const char *text = getenv(name);
    if (!text || !*text) return -1;
    char *end;
    long v = strtol(text, &end, 10);
    return *end == '\0' && v >= 0 && v <= INT_MAX ? (int)v : -1;
}

/* First of the variables that is set. */
static int env_first(const char *const *names, int count)
{
    for (int i = 0; i < count; i++) {
        int v = env_number(names[i]);
        if (v >= 0) return v;
    }
    return -1;
}

int cli_mpi_launched(int *size, int *rank)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                        "SLURM_STEP_NUM_TASKS"};
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                        "SLURM_PROCID"};
    int n = env_first(sizes, 3), r = env_first(ranks, 4);
    *size = n > 0 ? n : 0;
    *rank = r > 0 ? r : 0;
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK") ||
           (getenv("SLURM_PROCID") && n > 1);
}

#ifdef CNNC_MPI
#include <mpi.h>

/* The tag of the exchange's messages: consecutive exchanges between two ranks match in order. */
#define EXCHANGE_TAG 0x636e
/* The bytes kept of a host's name (with its '\0'); a longer one is cut. */
#define HOST_NAME_SIZE 64

typedef struct {
    MPI_Comm world;        /* a duplicate of MPI_COMM_WORLD that returns errors instead of dying */
    int rank, size;
    MPI_Request *requests; /* [2 * size]: the receive from each rank, then the send to each */
    double timeout;        /* seconds an exchange waits for the other ranks; 0: for ever */
    char *afterword;       /* what the message on a lost rank ends with, or NULL */
    char *hosts;           /* [size * HOST_NAME_SIZE]: every rank's host, for that message */
    int stderr_fd;         /* the real stderr, even while dist.c holds this rank's back */
} mpi_state;

static void stop_everyone(MPI_Comm comm, const char *what)
{
    fprintf(stderr, "cnnc: error: %s; stopping every process\n", what);
    fflush(stderr);
    MPI_Abort(comm, 1);
    exit(1); /* MPI_Abort does not return; this keeps the compiler sure of it */
}

static void stop_on_error(MPI_Comm comm, const char *call, int rc)
{
    char text[MPI_MAX_ERROR_STRING], what[MPI_MAX_ERROR_STRING + 32];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    snprintf(what, sizeof what, "%s: %s", call, text);
    stop_everyone(comm, what);
}

/* Posts the receive of every other rank's block into recv (rank k's at k * block) and the send
 * to every other rank k of send + k * stride (stride 0: the same bytes to all), each in the
 * order rank + 1, rank + 2, ... (mod size). */
static int post_exchange(mpi_state *m, const char *send, size_t stride, char *recv, int block)
{
    MPI_Request *recvs = m->requests, *sends = m->requests + m->size;
    int rc = MPI_SUCCESS;
    for (int k = 0; k < 2 * m->size; k++) m->requests[k] = MPI_REQUEST_NULL;
    for (int i = 1; i < m->size && rc == MPI_SUCCESS; i++) {
        int k = (m->rank + i) % m->size;
        rc = MPI_Irecv(recv + (size_t)k * (size_t)block, block, MPI_BYTE, k, EXCHANGE_TAG,
                       m->world, &recvs[k]);
    }
    for (int i = 1; i < m->size && rc == MPI_SUCCESS; i++) {
        int k = (m->rank + i) % m->size;
        rc = MPI_Isend(send + (size_t)k * stride, block, MPI_BYTE, k, EXCHANGE_TAG, m->world,
                       &sends[k]);
    }
    return rc;
}

/* Tests every request not yet complete; *left counts those still pending. */
static int test_exchange(mpi_state *m, int *left)
{
    *left = 0;
    for (int i = 0; i < 2 * m->size; i++) {
        if (m->requests[i] == MPI_REQUEST_NULL)
            continue;
        int done = 0, rc = MPI_Test(&m->requests[i], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return rc;
        *left += !done;
    }
    return MPI_SUCCESS;
}

/* Between two tests: nothing for the first 20 ms, then 1 ms. A message of more than a few KB
 * moves only while both ranks call MPI (Open MPI's rendezvous), so a pause of the waiting rank
 * delays the exchange by as much; the waits of a training step (ranks a step apart, a checkpoint
 * being written) end well within 20 ms, and a rank that waits longer is waiting for a slow or
 * lost peer, for which a thousand wake-ups a second cost little and the deadline counts. */
static void pause_after(double waited)
{
    if (waited < 20e-3)
        return;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* "1 (host2), 3 (host4)": the ranks, with their hosts, whose receive is still pending or, when
 * every receive is complete, whose send is (*sent set); *count is how many. */
static void lost_ranks(const mpi_state *m, char *out, size_t size, int *count, int *sent)
{
    const MPI_Request *recv = m->requests, *send = m->requests + m->size;
    *sent = 1;
    for (int k = 0; k < m->size; k++) *sent &= recv[k] == MPI_REQUEST_NULL;
    const MPI_Request *pending = *sent ? send : recv;
    size_t used = 0;
    out[0] = '\0';
    *count = 0;
    for (int k = 0; k < m->size && used < size; k++) {
        if (pending[k] == MPI_REQUEST_NULL)
            continue;
        int n = snprintf(out + used, size - used, "%s%d (%s)", *count ? ", " : "", k,
                         m->hosts + (size_t)k * HOST_NAME_SIZE);
        used += n > 0 ? (size_t)n : 0;
        (*count)++;
    }
}

/* Past the deadline: names the ranks that did not deliver, then ends every process without
 * MPI_Finalize, which would wait for them too. An alarm ends this one should MPI_Abort hang. */
static void stop_lost(mpi_state *m)
{
    char ranks[1024];
    int count, sent;
    lost_ranks(m, ranks, sizeof ranks, &count, &sent);
    fflush(stderr);
    int fd = m->stderr_fd >= 0 ? m->stderr_fd : STDERR_FILENO;
    dprintf(fd, "cnnc: error: rank%s %s %s rank %d for %g s (--mpi-timeout); %s "
            "probably gone. Stopping every process%s%s\n", count > 1 ? "s" : "", ranks,
            sent ? "took nothing from" : "sent nothing to", m->rank, m->timeout,
            count > 1 ? "they are" : "it is", m->afterword ? "; " : "",
            m->afterword ? m->afterword : "");
    alarm(10);
    MPI_Abort(m->world, 1);
    _exit(1);
}

/* Waits until every request is complete, or stops every process past the deadline. */
static int wait_exchange(mpi_state *m)
{
    double start = cli_seconds();
    for (;;) {
        int left, rc = test_exchange(m, &left);
        if (rc != MPI_SUCCESS || left == 0)
            return rc;
        double waited = cli_seconds() - start;
        if (m->timeout > 0 && waited >= m->timeout)
            stop_lost(m);
        pause_after(waited);
    }
}

/* One message of block bytes to and from every other rank (post_exchange), waited for under
 * the deadline; an MPI error stops every process. */
static int exchange(mpi_state *m, const char *send, size_t stride, char *recv, size_t block,
                    cn_error *err)
{
    if (block > INT_MAX) /* every rank has the same block size, so every rank refuses */
        return cn_fail(err, "%zu bytes per process is more than one message sends", block);
    int rc = post_exchange(m, send, stride, recv, (int)block);
    if (rc != MPI_SUCCESS)
        stop_on_error(m->world, "posting the exchange", rc);
    rc = wait_exchange(m);
    if (rc != MPI_SUCCESS)
        stop_on_error(m->world, "the exchange", rc);
    return 0;
}

/* Every rank's block to every other, the same bytes in the same places as MPI_Allgather. */
static int mpi_allgather(void *ctx, void *blocks, size_t block, cn_error *err)
{
    mpi_state *m = ctx;
    char *bytes = blocks;
    return exchange(m, bytes + (size_t)m->rank * block, 0, bytes, block, err);
}

/* Block k of send to rank k, the same bytes in the same places as MPI_Alltoall. */
static int mpi_alltoall(void *ctx, const void *send, void *recv, size_t block, cn_error *err)
{
    mpi_state *m = ctx;
    const char *from = send;
    char *to = recv;
    size_t own = (size_t)m->rank * block;
    memcpy(to + own, from + own, block);
    return exchange(m, from, block, to, block, err);
}

static void mpi_abort(void *ctx, const char *message)
{
    stop_everyone(((mpi_state *)ctx)->world, message);
}

/* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
static void library_name(char *out, size_t size)
{
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    MPI_Get_library_version(text, &len);
    text[strcspn(text, ",\n")] = '\0';
    snprintf(out, size, "%s", text);
}

/* Every rank's host name, gathered once, so that the message on a lost rank names its host. */
static int learn_hosts(mpi_state *m)
{
    m->hosts = calloc((size_t)m->size, HOST_NAME_SIZE);
    if (!m->hosts)
        return -1;
    char name[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(name, &len);
    /* a longer name is cut, as the message that quotes it expects */
    snprintf(m->hosts + (size_t)m->rank * HOST_NAME_SIZE, HOST_NAME_SIZE, "%.*s",
             HOST_NAME_SIZE - 1, name);
    mpi_allgather(m, m->hosts, HOST_NAME_SIZE, NULL);
    for (int k = 1; k <= m->size; k++) m->hosts[(size_t)k * HOST_NAME_SIZE - 1] = '\0';
    return 0;
}

static void free_state(mpi_state *m)
{
    if (m->stderr_fd >= 0)
        close(m->stderr_fd);
    free(m->requests);
    free(m->afterword);
    free(m->hosts);
    free(m);
}

int cli_mpi_start(cn_comm *comm, char *library, size_t library_size)
{
    int provided = 0;
    /* only the main thread calls MPI; the worker threads never do */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        cli_failure("MPI_Init failed");
        return -1;
    }
    mpi_state *m = calloc(1, sizeof *m);
    if (m) {
        MPI_Comm_dup(MPI_COMM_WORLD, &m->world);
        MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
        MPI_Comm_rank(m->world, &m->rank);
        MPI_Comm_size(m->world, &m->size);
        m->timeout = CLI_MPI_TIMEOUT;
        m->stderr_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
        m->requests = malloc(2 * (size_t)m->size * sizeof *m->requests);
    }
    if (!m || !m->requests || learn_hosts(m) != 0) {
        cli_failure("out of memory starting MPI");
        MPI_Abort(MPI_COMM_WORLD, 1);
        return -1;
    }
    *comm = (cn_comm){.rank = m->rank, .size = m->size, .ctx = m, .allgather = mpi_allgather,
                      .alltoall = mpi_alltoall, .abort = mpi_abort};
    library_name(library, library_size);
    return 0;
}

int cli_mpi_deadline(cn_comm *comm, double seconds, const char *afterword)
{
    mpi_state *m = comm->ctx;
    char *copy = afterword ? strdup(afterword) : NULL;
    if (afterword && !copy)
        return -1;
    free(m->afterword);
    m->afterword = copy;
    m->timeout = seconds;
    return 0;
}

void cli_mpi_finish(cn_comm *comm)
{
    mpi_state *m = comm->ctx;
    MPI_Comm_free(&m->world);
    free_state(m);
    comm->ctx = NULL;
    MPI_Finalize();
}

int cli_mpi_library(char *name, size_t size)
{
    library_name(name, size); /* MPI allows this one call before MPI_Init */
    return 1;
}

#else /* built without MPI */

int cli_mpi_start(cn_comm *comm, char *library, size_t library_size)
{
    (void)comm, (void)library, (void)library_size;
    return -1; /* cli_dist_start says why, once */
}

int cli_mpi_deadline(cn_comm *comm, double seconds, const char *afterword)
{
    (void)comm, (void)seconds, (void)afterword;
    return 0;
}

void cli_mpi_finish(cn_comm *comm)
{
    (void)comm;
}

int cli_mpi_library(char *name, size_t size)
{
    if (size > 0)
        name[0] = '\0';
    return 0;
}

#endif
