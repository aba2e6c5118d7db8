"""Verifies a Sluice admission token with PyJWT against the served JWKS.

usage: verify_jwt.py JWKS_URL TOKEN ROOM
"""
import json
import sys

import jwt

jwks_url, token, room = sys.argv[1], sys.argv[2], sys.argv[3]
client = jwt.PyJWKClient(jwks_url)
key = client.get_signing_key_from_jwt(token)
claims = jwt.decode(token, key.key, algorithms=["EdDSA"], audience=f"sluice:{room}", issuer="sluice")
print(json.dumps(claims))
