#!/usr/bin/env bash
# Build the local-tree benchmark corpus (the same recipe as the peer harness's docs-fs):
#   python3-doc HTML + the plain-text files of /usr/share/doc (.gz decompressed) + common-licenses,
#   every file and directory with mtime 2024-01-01 00:00:00 UTC.
# Installs python3-doc with apt when missing (says so). Output: $BENCH_DATA/docs-fs
set -euo pipefail
BENCH_DATA=${BENCH_DATA:-/tmp/bench-data}
DOCS=$BENCH_DATA/docs-fs
if ! dpkg -s python3-doc >/dev/null 2>&1; then
  echo "bench: installing Debian package python3-doc (the HTML corpus)" >&2
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-doc
fi
PYHTML=$(readlink -f /usr/share/doc/python3-doc/html)
rm -rf "$DOCS"; mkdir -p "$DOCS"
cp -rL "$PYHTML" "$DOCS/python-html"
python3 - "$PYHTML" "$DOCS" <<'PY'
import gzip, os, sys, zlib
pyhtml, dst = sys.argv[1], sys.argv[2]
def copy_text(src, out_root, follow):
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if os.path.realpath(os.path.join(root, d)) != pyhtml
                         and not os.path.islink(os.path.join(root, d)))
        for name in sorted(files):
            p = os.path.join(root, name)
            if os.path.islink(p) and not follow:
                continue
            rel = os.path.relpath(p, src)
            try:
                if name.endswith(".gz"):
                    with gzip.open(p, "rb") as f: data = f.read()
                    rel = rel[:-3]
                else:
                    with open(p, "rb") as f: data = f.read()
            except (OSError, EOFError, zlib.error):
                continue
            if not data or b"\0" in data[:65536] or data.startswith(b"%!PS"):
                continue
            out = os.path.join(out_root, rel)
            if os.path.exists(out):
                continue
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as f: f.write(data)
copy_text("/usr/share/doc", os.path.join(dst, "usr-share-doc"), False)
copy_text("/usr/share/common-licenses", os.path.join(dst, "common-licenses"), True)
PY
chmod -R a+rX "$DOCS"
find "$DOCS" -exec touch -h -d "2024-01-01 00:00:00 UTC" {} +
echo "$DOCS: $(find "$DOCS" -type f | wc -l) files, $(du -sh "$DOCS" | cut -f1)"
