/* dist_mpi.c — the only file that calls MPI: recognising a process started by mpirun or srun,
 * MPI_Init, the allgather the library's communicator runs on, stopping every process when a
 * collective fails, and MPI_Finalize. Built without CNNC_MPI (make MPI=0) it still recognises a
 * launcher, so that a build without MPI refuses to run as several processes rather than run
 * several independent trainings. It decides nothing about training. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

typedef struct {
    MPI_Comm world; /* a duplicate of MPI_COMM_WORLD that returns errors instead of dying */
} mpi_state;

static void stop_everyone(MPI_Comm comm, const char *what)
{
    fprintf(stderr, "cnnc: error: %s; stopping every process\n", what);
    fflush(stderr);
    MPI_Abort(comm, 1);
    exit(1); /* MPI_Abort does not return; this keeps the compiler sure of it */
}

static int mpi_allgather(void *ctx, void *blocks, size_t block, cn_error *err)
{
    mpi_state *m = ctx;
    if (block > INT_MAX) /* every rank has the same block size, so every rank refuses */
        return cn_fail(err, "%zu bytes per process is more than one MPI_Allgather sends", block);
    int rc = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, blocks, (int)block, MPI_BYTE,
                           m->world);
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING], what[MPI_MAX_ERROR_STRING + 32];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        snprintf(what, sizeof what, "MPI_Allgather: %s", text);
        stop_everyone(m->world, what);
    }
    return 0;
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

int cli_mpi_start(cn_comm *comm, char *library, size_t library_size)
{
    int provided = 0;
    /* only the main thread calls MPI; the worker threads never do */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        cli_failure("MPI_Init failed");
        return -1;
    }
    mpi_state *m = malloc(sizeof *m);
    if (!m) {
        cli_failure("out of memory starting MPI");
        MPI_Abort(MPI_COMM_WORLD, 1);
        return -1;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &m->world);
    MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
    *comm = (cn_comm){0, 1, m, mpi_allgather, mpi_abort};
    MPI_Comm_rank(m->world, &comm->rank);
    MPI_Comm_size(m->world, &comm->size);
    library_name(library, library_size);
    return 0;
}

void cli_mpi_finish(cn_comm *comm)
{
    mpi_state *m = comm->ctx;
    MPI_Comm_free(&m->world);
    free(m);
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
