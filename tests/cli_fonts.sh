#!/bin/sh
# cli_fonts.sh — the pictures' text comes from DejaVu's font files, not from fontconfig: the
# training curves, the result picture and the confusion matrix drawn with a fontconfig that knows
# no fonts are the same bytes as those drawn with the system's; with the font folder hidden,
# emptied or half there (a private mount namespace), `cnnc plot` says which font file is wrong
# in one line, exits 1 and leaves no picture. The pictures' layout is checked by test_plot.c and
# test_picture.c. The result picture and the confusion matrix need Debian's Fashion-MNIST; the
# hidden fonts need root (mount namespaces), else they are skipped with a note.
# Usage: sh tests/cli_fonts.sh BUILD_DIR
# shellcheck source=tests/lib/cli.sh
. "$(dirname "$0")/lib/cli.sh"
require_cnnc
make_tmp
cd "$tmp" || exit 1
fontdir=/usr/share/fonts/truetype/dejavu

# A fontconfig that lists no fonts, as a stale cache does: a configuration with no font folder.
mkdir nofc
printf '<?xml version="1.0"?>\n<fontconfig><cachedir>%s</cachedir></fontconfig>\n' \
  "$tmp/nofc" >nofc/fonts.conf

# same_without_fontconfig NAME ARGS...: cnnc ARGS writes NAME; again with the empty fontconfig
# (as NAME.nofc); both must succeed with the same bytes.
same_without_fontconfig() {
  name=$1
  shift
  run "$@"
  [ "$status" -eq 0 ] || { fail "cnnc $*: exit status $status: $(cat "$tmp/err")"; return; }
  mv "$name" "$name.system"
  FONTCONFIG_FILE="$tmp/nofc/fonts.conf" "$cnnc" "$@" >"$tmp/out" 2>"$tmp/err"
  status=$?
  [ "$status" -eq 0 ] ||
    { fail "cnnc $* without fontconfig's fonts: exit status $status: $(cat "$tmp/err")"; return; }
  cmp -s "$name" "$name.system" ||
    fail "cnnc $*: $name drawn without fontconfig's fonts differs from the one drawn with them"
}

cat >m.jsonl <<'EOF'
{"epoch":1,"train_loss":0.9,"test_loss":0.6,"test_accuracy":78.5}
{"epoch":2,"train_loss":0.5,"test_loss":0.48,"test_accuracy":83.1}
EOF
same_without_fontconfig curves.png plot m.jsonl -o curves.png

if have_data "the result picture and the confusion matrix"; then
  same_without_fontconfig result.png train --num-epochs 1 --train-samples 512 --num-cores 2 \
    --test-samples 100 --threads 2 --result-image result.png --plot none --save m.safetensors
  same_without_fontconfig confusion.png eval --checkpoint m.safetensors --test-samples 100 \
    --confusion confusion.png
fi

# plot_with_fonts DIR: `cnnc plot` with DIR mounted over the font folder (output in $tmp/out,
# $tmp/err, status in $status).
plot_with_fonts() {
  rm -f curves.png
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare -m sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$1" "$fontdir" \
    "$cnnc" plot m.jsonl -o curves.png >"$tmp/out" 2>"$tmp/err"
  status=$?
}

# expect_font_error DIR FILE WHAT: the one-line message for FILE, exit 1, no picture.
expect_font_error() {
  plot_with_fonts "$1"
  want="cnnc: error: curves.png: cannot draw picture: font $fontdir/$2: $3"
  want="$want (install Debian's fonts-dejavu-core)"
  if [ "$status" -ne 1 ] || [ "$(cat "$tmp/err")" != "$want" ]; then
    fail "fonts from $1: exit status $status, message: $(cat "$tmp/err"); expected: $want"
  fi
  [ -e curves.png ] && fail "fonts from $1: a picture was written"
  for left in curves.png.tmp.*; do
    [ -e "$left" ] && fail "fonts from $1: a temporary file was left behind"
  done
}

mkdir empty broken half
printf 'not a font\n' >broken/DejaVuSans.ttf
cp "$fontdir/DejaVuSans.ttf" half/
if [ -d "$fontdir" ] && unshare -m mount --bind empty "$fontdir" 2>/dev/null; then
  expect_font_error empty DejaVuSans.ttf "cannot open: No such file or directory"
  expect_font_error broken DejaVuSans.ttf "not a font FreeType can read, its error 2"
  expect_font_error half DejaVuSans-Bold.ttf "cannot open: No such file or directory"
  cp "$fontdir/DejaVuSans-Bold.ttf" half/
  plot_with_fonts half
  if [ "$status" -ne 0 ] || ! cmp -s curves.png curves.png.system; then
    fail "fonts copied to another folder: status $status, or another picture: $(cat "$tmp/err")"
  fi
else
  echo "$suite: skipped the missing fonts: cannot mount over $fontdir in a private namespace"
fi

finish
