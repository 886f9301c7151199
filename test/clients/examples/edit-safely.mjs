// Adds 1 to a document's count, safely, however many clients do the same
// at once: it reads the document with its version, and writes the change
// only if nobody changed the document since (If-Match); when someone did
// (412), it reads again and changes what is there now. Each write carries
// an Idempotency-Key, so when its outcome is unknown (no answer, or
// Sluice's 500 OutcomeUnknown) it is sent again with the same key, which
// answers the first outcome if the write happened: never counted twice.
//
//   node edit-safely.mjs [document URL] [how many times]
import { randomUUID } from 'node:crypto';

const url = process.argv[2] ?? 'http://localhost:6363/api/document/admin/counters?id=Counter/visits';
const times = Number(process.argv[3] ?? 1);
const authorization = 'Basic ' + btoa(process.env.SLUICE_CREDENTIALS ?? 'admin:root');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// edit applies change (the document as read → a JSON Merge Patch) to the
// document, and returns the version the write gave it.
async function edit(change) {
  for (;;) {
    const read = await fetch(url, { headers: { Authorization: authorization } });
    if (!read.ok) throw new Error(`read: ${read.status} ${await read.text()}`);
    const res = await send({
      method: 'PATCH',
      headers: {
        Authorization: authorization,
        'Content-Type': 'application/merge-patch+json',
        'If-Match': read.headers.get('ETag'), // only the version read
        'Idempotency-Key': randomUUID(), // one key per request, kept by its retries
      },
      body: JSON.stringify(change(await read.json())),
    });
    if (res.status === 412) continue; // changed since it was read: read again
    if (!res.ok) throw new Error(`write: ${res.status} ${await res.text()}`);
    return (await res.json()).version;
  }
}

// send sends a write until its outcome is known, the same request with
// the same key every time: no answer, Sluice's OutcomeUnknown, 409 (the
// first request with the key still runs) and 503 (nothing written) are
// worth another try.
async function send(request) {
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(url, request);
      const type = res.status >= 409 ? (await res.clone().json().catch(() => ({})))['api:error']?.['@type'] : '';
      if (!['api:OutcomeUnknown', 'api:Conflict', 'api:Unavailable'].includes(type)) return res;
    } catch {
      // no answer
    }
    await sleep(Math.min(100 * 2 ** attempt, 2000));
  }
}

for (let i = 0; i < times; i++) {
  const version = await edit((doc) => ({ count: (doc.count ?? 0) + 1 }));
  console.log('added 1, version', version);
}
