#!/bin/sh
# Regenerates the committed RSA test-key corpora (testdata/rsa-crt-keys) used by the
# quickshake-mbmath tests and mbmath-ctgrind.
#
#   sh gen_keys.sh            # writes rsa2048_keys.txt (16 keys), rsa3072_keys.txt and rsa4096_keys.txt (4 keys each)
#
# Each output line is one key: space-separated NAME=HEX fields (n e d p q dp dq qinv),
# big-endian hex without leading "00" sign bytes. Uses `openssl genrsa` and parses
# `openssl rsa -text -noout` with python3. TEST KEYS ONLY - never use them for anything real.
set -eu
cd "$(dirname "$0")"
gen() {
    bits=$1 count=$2 out=$3
    : > "$out.tmp"
    i=0
    while [ "$i" -lt "$count" ]; do
        openssl genrsa "$bits" 2>/dev/null | openssl rsa -text -noout 2>/dev/null | python3 -c '
import re, sys
text = sys.stdin.read()
names = {"modulus": "n", "privateExponent": "d", "prime1": "p", "prime2": "q",
         "exponent1": "dp", "exponent2": "dq", "coefficient": "qinv"}
fields = {}
cur = None
for line in text.splitlines():
    m = re.match(r"^(\w+):\s*(.*)$", line)
    if m:
        key, rest = m.group(1), m.group(2)
        if key == "publicExponent":
            fields["e"] = int(rest.split()[0])
            cur = None
        else:
            cur = names.get(key)
            if cur is not None:
                fields[cur] = ""
    elif cur is not None:
        fields[cur] += line.strip().replace(":", "")
out = []
for k in ["n", "e", "d", "p", "q", "dp", "dq", "qinv"]:
    v = fields[k]
    v = int(v, 16) if isinstance(v, str) else v
    out.append("%s=%x" % (k, v))
print(" ".join(out))
' >> "$out.tmp"
        i=$((i + 1))
    done
    mv "$out.tmp" "$out"
}
gen 2048 16 rsa2048_keys.txt
gen 3072 4 rsa3072_keys.txt
gen 4096 4 rsa4096_keys.txt
