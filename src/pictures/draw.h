/* draw.h — what the library's pictures (picture.c, plot.c, confusion.c) share: rendering onto an
 * opaque surface and writing it as a PNG that appears whole or not at all, the picture's fonts
 * read from DejaVu's font files, one-line text placed and shrunk to fit, and "nice" axis ticks.
 * Not part of the public header; it decides no layout of any particular picture. */
#ifndef CN_DRAW_H
#define CN_DRAW_H

#include <cairo.h>

#include "cnnc.h"

/* Where Debian's fonts-dejavu-core puts DejaVu Sans. The pictures' text is drawn from these
 * files through FreeType, never looked up through fontconfig, so that every machine draws the
 * same pixels whatever its font cache holds. */
#define CN_FONT_DIR "/usr/share/fonts/truetype/dejavu"
#define CN_FONT_REGULAR "DejaVuSans.ttf"
#define CN_FONT_BOLD "DejaVuSans-Bold.ttf"

/* The two faces of one picture's text. Each cairo font face owns its FreeType library and face
 * and frees them when cairo lets go of it (cairo may keep a face in its font cache after the
 * picture is done), so closing only drops this picture's references. */
typedef struct {
    cairo_font_face_t *regular, *bold;
} cn_fonts;

/* Loads dir/CN_FONT_REGULAR and dir/CN_FONT_BOLD. -1 with "font FILE: what is wrong (install
 * Debian's fonts-dejavu-core)" in err, fonts then holding nothing. */
int cn_fonts_open(cn_fonts *fonts, const char *dir, cn_error *err);
void cn_fonts_close(cn_fonts *fonts);

/* Draws the picture onto cr (already painted white, its font the regular face, antialiased in
 * grey with slight hinting); fonts->bold is there for titles. Returns cairo's status. */
typedef cairo_status_t (*cn_draw_fn)(cairo_t *cr, const cn_fonts *fonts, const void *ctx);

/* Loads the fonts from CN_FONT_DIR, creates an opaque width x height surface, paints it white,
 * calls draw and writes the result to path through a temporary file in the same folder, fsync
 * and rename. -1 with "PATH: cannot draw picture: ..." (a missing or unreadable font among
 * them) or "PATH: cannot write picture: ..." in err; path is then untouched. */
int cn_png_render(const char *path, int width, int height, cn_draw_fn draw, const void *ctx,
                  cn_error *err);

/* Draws one line of text with its baseline at y. align places it: 0 starts at x, 0.5 centres it
 * on x, 1 ends at x. A text wider than max_w is drawn in a smaller size so that it fits. Uses
 * the current font face and source colour. */
void cn_draw_text(cairo_t *cr, const char *text, double size, double x, double y, double align,
                  double max_w);

/* Width of text at the given size in the current font face. */
double cn_text_width(cairo_t *cr, const char *text, double size);

/* "…", what a text cut short ends with. */
#define CN_ELLIPSIS "\xE2\x80\xA6"

/* The size to draw text at so that it is at most max_w wide: size when it fits, else smaller,
 * but never below min_size (the text may then still be too wide). */
double cn_fit_size(cairo_t *cr, const char *text, double size, double min_size, double max_w);

/* Cuts the last whole UTF-8 character off s, in place; 0 when s was already empty. */
int cn_utf8_drop_last(char *s);

/* As cn_draw_text, but never smaller than min_size: a text still wider than max_w there loses
 * characters at its end for an ellipsis (…) until it fits. Texts are cut at 250 bytes. */
void cn_draw_text_fit(cairo_t *cr, const char *text, double size, double min_size, double x,
                      double y, double align, double max_w);

/* Tick marks for an axis over [lo, hi] (lo <= hi): first and last are multiples of step that
 * enclose the range, step is 1, 2 or 5 times a power of ten, with about max_ticks intervals.
 * decimals is how many digits after the point the labels need. */
typedef struct {
    double first, last, step;
    int decimals;
} cn_axis_ticks;

void cn_nice_ticks(double lo, double hi, int max_ticks, cn_axis_ticks *t);

#endif /* CN_DRAW_H */
