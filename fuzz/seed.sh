#!/usr/bin/env bash
# Seeds the libFuzzer corpora fuzz/corpus/<target>/ (git-ignored) from the test corpora, the
# regression files and the committed seeds in fuzz/seeds/<target>/. Safe to run again: files
# are named by content hash, so nothing is duplicated.
#   decode, scan_build_agree: raw pickles (tests/corpus/good, tests/corpus/hostile except the
#                             1 MB digit bomb, tests/regression, audit/vectors)
#   structured:               generator input bytes; pickles work too (they read as programs)
#   mitogen_frames:           a control byte + a stream (see check_mitogen_frames)
#   containers:               a magic-choosing byte + a model file (tests/corpus/models)
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
# mitogen_frames: a control byte, then the stream; an odd control byte wraps the rest in one
# pickle frame, so every pickle becomes a frame seed.
mkdir -p corpus/mitogen_frames
for f in "$root"/tests/corpus/good/*.p2.*pkl "$root"/tests/corpus/hostile/*.pkl seeds/mitogen_frames/*; do
    [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 4000 ] || continue
    name=$(sha1sum "$f" | cut -c1-40)
    { printf '\001'; cat "$f"; } > "corpus/mitogen_frames/$name"
done
# containers: a byte choosing a magic to put in front (0: none), then the file.
mkdir -p corpus/containers
for f in "$root"/tests/corpus/models/good/* "$root"/tests/corpus/models/hostile/*; do
    [ -f "$f" ] || continue
    name=$(sha1sum "$f" | cut -c1-40)
    { printf '\000'; cat "$f"; } > "corpus/containers/$name"
done
# torch tars behind the tar selector (10), trailing zero blocks cut (the harness adds them),
# so that they fit libFuzzer's -max_len.
for f in "$root"/tests/corpus/models/good/tar_* "$root"/tests/corpus/models/hostile/tar_*; do
    [ -f "$f" ] || continue
    name=$(sha1sum "$f" | cut -c1-40)
    { printf '\012'; python3 -c 'import sys; d=open(sys.argv[1],"rb").read().rstrip(b"\0"); n=-(-len(d)//512)*512; sys.stdout.buffer.write(d.ljust(n, b"\0"))' "$f"; } > "corpus/containers/tar-$name"
done
for t in decode scan_build_agree structured mitogen_frames containers; do
    echo "fuzz/corpus/$t: $(ls "corpus/$t" | wc -l) files"
done
