/* progress.c — the live progress bar of `cnnc train` on a terminal and its plain-line
 * counterpart elsewhere (see progress.h). The bar is one line redrawn with \r, never wider than
 * the terminal, at most ten times a second, ended by the epoch's summary line. Nothing here
 * touches the model or the files; the numbers come from train.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "progress.h"
#include "train.h"

#define BAR_REDRAW_SECONDS 0.1
#define BAR_MAX_WIDTH 30
#define BAR_MIN_WIDTH 8     /* narrower than this, no bar: only the numbers */
#define BAR_SPARE 4         /* columns kept for numbers that grow during the epoch */
#define LINE_MAX 512

static int terminal_columns(FILE *out)
{
    struct winsize ws;
    if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *columns = getenv("COLUMNS");
    int n = columns ? atoi(columns) : 0;
    return n > 0 ? n : 80;
}

static int is_live_terminal(FILE *out)
{
    const char *term = getenv("TERM");
    return isatty(fileno(out)) && !(term && strcmp(term, "dumb") == 0);
}

void progress_init(progress *p, FILE *out, progress_level level, int log_steps, int num_epochs,
                   long samples_per_step)
{
    *p = (progress){.out = out, .level = level, .log_steps = log_steps,
                    .num_epochs = num_epochs, .samples_per_step = samples_per_step};
    p->live = level != PROGRESS_QUIET && is_live_terminal(out);
    p->columns = p->live ? terminal_columns(out) : 80;
}

int progress_shows(const progress *p, progress_level level) { return p->level >= level; }

void progress_epoch_begin(progress *p, const cn_epoch_position *pos)
{
    p->epoch = pos->epoch;
    p->first_step = p->steps_done = pos->step;
    p->loss_sum = pos->loss_sum;
    p->correct = pos->correct;
    p->epoch_start = cli_seconds();
    if (p->run_start == 0) p->run_start = p->epoch_start, p->run_first_epoch = p->epoch;
    p->last_draw = 0;
    p->bar_cells = -1;
}

/* "1:05" or "2:03:07"; "--:--" when unknown. */
static void format_duration(char *buf, size_t size, double seconds)
{
    if (!(seconds >= 0) || seconds > 359999) {
        snprintf(buf, size, "--:--");
        return;
    }
    long s = lround(seconds);
    if (s >= 3600) snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}

/* "0:12 elapsed, 1:05 left": the run's time so far in this process and the time left in the
 * whole run. Later epochs are assumed to take as long as the finished ones did (test passes
 * included) or, during the first, as this one's training. */
static void time_left(const progress *p, int done, int steps, double now, char *buf, size_t size)
{
    int here = done - p->first_step; /* steps this process ran in this epoch */
    double per_step = here > 0 ? (now - p->epoch_start) / here : -1;
    int epochs_here = p->epoch - p->run_first_epoch; /* whole epochs this process ran */
    double per_epoch = epochs_here > 0 ? (p->epoch_start - p->run_start) / epochs_here
                                       : per_step * steps;
    double left = per_step * (steps - done) + per_epoch * (p->num_epochs - p->epoch);
    char elapsed[32], rest[32];
    format_duration(elapsed, sizeof elapsed, now - p->run_start);
    format_duration(rest, sizeof rest, per_step < 0 ? -1 : left);
    snprintf(buf, size, "%s elapsed, %s left", elapsed, rest);
}

/* "[=========>          ]" with width cells between the brackets. */
static void format_bar(char *buf, int width, int done, int steps)
{
    int filled = (int)((long)done * width / steps);
    buf[0] = '[';
    for (int i = 0; i < width; i++)
        buf[1 + i] = i < filled ? '=' : (i == filled && done < steps ? '>' : ' ');
    buf[1 + width] = ']';
    buf[2 + width] = '\0';
}

/* Decides once per epoch, from its first line, how wide the bar is, so that it does not jump
 * about as the numbers change. A few columns are kept spare for numbers that grow. */
static void choose_bar_width(progress *p, int text_length)
{
    int avail = p->columns - 1 - text_length - 2 - BAR_SPARE;
    p->bar_cells = avail < BAR_MIN_WIDTH ? 0 : avail < BAR_MAX_WIDTH ? avail : BAR_MAX_WIDTH;
}

/* "  71,234 samples/s": the training rate of this process in this epoch. */
static void format_rate(char *buf, size_t size, const progress *p, int done, double now)
{
    int here = done - p->first_step;
    double rate = now > p->epoch_start ? (double)here * p->samples_per_step /
                                             (now - p->epoch_start) : 0;
    snprintf(buf, size, "  %.0f samples/s", rate);
}

/* Rewrites the bar line: done of steps, the epoch's mean loss and training accuracy so far, then
 * tail (the times, or what happens now), and the rate where the terminal is wide enough. The
 * line is cut at the terminal's width, so that it never wraps. */
static void draw_bar(progress *p, int done, int steps, const char *tail, double now)
{
    char head[64], info[256], rate[64], bar[BAR_MAX_WIDTH + 3] = "", line[LINE_MAX];
    int digits = snprintf(NULL, 0, "%d", steps), seen = p->steps_done > 0 ? p->steps_done : 1;
    double accuracy = 100.0 * (double)p->correct / ((double)seen * p->samples_per_step);
    snprintf(head, sizeof head, "Epoch %d/%d ", p->epoch, p->num_epochs);
    snprintf(info, sizeof info, " %*d/%d loss %.4f acc %.2f%%  %s", digits, done, steps,
             p->loss_sum / seen, accuracy, tail);
    format_rate(rate, sizeof rate, p, done, now);
    if (p->bar_cells < 0) {
        int text = (int)(strlen(head) + strlen(info));
        p->show_rate = p->columns - 1 - text - (int)strlen(rate) - 2 - BAR_SPARE >= BAR_MIN_WIDTH;
        choose_bar_width(p, text + (p->show_rate ? (int)strlen(rate) : 0));
    }
    if (p->show_rate) strncat(info, rate, sizeof info - strlen(info) - 1);
    if (p->bar_cells > 0) format_bar(bar, p->bar_cells, done, steps);
    int length = snprintf(line, sizeof line, "%s%s%s", head, bar, info);
    if (length >= LINE_MAX) length = LINE_MAX - 1;
    if (length > p->columns - 1) length = p->columns > 1 ? p->columns - 1 : 0;
    line[length] = '\0';
    /* spaces cover what a longer previous line left behind */
    int pad = p->bar_length > length ? p->bar_length - length : 0;
    fprintf(p->out, "\r%s%*s", line, pad, "");
    fflush(p->out);
    p->bar_length = length;
    p->bar_shown = 1;
    p->last_draw = now;
}

void progress_step(void *ctx, const cn_step_report *r)
{
    progress *p = ctx;
    int steps = r->steps, done = r->step + 1;
    p->loss_sum += r->loss;
    p->correct += r->correct;
    p->steps_done = done;
    if (!p->live) {
        if (progress_shows(p, PROGRESS_NORMAL) && r->step % p->log_steps == 0)
            fprintf(p->out, "Epoch %d step %d/%d Loss=%.5f\n", r->epoch, r->step, steps,
                    (double)r->loss);
        return;
    }
    double now = cli_seconds();
    if (done > 1 && done < steps && now - p->last_draw < BAR_REDRAW_SECONDS) return;
    char left[96];
    time_left(p, done, steps, now, left, sizeof left);
    draw_bar(p, done, steps, left, now);
}

void progress_epoch_trained(progress *p, int epoch, int steps)
{
    if (p->live)
        draw_bar(p, steps, steps, "testing", cli_seconds());
    else if (progress_shows(p, PROGRESS_NORMAL))
        fprintf(p->out, "Finished training epoch %d\n", epoch);
}

static void clear_bar(progress *p)
{
    if (!p->bar_shown) return;
    fprintf(p->out, "\r%*s\r", p->bar_length, "");
    p->bar_shown = 0;
    p->bar_length = 0;
}

void progress_epoch_report(progress *p, const epoch_report *r, int metrics_debug)
{
    clear_bar(p);
    if (progress_shows(p, PROGRESS_NORMAL) || r->epoch == p->num_epochs)
        print_epoch_report(r, metrics_debug || progress_shows(p, PROGRESS_VERBOSE));
    fflush(p->out);
}

void progress_break(progress *p)
{
    if (!p->bar_shown) return;
    fputc('\n', p->out);
    fflush(p->out);
    p->bar_shown = 0;
    p->bar_length = 0;
}
