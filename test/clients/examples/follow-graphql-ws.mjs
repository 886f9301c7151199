// Follows the people added to admin/people over GraphQL over WebSocket
// with the graphql-ws client, for good: every reconnect resumes right
// after the last event received, whether the client reconnects a broken
// socket by itself or subscribes again after Sluice completed the
// subscription (it does when it shuts down). Nothing is missed, nothing
// repeats. A refusal that retrying cannot change (wrong credentials, a
// database that does not exist or that the user may not read) stops it
// with an error.
//
//   npm install graphql-ws ws
//   node follow-graphql-ws.mjs [GraphQL WebSocket URL] [position to start after]
import { createClient } from 'graphql-ws';
import WebSocket from 'ws'; // Node 20 has no WebSocket of its own; browsers and Node 22 do

const url = process.argv[2] ?? 'ws://localhost:6363/api/graphql/admin/people';
const authorization = 'Basic ' + btoa(process.env.SLUICE_CREDENTIALS ?? 'admin:root');

// Each result carries its position as extensions.lastEventId. Keep the last
// one in the payload subscribed with: the client sends that payload again
// whenever it reconnects by itself, so that resumes too.
const payload = { query: 'subscription { Person_added { _id name } }', extensions: {} };
if (process.argv[3]) payload.extensions.lastEventId = process.argv[3];

// Sluice closes the socket with 4403 when it refuses the credentials or
// the database (one that does not exist, or that the user may not read),
// and with 4400 when it refuses a message. graphql-ws retries 4403, and
// this loop would subscribe again after either: that would look like
// waiting, for ever. A restart closes the socket with other codes.
const refused = (closeOrError) => closeOrError?.code === 4403 || closeOrError?.code === 4400;

const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: { Authorization: authorization },
  retryAttempts: Infinity, // never give up while Sluice restarts,
  retryWait: (retries) => new Promise((r) => setTimeout(r, Math.min(500 * 2 ** retries, 10_000))), // waiting at most 10 s
  shouldRetry: (closeOrError) => closeOrError?.reason !== undefined && !refused(closeOrError), // a closed socket, unless refused
});

for (;;) {
  const stop = await new Promise((resolve) => {
    client.subscribe(payload, {
      next(result) {
        payload.extensions.lastEventId = result.extensions.lastEventId;
        const person = result.data.Person_added;
        console.log('added', person._id, person.name);
      },
      error(err) {
        // Sluice ended the subscription with an error message (an access
        // change, an outage), or the client could not connect.
        const errors = Array.isArray(err) ? err : [err];
        console.error('subscription ended:', errors[0].message ?? errors[0].reason ?? err);
        // The position is older than the history Sluice keeps: re-read the
        // state, then follow from now on.
        if (errors[0].extensions?.code === 'POSITION_EXPIRED') delete payload.extensions.lastEventId;
        resolve(refused(err));
      },
      complete: () => resolve(false),
    });
  });
  if (stop) {
    console.error('stopped, retrying cannot help');
    process.exit(1);
  }
  await new Promise((r) => setTimeout(r, 1000)); // then subscribe again, after the last event
}
