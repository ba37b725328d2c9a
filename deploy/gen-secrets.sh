#!/bin/sh
# Makes the secrets of a compose fleet in DIR (default deploy/secrets): API
# tokens with roles, a gossip encryption key and a CA with node and client
# certificates for mutual TLS. Refuses to overwrite an existing DIR.
#
#   deploy/gen-secrets.sh [DIR [SUBNET_PREFIX [FAK]]]
#
# SUBNET_PREFIX (default 172.29.74) is the fleet network's first three
# octets: node n<i> sits at SUBNET_PREFIX.1<i> and its certificate names it.
# FAK is the fak binary (default bin/fak).
set -eu
dir=${1:-deploy/secrets}
prefix=${2:-172.29.74}
fak=${3:-bin/fak}

if [ -e "$dir" ]; then
	echo "$dir exists; remove it to make new secrets" >&2
	exit 1
fi
umask 077
mkdir -p "$dir"

token() { od -An -tx1 -N24 /dev/urandom | tr -d ' \n'; }
{
	echo "# API tokens of this fleet: <role> <token> (operator, agent, read)."
	echo "operator $(token)"
	echo "agent $(token)"
	echo "read $(token)"
} >"$dir/tokens"

# Read by every node with --config: what all nodes share.
cat >"$dir/fleet.hcl" <<HCL
token_file = "/etc/fak/secrets/tokens"
gossip_key = ["$("$fak" keygen)"]
tls_ca     = "/etc/fak/secrets/tls/ca.pem"
HCL

"$fak" tls init --dir "$dir/tls" --nodes n1,n2,n3 \
	--ip "$prefix.11,$prefix.12,$prefix.13" >/dev/null
# fakctl's settings for the fleet's n1, as the operator:
#   . deploy/secrets/fakctl.env && bin/fakctl fleet
abs=$(cd "$dir" && pwd)
cat >"$dir/fakctl.env" <<ENV
export FAK_ADDR=https://127.0.0.1:7401
export FAK_TOKEN=$(awk '$1 == "operator" { print $2 }' "$dir/tokens")
export FAK_CACERT=$abs/tls/ca.pem
export FAK_CLIENT_CERT=$abs/tls/client.pem
export FAK_CLIENT_KEY=$abs/tls/client-key.pem
ENV
echo "wrote the fleet's tokens, gossip key and TLS certificates to $dir"
