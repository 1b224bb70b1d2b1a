#!/usr/bin/env python3
"""Checks every relative link in every Markdown file of the source tree.

  tests/docs/check_links.py SOURCE_DIR

A link [text](target) or a reference definition [label]: target that is not
a URL resolves when its file or folder exists (relative to the Markdown file,
or to SOURCE_DIR when it starts with /). A #anchor, alone or after a Markdown
file, must name a heading of that file, slugged as GitHub does: lower case,
inline formatting dropped, every character but letters, digits, spaces, '-'
and '_' removed, spaces turned into '-', and -1, -2, ... added to repeats.
Code blocks and code spans are not read.

The files are those `git ls-files '*.md'` lists in a git checkout, else every
*.md under SOURCE_DIR outside hidden and build folders. Prints each broken
link as FILE:LINE: and exits 1 if there is one. Standard library only.
"""

import os
import re
import subprocess
import sys
import unicodedata
import urllib.parse

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*(?:name|id)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
CODE_SPAN = re.compile(r"(`+)(?:.|\n(?![ \t]*\n))*?(?<!`)\1(?!`)")  # within a paragraph
# [text](target) and ![alt](target); the text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]*(<[^>]*>|\S+)", re.MULTILINE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def slug(heading):
    """GitHub's anchor for a heading's text (before de-duplication)."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`").strip(), heading)
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("*", "")
    text = re.sub(r"(?<![\w])_+|_+(?![\w])", "", text)  # _emphasis_, not snake_case
    out = []
    for ch in text.lower():
        category = unicodedata.category(ch)
        if ch in "-_" or category[0] in "LN" or category == "Mn":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def scan(path):
    """Returns (anchors, links): the file's anchors, and (line, target) per link."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    anchors, seen = set(), {}
    prose = []  # the file's lines, code blocks blanked
    fence = None
    previous = ""

    def add_heading(text):
        base = slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        anchors.add(base if n == 0 else f"{base}-{n}")

    for line in lines:
        prose.append("")
        m = FENCE.match(line)
        if fence:
            closing = m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)
            if closing and not line.strip().lstrip(fence[0]):
                fence = None
            previous = ""
            continue
        if m:
            fence = m.group(1)
            previous = ""
            continue
        if line.startswith("    ") and not previous.strip():
            continue  # an indented code block
        heading = ATX_HEADING.match(line)
        if heading:
            add_heading(heading.group(2) or "")
        elif SETEXT_UNDERLINE.match(line) and previous.strip() and not previous.lstrip().startswith(("|", "-", "*", ">")):
            add_heading(previous.strip())
        anchors.update(HTML_ANCHOR.findall(line))
        prose[-1] = line
        previous = line
    # Links may wrap across lines; code spans may too.
    text = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), "\n".join(prose))
    links = [(text.count("\n", 0, m.start()) + 1, m.group(1))
             for pattern in (INLINE_LINK, REFERENCE_DEF) for m in pattern.finditer(text)]
    return anchors, sorted(links)


def markdown_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "*.md"],
                             check=True, capture_output=True).stdout
        names = [n for n in out.decode().split("\0") if n]
        return sorted(os.path.join(root, n) for n in names if os.path.isfile(os.path.join(root, n)))
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if not d.startswith(".") and not d.startswith("build")
                      and not os.path.exists(os.path.join(directory, d, "CMakeCache.txt"))]
        found += [os.path.join(directory, f) for f in files if f.endswith(".md")]
    return sorted(found)


def check(root):
    root = os.path.abspath(root)
    files = markdown_files(root)
    cache = {}

    def anchors_of(path):
        if path not in cache:
            cache[path] = scan(path)[0]
        return cache[path]

    broken, checked = [], 0
    for path in files:
        anchors, links = scan(path)
        cache[path] = anchors
        where = os.path.relpath(path, root)
        for number, target in links:
            target = target.strip("<>")
            if not target or SCHEME.match(target):
                continue  # a URL (http:, mailto:, ...)
            checked += 1
            file_part, _, anchor = target.partition("#")
            file_part = urllib.parse.unquote(file_part.split("?")[0])
            if file_part:
                base = root if file_part.startswith("/") else os.path.dirname(path)
                resolved = os.path.normpath(os.path.join(base, file_part.lstrip("/")))
                if not os.path.exists(resolved):
                    broken.append(f"{where}:{number}: {target}: no such file")
                    continue
            else:
                resolved = path
            if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
                if urllib.parse.unquote(anchor).lower() not in {a.lower() for a in anchors_of(resolved)}:
                    broken.append(f"{where}:{number}: {target}: no heading #{anchor} in "
                                  f"{os.path.relpath(resolved, root)}")
    return files, checked, broken


def self_check():
    """The slug rules on headings whose GitHub anchors are known."""
    cases = {
        "Set-up: two commands": "set-up-two-commands",
        "On a GPU (the CUDA backend)": "on-a-gpu-the-cuda-backend",
        "Boundary search (`SweepSpec.boundary_search`)": "boundary-search-sweepspecboundary_search",
        "Metrics (`/metrics`)": "metrics-metrics",
        "**Bold** and _emphasis_ in [a link](x.md)": "bold-and-emphasis-in-a-link",
        "normsweep-train": "normsweep-train",
        "1. Hidden-state growth": "1-hidden-state-growth",
    }
    for heading, expected in cases.items():
        got = slug(heading)
        if got != expected:
            sys.exit(f"check_links.py: slug({heading!r}) is {got!r}, GitHub's is {expected!r}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_links.py SOURCE_DIR")
    self_check()
    files, checked, broken = check(sys.argv[1])
    if not files:
        sys.exit(f"check_links.py: no Markdown files under {sys.argv[1]}")
    for line in broken:
        print(line)
    print(f"{len(files)} Markdown files, {checked} relative links, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
