// Talking to the API: JSON, images and live updates, with the bearer token when one is set.
// The token lives in sessionStorage (this tab only) and only ever goes in the Authorization header.

const TOKEN_KEY = "worldsample-dashboard-token";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) || "",
  set: (t) => (t ? sessionStorage.setItem(TOKEN_KEY, t) : sessionStorage.removeItem(TOKEN_KEY)),
};

export class ApiError extends Error {
  constructor(status, detail, retryAfter = null) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
    this.retryAfter = retryAfter; // seconds, from a 429's Retry-After (null when none)
  }
}

export const MIN_TOKEN_LENGTH = 16; // the server refuses shorter tokens at start

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// fn() again after a 429 (busy: too many wrong tokens, the imagine queue full), waiting the
// Retry-After it names (at most 60 s; 2 s when it names none), at most `tries` times in all;
// onWait(seconds, err, attempt) says so before each wait. Other errors are thrown at once.
export async function retrying(fn, onWait, tries = 4) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 429 || attempt >= tries) throw err;
      const s = Math.min(60, Math.max(1, err.retryAfter ?? 2));
      onWait?.(s, err, attempt);
      await sleep(s * 1000);
    }
  }
}

function headers(extra = {}) {
  const h = { ...extra };
  const t = token.get();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function fail(resp) {
  let detail = resp.statusText;
  try {
    const body = await resp.json();
    detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
  } catch (_) { /* not JSON */ }
  const ra = parseFloat(resp.headers.get("Retry-After") || "");
  return new ApiError(resp.status, detail, Number.isFinite(ra) && ra >= 0 ? ra : null);
}

export async function getJSON(path, opts = {}) {
  const resp = await fetch(path, { headers: headers(), signal: opts.signal });
  if (!resp.ok) throw await fail(resp);
  return resp.json();
}

// The answer to a request that boot.js started early, once; a normal request when there is none.
export async function earlyJSON(key, path) {
  const early = window.worldsampleEarly?.[key];
  if (!early) return getJSON(path);
  delete window.worldsampleEarly[key];
  let resp;
  try { resp = await early; } catch (_) { return getJSON(path); }
  if (!resp.ok) throw await fail(resp);
  return resp.json();
}

export async function postJSON(path, body) {
  const resp = await fetch(path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body || {}),
  });
  if (!resp.ok) throw await fail(resp);
  return resp.json();
}

// A file (a download) as a Blob, fetched with the token.
export async function getBlob(path) {
  const resp = await fetch(path, { headers: headers() });
  if (!resp.ok) throw await fail(resp);
  return resp.blob();
}

// An image as an ImageBitmap, with the response headers (contact-sheet layout).
export async function getBitmap(path, opts = {}) {
  const resp = await fetch(path, { headers: headers(), signal: opts.signal });
  if (!resp.ok) throw await fail(resp);
  const bitmap = await createImageBitmap(await resp.blob());
  return { bitmap, headers: resp.headers };
}

// POST a JSON body; the answer is an image (a play step): an ImageBitmap with the response headers.
export async function postBitmap(path, body) {
  const resp = await fetch(path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body || {}),
  });
  if (!resp.ok) throw await fail(resp);
  const bitmap = await createImageBitmap(await resp.blob());
  return { bitmap, headers: resp.headers };
}

export async function deleteJSON(path) {
  const resp = await fetch(path, { method: "DELETE", headers: headers() });
  if (!resp.ok) throw await fail(resp);
}

// Server-sent events over fetch (EventSource cannot send an Authorization header).
// handlers: {eventName: fn(data)}; onState(connected:boolean, why?:string). Reconnects with
// backoff (after a 429, no sooner than its Retry-After).
export function subscribe(path, handlers, onState) {
  let stopped = false;
  let delay = 500;
  const run = async () => {
    while (!stopped) {
      try {
        const resp = await fetch(path, { headers: headers({ Accept: "text/event-stream" }) });
        if (!resp.ok) throw await fail(resp);
        onState(true);
        delay = 500;
        const reader = resp.body.getReader();
        const dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done || stopped) break;
          buf += dec.decode(value, { stream: true });
          let cut;
          while ((cut = buf.indexOf("\n\n")) >= 0) {
            dispatch(buf.slice(0, cut), handlers);
            buf = buf.slice(cut + 2);
          }
        }
      } catch (err) {
        if (err instanceof ApiError && err.status === 401 && handlers.unauthorized) handlers.unauthorized(err);
        if (err instanceof ApiError && err.status === 429) {
          delay = Math.max(delay, 1000 * Math.min(60, err.retryAfter ?? 5));
          onState(false, `refused (${err.detail}): retrying in ${Math.round(delay / 1000)} s`);
          await sleep(delay);
          continue;
        }
      }
      onState(false);
      await sleep(delay);
      delay = Math.min(delay * 2, 10000);
    }
  };
  run();
  return () => { stopped = true; };
}

function dispatch(block, handlers) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
  }
  if (!data.length || !handlers[event]) return;
  try {
    handlers[event](JSON.parse(data.join("\n")));
  } catch (err) {
    console.error("bad live update", event, err);
  }
}
