/* dist.h — how a cnnc command runs as several processes: started by mpirun or srun it joins
 * them through MPI, otherwise it is one process and touches no MPI at all. It hands the library
 * its communicator, makes rank 0 the only one that prints to stdout, keeps the other ranks from
 * repeating rank 0's error messages, and lets the processes agree at fixed points, so that a
 * failure on any rank stops every rank and none is left waiting in a collective. The MPI calls
 * themselves live in dist_mpi.c alone. */
#ifndef CNNC_CLI_DIST_H
#define CNNC_CLI_DIST_H

#include <stddef.h>
#include <stdio.h>

#include "cnnc.h"

/* A status for cli_dist_agree: this rank finished early and successfully (--help); every rank
 * stops, and cli_dist_finish turns it into CLI_OK. */
#define CLI_DONE (-1)

/* The default of --mpi-timeout: the seconds an exchange waits for the other processes before
 * the ones waiting stop, taking the rest with them (docs/distributed.md says why 300). */
#define CLI_MPI_TIMEOUT 300

typedef struct {
    cn_comm comm;      /* rank 0 of 1 when alone */
    int mpi;           /* MPI was started and must be finished */
    int saved_stderr;  /* the real stderr while cli_dist_hold_errors holds it back, else -1 */
    FILE *held;        /* what this rank wrote to stderr meanwhile */
    char library[64];  /* "Open MPI v4.1.4" */
} cli_dist;

/* Joins the other processes when an MPI launcher started this one, else sets up one process.
 * Under a launcher this process is killed (SIGKILL) when the launcher dies. On ranks other
 * than 0, stdout goes to /dev/null. CLI_OK, or CLI_FAILURE after a message. */
int cli_dist_start(cli_dist *d);
/* The communicator for the library: NULL when this process is alone. */
const cn_comm *cli_dist_comm(const cli_dist *d);
int cli_dist_rank(const cli_dist *d);
int cli_dist_size(const cli_dist *d);
/* Whether an MPI launcher started this process (even as one process alone). */
int cli_dist_launched(const cli_dist *d);
/* On ranks other than 0, holds back what goes to stderr until the next cli_dist_agree, which
 * lets it out only when this rank failed and rank 0 did not: an error every rank meets alike
 * (the same bad flag) is said once, by rank 0, and one that only this rank meets (its dataset
 * is damaged) still reaches the user. */
void cli_dist_hold_errors(cli_dist *d);
/* A library error that every rank got alike: rank 0 prints it. Returns CLI_FAILURE. */
int cli_dist_library_error(const cli_dist *d, const cn_error *err);
/* Every rank gives its status and gets the run's: that of the lowest rank that failed, CLI_OK
 * when none did. Rank 0, when it did not fail itself, names the rank that did (that rank has
 * printed why). The same call on every rank. */
int cli_dist_agree(cli_dist *d, int status);
/* Every rank gives a value and gets the lowest rank's non-zero one, or 0 (such as the signal
 * that one rank received). The same call on every rank. */
int cli_dist_first(cli_dist *d, int value);
/* From now on an exchange that waits more than seconds (0: for ever; CLI_MPI_TIMEOUT until
 * this is called) for another process stops every process, with a message that names the
 * processes it waited for and ends with afterword (what is left usable; may be NULL). Nothing
 * to do for one process. CLI_OK, or CLI_FAILURE after a message. */
int cli_dist_deadline(cli_dist *d, double seconds, const char *afterword);
/* Agrees on the final status, leaves MPI, and returns the status to exit with. */
int cli_dist_finish(cli_dist *d, int status);

/* The MPI side (dist_mpi.c). launched: 1 when mpirun or srun started this process, with the
 * world's size and this process's rank as the launcher's environment gives them (0 when it
 * does not say). */
int cli_mpi_launched(int *size, int *rank);
/* MPI_Init and a communicator of every process; 0, or -1 after printing why. */
int cli_mpi_start(cn_comm *comm, char *library, size_t library_size);
void cli_mpi_finish(cn_comm *comm);
/* cli_dist_deadline for the communicator of cli_mpi_start; 0, or -1 when out of memory. */
int cli_mpi_deadline(cn_comm *comm, double seconds, const char *afterword);
/* Whether this cnnc was built with MPI: 1 with the library's name ("Open MPI v4.1.4") in
 * name, else 0. Needs no MPI_Init. */
int cli_mpi_library(char *name, size_t size);

#endif /* CNNC_CLI_DIST_H */
