#!/usr/bin/env bash
# Renders a `normsweep report` page in headless Chromium and saves a PNG, to
# check the page draws (and for attaching a picture of it).
#
#   client/report_screenshot.sh [--section ID] REPORT_DIR|REPORT.html OUT.png [WIDTHxHEIGHT]
#
# The PNG is the window (default 1400x4400), not the whole page: a sweep with
# two placements and one variant fits; give a taller size for more variants.
# --section ID shows that section of the page alone, at the top of the window
# (the report's sections with an id: variants-compared); the page itself is
# not changed.
#
# Chromium is Debian's `chromium` (deploy/install-deps.sh installs it); set
# CHROMIUM to use another binary. The page needs no network and no script.
set -euo pipefail
usage="usage: $0 [--section ID] REPORT_DIR|REPORT.html OUT.png [WIDTHxHEIGHT]"
section=
if [[ ${1:-} == --section ]]; then
  if (($# < 2)); then
    echo "$usage" >&2
    exit 2
  fi
  section=$2
  shift 2
fi
if (($# < 2 || $# > 3)); then
  echo "$usage" >&2
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
if [[ -n $section && ! $section =~ ^[A-Za-z][A-Za-z0-9_-]*$ ]]; then
  echo "$0: --section takes an element id (letters, digits, - and _), got '$section'" >&2
  exit 2
fi
if [[ -n $section ]] && ! grep -q "<section id=\"$section\">" "$page"; then
  echo "$0: $page has no section '$section'" >&2
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
if [[ -n $section ]]; then
  # A copy of the page that hides every element of the body but the section
  # and the zero-size SVG of the shared patterns (figures are SVGs in the
  # body too): the page is self-contained, so the copy draws the same from
  # the profile's directory.
  style="<style>body > :not(#$section):not(svg[width='0']) { display: none !important; }</style>"
  sed "s|</head>|$style</head>|" "$page" >"$profile/section.html"
  page=$profile/section.html
fi
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
