#!/bin/sh
# man-example.sh: prints the C program of a man page's EXAMPLES section (its first .Bd -literal block), unescaped.
# SPDX-License-Identifier: MIT
# Usage: man-example.sh PAGE > FILE.c
# mdoc writes a backslash as \e: "\en" in the page is "\n" in the program.
awk '
    /^\.Sh / { inex = ($2 == "EXAMPLES") }
    inex && !done && /^\.Bd -literal/ { inblock = 1; next }
    inblock && /^\.Ed/ { inblock = 0; done = 1; next }
    inblock { gsub(/\\e/, "\\"); print }
    END { if (!done) { print "man-example.sh: no .Bd -literal block in EXAMPLES" > "/dev/stderr"; exit 1 } }
' "$1"
