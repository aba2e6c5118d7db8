#!/usr/bin/env bash
# Makes a test CA and certificates for Sluice nodes (node-to-node mutual TLS and client TLS).
#
#   deploy/tls/make-certs.sh OUT_DIR NAME:HOST[,HOST...] [NAME:HOST...]
#   e.g. deploy/tls/make-certs.sh /etc/sluice/tls node1:10.0.0.1,sluice-1 node2:10.0.0.2 node3:10.0.0.3
#
# Writes ca.pem, ca-key.pem and, per node, NAME.pem and NAME-key.pem (EC P-256), each valid for
# the listed DNS names and IP addresses, for both server and client authentication. For tests
# and small deployments; production CAs are usually managed elsewhere.
set -euo pipefail
out=${1:?usage: make-certs.sh OUT_DIR NAME:HOST[,HOST...]...}
shift
mkdir -p "$out"
cd "$out"
if [ ! -f ca.pem ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out ca-key.pem
  openssl req -x509 -new -key ca-key.pem -sha256 -days 3650 -subj "/CN=Sluice test CA" -out ca.pem \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi
for spec in "$@"; do
  name=${spec%%:*}
  hosts=${spec#*:}
  san=""
  IFS=',' read -ra list <<< "$hosts"
  for h in "${list[@]}"; do
    if [[ $h =~ ^[0-9.]+$ || $h == *:* ]]; then san+="IP:$h,"; else san+="DNS:$h,"; fi
  done
  san=${san%,}
  openssl ecparam -name prime256v1 -genkey -noout -out "$name-key.pem.ec"
  openssl pkcs8 -topk8 -nocrypt -in "$name-key.pem.ec" -out "$name-key.pem"
  rm -f "$name-key.pem.ec"
  openssl req -new -key "$name-key.pem" -subj "/CN=$name" -out "$name.csr"
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE\n' "$san" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 825 -sha256 -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
  chmod 600 "$name-key.pem"
  echo "$out/$name.pem ($san)"
done
