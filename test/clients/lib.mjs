// What the client scripts of this directory share: failing, a queue of
// the results a client delivers, and an Apollo link on graphql-sse.
import { ApolloLink, Observable } from '@apollo/client';
import { print } from 'graphql';

// fail ends the script with a failure the Go test reports.
export function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

// A queue of results a client delivers, awaited one at a time. An Error
// or a result with errors fails the script, named by what.
export function inbox() {
  const items = [];
  let wake = null;
  return {
    push(x) { items.push(x); if (wake) { wake(); wake = null; } },
    async take(what) {
      while (!items.length) await new Promise((r) => { wake = r; });
      const x = items.shift();
      if (x instanceof Error) fail(`${what}: ${x.message}`);
      if (x.errors) fail(`${what}: ${JSON.stringify(x.errors)}`);
      return x;
    },
  };
}

// An Apollo link on graphql-sse (the recipe of graphql-sse's docs).
export class SSELink extends ApolloLink {
  constructor(client) { super(); this.client = client; }
  request(operation) {
    return new Observable((sink) => this.client.subscribe({ ...operation, query: print(operation.query) }, {
      next: sink.next.bind(sink), complete: sink.complete.bind(sink), error: sink.error.bind(sink),
    }));
  }
}
