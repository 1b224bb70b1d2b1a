#!/usr/bin/env bash
# Renders a `normsweep report` page in headless Chromium and saves a PNG, to
# check the page draws (and for attaching a picture of it).
#
#   client/report_screenshot.sh REPORT_DIR|REPORT.html OUT.png [WIDTHxHEIGHT]
#
# The PNG is the window (default 1400x4400), not the whole page: a sweep with
# two placements and one variant fits; give a taller size for more variants.
#
# Chromium is Debian's `chromium` (deploy/install-deps.sh installs it); set
# CHROMIUM to use another binary. The page needs no network and no script.
set -euo pipefail
if (($# < 2 || $# > 3)); then
  echo "usage: $0 REPORT_DIR|REPORT.html OUT.png [WIDTHxHEIGHT]" >&2
  exit 2
fi
page=$1
out=$2
size=${3:-1400x4400}
[[ -d $page ]] && page=$page/index.html
if [[ ! -f $page ]]; then
  echo "$0: no report at $page (write one with: normsweep report ID --out DIR)" >&2
  exit 2
fi
if [[ ! $size =~ ^[0-9]+x[0-9]+$ ]]; then
  echo "$0: size must be WIDTHxHEIGHT, got '$size'" >&2
  exit 2
fi
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [[ -z $chromium ]]; then
  echo "$0: chromium not found: install Debian's chromium (deploy/install-deps.sh) or set CHROMIUM" >&2
  exit 1
fi
page=$(realpath "$page")
out_abs=$(realpath -m "$out")
rm -f "$out_abs"
# A private profile, so that a running browser or a read-only HOME does not matter.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --disable-gpu --disable-dev-shm-usage --no-first-run --no-default-browser-check --hide-scrollbars
  --user-data-dir="$profile" --screenshot="$out_abs" --window-size="${size/x/,}")
[[ $(id -u) == 0 ]] && flags+=(--no-sandbox)  # Chromium refuses to run as root with its sandbox
# --disable-dev-shm-usage: containers often have a tiny /dev/shm.
if ! HOME=$profile timeout 120 "$chromium" "${flags[@]}" "file://$page" >"$profile/chromium.log" 2>&1 ||
   [[ ! -s $out_abs ]]; then
  echo "$0: chromium did not write $out; its output:" >&2
  cat "$profile/chromium.log" >&2
  exit 1
fi
echo "$out"
