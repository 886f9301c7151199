// Follows the people added to admin/people with the graphql-sse client
// (distinct connections mode), for good: every reconnect resumes right
// after the last event received, whether the client retries a broken
// connection or subscribes again after Sluice completed the subscription
// (it does when it shuts down). Nothing is missed, nothing repeats. An
// answer that retrying cannot change (wrong credentials, a database that
// does not exist or that the user may not read) stops it with an error.
//
//   npm install graphql-sse
//   node follow-graphql-sse.mjs [GraphQL URL] [position to start after]
import { createClient } from 'graphql-sse';

const url = process.argv[2] ?? 'http://localhost:6363/api/graphql/admin/people';
const authorization = 'Basic ' + btoa(process.env.SLUICE_CREDENTIALS ?? 'admin:root');
let last = process.argv[3]; // the position of the last event received (none: from now on)
// graphql-sse retries every answer that is not a 2xx, so a refusal would
// look like waiting, for ever: fetchFn keeps one here, and retry() throws it.
let refused;

// In this mode an event's position is its SSE id, which the client does
// not hand on: read the ids as the stream passes, keep the id of the last
// complete event, and send it as Last-Event-ID on every request.
async function fetchFn(input, init) {
  const res = await fetch(input, { ...init, headers: { ...init.headers, ...(last && { 'Last-Event-ID': last }) } });
  // 401 wrong credentials, 403 no access to the database, 404 no such database
  if ([401, 403, 404].includes(res.status)) refused = new Error(`Sluice answered ${res.status}: ${(await res.text()).trim()}`);
  if (!res.ok || !res.body) return res; // graphql-sse retries any other failure (Sluice restarting, say)
  const decoder = new TextDecoder();
  let rest = '', id;
  const ids = new TransformStream({
    transform(chunk, controller) {
      const lines = (rest + decoder.decode(chunk, { stream: true })).split('\n');
      rest = lines.pop();
      for (const line of lines) {
        if (line.startsWith('id:')) id = line.slice(3).trim();
        else if (line === '' && id) [last, id] = [id, undefined]; // the event is complete
      }
      controller.enqueue(chunk);
    },
  });
  return new Response(res.body.pipeThrough(ids), res);
}

const client = createClient({
  url,
  headers: { Authorization: authorization },
  fetchFn,
  retryAttempts: Infinity, // never give up while Sluice restarts,
  retry: async (retries) => {
    if (refused) throw refused; // but not after a refusal: this ends the subscription with it
    await new Promise((r) => setTimeout(r, Math.min(500 * 2 ** retries, 10_000))); // waiting at most 10 s
  },
});

for (;;) {
  try {
    for await (const result of client.iterate({ query: 'subscription { Person_added { _id name } }' })) {
      if (result.errors) {
        console.error('subscription ended:', result.errors[0].message);
        // The position is older than the history Sluice keeps: re-read the
        // state, then follow from now on.
        if (result.errors[0].extensions?.code === 'POSITION_EXPIRED') last = undefined;
        continue;
      }
      const person = result.data.Person_added;
      console.log('added', person._id, person.name);
    }
  } catch (err) {
    if (err === refused) {
      console.error('stopped, retrying cannot help:', refused.message);
      process.exit(1);
    }
    console.error('subscription failed:', err.message ?? err);
  }
  await new Promise((r) => setTimeout(r, 1000)); // then subscribe again, after `last`
}
