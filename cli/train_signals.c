/* train_signals.c — SIGINT and SIGTERM during `cnnc train`. The first one only records which
 * signal came and puts both back to their default action; the training loop reads the record
 * after every step, saves a checkpoint and exits 128 + the signal. So a second signal ends the
 * process at once: a checkpoint being written then stays a temporary file that nothing takes
 * for a checkpoint, and the previous one is whole. The handler does nothing else (no I/O). */
#include <signal.h>
#include <string.h>

#include "cli.h"
#include "train.h"

static volatile sig_atomic_t stop_signal;

static void set_action(int sig, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

static void on_stop_signal(int sig)
{
    stop_signal = sig;
    set_action(SIGINT, SIG_DFL);
    set_action(SIGTERM, SIG_DFL);
}

void train_signals_install(void)
{
    set_action(SIGINT, on_stop_signal);
    set_action(SIGTERM, on_stop_signal);
}

void train_signals_restore(void)
{
    set_action(SIGINT, SIG_DFL);
    set_action(SIGTERM, SIG_DFL);
}

int train_stop_signal(void)
{
    return stop_signal;
}
