/* dist.c — a cnnc command as one of several processes: deciding at start whether MPI is in
 * play, rank 0 as the only voice on stdout, the other ranks' error messages held back where
 * rank 0 would say the same, and the agreement on a status that keeps every rank at the same
 * point of the run; a process that a launcher started dies with the launcher. One process alone
 * goes through the same calls, which then do nothing. No MPI calls here (dist_mpi.c) and
 * nothing specific to training (train_dist.c). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "cli.h"
#include "dist.h"

/* A process started by a launcher (mpirun, its orted on another host, srun's slurmstepd: its
 * parent) dies the moment the launcher does, whatever it is doing: with nobody left to collect
 * its output or stop it, it would otherwise train on and write checkpoints into a folder that a
 * new run may already use. Linux only (PR_SET_PDEATHSIG); elsewhere the launcher's own
 * clean-up has to do. */
static int die_with_launcher(void)
{
#ifdef __linux__
    pid_t launcher = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != launcher)
        return cli_failure("the launcher that started this process is gone"); /* just now */
#endif
    return CLI_OK;
}

/* A failure at the start that only rank 0 puts into words: mpirun stops the whole job at the
 * first process that exits with an error, and that could be a silent rank before rank 0 has
 * spoken. So the other ranks wait a moment first; mpirun ends them as soon as rank 0 fails. */
static int start_failure(int rank)
{
    if (rank > 0)
        sleep(5);
    return CLI_FAILURE;
}

int cli_dist_start(cli_dist *d)
{
    *d = (cli_dist){.comm = {.rank = 0, .size = 1}, .saved_stderr = -1};
    int size, rank;
    if (!cli_mpi_launched(&size, &rank))
        return CLI_OK;
    if (die_with_launcher() != CLI_OK)
        return CLI_FAILURE;
    char library[64];
    if (!cli_mpi_library(library, sizeof library)) {
        if (size <= 1)
            return CLI_OK; /* mpirun -np 1: nothing to share */
        if (rank == 0)
            cli_failure("this cnnc was built without MPI, so it cannot run as %d processes: "
                        "install libopenmpi-dev and rebuild it with make, or run it "
                        "without mpirun", size);
        return start_failure(rank);
    }
    if (cli_mpi_start(&d->comm, d->library, sizeof d->library) != 0)
        return CLI_FAILURE;
    d->mpi = 1;
    if (d->comm.size == 1 && size > 1) { /* e.g. srun without a PMI plugin */
        if (rank == 0)
            cli_failure("the launcher started %d processes but MPI sees each one alone: with "
                        "Slurm, run srun --mpi=pmix (or mpirun)", size);
        cli_mpi_finish(&d->comm);
        d->mpi = 0;
        return start_failure(rank);
    }
    if (d->comm.rank > 0)
        (void)!freopen("/dev/null", "w", stdout); /* on failure the rank only talks more */
    return CLI_OK;
}

const cn_comm *cli_dist_comm(const cli_dist *d)
{
    return d->comm.size > 1 ? &d->comm : NULL;
}

int cli_dist_rank(const cli_dist *d)
{
    return d->comm.rank;
}

int cli_dist_size(const cli_dist *d)
{
    return d->comm.size;
}

int cli_dist_launched(const cli_dist *d)
{
    return d->mpi;
}

void cli_dist_hold_errors(cli_dist *d)
{
    if (d->comm.rank == 0 || d->held)
        return;
    fflush(stderr);
    d->held = tmpfile();
    d->saved_stderr = d->held ? dup(STDERR_FILENO) : -1;
    if (d->saved_stderr >= 0 && dup2(fileno(d->held), STDERR_FILENO) >= 0)
        return;
    if (d->saved_stderr >= 0) /* could not hold: this rank just speaks for itself */
        close(d->saved_stderr);
    if (d->held)
        fclose(d->held);
    d->held = NULL;
    d->saved_stderr = -1;
}

/* Gives stderr back; passes on what was held when say is set, each error naming this rank. */
static void release_errors(cli_dist *d, int say)
{
    if (!d->held)
        return;
    fflush(stderr);
    dup2(d->saved_stderr, STDERR_FILENO);
    close(d->saved_stderr);
    d->saved_stderr = -1;
    static const char prefix[] = "cnnc: error: ";
    char line[2048];
    rewind(d->held);
    while (say && fgets(line, sizeof line, d->held)) {
        if (strncmp(line, prefix, sizeof prefix - 1) == 0)
            fprintf(stderr, "%srank %d: %s", prefix, d->comm.rank, line + sizeof prefix - 1);
        else
            fputs(line, stderr);
    }
    fclose(d->held);
    d->held = NULL;
}

int cli_dist_library_error(const cli_dist *d, const cn_error *err)
{
    if (d->comm.rank == 0)
        return cli_library_error(err, NULL);
    return CLI_FAILURE;
}

/* What each rank contributes to an agreement. */
typedef struct {
    int32_t value;
    char host[60];
} value_record;

/* Gathers every rank's value; *first is the lowest rank whose value is not 0 (size if none).
 * NULL after printing why when it cannot. */
static value_record *gather_values(cli_dist *d, int value, int *first)
{
    const cn_comm *c = &d->comm;
    value_record *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        c->abort(c->ctx, "out of memory agreeing on the run's status");
    all[c->rank].value = value;
    gethostname(all[c->rank].host, sizeof all[c->rank].host - 1);
    cn_error err = {{0}};
    if (c->allgather(c->ctx, all, sizeof *all, &err) != 0) {
        free(all);
        cli_failure("%s", err.msg);
        return NULL;
    }
    for (*first = 0; *first < c->size && all[*first].value == 0; (*first)++)
        continue;
    return all;
}

int cli_dist_first(cli_dist *d, int value)
{
    int first;
    if (d->comm.size == 1)
        return value;
    value_record *all = gather_values(d, value, &first);
    if (!all)
        return CLI_FAILURE;
    int agreed = first < d->comm.size ? all[first].value : 0;
    free(all);
    return agreed;
}

int cli_dist_agree(cli_dist *d, int status)
{
    const cn_comm *c = &d->comm;
    int first;
    if (c->size == 1)
        return status;
    value_record *all = gather_values(d, status, &first);
    if (!all)
        return CLI_FAILURE;
    release_errors(d, status != CLI_OK && all[0].value == CLI_OK);
    int agreed = first < c->size ? all[first].value : CLI_OK;
    if (c->rank == 0 && status == CLI_OK && agreed != CLI_OK && agreed != CLI_DONE) {
        all[first].host[sizeof all[first].host - 1] = '\0';
        /* one write, so that the failing rank's own message cannot cut into it */
        fprintf(stderr, "cnnc: error: rank %d of %d (on host %s) failed (its message says "
                "why); every rank stops\n", first, c->size, all[first].host);
    }
    free(all);
    return agreed;
}

int cli_dist_deadline(cli_dist *d, double seconds, const char *afterword)
{
    if (d->mpi && cli_mpi_deadline(&d->comm, seconds, afterword) != 0)
        return cli_failure("out of memory");
    return CLI_OK;
}

int cli_dist_finish(cli_dist *d, int status)
{
    if (d->mpi) {
        status = cli_dist_agree(d, status);
        cli_mpi_finish(&d->comm);
        d->mpi = 0;
    }
    return status == CLI_DONE ? CLI_OK : status;
}
