#!/usr/bin/env python3
"""Checks that every relative link in the repository's Markdown files (the README front page and
the manual pages it links to) points to a file or folder that exists. Links to web pages and
in-page anchors are left alone; links inside code blocks and code spans are not links."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {".git", "target", ".mirror"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def markdown_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith("target")]
        for f in files:
            if f.endswith(".md"):
                yield os.path.join(top, f)


def in_link_text(line, m):
    return line[m.start() - 1 : m.start()] == "[" and line[m.end() : m.end() + 1] == "]"


def links(text):
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        # Drop code spans (`...`, paired left to right), but keep a link whose text is a code
        # span: [`x`](target).
        line = re.sub(r"`[^`]*`", lambda m: m.group(0) if in_link_text(line, m) else "", line)
        for m in LINK.finditer(line):
            yield n, m.group(1)


bad = 0
count = 0
for path in sorted(markdown_files()):
    text = open(path, encoding="utf-8").read()
    for n, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        count += 1
        dest = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#", 1)[0]))
        if not os.path.exists(dest):
            print(f"{os.path.relpath(path, ROOT)}:{n}: broken link {target}")
            bad += 1
print(f"doc-links: {count} relative links, {bad} broken")
sys.exit(1 if bad else 0)
