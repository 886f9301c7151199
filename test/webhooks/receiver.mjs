// The webhook receiver of Sluice's end-to-end webhook tests
// (internal/webhook/receiver_test.go starts it). It verifies every
// request's signature with the standardwebhooks package, the reference
// implementation of Standard Webhooks, and reports each request as a JSON
// line on stdout, in the order requests arrived. It takes commands as JSON
// lines on stdin, each acknowledged with {"type":"ok","seq":n}:
//   {"cmd":"secret","path":"/a","secrets":["whsec_…"]}  verify /a's requests with these
//   {"cmd":"fail","path":"/a","status":500,"count":2}   answer the next 2 with 500
//   {"cmd":"hang","path":"/a","count":1}                answer the next one never
//   {"cmd":"down"} / {"cmd":"up"}                       stop listening (connections refused) / listen again
//   {"cmd":"sync"}                                      nothing: acknowledged after every delivery reported so far
import http from 'node:http';
import readline from 'node:readline';
import { Webhook } from 'standardwebhooks';

const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const paths = new Map(); // path -> { verifiers, fail: [{status}], hang }
const state = (p) => {
  if (!paths.has(p)) paths.set(p, { verifiers: [], plan: [] });
  return paths.get(p);
};
const sockets = new Set();
const hung = new Set();

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const st = state(req.url);
    let verified = false;
    let error = st.verifiers.length === 0 ? 'no secret for ' + req.url : '';
    for (const wh of st.verifiers) {
      try {
        wh.verify(body, req.headers);
        verified = true;
        error = '';
        break;
      } catch (e) {
        error = String(e && e.message || e);
      }
    }
    let events = [];
    try {
      const parsed = JSON.parse(body);
      events = (Array.isArray(parsed) ? parsed : [parsed]).map((e) => ({ id: e.id, type: e.type, subject: e.subject, data: e.data }));
    } catch (e) {
      error = error || 'body is not JSON: ' + e.message;
    }
    const step = st.plan.shift();
    let answered = verified ? 204 : 401;
    if (step && step.hang) answered = 0;
    else if (step) answered = step.status;
    out({ type: 'delivery', path: req.url, method: req.method, id: req.headers['webhook-id'], timestamp: req.headers['webhook-timestamp'],
      signatures: (req.headers['webhook-signature'] || '').split(' ').length, contentType: req.headers['content-type'],
      userAgent: req.headers['user-agent'], verified, error, answered, events });
    if (answered === 0) {
      hung.add(res);
      res.on('close', () => hung.delete(res));
      return;
    }
    res.writeHead(answered, { 'Content-Type': 'text/plain' });
    res.end(answered < 300 ? '' : 'failing on purpose: ' + answered);
  });
});
server.on('connection', (s) => {
  sockets.add(s);
  s.on('close', () => sockets.delete(s));
});

let port = 0;
const listen = () => new Promise((resolve) => server.listen(port, '127.0.0.1', () => {
  port = server.address().port;
  resolve();
}));

let seq = 0;
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  const c = JSON.parse(line);
  switch (c.cmd) {
    case 'secret':
      state(c.path).verifiers = c.secrets.map((s) => new Webhook(s));
      break;
    case 'fail':
      for (let i = 0; i < c.count; i++) state(c.path).plan.push({ status: c.status });
      break;
    case 'hang':
      for (let i = 0; i < c.count; i++) state(c.path).plan.push({ hang: true });
      break;
    case 'down':
      await new Promise((resolve) => {
        server.close(resolve);
        for (const s of sockets) s.destroy();
      });
      break;
    case 'up':
      await listen();
      break;
    case 'sync': // nothing: its acknowledgement follows every delivery reported so far
      break;
    default:
      out({ type: 'error', error: 'unknown command ' + c.cmd });
  }
  out({ type: 'ok', seq: ++seq, cmd: c.cmd });
});
rl.on('close', () => process.exit(0));

await listen();
out({ type: 'listening', port });
