/* train_signals.c — SIGINT, SIGTERM and a lost standard output during `cnnc train`. The first
 * SIGINT or SIGTERM only records which signal came and puts both back to their default action;
 * the training loop reads the record after every step, saves a checkpoint and exits 128 + the
 * signal. So a second signal ends the process at once: a checkpoint being written then stays a
 * temporary file that nothing takes for a checkpoint, and the previous one is whole. A signal
 * that was ignored when cnnc started (nohup, `trap '' INT`, a background job of a script) stays
 * ignored. SIGPIPE is always ignored, so that a write to a pipe nobody reads fails instead of
 * killing the process; a failed write to stdout then stops the run as SIGPIPE would, with its
 * status (141), through the same path. The handler does nothing else (no I/O). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "train.h"

static const int stop_signals[] = {SIGINT, SIGTERM};
#define STOP_SIGNALS ((int)(sizeof stop_signals / sizeof stop_signals[0]))

static volatile sig_atomic_t stop_signal;
static int installed;
static int ignored[STOP_SIGNALS]; /* ignored when cnnc started: left so */

static void set_action(int sig, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < STOP_SIGNALS; i++) sigaddset(&sa.sa_mask, stop_signals[i]);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

/* Every stop signal that cnnc handles gets handler; the ignored ones stay ignored. */
static void set_stop_actions(void (*handler)(int))
{
    for (int i = 0; i < STOP_SIGNALS; i++)
        if (!ignored[i])
            set_action(stop_signals[i], handler);
}

static void on_stop_signal(int sig)
{
    stop_signal = sig;
    set_stop_actions(SIG_DFL);
}

void train_signals_ignore_pipe(void)
{
    set_action(SIGPIPE, SIG_IGN);
}

void train_signals_install(void)
{
    for (int i = 0; i < STOP_SIGNALS; i++) {
        struct sigaction old;
        ignored[i] = sigaction(stop_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN;
    }
    installed = 1;
    set_stop_actions(on_stop_signal);
}

void train_signals_restore(void)
{
    if (installed)
        set_stop_actions(SIG_DFL);
    installed = 0;
}

int train_stop_signal(void)
{
    if (stop_signal == 0 && ferror(stdout))
        return SIGPIPE;
    return stop_signal;
}
