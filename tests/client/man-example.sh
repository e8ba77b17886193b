#!/bin/sh
# man-example.sh: prints the C program of a man page's EXAMPLES section (its first .Bd -literal block), unescaped.
# SPDX-License-Identifier: MIT
# Usage: man-example.sh PAGE > FILE.c
# mdoc writes a backslash as \e: "\en" in the page is "\n" in the program. The two lines
# put first make the file one of the tree's sources (tests/tools/style-t.sh).
name=$(basename "$1")
printf '/* %s-example.c: the EXAMPLES program of %s, as man-example.sh takes it out. */\n' "${name%.*}" "$name"
echo '/* SPDX-License-Identifier: MIT */'
awk '
    /^\.Sh / { inex = ($2 == "EXAMPLES") }
    inex && !done && /^\.Bd -literal/ { inblock = 1; next }
    inblock && /^\.Ed/ { inblock = 0; done = 1; next }
    inblock { gsub(/\\e/, "\\"); print }
    END { if (!done) { print "man-example.sh: no .Bd -literal block in EXAMPLES" > "/dev/stderr"; exit 1 } }
' "$1"
