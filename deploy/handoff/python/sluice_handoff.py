"""Admission handed from a Sluice waiting room to an application that has no proxy in front.

The room lists this application's origin in `line.handoff_origins`. A visitor the room admits is
sent here with `?sluice_token=<JWT>`: an EdDSA token signed by the waiting room (keys at its
`/.well-known/jwks.json`), naming the room (`aud` = `sluice:<room>`), this origin (`origin`), the
visitor (`sub`), the session's end (`session_exp`) and its own id (`jti`), and living at most a
minute. This WSGI middleware:

- takes a token once: it checks the signature, issuer, room, origin and expiry, records the `jti`
  (a token seen before is refused), sets this application's own session cookie (signed, ending
  with the Sluice session) and redirects to the same URL without the token;
- lets a request with a valid session cookie through to the application;
- sends anyone else (no token, a bad or used token, an ended session) to the waiting room, with
  the page they asked for as `next`, so that they come back here once admitted.

One process keeps the used tokens in memory (`SeenTokens`). Several processes or machines must
share them: give `seen=` an object whose `take(jti, exp)` is atomic across them, for example
Redis' `SET sluice:jti:<jti> 1 NX EXAT <exp>` (true when the key was set).

Needs PyJWT with `cryptography` (`pip install "PyJWT[crypto]"`). Works with any WSGI framework
(Flask: `app.wsgi_app = SluiceHandoff(app.wsgi_app, ...)`; Django: wrap `get_wsgi_application()`).
Run as a program, it serves a small protected page (see `main`).
"""

import base64
import hashlib
import hmac
import html
import os
import sys
import threading
import time
import urllib.parse

import jwt

PARAM = "sluice_token"
# Longest token taken (a Sluice token is about 500 bytes).
TOKEN_LEN_MAX = 2048
# Most used tokens remembered at once; beyond it, new tokens are refused until old ones expire.
SEEN_MAX = 1_000_000
# A token signed by a key not seen yet fetches the waiting room's keys again at most this often
# (a flood of tokens naming made-up keys must not become a flood of fetches).
JWKS_REFETCH_SECS = 30


class SeenTokens:
    """The ids of tokens already taken, until they expire (one process)."""

    def __init__(self, limit=SEEN_MAX, clock=time.time):
        self._lock = threading.Lock()
        self._seen = {}
        self._limit = limit
        self._clock = clock

    def take(self, jti, exp):
        """True the first time `jti` is taken, false after (and when full)."""
        with self._lock:
            now = self._clock()
            if len(self._seen) >= self._limit:
                self._seen = {j: e for j, e in self._seen.items() if e > now}
            if jti in self._seen or len(self._seen) >= self._limit:
                return False
            self._seen[jti] = exp
            return True


class SluiceHandoff:
    """WSGI middleware admitting only visitors a Sluice room handed over (see the module)."""

    def __init__(self, app, *, waiting_room, room, origin, issuer, secret, cookie="app_session",
                 jwks_url=None, seen=None, clock=time.time):
        if len(secret) < 32:
            raise ValueError("the session secret needs at least 32 bytes")
        self.app = app
        self.waiting_room = waiting_room.rstrip("/")
        self.room = room
        self.origin = origin
        self.issuer = issuer
        self.secret = secret if isinstance(secret, bytes) else secret.encode()
        self.cookie = cookie
        self.secure = origin.startswith("https://")
        self.jwks = jwt.PyJWKClient(jwks_url or self.waiting_room + "/.well-known/jwks.json")
        self.keys = {}
        self.fetched = None
        self.keys_lock = threading.Lock()
        self.seen = seen if seen is not None else SeenTokens(clock=clock)
        self.clock = clock

    def __call__(self, environ, start_response):
        query = urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        tokens = [v for k, v in query if k == PARAM]
        rest = urllib.parse.urlencode([(k, v) for k, v in query if k != PARAM])
        here = self.origin + urllib.parse.quote(environ.get("PATH_INFO", "/") or "/") \
            + ("?" + rest if rest else "")
        if tokens:
            claims = self.check(tokens[0]) if len(tokens) == 1 else None
            if claims is None:
                return self.to_waiting_room(here, start_response)
            start_response("303 See Other", [
                ("Location", here),
                ("Set-Cookie", self.session_cookie(claims)),
                ("Cache-Control", "no-store"),
                ("Referrer-Policy", "no-referrer"),
            ])
            return [b""]
        visitor = self.session(environ.get("HTTP_COOKIE", ""))
        if visitor is None:
            return self.to_waiting_room(here, start_response)
        environ["sluice.visitor"] = visitor
        return self.app(environ, start_response)

    def check(self, token):
        """The claims of a token this application may take now (once), or None."""
        if len(token) > TOKEN_LEN_MAX:
            return None
        try:
            key = self.key_for(jwt.get_unverified_header(token).get("kid"))
            if key is None:
                return None
            claims = jwt.decode(
                token, key, algorithms=["EdDSA"], audience="sluice:" + self.room,
                issuer=self.issuer, leeway=0,
                options={"require": ["exp", "iat", "sub", "jti", "origin", "session_exp"],
                         "verify_exp": False},
            )
        except (jwt.PyJWTError, ValueError, TypeError):
            return None
        now = self.clock()
        if claims["exp"] <= now or claims.get("room") != self.room \
                or claims["origin"] != self.origin or claims["session_exp"] <= now:
            return None
        if not self.seen.take(claims["jti"], claims["exp"]):
            return None
        return claims

    def key_for(self, kid):
        """The public key `kid` names: from the keys fetched last, or fetched again if that was
        at least JWKS_REFETCH_SECS ago (a rotation publishes the next key ahead of use)."""
        with self.keys_lock:
            now = self.clock()
            if kid not in self.keys and (self.fetched is None
                                         or now - self.fetched >= JWKS_REFETCH_SECS):
                self.fetched = now
                jwks = self.jwks.get_jwk_set(refresh=True)
                self.keys = {k.key_id: k.key for k in jwks.keys if k.key_id}
            return self.keys.get(kid)

    def session_cookie(self, claims):
        end = int(claims["session_exp"])
        value = f"{claims['sub']}.{end}"
        mac = self.mac(value)
        attrs = f"Path=/; HttpOnly; SameSite=Lax; Max-Age={max(0, end - int(self.clock()))}"
        if self.secure:
            attrs += "; Secure"
        return f"{self.cookie}={value}.{mac}; {attrs}"

    def session(self, cookie_header):
        """The visitor of a valid, unexpired session cookie, or None."""
        for part in cookie_header.split(";"):
            name, _, value = part.strip().partition("=")
            if name != self.cookie:
                continue
            visitor, _, rest = value.partition(".")
            end, _, mac = rest.partition(".")
            if not end.isdigit() or not hmac.compare_digest(mac, self.mac(f"{visitor}.{end}")):
                return None
            return visitor if int(end) > self.clock() else None
        return None

    def mac(self, value):
        digest = hmac.new(self.secret, value.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def to_waiting_room(self, here, start_response):
        to = f"{self.waiting_room}/wait/{self.room}?next={urllib.parse.quote(here, safe='')}"
        start_response("303 See Other", [("Location", to), ("Cache-Control", "no-store")])
        return [b""]


def main():
    """Serves a protected page: `python3 sluice_handoff.py PORT` with the settings in the
    environment: SLUICE_URL (the waiting room's address), SLUICE_ROOM, APP_ORIGIN (this
    application's origin as the room lists it), SLUICE_ISSUER (the nodes' `[tokens] issuer`,
    default `sluice`) and APP_SECRET (at least 32 bytes)."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    def shop(environ, start_response):
        body = (f"<!doctype html><title>Shop</title><h1 id=welcome>Welcome to the shop</h1>"
                f"<p>Visitor <code id=visitor>{html.escape(environ['sluice.visitor'])}</code></p>").encode()
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                  ("Cache-Control", "no-store")])
        return [body]

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    app = SluiceHandoff(shop, waiting_room=os.environ["SLUICE_URL"], room=os.environ["SLUICE_ROOM"],
                        origin=os.environ["APP_ORIGIN"],
                        issuer=os.environ.get("SLUICE_ISSUER", "sluice"),
                        secret=os.environ["APP_SECRET"])
    with make_server("127.0.0.1", int(sys.argv[1]), app, server_class=Server,
                     handler_class=Quiet) as server:
        print("listening", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
