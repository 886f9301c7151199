// Follows admin/people's Person documents from a web page with the
// browser's native EventSource on the REST change stream, for good.
// EventSource cannot send an Authorization header, so each stream opens
// with a stream ticket, which is single use: when a stream ends, close it
// (EventSource's own retry would present the spent ticket) and open a new
// one with a new ticket, resuming after the last event received.
const sluice = 'https://sluice.example.com'; // Sluice's origin, with this page's origin in its cors_origins
const credential = `Bearer ${token}`; // whatever the page holds: an API token, a JWT, Basic credentials

let last = null; // the id of the last event received (or a read's Sluice-Position): a stream resumes after it

// ticket gets a stream ticket for admin/people.
async function ticket() {
  const res = await fetch(`${sluice}/api/stream-tickets`, {
    method: 'POST',
    headers: { Authorization: credential, 'Content-Type': 'application/json' },
    body: JSON.stringify({ database: 'admin/people' }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(body['api:message']); // 401, 403, 404: readable thanks to CORS
  return body.ticket;
}

// stream follows one EventSource until it ends.
async function stream() {
  const url = new URL(`${sluice}/api/subscribe/admin/people/Person`);
  url.searchParams.set('ticket', await ticket());
  if (last) url.searchParams.set('lastEventId', last);
  const es = new EventSource(url);
  for (const op of ['create', 'update', 'delete']) {
    es.addEventListener(`entity.${op}`, (e) => {
      last = e.lastEventId;
      console.log(op, JSON.parse(e.data).subject);
    });
  }
  await new Promise((resolve) => {
    es.onerror = (e) => {
      es.close();
      if (e.data) { // Sluice ended the stream with an `event: error` frame
        const err = JSON.parse(e.data);
        console.error(err['api:message']);
        if (err['api:error']['@type'] === 'api:Gone') last = null; // history is gone: re-read, then follow
      }
      resolve();
    };
  });
}

async function follow() {
  for (;;) {
    await stream().catch((err) => console.error(err.message)); // Sluice unreachable: try again
    await new Promise((r) => setTimeout(r, 1000));
  }
}
follow();
