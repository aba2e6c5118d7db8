// Admission handed from a Sluice waiting room to an application that has no proxy in front.
//
// The room lists this application's origin in `line.handoff_origins`. A visitor the room admits
// is sent here with `?sluice_token=<JWT>`: an EdDSA token signed by the waiting room (keys at its
// `/.well-known/jwks.json`), naming the room (`aud` = `sluice:<room>`), this origin (`origin`),
// the visitor (`sub`), the session's end (`session_exp`) and its own id (`jti`), and living at
// most a minute. `sluiceHandoff(options)` returns a middleware `(req, res, next)` (Connect and
// Express take it as it is; plain `node:http` calls it with a `next` of its own) that:
//
// - takes a token once: checks the signature, issuer, room, origin and expiry, records the `jti`
//   (a token seen before is refused), sets this application's own session cookie (signed, ending
//   with the Sluice session) and redirects to the same URL without the token;
// - lets a request with a valid session cookie through (`req.sluiceVisitor` names the visitor);
// - sends anyone else to the waiting room, with the page they asked for as `next`.
//
// One process keeps the used tokens in memory. Several processes must share them: pass `seen`
// with an atomic `take(jti, exp)` (Redis: `SET sluice:jti:<jti> 1 NX EXAT <exp>`).
//
// Needs `jose` (pinned in package.json). Run as a program, it serves a small protected page.

import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';
import { createRemoteJWKSet, jwtVerify } from 'jose';

const PARAM = 'sluice_token';
// Longest token taken (a Sluice token is about 500 bytes).
const TOKEN_LEN_MAX = 2048;
// Most used tokens remembered at once; beyond it, new tokens are refused until old ones expire.
const SEEN_MAX = 1_000_000;

/** The ids of tokens already taken, until they expire (one process). */
export class SeenTokens {
  constructor(limit = SEEN_MAX, clock = () => Date.now() / 1000) {
    this.seen = new Map();
    this.limit = limit;
    this.clock = clock;
  }

  /** True the first time `jti` is taken, false after (and when full). */
  async take(jti, exp) {
    const now = this.clock();
    if (this.seen.size >= this.limit) {
      for (const [j, e] of this.seen) if (e <= now) this.seen.delete(j);
    }
    if (this.seen.has(jti) || this.seen.size >= this.limit) return false;
    this.seen.set(jti, exp);
    return true;
  }
}

export function sluiceHandoff({
  waitingRoom, room, origin, issuer, secret, cookie = 'app_session', jwksUrl, seen,
  clock = () => Date.now() / 1000,
}) {
  if (!secret || Buffer.byteLength(secret) < 32) throw new Error('the session secret needs at least 32 bytes');
  const base = waitingRoom.replace(/\/+$/, '');
  // A token naming a key not seen yet fetches the keys again at most every 30 s (a flood of
  // tokens naming made-up keys must not become a flood of fetches).
  const jwks = createRemoteJWKSet(new URL(jwksUrl || `${base}/.well-known/jwks.json`), {
    cooldownDuration: 30_000,
  });
  const used = seen || new SeenTokens(SEEN_MAX, clock);
  const mac = (value) => createHmac('sha256', secret).update(value).digest('base64url');
  const secure = origin.startsWith('https://');

  const redirect = (res, to, headers = {}) => {
    res.writeHead(303, { Location: to, 'Cache-Control': 'no-store', ...headers });
    res.end();
  };
  const toWaitingRoom = (res, here) =>
    redirect(res, `${base}/wait/${room}?next=${encodeURIComponent(here)}`);

  async function check(token) {
    if (token.length > TOKEN_LEN_MAX) return null;
    let payload;
    try {
      ({ payload } = await jwtVerify(token, jwks, {
        algorithms: ['EdDSA'],
        issuer,
        audience: `sluice:${room}`,
        requiredClaims: ['exp', 'iat', 'sub', 'jti', 'origin', 'session_exp'],
        currentDate: new Date(clock() * 1000),
      }));
    } catch {
      return null;
    }
    const now = clock();
    if (payload.room !== room || payload.origin !== origin || !(payload.session_exp > now)) return null;
    if (!(await used.take(payload.jti, payload.exp))) return null;
    return payload;
  }

  function session(header) {
    for (const part of (header || '').split(';')) {
      const [name, ...v] = part.trim().split('=');
      if (name !== cookie) continue;
      const [visitor, end, sig] = v.join('=').split('.');
      if (!visitor || !/^\d+$/.test(end || '') || !sig) return null;
      const want = Buffer.from(mac(`${visitor}.${end}`));
      const got = Buffer.from(sig);
      if (want.length !== got.length || !timingSafeEqual(want, got)) return null;
      return Number(end) > clock() ? visitor : null;
    }
    return null;
  }

  return async function handoff(req, res, next) {
    const url = new URL(req.url, origin);
    const tokens = url.searchParams.getAll(PARAM);
    url.searchParams.delete(PARAM);
    const here = origin + url.pathname + url.search;
    if (tokens.length > 0) {
      const claims = tokens.length === 1 ? await check(tokens[0]) : null;
      if (!claims) return toWaitingRoom(res, here);
      const end = Math.floor(claims.session_exp);
      const value = `${claims.sub}.${end}`;
      let attrs = `Path=/; HttpOnly; SameSite=Lax; Max-Age=${Math.max(0, end - Math.floor(clock()))}`;
      if (secure) attrs += '; Secure';
      return redirect(res, here, {
        'Set-Cookie': `${cookie}=${value}.${mac(value)}; ${attrs}`,
        'Referrer-Policy': 'no-referrer',
      });
    }
    const visitor = session(req.headers.cookie);
    if (!visitor) return toWaitingRoom(res, here);
    req.sluiceVisitor = visitor;
    return next();
  };
}

// `node sluice-handoff.mjs PORT`, with SLUICE_URL, SLUICE_ROOM, APP_ORIGIN, SLUICE_ISSUER
// (default `sluice`) and APP_SECRET in the environment: a protected page.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const env = process.env;
  const guard = sluiceHandoff({
    waitingRoom: env.SLUICE_URL,
    room: env.SLUICE_ROOM,
    origin: env.APP_ORIGIN,
    issuer: env.SLUICE_ISSUER || 'sluice',
    secret: env.APP_SECRET,
  });
  const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  createServer((req, res) => {
    guard(req, res, () => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end('<!doctype html><title>Shop</title><h1 id=welcome>Welcome to the shop</h1>'
        + `<p>Visitor <code id=visitor>${escape(req.sluiceVisitor)}</code></p>`);
    }).catch(() => {
      res.writeHead(500);
      res.end();
    });
  }).listen(Number(process.argv[2]), '127.0.0.1', () => console.log('listening'));
}
