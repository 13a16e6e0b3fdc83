#!/usr/bin/env bash
# Regenerates the committed test certificates and keys (test use only; never deploy these).
# Usage: testdata/gen-certs.sh   (writes testdata/certs/; testdata/README.md lists what each file is for)
set -euo pipefail
cd "$(dirname "$0")/certs"
days=36500
selfsigned() { # name keyopts cn san
  local name=$1 keyopt=$2 cn=$3 san=$4
  openssl req -x509 -new -batch -nodes $keyopt -keyout "$name.key.pem" -out "$name.cert.pem" \
    -days $days -subj "/CN=$cn" -addext "subjectAltName=$san" 2>/dev/null
}
selfsigned rsa2048 "-newkey rsa:2048" localhost "DNS:localhost,IP:127.0.0.1,IP:::1"
selfsigned ecdsa-p256 "-newkey ec -pkeyopt ec_paramgen_curve:P-256" localhost "DNS:localhost,IP:127.0.0.1,IP:::1"
selfsigned other "-newkey rsa:2048" other.test "DNS:other.test,DNS:*.other.test"
for bits in 1024 3072 4096; do
  selfsigned rsa$bits "-newkey rsa:$bits" localhost "DNS:localhost,IP:127.0.0.1"
done
# A key that matches no certificate (for the mismatch test).
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out mismatch.key.pem 2>/dev/null
# An RSA key with e = 3 (providers reject it).
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -pkeyopt rsa_keygen_pubexp:3 -out rsa2048-e3.key.pem 2>/dev/null
openssl req -x509 -new -batch -key rsa2048-e3.key.pem -out rsa2048-e3.cert.pem -days $days -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost" 2>/dev/null
# mTLS: a client CA, a client it signed, and a client nobody trusts.
openssl req -x509 -new -batch -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout client-ca.key.pem \
  -out client-ca.cert.pem -days $days -subj "/CN=quickshake test client CA" 2>/dev/null
openssl req -new -batch -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout client.key.pem \
  -out client.csr -subj "/CN=trusted client" 2>/dev/null
openssl x509 -req -in client.csr -CA client-ca.cert.pem -CAkey client-ca.key.pem -CAcreateserial \
  -out client.cert.pem -days $days 2>/dev/null
rm -f client.csr client-ca.cert.srl
selfsigned untrusted-client "-newkey ec -pkeyopt ec_paramgen_curve:P-256" "untrusted client" "DNS:untrusted"
# Envoy session ticket keys are 80 random bytes.
head -c 80 /dev/urandom > ticket.key
chmod 0600 ./*.key.pem
echo "regenerated $(ls | wc -l) files in $(pwd)"
