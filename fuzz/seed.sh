#!/usr/bin/env bash
# Seeds the libFuzzer corpora fuzz/corpus/<target>/ (git-ignored) from the test corpora, the
# regression files and the committed seeds in fuzz/seeds/<target>/. Safe to run again: files
# are named by content hash, so nothing is duplicated.
#   decode, scan_build_agree: raw pickles (tests/corpus/good, tests/corpus/hostile except the
#                             1 MB digit bomb, tests/regression, audit/vectors)
#   structured:               generator input bytes; pickles work too (they read as programs)
set -euo pipefail
cd "$(dirname "$0")"
root=..
add() { # add TARGET FILE...
    local target=$1; shift
    mkdir -p "corpus/$target"
    for f in "$@"; do
        [ -f "$f" ] || continue
        case "$f" in *.tsv|*.md|*.txt) continue ;; esac
        # libFuzzer's -max_len is 4096 here; a bigger seed would only be cut.
        [ "$(stat -c %s "$f")" -le 65536 ] || continue
        cp "$f" "corpus/$target/$(sha1sum "$f" | cut -c1-40)"
    done
}
shopt -s nullglob
pickles=("$root"/tests/corpus/good/*.pkl "$root"/tests/corpus/hostile/*.pkl \
         "$root"/tests/regression/* "$root"/audit/vectors/*)
add decode "${pickles[@]}" seeds/decode/*
add scan_build_agree "${pickles[@]}" seeds/decode/* seeds/scan_build_agree/*
add structured seeds/structured/* "$root"/tests/corpus/hostile/*.pkl
for t in decode scan_build_agree structured; do
    echo "fuzz/corpus/$t: $(ls "corpus/$t" | wc -l) files"
done
