# style-check.awk: prints "file:line: what" for each break of the written formatting rule.
# SPDX-License-Identifier: MIT
function base(p) { sub(/.*\//, "", p); return p }
FNR == 1 {
    hstart = 0; commented = 0
    want = "/* " base(FILENAME) ": "
    if (index($0, want) != 1)
        print FILENAME ":1: the first line is not \"" want "<purpose> */\""
}
FNR == 2 && $0 !~ /SPDX-License-Identifier: MIT/ { print FILENAME ":2: the second line is not the SPDX line" }
/\t/ { print FILENAME ":" FNR ": a tab" }
/[ \t]+$/ { print FILENAME ":" FNR ": white space at the end of the line" }
length($0) > maxcol { print FILENAME ":" FNR ": " length($0) " columns, over " maxcol }
{
    # A function definition's opening brace stands alone in column 0; the paragraph that holds
    # its header (the lines since the last blank one) must hold a comment before the header.
    if ($0 == "{" && hstart > 0 && !hcommented)
        print FILENAME ":" hstart ": a function without a comment: " hdr
    if ($0 ~ /^$/) {
        commented = 0; hstart = 0
    } else if ($0 ~ /^[A-Za-z_]/ && $0 ~ /\(/ && hstart == 0 && $0 !~ /^template *<[^>]*>$/) {
        # An explicit specialization shares its primary template's comment.
        hstart = FNR; hdr = $0; hcommented = commented || $0 ~ /^template <>/ || prev ~ /^template <>$/
    } else if ($0 ~ /^\}/) {
        hstart = 0
    }
    if ($0 ~ /\*\/ *$/)
        commented = 1
    prev = $0
}
